"""Admission (accept_all, load_based) and preemption (priority, none) with backfill."""

from __future__ import annotations

import pytest
from _core_helpers import cluster, comp, pending, running, snapshot, started

from blox_slurm.core.composition import CompositionError
from blox_slurm.core.model import NodeState
from blox_slurm.core.round import decide
from blox_slurm.policies.admission.accept_all import AcceptAll
from blox_slurm.policies.admission.load_based import LoadBased


def load_based(k: float) -> LoadBased:
    return LoadBased(LoadBased.Params(k=k))


# --------------------------------------------------------------------------- admission

def test_accept_all_admits_every_waiting_job() -> None:
    s = snapshot(cluster(1), [])
    waiting = [pending(3, admitted=False), pending(1, admitted=False)]
    assert list(AcceptAll().admit(s, waiting)) == [3, 1]


def test_decide_admits_only_jobs_not_yet_admitted() -> None:
    shape = cluster(2)
    jobs = [running(1, [0]), pending(2, submit=1.0), pending(3, submit=2.0, admitted=False)]
    d = decide(snapshot(shape, jobs, now=5.0), comp("fifo"))
    assert d.admit == (3,)
    assert d.order == (1, 2, 3)


def _demand_snapshot(*waiting):
    # 4 GPUs. Active demand: R running on 2 GPUs + W admitted and waiting for 1 = 3.
    jobs = [running(1, [0, 1], submit=0.0), pending(2, gpus=1, submit=1.0), *waiting]
    return snapshot(cluster(4), jobs, now=20.0)


def test_load_based_admits_while_demand_stays_within_k_times_gpus() -> None:
    a = pending(10, submit=10.0, admitted=False)
    b = pending(11, submit=11.0, admitted=False)
    s = _demand_snapshot(a, b)
    # k = 1: limit 4; 3 + A(1) = 4 <= 4 admitted; + B = 5 > 4 waits.
    assert list(load_based(1.0).admit(s, [a, b])) == [10]
    # k = 1.5: limit 6; 4, then 5 -> both.
    assert list(load_based(1.5).admit(s, [a, b])) == [10, 11]
    # k = 0.5: limit 2 < 3 already active -> nobody.
    assert list(load_based(0.5).admit(s, [a, b])) == []


def test_load_based_overflow_queue_is_fifo_and_blocks_later_arrivals() -> None:
    big = pending(10, gpus=2, submit=10.0, admitted=False)
    small = pending(11, gpus=1, submit=11.0, admitted=False)
    s = _demand_snapshot(big, small)
    # k = 1: 3 + 2 = 5 > 4 -> the big job waits, and the small one (3 + 1 = 4 would fit)
    # is not let past it.
    assert list(load_based(1.0).admit(s, [small, big])) == []
    # arrival order, not list order, and ties by id
    t1 = pending(21, submit=12.0, admitted=False)
    t2 = pending(20, submit=12.0, admitted=False)
    s2 = _demand_snapshot(t1, t2)
    assert list(load_based(1.25).admit(s2, [t1, t2])) == [20, 21]  # limit 5: 4, 5


def test_load_based_counts_running_and_admitted_waiting_demand_only() -> None:
    # Not-admitted waiting jobs are not demand yet: alone on an idle 4-GPU cluster, four
    # 1-GPU arrivals under k = 1 are all admitted (1, 2, 3, 4 <= 4), a fifth is not.
    shape = cluster(4)
    waiting = [pending(i, submit=float(i), admitted=False) for i in range(5)]
    s = snapshot(shape, waiting, now=10.0)
    assert list(load_based(1.0).admit(s, waiting)) == [0, 1, 2, 3]
    # A running job that is (oddly) not flagged admitted still counts.
    r = running(9, [0, 1, 2], admitted=False)
    s2 = snapshot(shape, [r, *waiting], now=10.0)
    assert list(load_based(1.0).admit(s2, waiting)) == [0]


def test_load_based_in_a_round_explains_who_was_not_admitted() -> None:
    a = pending(10, submit=10.0, admitted=False)
    b = pending(11, submit=11.0, admitted=False)
    s = _demand_snapshot(a, b)
    c = comp("fifo", admission={"policy": "load_based", "k": 1.0})
    d = decide(s, c, explain=True)
    assert d.admit == (10,)
    assert 11 not in d.order and 10 in d.order
    assert started(d) == {2: (2,), 10: (3,)}
    assert d.reasons[11] == "not admitted by load_based"
    assert decide(s, c).start == d.start  # explain changes only the reasons


def test_load_based_rejects_non_positive_k() -> None:
    with pytest.raises(CompositionError, match="k"):
        comp("fifo", admission={"policy": "load_based", "k": 0})


# --------------------------------------------------------------------------- preemption

def test_priority_preempts_from_the_tail_of_the_order() -> None:
    shape = cluster(2)
    # LAS at t=1000: R1 100 GPU-s, R2 500 GPU-s; P (0) needs 1 GPU -> stop R2, the tail.
    r1 = running(1, [0], submit=0.0, since=900.0)
    r2 = running(2, [1], submit=0.0, since=500.0)
    p = pending(3, submit=999.0)
    d = decide(snapshot(shape, [r1, r2, p], now=1000.0), comp("las"))
    assert d.preempt == (2,) and started(d) == {3: (1,)}


