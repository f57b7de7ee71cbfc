"""The walk's index of preemption candidates (``round._Live``) against its definition.

The walk used to recompute the candidates below a rank as "every running job ranked below,
less those stopped or moved so far" on each call; the index keeps that list up to date
instead. Any sequence of stops, spares and moves must leave it equal to the definition, and
a round decided with it must equal one decided by a walk that recomputes it.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from _core_helpers import cluster, pending, running, snapshot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_round import COMPS, snapshots

from blox_slurm.core import round as round_module
from blox_slurm.core.abstractions import PreemptionBase, Ranked
from blox_slurm.core.composition import build
from blox_slurm.core.ledger import Ledger
from blox_slurm.core.registry import register
from blox_slurm.core.round import _Live, decide


@st.composite
def walks(draw: st.DrawFn) -> tuple[list, list[tuple[str, int]]]:
    """A rank order of running and pending jobs, and a sequence of (operation, argument)."""
    kinds = draw(st.lists(st.booleans(), min_size=1, max_size=30))
    order = [running(i, (i,), since=0.0) if run else pending(i) for i, run in enumerate(kinds)]
    ops = draw(st.lists(st.tuples(st.sampled_from(["stop", "spare", "move", "below"]),
                                  st.integers(0, len(order))), max_size=40))
    return order, ops


@settings(max_examples=300, deadline=None)
@given(walks())
def test_candidates_below_a_rank_are_the_running_jobs_not_yet_out(case) -> None:
    order, ops = case
    ledger = Ledger()
    live = _Live(order, ledger)
    rank = {j.id: i for i, j in enumerate(order)}

    def definition(pos: int) -> list:
        return [j for j in order[pos + 1:] if j.gpus and not ledger.out(j.id)]

    for op, arg in ops:
        if op == "below":
            assert _read(live.below(arg)) == definition(arg)
            assert live.any_below(arg) == bool(definition(arg))
            continue
        pick = [j for j in order if j.gpus and not ledger.out(j.id)]
        if op == "spare":
            stopped = [j for j in order if j.id in ledger.stopped]
            if stopped:
                victim = stopped[arg % len(stopped)]
                ledger.spare(victim.id)
                live.back(victim, rank[victim.id])
        elif pick:
            job = pick[arg % len(pick)]
            if op == "stop":
                ledger.stop(job.id, -1)
                assert live.leave(job) == rank[job.id]
            else:
                ledger.move(job.id, job.gpus)
                assert live.leave(job, rank[job.id]) == rank[job.id]
    for pos in range(len(order) + 1):
        assert _read(live.below(pos)) == definition(pos)


def _read(view) -> list:
    """The candidates of a view (``_Live.below``), read every way a preemption policy may:
    iterated, reversed, indexed from either end, sliced."""
    jobs = list(view)
    n = len(view)
    assert len(jobs) == n and list(reversed(view)) == jobs[::-1]
    assert [view[i] for i in range(n)] == jobs == [view[i - n] for i in range(n)]
    assert view[1:] == jobs[1:] and view[::-1] == jobs[::-1]
    for bad in (n, -n - 1):
        with pytest.raises(IndexError):
            view[bad]
    return jobs


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), max_size=30))
def test_an_index_built_from_a_ranked_order_is_the_one_built_from_the_plain_order(kinds) -> None:
    """A :class:`Ranked` order (the service index's) gives its pending positions and running
    jobs instead of a pass over the order: the same candidates below every rank."""
    order = [running(i, (i,), since=0.0) if run else pending(i) for i, run in enumerate(kinds)]
    ranked = Ranked()
    ranked += order
    ranked.pending_at = [i for i, j in enumerate(order) if not j.gpus]
    ranked.running = [j for j in order if j.gpus]
    fast, plain = _Live(ranked, Ledger()), _Live(order, Ledger())
    assert fast.pos == plain.pos and fast.jobs == plain.jobs


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_the_walk_stops_early_only_where_no_later_job_could_start(s) -> None:
    """Without ``explain`` the walk stops once nothing is free and every running job ranked
    below has been stopped (``_Walk._all_stopped_below``); walking on, as ``explain`` does to
    say why each job waits, decides the same round."""
    for name, c in COMPS.items():
        for rank_all in (True, False):
            quick = decide(s, c, rank_all=rank_all)
            full = decide(s, c, explain=True, rank_all=rank_all)
            assert replace(quick, reasons={}, order=()) == replace(full, reasons={}, order=()), name


def test_an_index_built_after_a_move_leaves_the_moved_job_out() -> None:
    order = [running(1, (0,), since=0.0), running(2, (1,), since=0.0), pending(3)]
    ledger = Ledger()
    ledger.move(2, (3,))
    assert [j.id for j in _Live(order, ledger).below(-1)] == [1]


def test_an_index_built_after_a_pause_leaves_the_paused_jobs_out() -> None:
    """The walk makes the index on its first need, after pausing (``Schedule.stop``, free
    movers): jobs still off their GPUs are no one's victims."""
    order = [running(1, (0,), since=0.0), running(2, (1,), since=0.0), pending(3)]
    assert [j.id for j in _Live(order, Ledger(), paused={1}).below(-1)] == [2]


class _Recomputed:
    """The definition the index replaces, as the walk computed it before: every running job
    ranked below, less those out and those paused off their GPUs, found by a pass over the
    order on each call."""

    def __init__(self, order, ledger: Ledger, paused=()) -> None:
        self.order, self.ledger, self.paused = order, ledger, paused
        self.rank = {j.id: i for i, j in enumerate(order)}

    def below(self, rank: int) -> list:
        return [j for j in self.order[rank + 1:]
                if j.gpus and not (self.ledger.out(j.id) or j.id in self.paused)]

    def any_below(self, rank: int) -> bool:
        return bool(self.below(rank))

    def leave(self, job, at: int | None = None) -> int:
        return self.rank[job.id]

    def back(self, job, at: int) -> None:
        pass


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_every_composition_decides_as_with_the_candidates_recomputed(s) -> None:
    """Each bundled composition, with Gavel's moves and node states, decides the same
    round with the index as with the pass it replaced."""
    for name, c in COMPS.items():
        for rank_all in (True, False):
            fast = decide(s, c, explain=True, rank_all=rank_all)
            with pytest.MonkeyPatch.context() as m:
                m.setattr(round_module, "_Live", _Recomputed)
                slow = decide(s, c, explain=True, rank_all=rank_all)
            assert fast == slow, name


@register("preemption", "test-copies-victims")
class CopiesVictims(PreemptionBase):
    """Names the lowest-ranked candidate by a copy of its record, not the object handed in."""

    def __init__(self, params: object = None) -> None:
        pass

    def victims(self, job, candidates, free, count, fits):
        return [replace(candidates[-1])]


@register("preemption", "test-names-a-waiting-job")
class NamesAWaitingJob(CopiesVictims):
    def victims(self, job, candidates, free, count, fits):
        return [job]


def _full_cluster():
    shape = cluster(2)
    return snapshot(shape, [running(1, (0,), since=0.0), running(2, (1,), since=100.0),
                            pending(3, submit=50.0)], now=1000.0)


def test_a_victim_named_by_a_copy_is_found_by_its_id() -> None:
    d = decide(_full_cluster(), build({"scheduling": "las", "preemption": "test-copies-victims"}))
    assert d.preempt == (1,) and [s.job_id for s in d.start] == [3]
    assert d == decide(_full_cluster(), build({"scheduling": "las"}))


def test_a_policy_that_names_a_job_not_running_is_told_so() -> None:
    comp = build({"scheduling": "las", "preemption": "test-names-a-waiting-job"})
    with pytest.raises(ValueError, match="preemption chose job 3, which is not running"):
        decide(_full_cluster(), comp)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 40).flatmap(lambda n: st.tuples(
    st.just(n), st.sets(st.integers(0, max(n - 1, 0)), max_size=n), st.integers(0, n))))
def test_the_running_positions_are_the_range_less_the_pending_ones(case) -> None:
    """``_others`` cuts the pending positions that end the range off by a bisection: the
    set difference, whatever block of them ends it (the whole range, none, some)."""
    n, some, tail = case
    skip = sorted({i for i in some if i < n} | set(range(n - tail, n)))
    assert round_module._others(n, skip) == [i for i in range(n) if i not in set(skip)]
