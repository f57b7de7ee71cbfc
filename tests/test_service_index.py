"""The world's index of running jobs by attained service (``ClusterSnapshot.by_service``)
against the plain sort it stands in for: the same order, ties included, after any sequence
of starts, stops and rounds, and an answer only where it is exact."""

from __future__ import annotations

import dataclasses
import math

import pytest
from _core_helpers import comp
from hypothesis import given, settings
from hypothesis import strategies as st

from blox_slurm import loading
from blox_slurm.core.abstractions import Ranked
from blox_slurm.core.model import Job, JobState
from blox_slurm.core.service_index import ServiceIndex, waiting_entries
from blox_slurm.policies.scheduling.las import Las, by_service
from blox_slurm.sim.config import ClusterSpec, SimConfig
from blox_slurm.sim.simulator import Simulator
from blox_slurm.workloads import generate

# Few distinct values, so equal services and equal submit times are common.
_whole = st.sampled_from([0.0, 300.0, 600.0, 4e5]) | st.integers(0, 10**7).map(float)
_service = _whole | st.sampled_from([1e-9, 0.1, 0.5, 2.0**51])


def _running(jid: int, submit: float, base: float, since: float, g: int) -> Job:
    return Job(jid, submit, g, state=JobState.RUNNING, gpus=tuple(range(g)),
               run_since=since, attained_base=base)


@st.composite
def _rounds(draw: st.DrawFn) -> list[tuple[str, int, float, Job | None]]:
    """Rounds of a world: jobs start (their runs begin then or after a start latency) and
    stop, and the round ranks every job at its time."""
    steps: list[tuple[str, int, float, Job | None]] = []
    now = 0.0
    for jid in range(draw(st.integers(1, 30))):
        now += draw(st.sampled_from([0.0, 300.0, 0.5, 0.1, 1e7 + 0.3]))
        since = now + draw(st.sampled_from([0.0, 0.0, 0.0, 300.0, 1.5, 0.1]))
        job = _running(jid, draw(st.sampled_from([0.0, 60.0, now])), draw(_service), since,
                       draw(st.sampled_from([1, 1, 2, 4])))
        steps.append(("start", jid, now, job))
        if draw(st.booleans()):
            steps.append(("stop", draw(st.integers(0, jid)), now, None))
        steps.append(("round", jid, now, None))
    return steps


def _check(index: ServiceIndex, running: dict[int, Job], waiting: dict[int, Job],
           now: float) -> list[Job] | None:
    jobs = (*running.values(), *waiting.values())
    index.seal(jobs)
    got = index.order(jobs, tuple(waiting.values()), now)
    if got is not None:
        assert [j.id for j in got] == [j.id for j in by_service(jobs, now)]
    if isinstance(got, Ranked):  # where the waiting jobs are, and the running ones between
        assert got.pending_at == [i for i, j in enumerate(got) if not j.gpus]
        assert got.running == [j for j in got if j.gpus]
    return got


@settings(max_examples=300, deadline=None)
@given(_rounds())
def test_the_index_ranks_as_the_plain_sort_after_any_starts_and_stops(steps) -> None:
    index = ServiceIndex()
    running: dict[int, Job] = {}
    waiting: dict[int, Job] = {}
    for what, jid, now, job in steps:
        if job is not None:
            running[jid] = job
            index.add(job, now)
        elif what == "stop" and jid in running:
            stopped = running.pop(jid)
            index.remove(stopped)
            waiting[jid] = Job(jid, stopped.submit_time, stopped.num_gpus,
                               attained_base=stopped.attained_base + 300.0)
        elif what == "round":
            _check(index, running, waiting, now)


def test_whole_seconds_get_an_answer_and_a_fraction_anywhere_gets_none() -> None:
    index = ServiceIndex()
    a, b = _running(1, 0.0, 600.0, 300.0, 1), _running(2, 5.0, 0.0, 300.0, 2)
    for job in (a, b):
        index.add(job, 300.0)
    waiting = {3: Job(3, 1.0, 1, attained_base=700.0)}
    assert _check(index, {1: a, 2: b}, waiting, 600.0) is not None  # two groups: merged
    assert _check(index, {1: a, 2: b}, waiting, 600.5) is None  # a fractional clock
    index.remove(b)
    assert [j.id for j in _check(index, {1: a}, waiting, 900.0) or []] == [3, 1]  # galloped
    assert _check(index, {1: a}, {3: dataclasses.replace(waiting[3], attained_base=0.5)},
                  900.0) is not None  # an off-grid waiting job: merged by key, still exact
    late = _running(4, 0.0, 0.0, 1200.0, 1)  # its run begins after a start latency
    index.add(late, 900.0)
    assert _check(index, {1: a, 4: late}, waiting, 900.0) is None
    assert _check(index, {1: a, 4: late}, waiting, 1200.0) is not None
    index.add(_running(5, 0.0, 0.25, 300.0, 1), 1200.0)  # a service off the grid
    assert _check(index, {1: a, 4: late}, waiting, 1500.0) is None


