"""Same history, same accounting: the simulator's world and the controller's store agree.

A random history (jobs arriving, started, stopped, moved and finishing on round boundaries,
completions between them) is carried out twice: by the simulator's :class:`World`, through the
decisions it applies, and by the controller's :class:`Store`, through what Slurm would show it
each round (the jobs seen, the end of those that left, the stops it noted). Each round, every
active job must have the same attained service, preemptions, first start and last event in
both, every finished job the same service and end, and fair share the same decayed usage.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blox_slurm.core.accounting import DecayedUsage, EndedRun, usage_at
from blox_slurm.core.model import Decisions, Job, Move, Start, Stop, build_cluster
from blox_slurm.core.throughput import DEFAULT_THROUGHPUT
from blox_slurm.sim.config import SimConfig
from blox_slurm.sim.world import World
from blox_slurm.slurm.store import Observed, Store

ROUND = 100.0
SLOTS = 8  # GPUs per job: two blocks of 4, so a move always has somewhere to go


@dataclass(frozen=True)
class Plan:
    """One job's history: when it arrives and, each round after, what the policy wants."""

    job: Job
    wants: tuple[str, ...]  # per round from arrival: "run", "wait" or "move"
    arrival: int


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Plan], float]:
    plans = []
    for jid in range(draw(st.integers(1, 5))):
        arrival = draw(st.integers(0, 3))
        job = Job(jid, arrival * ROUND, draw(st.integers(1, 4)), draw(st.sampled_from("ab")),
                  draw(st.sampled_from(["", "x"])), duration=draw(st.floats(30.0, 1500.0)),
                  last_event=arrival * ROUND)
        wants = draw(st.lists(st.sampled_from(["run", "wait", "move"]), min_size=10,
                              max_size=10))
        plans.append(Plan(job, tuple(wants), arrival))
    return plans, draw(st.sampled_from([100.0, 3600.0, 1e9]))


def _gpus(job: Job, block: int) -> tuple[int, ...]:
    base = job.id * SLOTS + 4 * block
    return tuple(range(base, base + job.num_gpus))


def _decisions(world: World, plans: list[Plan], k: int) -> Decisions:
    """What the plans want at round ``k`` of the jobs still active."""
    start, stop, move = [], [], []
    for p in plans:
        job = world.active.get(p.job.id)
        if job is None or k < p.arrival:
            continue
        want = p.wants[k - p.arrival]
        if not job.running and want != "wait":
            start.append(Start(job.id, _gpus(job, 0)))
        elif job.running and want == "wait":
            stop.append(Stop(job.id, None))
        elif job.running and want == "move":
            other = 1 - (job.gpus[0] - job.id * SLOTS) // 4
            move.append(Move(job.id, _gpus(job, other), None))
    return Decisions(start=tuple(start), stop=tuple(stop), move=tuple(move))


def _seen(job: Job) -> Observed:
    return Observed(job.id, job.user, "gpu", job.num_gpus, job.submit_time, job.running,
                    job.run_since, False, {}, job.account)


def _agree(world: World, store: Store, finished: dict[int, tuple[Job, float]], t: float,
           half_life: float) -> None:
    extras = store.extras(t)
    assert set(extras) == set(world.active)
    for jid, job in world.active.items():
        x = extras[jid]
        assert x.attained_base == pytest.approx(job.attained_base, abs=1e-6), jid
        assert (x.preemptions, x.first_start, x.last_event, x.submit_time) == (
            job.preemptions, job.first_start, job.last_event, job.submit_time), jid
    for jid, (job, end) in finished.items():
        row = store.job(jid)
        assert row is not None and row["state"] == "done"
        assert row["attained_base"] == pytest.approx(job.attained_service(end), abs=1e-6)
        assert (row["finished_at"], row["preemptions"]) == (end, job.preemptions)
    assert store.usage(t, half_life) == pytest.approx(world.usage.at(t), rel=1e-9, abs=1e-9)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(case=histories())
def test_the_same_history_gives_the_same_jobs_and_usage_in_both_worlds(tmp_path_factory,
                                                                         case) -> None:
    plans, half_life = case
    nodes, gpus = build_cluster([("gpu", len(plans), SLOTS)])
    world = World(nodes, gpus, SimConfig(round_duration=ROUND, restart_cost=0.0,
                                         usage_half_life=half_life),
                  DEFAULT_THROUGHPUT, DecayedUsage(half_life))
    store = Store(tmp_path_factory.mktemp("store") / "blox.db")
    finished: dict[int, tuple[Job, float]] = {}
    for k in range(14):
        t = k * ROUND
        ended = {}
        while (done := world.pop_completion(t)) is not None:
            job, end = done
            finished[job.id] = (job, end)
            ended[job.id] = (job.run_since, end)
        for p in plans:
            if p.arrival == k:
                world.arrive(p.job)
        store.observe(t, [_seen(j) for j in world.active.values()],
                      {j.id: len(j.gpus) for j in world.active.values() if j.running}, ended)
        _agree(world, store, finished, t, half_life)
        d = _decisions(world, plans, k) if k < 10 else Decisions()
        world.apply(d, t)
        store.note_preempted(d.preempt, t)


def test_usage_of_kept_runs_equals_usage_kept_incrementally() -> None:
    runs = [EndedRun("a", "x", 100.0, 50.0), EndedRun("b", "", 40.0, 10.0),
            EndedRun("a", "", 10.0, 900.0)]
    live = DecayedUsage(300.0)
    for r in runs:
        live.add(r.user, r.account, r.gpu_seconds, r.end)
    assert usage_at(runs, 1000.0, 300.0) == pytest.approx(live.at(1000.0))
    assert usage_at(runs, 1000.0, 300.0)["account:"] == pytest.approx(
        40.0 * 0.5 ** (990 / 300) + 10.0 * 0.5 ** (100 / 300))
