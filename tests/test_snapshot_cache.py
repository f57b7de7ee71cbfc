"""The snapshot's kept core records (:class:`blox_slurm.slurm.snapshot.JobCache`): a snapshot
built with the cache is the one built without it, round after round, whatever changed in a
job's Slurm record or extras, and whatever the clock did."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blox_slurm.loading import load
from blox_slurm.slurm import controller as controller_module
from blox_slurm.slurm.client import GresAlloc, SlurmJob, SlurmNode
from blox_slurm.slurm.controller import Controller
from blox_slurm.slurm.controller_config import ControllerConfig
from blox_slurm.slurm.parse import ParsedJob
from blox_slurm.slurm.snapshot import JobCache, JobExtras, _hints, build_snapshot
from blox_slurm.slurm.store import Store
from blox_slurm.testing.fake_slurm import FakeSlurm

NODES = [SlurmNode(f"node{i}", "mixed", gpus_total=4, partitions=("blox",)) for i in (1, 2)]
#: The same nodes and one more that sorts first: every GPU of node1 and node2 is renumbered.
MORE_NODES = [SlurmNode("node0", "idle", gpus_total=2, partitions=("blox",)), *NODES]


def pending(job_id: int, **fields: object) -> SlurmJob:
    base = ParsedJob(job_id=job_id, name="j", user="u", account="", partition="blox",
                     state="PENDING", reason="JobHeldAdmin", priority=0, num_gpus=1,
                     submit_time=100.0 + job_id)
    return replace(base, **fields)  # type: ignore[arg-type]


def running(j: SlurmJob, now: float | None) -> SlurmJob:
    return replace(j, state="RUNNING", nodes=("node1",), start_time=now,
                   gpu_alloc=MappingProxyType({"node1": GresAlloc("", j.num_gpus,
                                                                  tuple(range(j.num_gpus)))}))


#: What may happen to one job between two rounds: its record (a new object, changed or not)
#: or its extras (the store's row rewritten), or nothing at all.
EDITS = {
    "same": lambda j, x, now: (j, x),
    "record copied": lambda j, x, now: (replace(j), x),
    "priority": lambda j, x, now: (replace(j, priority=j.priority + 1, reason="None"), x),
    "request": lambda j, x, now: (replace(j, num_gpus=j.num_gpus % 4 + 1), x),
    "gpu type": lambda j, x, now: (replace(j, gpu_type="v100" if not j.gpu_type else ""), x),
    "per node": lambda j, x, now: (replace(j, gpu_nodes=1 - j.gpu_nodes), x),
    "user": lambda j, x, now: (replace(j, user=j.user + "x", account="a"), x),
    "no submit time": lambda j, x, now: (replace(j, submit_time=None), x),
    "submit time": lambda j, x, now: (replace(j, submit_time=now), x),
    "requeued": lambda j, x, now: (replace(j, restart_cnt=j.restart_cnt + 1), x),
    "started": lambda j, x, now: (running(j, now), x),
    "started, no start time": lambda j, x, now: (running(j, None), x),
    "completing": lambda j, x, now: (replace(j, state="COMPLETING"), x),
    "back to pending": lambda j, x, now: (replace(j, state="PENDING", nodes=(),
                                                  gpu_alloc=MappingProxyType({})), x),
    "no gpus": lambda j, x, now: (replace(j, num_gpus=0), x),
    "hints": lambda j, x, now: (j, replace(x, hints=MappingProxyType(
        {"elastic": "1", "max_gpus": "4"} if not x.hints else {}))),
    "marks": lambda j, x, now: (j, replace(x, marks=(("reset", now),))),
    "admitted": lambda j, x, now: (j, replace(x, admitted=not x.admitted)),
    "service": lambda j, x, now: (j, replace(x, attained_base=x.attained_base + 60.0,
                                            preemptions=(x.preemptions or 0) + 1)),
    "stored submit": lambda j, x, now: (j, replace(x, submit_time=None if x.submit_time
                                                   else 50.0)),
    "last event": lambda j, x, now: (j, replace(x, last_event=now)),
    "extras dropped": lambda j, x, now: (j, JobExtras()),
}


def both(jobs: dict[int, SlurmJob], extras: dict[int, JobExtras], now: float,
         cache: JobCache, nodes: list[SlurmNode] = NODES) -> tuple[object, object]:
    """The snapshot's jobs with the cache, and without."""
    kept = build_snapshot(jobs.values(), nodes, ["blox"], now=now, extras=extras, cache=cache)
    fresh = build_snapshot(jobs.values(), nodes, ["blox"], now=now, extras=extras)
    return kept.jobs, fresh.jobs


#: One round: the edits since the last (job, what), how far the clock moved, and whether
#: one more node is listed (it sorts first, so every other GPU is renumbered).
ROUNDS = st.lists(st.tuples(
    st.lists(st.tuples(st.integers(1, 6), st.sampled_from(sorted(EDITS))), max_size=6),
    st.floats(0.0, 100.0), st.booleans()), min_size=1, max_size=8)