def test_the_index_answers_only_for_the_jobs_it_was_sealed_with() -> None:
    index = ServiceIndex()
    job = _running(1, 0.0, 0.0, 0.0, 1)
    index.add(job, 0.0)
    jobs = (job,)
    index.seal(jobs)
    assert index.order(jobs, (), 300.0) == [job]
    assert index.order((job,), (), 300.0) is None  # another sequence, even if equal
    index.add(_running(2, 0.0, 0.0, 300.0, 1), 300.0)
    assert index.order(jobs, (), 300.0) is None  # the world changed since the seal
    with pytest.raises(ValueError, match="not in the index"):
        index.remove(dataclasses.replace(job, attained_base=1.0))  # never added


class _Unindexed(Las):
    reads_service_index = False


@pytest.mark.parametrize("cfg", [{}, {"start_latency": 1.5, "stop_latency": 2.0},
                                 {"round_duration": 60.0, "restart_cost": 7.5}])
def test_las_with_the_index_simulates_as_without_it(cfg) -> None:
    wl = generate(n_jobs=300, jobs_per_hour=40.0, seed=5, measure=None,
                  gpu_demand={1: 0.7, 2: 0.1, 4: 0.15, 8: 0.05})
    shape = ClusterSpec.parse("gpu:4x4").build()
    indexed = comp("las")
    plain = dataclasses.replace(indexed, scheduling=_Unindexed())
    a = Simulator(wl, indexed, shape, SimConfig(**cfg)).run()
    b = Simulator(wl, plain, shape, SimConfig(**cfg)).run()
    assert a.jobs == b.jobs and a.utilization == b.utilization and a.rounds == b.rounds
    assert sum(j.preemptions for j in a.jobs) > 50  # the preempting rounds were exercised


def test_the_bundled_las_compositions_read_the_index() -> None:
    assert loading.load("las").scheduling.reads_service_index is True


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_service | st.just(math.nan), st.sampled_from([0.0, 60.0])),
                max_size=40), st.permutations(range(40)))
def test_waiting_jobs_alone_rank_as_the_keyed_sort_ranks_them(rows, ids) -> None:
    """``by_service`` of jobs none of which runs (a pending-only round) sorts their keys read
    in C loops: the order of the per-job key's sort, ties and NaN included."""
    jobs = [Job(jid, submit, 1, attained_base=base)
            for jid, (base, submit) in zip(ids, rows, strict=False)]

    def key(j: Job) -> tuple[float, float, int]:
        return j.attained_base, j.submit_time, j.id

    assert [j.id for j in by_service(jobs, 1e6)] == [j.id for j in sorted(jobs, key=key)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_whole, _whole, st.sampled_from([0.0, 60.0])), min_size=1,
                max_size=12),
       st.lists(st.tuples(_whole, st.sampled_from([0.0, 60.0])), max_size=12))
def test_waiting_jobs_ranked_below_every_running_one_follow_them(runs, below) -> None:
    """The merge appends the waiting jobs that rank below every running job together: the
    plain sort's order, and their positions, with waiting jobs above and among the running
    ones too."""
    now = 1e7
    index = ServiceIndex()
    running = {jid: _running(jid, submit, base, since, 1)
               for jid, (base, since, submit) in enumerate(runs)}
    for job in running.values():
        index.add(job, now)
    top = max(j.attained_service(now) for j in running.values())
    waiting = {100 + i: Job(100 + i, submit, 1, attained_base=top + extra)
               for i, (extra, submit) in enumerate(below)}
    waiting[99] = Job(99, 0.0, 1)  # above or among them
    got = _check(index, running, waiting, now)
    assert isinstance(got, Ranked)


def test_the_waiting_jobs_are_sorted_once_for_the_same_records() -> None:
    """``ServiceIndex.waiting`` answers as ``waiting_entries`` and sorts again only when a
    record differs, an equal copy included (its entries would name the other object)."""
    index = ServiceIndex()
    jobs = [Job(jid, 0.0, 1, attained_base=float(10 - jid)) for jid in range(5)]
    first = index.waiting(jobs)
    assert first == waiting_entries(jobs)
    assert index.waiting(tuple(jobs)) is first
    copy = [*jobs[:2], dataclasses.replace(jobs[2]), *jobs[3:]]
    again = index.waiting(copy)
    assert again is not first and again == waiting_entries(copy)
    assert any(entry[3] is copy[2] for entry in again)
    assert index.waiting(jobs[:4]) == waiting_entries(jobs[:4])
