"""Gavel's exact logic on hand-solved cases: the LPs, the equal share, the mechanism."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from _core_helpers import pending, running, snapshot
from _gavel_data import GAVEL, THROUGHPUTS, needs_gavel

from blox_slurm.core import transitions
from blox_slurm.core.abstractions import FreeGpus
from blox_slurm.core.composition import Composition
from blox_slurm.core.model import Move, NodeState, build_cluster
from blox_slurm.core.round import decide
from blox_slurm.core.throughput import ParametricThroughput
from blox_slurm.loading import build, load
from blox_slurm.policies.scheduling.gavel import Gavel, allocate, equal_share, priority, usable_gpus
from blox_slurm.sim.config import ClusterSpec, SimConfig
from blox_slurm.sim.simulator import Simulator
from blox_slurm.workloads.gavel import load_gavel
from blox_slurm.workloads.gavel_throughput import GavelThroughput

CAP11 = np.array([1.0, 1.0])  # types (v100, k80): one GPU each
ONE = np.array([1.0, 1.0])  # two 1-GPU jobs


def test_equal_share_is_one_nth_of_each_usable_type_capped_at_all_the_time() -> None:
    thr = np.array([[1.0, 0.1], [1.0, 0.9]])
    # 1 v100 + 2 k80, 2 jobs: fractions 1/2 and 1 sum to 1.5 -> scaled to 1/3 and 2/3
    assert equal_share(thr, ONE, np.array([1.0, 2.0])) == pytest.approx(
        [1 / 3 + 0.1 * 2 / 3, 1 / 3 + 0.9 * 2 / 3])
    # a type the job cannot use is not part of its share
    assert equal_share(np.array([[1.0, 0.0]]), np.array([1.0]), CAP11) == pytest.approx([1.0])


def test_max_min_fairness_two_jobs_two_types_hand_solved() -> None:
    # 1 v100 + 2 k80; A barely runs on k80 (0.1), B hardly cares (0.9). Equal shares 0.4 and
    # 14/15. With B's v100 fraction b: A = 1 - 0.9b, B = 0.9 + 0.1b; equal ratios give
    # b = 43/66, and both jobs beat their equal share (min ratio 1.034).
    thr = np.array([[1.0, 0.1], [1.0, 0.9]])
    x = allocate(thr, ONE, np.array([1.0, 2.0]), "max_min_fairness")
    b = 43 / 66
    assert x == pytest.approx(np.array([[1 - b, b], [b, 1 - b]]), abs=1e-4)
    eff = (x * thr).sum(axis=1)
    assert min(eff / equal_share(thr, ONE, np.array([1.0, 2.0]))) == pytest.approx(
        (0.9 + 0.1 * b) / (14 / 15), rel=1e-4)


def test_min_makespan_equalizes_finish_times() -> None:
    # A (1, 0.5), B (1, 0.1), 100 s each: A = 0.5 + 0.5a, B = 1 - 0.9a with a = A's v100
    # time; equal at a = 5/14.
    thr = np.array([[1.0, 0.5], [1.0, 0.1]])
    x = allocate(thr, ONE, CAP11, "min_makespan", np.array([100.0, 100.0]))
    a = 5 / 14
    assert x == pytest.approx(np.array([[a, 1 - a], [1 - a, a]]), abs=1e-4)
    # twice the work for A: it gets more of both
    x2 = allocate(thr, ONE, CAP11, "min_makespan", np.array([200.0, 100.0]))
    eff = (x2 * thr).sum(axis=1)
    assert 200 / eff[0] == pytest.approx(100 / eff[1], rel=1e-4)


def test_max_sum_throughput_puts_each_job_where_it_loses_least() -> None:
    thr = np.array([[1.0, 0.5], [1.0, 0.1]])
    x = allocate(thr, ONE, CAP11, "max_sum_throughput")
    assert x == pytest.approx(np.array([[0.0, 1.0], [1.0, 0.0]]), abs=1e-9)


def test_capacity_counts_gpus_per_job() -> None:
    # one 2-GPU job and one 1-GPU job on 2 v100s: the 2-GPU one can run half the time at most
    x = allocate(np.array([[1.0], [1.0]]), np.array([2.0, 1.0]), np.array([2.0]),
                 "max_sum_throughput")
    assert (x[:, 0] * [2, 1]).sum() == pytest.approx(2.0)
    assert x.max() <= 1.0 + 1e-9


def test_priority_is_allocation_over_fraction_received() -> None:
    assert priority(0.5, 100.0, 400.0) == pytest.approx(2.0)  # got 1/4, owed 1/2
    assert priority(0.5, 200.0, 400.0) == pytest.approx(1.0)
    assert priority(0.5, 0.0, 400.0) == math.inf
    assert priority(0.5, 0.0, 0.0) == math.inf


# ------------------------------------------------------------------- the policy on snapshots

SHAPE = build_cluster([("k80", 1, 1), ("v100", 1, 2)])  # GPU 0: k80; GPUs 1, 2: v100
SPEED = ParametricThroughput(type_speed={"v100": 1.0, "k80": 0.25})


def test_a_job_that_fits_only_one_type_is_sent_there() -> None:
    s = snapshot(SHAPE, [pending(1, 2, submit=0.0)], now=10.0, throughput=SPEED)
    sched = Gavel().order(s, s.jobs)
    assert sched.types == {1: "v100"}
    _, jobs, x, _ = Gavel().allocation(s, s.jobs)
    assert x[0].tolist() == pytest.approx([0.0, 1.0])  # types sorted: k80, v100


def test_the_lp_is_solved_again_only_when_its_numbers_change(monkeypatch) -> None:
    import blox_slurm.policies.scheduling.gavel as gavel_module

    solves = []
    real = gavel_module.allocate
    monkeypatch.setattr(gavel_module, "allocate",
                        lambda *a, **kw: solves.append(1) or real(*a, **kw))
    g = Gavel()
    s = snapshot(SHAPE, [pending(1, 1), pending(2, 1)], now=10.0, throughput=SPEED)
    g.order(s, s.jobs)
    g.order(replace(s, now=20.0), s.jobs)  # the same jobs and speeds: the memo answers
    assert len(solves) == 1
    # Another throughput model (a new object or new numbers): the rates differ, solve again.
    faster_k80 = replace(s, throughput=ParametricThroughput(type_speed={"v100": 1.0,
                                                                       "k80": 0.5}))
    g.order(faster_k80, s.jobs)
    assert len(solves) == 2


def test_a_job_that_asked_for_a_type_is_given_only_that_type_and_never_moved() -> None:
    # Job 1 asked for a k80 (--gres=gpu:k80:1): the idle, 4x faster v100s are not its to
    # take; Slurm could not run it there. Running on the k80, it stays.
    k80 = (("gpu_type", "k80"),)
    s = snapshot(SHAPE, [pending(1, 1, submit=0.0, hints=k80)], now=10.0, throughput=SPEED)
    _, _, x, _ = Gavel().allocation(s, s.jobs)
    assert x[0].tolist() == pytest.approx([1.0, 0.0])  # types sorted: k80, v100
    assert Gavel().order(s, s.jobs).types == {1: "k80"}
    on_k80 = snapshot(SHAPE, [running(1, [0], submit=0.0, since=0.0, hints=k80)], now=360.0,
                      throughput=SPEED)
    d = decide(on_k80, load("gavel"))
    assert (d.start, d.preempt) == ((), ())


def test_gpus_held_outside_the_snapshot_are_not_capacity() -> None:
    # Both v100s are held by a job the controller does not manage (another partition): its
    # free index leaves them out, and no snapshot job holds them. Counting them, Gavel would
    # give job 1 the 4x faster v100 and it would wait; it must get the idle k80 and start.
    free = FreeGpus({"node1": (0,), "node2": ()}, SHAPE[1])
    s = snapshot(SHAPE, [pending(1, 1, submit=0.0)], now=10.0, throughput=SPEED, free=free)
    assert usable_gpus(s) == {"k80": 1, "v100": 0}
    assert Gavel().order(s, s.jobs).types == {1: "k80"}
    assert [(st.job_id, st.gpus) for st in decide(s, load("gavel")).start] == [(1, (0,))]
    # GPUs the snapshot's own jobs hold are capacity (running jobs are re-placed each round).
    mine = snapshot(SHAPE, [running(2, [1, 2], submit=0.0), pending(1, 1, submit=5.0)],
                    now=10.0, throughput=SPEED)
    assert usable_gpus(mine) == {"k80": 1, "v100": 2}


def test_with_every_gpu_free_or_held_the_capacity_is_the_totals_per_type() -> None:
    """The shortcut of a world whose free index and jobs hold every GPU (the simulator's)
    gives the count it replaces, with the same type order; a GPU held outside the snapshot
    (the controller's) or a drained node takes the count."""
    held = snapshot(SHAPE, [running(2, [1], submit=0.0), pending(1, 1, submit=5.0)], now=10.0)
    full = replace(held, free=FreeGpus({"node1": (0,), "node2": (2,)}, SHAPE[1]))
    assert list(usable_gpus(full).items()) == list(usable_gpus(held).items())
    assert usable_gpus(full) == {"k80": 1, "v100": 2}
    foreign = replace(held, free=FreeGpus({"node1": (0,), "node2": ()}, SHAPE[1]))
    assert usable_gpus(foreign) == {"k80": 1, "v100": 1}
    nodes = (SHAPE[0][0], replace(SHAPE[0][1], state=NodeState.DRAIN))
    assert usable_gpus(replace(full, nodes=nodes)) == {"k80": 1}


def test_a_job_no_type_can_hold_goes_last_without_a_type() -> None:
    s = snapshot(SHAPE, [pending(1, 3, submit=0.0), pending(2, 1, submit=5.0)], now=10.0,
                 throughput=SPEED)
    sched = Gavel().order(s, s.jobs)
    assert [j.id for j in sched.order] == [2, 1] and 1 not in sched.types


def test_mechanism_counts_time_per_type_in_marks_and_ranks_by_priority() -> None:
    # Three 1-GPU jobs, 1 k80 + 2 v100; job 1 has run 300 s on v100 since t=100 and had
    # 200 s there before (seen at t=300: only 100 s are new).
    jobs = [running(1, [1], submit=0.0, since=200.0,
                    marks=(("gavel.on.v100", 200.0), ("gavel.seen", 300.0))),
            pending(2, 1, submit=0.0), pending(3, 1, submit=0.0)]
    s = snapshot(SHAPE, jobs, now=400.0, throughput=SPEED)
    sched = Gavel().order(s, s.jobs)
    assert sched.marks == ((1, "gavel.on.v100", 300.0), (1, "gavel.seen", 400.0))
    # Each job's allocation is 2/3 v100 + 1/3 k80 (3 jobs, 3 GPUs, equal speedups). Jobs 2
    # and 3 never ran: infinite priority, the larger share (v100) first, so they claim both
    # v100s; job 1 (got 300/400 of v100, owed 2/3: priority 0.89) has infinite priority on
    # the k80 it never ran on, but its (-inf, -1/3) pair sorts after theirs: it gets the k80.
    assert [j.id for j in sched.order] == [2, 3, 1]
    assert sched.types == {2: "v100", 3: "v100", 1: "k80"}
    # The round: job 2 takes the free v100, job 3 preempts job 1 (ranked below it) for the
    # other, and job 1 restarts at once on the k80 left over, its type.
    d = decide(s, load("gavel"))
    assert [(st.job_id, st.gpus) for st in d.start] == [(2, (2,)), (3, (1,))]
    assert d.move == (Move(1, (0,), for_job=3),) and d.stop == ()
    # Confined to its type (migrate = false), job 1 competes only for the claimed v100s.
    fixed = Gavel(Gavel.Params(migrate=False)).order(s, s.jobs)
    assert [j.id for j in fixed.order] == [2, 3, 1] and fixed.types == {2: "v100", 3: "v100"}


def _gavel(migrate: bool) -> Composition:
    return build({"name": "gavel", "scheduling": {"policy": "gavel", "migrate": migrate},
                  "placement": {"policy": "consolidated", "spread_if_needed": True}})


def test_an_uncontended_running_job_moves_to_the_faster_idle_type() -> None:
    # Job 1, alone on the k80 and owed all of its time on the (idle) v100s: Gavel gives it a
    # v100 and the round moves it there (a move: the job and its new GPUs), its k80 left
    # free. Confined (migrate = false) it keeps the k80 until another job claims it:
    # that stranding cost Gavel the lightly loaded e13805 trace (docs/compositions.md).
    s = snapshot(SHAPE, [running(1, [0], submit=0.0, since=0.0)], now=360.0, throughput=SPEED)
    _, _, x, _ = Gavel().allocation(s, s.jobs)
    assert x[0].tolist() == pytest.approx([0.0, 1.0])  # all of its time on v100
    assert Gavel().order(s, s.jobs).types == {1: "v100"}
    d = decide(s, _gavel(True), explain=True)
    assert d.start == () and d.stop == () and len(d.move) == 1
    move = d.move[0]
    assert move.job_id == 1 and move.for_job is None
    assert {s.gpus[g].type for g in move.gpus} == {"v100"}
    assert "moved to v100" in d.reasons[1]
    after = transitions.apply(s, d)  # carried out: on a v100, and the next round leaves it
    assert after.jobs[0].gpus == move.gpus and after.jobs[0].preemptions == 1
    assert decide(after, _gavel(True)).empty
    assert Gavel(Gavel.Params(migrate=False)).order(s, s.jobs).types == {}
    kept = decide(s, _gavel(False))
    assert (kept.start, kept.preempt) == ((), ())


def test_a_move_without_free_gpus_swaps_with_a_job_leaving_that_type() -> None:
    # Job 1 ran on the k80 all along; jobs 2 and 3 hold both v100s. Gavel gives job 1 a v100,
    # job 2 (owed k80 time, never had any) the k80, job 3 keeps its v100. No v100 is free, so
    # job 1 stops job 2, which is leaving the v100s anyway, and job 2 restarts on job 1's old
    # k80: a swap in one round. Job 3, which stays, is not stopped to make room.
    jobs = [running(1, [0], submit=0.0, since=0.0), running(2, [1], submit=50.0, since=50.0),
            running(3, [2], submit=60.0, since=60.0)]
    s = snapshot(SHAPE, jobs, now=360.0, throughput=SPEED)
    assert Gavel().order(s, s.jobs).types == {1: "v100", 2: "k80", 3: "v100"}
    c = _gavel(True)
    d = decide(s, c, explain=True)
    assert d.move == (Move(1, (1,)), Move(2, (0,), for_job=1)) and d.start == ()
    assert d.reasons[1].startswith("moved to v100")
    assert d.reasons[2].endswith("restarted on GPUs left over")
    again = decide(transitions.apply(s, d), c)
    assert (again.preempt, again.start) == ((), ())


def test_same_throughput_on_every_type_reduces_to_fair_time_sharing() -> None:
    s = snapshot(SHAPE, [pending(i, 1, submit=0.0) for i in range(6)], now=10.0,
                 throughput=ParametricThroughput())
    _, _, x, _ = Gavel().allocation(s, s.jobs)
    assert x.sum(axis=1) == pytest.approx([0.5] * 6, abs=1e-6)  # 3 GPUs, 6 jobs


@needs_gavel
def test_gavel_runs_a_real_trace_prefix_on_a_heterogeneous_cluster() -> None:
    thr = GavelThroughput(THROUGHPUTS, fallback=ParametricThroughput())
    wl = load_gavel(GAVEL / "msr_seed0_2869ce.trace", throughputs=thr)
    wl = replace(wl, jobs=tuple(j for j in wl.jobs[:40] if j.num_gpus <= 4), measure=None)
    shape = ClusterSpec.parse("v100:4x2,p100:4x2,k80:4x2").build()
    result = Simulator(wl, load("gavel"), shape, SimConfig(round_duration=360.0), thr).run()
    assert result.unfinished == () and len(result.jobs) == len(wl.jobs)