@settings(max_examples=150, deadline=None)
@given(ROUNDS)
def test_a_kept_record_is_the_one_a_fresh_build_gives(
        rounds: list[tuple[list[tuple[int, str]], float, bool]]) -> None:
    """Six jobs, some with no submit time anywhere (placed at ``now``), edited between
    rounds in every way a record or extras can change; the clock moves by any amount, or
    not at all, and a node may come or go."""
    jobs = {i: pending(i, submit_time=None if i % 3 == 0 else 100.0 + i) for i in range(1, 7)}
    extras: dict[int, JobExtras] = {i: JobExtras() for i in range(1, 6)}  # 6 has none
    cache, now = JobCache(), 1000.0
    kept, fresh = both(jobs, extras, now, cache)
    assert kept == fresh
    for edits, step, extra_node in rounds:
        now += step
        for job_id, edit in edits:
            j, x = EDITS[edit](jobs[job_id], extras.get(job_id, JobExtras()), now)
            jobs[job_id], extras[job_id] = j, x
        kept, fresh = both(jobs, extras, now, cache, MORE_NODES if extra_node else NODES)
        assert kept == fresh


def test_an_unchanged_waiting_job_keeps_its_record_and_a_changed_one_does_not() -> None:
    jobs = {1: pending(1), 2: pending(2)}
    extras = {1: JobExtras(), 2: JobExtras()}
    cache = JobCache()
    first, _ = both(jobs, extras, 1000.0, cache)
    extras[2] = replace(extras[2], hints=MappingProxyType({"duration": "60"}))
    second, _ = both(jobs, extras, 1030.0, cache)
    assert second[0] is first[0]  # type: ignore[index]
    assert second[1] is not first[1] and second[1].hint("duration") == "60"  # type: ignore[index]


def test_a_job_placed_at_now_is_never_kept() -> None:
    """Slurm gave no submit time and the store none either: the job is placed at ``now``,
    which moves every round."""
    jobs = {1: pending(1, submit_time=None)}
    cache = JobCache()
    for now in (1000.0, 1030.0, 1060.0):
        kept, fresh = both(jobs, {}, now, cache)
        assert kept == fresh and kept[0].submit_time == now  # type: ignore[index]


@settings(deadline=None)
@given(st.integers(1, 16), st.sampled_from(["", "v100", "a100"]), st.integers(0, 4))
def test_a_job_without_hints_of_its_own_gets_its_requests_hints(gpus: int, kind: str,
                                                                 per_node: int) -> None:
    """Those are shared between jobs of one request shape: the same as a job with a hint of
    its own has, but for that hint."""
    j = pending(1, num_gpus=gpus, gpu_type=kind, gpu_nodes=per_node)
    own = tuple(h for h in _hints(j, JobExtras(hints=MappingProxyType({"model": "m"})))
                if h != ("model", "m"))
    assert _hints(j, JobExtras()) == own
    assert _hints(replace(j, job_id=2), JobExtras()) == own


@pytest.mark.parametrize("composition", ["tiresias", "las", "fifo"])
def test_the_controllers_snapshots_equal_fresh_builds(tmp_path: Path, composition: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole workload through the controller (starts, preemptions, policy marks, ends,
    new arrivals): every round's snapshot, built with the controller's cache from the
    store's extras, is the one built afresh."""
    def checked(*args: object, **kw: object) -> object:
        kept = build_snapshot(*args, **kw)  # type: ignore[arg-type]
        assert kw.get("cache") is not None
        fresh = build_snapshot(*args, **{**kw, "cache": None})  # type: ignore[arg-type]
        assert kept == fresh
        return kept

    monkeypatch.setattr(controller_module, "build_snapshot", checked)
    fake = FakeSlurm([(2, 4)])
    cfg = ControllerConfig(store=str(tmp_path / "state.db"), heartbeat=str(tmp_path / "hb"),
                           plugin_config="", round_seconds=30.0)
    ctl = Controller(cfg, load(composition), fake, Store(cfg.store), clock=lambda: fake.now)
    for r in range(40):
        if r % 4 == 0:
            for g in (1, 2, 4):
                fake.submit_job(g, runtime=90.0 * g, user=f"u{r % 3}",
                                hints={"duration": 90 * g} if g == 2 else None)
        assert ctl.round().error == ""
        fake.advance(30.0)


def test_admitted_copy_is_replace_with_admitted() -> None:
    """The store's copy of an admitted job's extras keeps every other field, in its place."""
    x = JobExtras(*(object() for _ in fields(JobExtras)))  # type: ignore[arg-type]
    copy = x.admitted_copy()
    assert {f.name: getattr(copy, f.name) for f in fields(JobExtras)} == {
        f.name: getattr(x, f.name) if f.name != "admitted" else True for f in fields(JobExtras)}