def test_priority_preempts_only_when_that_makes_the_job_fit() -> None:
    shape = cluster(2, 2)  # node1: 0,1  node2: 2,3
    # FIFO: HI (t=0) on GPU 0 ranks above P (t=5); LO (t=10) on GPU 2 ranks below.
    hi, lo = running(1, [0], submit=0.0), running(2, [2], submit=10.0)
    # P wants 4: stopping LO frees 3 of 4 -> no preemption at all.
    s = snapshot(shape, [hi, lo, pending(3, gpus=4, submit=5.0)], now=100.0)
    d = decide(s, comp("fifo"), explain=True)
    assert d.preempt == () and d.start == ()
    assert d.reasons[3].startswith("needs 4 GPU(s); 2 free")
    # P wants 2 on one node (consolidated): GPUs 1 and 3 are free but on two nodes;
    # stopping LO gives node2 two free GPUs, and LO restarts at once on the one left (GPU 1).
    s = snapshot(shape, [hi, lo, pending(3, gpus=2, submit=5.0)], now=100.0)
    d = decide(s, comp("fifo", placement="consolidated"), explain=True)
    assert d.preempt == (2,) and started(d) == {3: (2, 3), 2: (1,)}
    assert d.reasons[2] == ("preempted so job 3 (ranked higher) can run; restarted on GPUs "
                            "left over")
    # first_fit: P fits as is (1, 3), nobody is stopped.
    d = decide(s, comp("fifo"))
    assert d.preempt == () and started(d) == {3: (1, 3)}


def _minimize_snapshot():
    shape = cluster(2, 2)  # node1: 0,1  node2: 2,3
    # FIFO ranks: TOP(1, t=1) > P(4, t=5) > MID(2, t=20) > TAIL(3, t=30); nothing free.
    jobs = [running(1, [3], submit=1.0), running(2, [0, 1], submit=20.0),
            running(3, [2], submit=30.0), pending(4, gpus=2, submit=5.0)]
    return snapshot(shape, jobs, now=100.0)


def test_priority_minimize_spares_victims_that_turned_out_unnecessary() -> None:
    # P wants 2 on one node. From the tail: TAIL (node2: 1 free) does not fit; + MID (node1
    # free) fits. Minimize then spares TAIL: MID alone suffices.
    c = comp("fifo", placement="consolidated")
    d = decide(_minimize_snapshot(), c)
    assert d.preempt == (2,) and started(d) == {4: (0, 1)}


def test_priority_without_minimize_stops_every_job_it_tried_like_blox() -> None:
    c = comp("fifo", placement="consolidated",
             preemption={"policy": "priority", "minimize": False})
    d = decide(_minimize_snapshot(), c)
    assert sorted(d.preempt) == [2, 3] and started(d) == {4: (0, 1)}


def test_no_preemption_never_stops_a_job() -> None:
    c = comp("fifo", placement="consolidated", preemption="none")
    d = decide(_minimize_snapshot(), c)
    assert d.preempt == () and d.start == ()
    shape = cluster(1)
    s = snapshot(shape, [running(1, [0], since=0.0), pending(2)], now=1e6)
    assert decide(s, comp("las", preemption="none")).preempt == ()  # LAS would preempt
    assert decide(s, comp("las")).preempt == (1,)


def test_priority_spares_a_victim_on_a_draining_node_it_cannot_use() -> None:
    shape = cluster(1, 1)
    # R_D (tail) runs on draining node1: stopping it frees nothing schedulable.
    rd = running(1, [0], submit=30.0)
    rx = running(2, [1], submit=20.0)
    p = pending(3, submit=5.0)
    s = snapshot(shape, [rd, rx, p], now=50.0, states={"node1": NodeState.DRAIN})
    d = decide(s, comp("fifo"))
    assert d.preempt == (2,) and started(d) == {3: (1,)}


def _backfill_snapshot():
    shape = cluster(2)
    # R (t=0) above everyone; P1 (t=1) wants 2 and cannot fit (R ranks above it);
    # P2 (t=2) wants 1 and would fit in the free GPU.
    jobs = [running(1, [0], submit=0.0), pending(2, gpus=2, submit=1.0),
            pending(3, gpus=1, submit=2.0)]
    return snapshot(shape, jobs, now=10.0)


@pytest.mark.parametrize("preemption", ["priority", "none"])
def test_backfill_lets_lower_jobs_use_gpus_the_head_cannot(preemption) -> None:
    d = decide(_backfill_snapshot(), comp("fifo", preemption=preemption))
    assert started(d) == {3: (1,)} and d.preempt == ()


@pytest.mark.parametrize("preemption", ["priority", "none"])
def test_strict_order_blocks_lower_jobs(preemption) -> None:
    c = comp("fifo", preemption={"policy": preemption, "backfill": False})
    d = decide(_backfill_snapshot(), c, explain=True)
    assert d.start == () and d.preempt == ()
    assert d.reasons[3] == "strict order: waiting behind job 2"
    assert decide(_backfill_snapshot(), c).start == ()
