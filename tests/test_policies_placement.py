"""Exact logic of the built-in placement policies (first_fit, consolidated, scattered)."""

from __future__ import annotations

from _core_helpers import cluster, comp, free_of, pending, running, snapshot, started

from blox_slurm.model import NodeState
from blox_slurm.round import decide
from policies.placement.consolidated import Consolidated
from policies.placement.first_fit import FirstFit
from policies.placement.scattered import Scattered


def choose(policy, shape, busy: dict[int, list[int]], want: int, states=None):
    """``busy``: running job id -> GPUs it holds."""
    jobs = [running(jid, gpus) for jid, gpus in busy.items()]
    s = snapshot(shape, jobs, states=states)
    return policy.choose(s, pending(99, want), want, free_of(s))


def consolidated(spread: bool = False) -> Consolidated:
    return Consolidated(Consolidated.Params(spread_if_needed=spread))


# --------------------------------------------------------------------------- first_fit

def test_first_fit_takes_first_free_gpus_in_node_order_spanning_nodes() -> None:
    shape = cluster(2, 2, 2)  # node1: 0,1  node2: 2,3  node3: 4,5
    busy = {1: [0], 2: [3]}  # free: 1 | 2 | 4, 5
    assert choose(FirstFit(), shape, busy, 1) == (1,)
    assert choose(FirstFit(), shape, busy, 3) == (1, 2, 4)
    assert choose(FirstFit(), shape, busy, 4) == (1, 2, 4, 5)
    assert choose(FirstFit(), shape, busy, 5) is None  # only 4 free


def test_first_fit_skips_drained_and_down_nodes() -> None:
    shape = cluster(2, 2, 2)
    states = {"node1": NodeState.DRAIN, "node2": NodeState.DOWN}
    assert choose(FirstFit(), shape, {}, 2, states) == (4, 5)
    assert choose(FirstFit(), shape, {}, 3, states) is None


# --------------------------------------------------------------------------- consolidated

def test_consolidated_prefers_a_node_whose_free_gpus_fit_exactly() -> None:
    shape = cluster(4, 4)  # node1: 0-3, node2: 4-7
    busy = {1: [0], 2: [4, 5]}  # free: node1 1,2,3 (3) | node2 6,7 (2)
    assert choose(consolidated(), shape, busy, 2) == (6, 7)  # exact fit on node2
    assert choose(FirstFit(), shape, busy, 2) == (1, 2)  # first-fit would break node1 up
    assert choose(consolidated(), shape, busy, 3) == (1, 2, 3)


def test_consolidated_falls_back_to_the_smallest_node_that_fits() -> None:
    shape = cluster(4, 4, 4)
    busy = {1: [4], 2: [8, 9, 10]}  # free: node1 4 | node2 3 (5,6,7) | node3 1 (11)
    # 2 GPUs: no exact fit; node2 (3 free) is the smallest that fits, not node1 (4 free).
    assert choose(consolidated(), shape, busy, 2) == (5, 6)
    assert choose(consolidated(), shape, busy, 1) == (11,)  # exact fit on node3


def test_consolidated_waits_when_no_node_has_room_unless_spread_if_needed() -> None:
    shape = cluster(2, 2)
    busy = {1: [0], 2: [2]}  # 1 free on each node: 2 GPUs free in total
    assert choose(consolidated(), shape, busy, 2) is None  # would fit one node: wait for it
    assert choose(consolidated(spread=True), shape, busy, 2) == (1, 3)
    assert choose(FirstFit(), shape, busy, 2) == (1, 3)


def test_consolidated_job_larger_than_any_node_uses_fewest_nodes() -> None:
    shape = cluster(4, 4, 4)
    busy = {1: [0, 1]}  # free: node1 2 (2,3) | node2 4 | node3 4
    got = choose(consolidated(), shape, busy, 8)
    # most-free nodes first: node2 + node3 = 2 nodes; first-fit spans all three
    assert got == (4, 5, 6, 7, 8, 9, 10, 11)
    assert choose(FirstFit(), shape, busy, 8) == (2, 3, 4, 5, 6, 7, 8, 9)
    # 6 GPUs: node2 (4) then 2 of node3 -> 2 nodes
    assert choose(consolidated(), shape, busy, 6) == (4, 5, 6, 7, 8, 9)
    assert choose(consolidated(), shape, busy, 11) is None  # 10 free


def test_consolidated_in_a_round_leaves_the_job_waiting_and_backfills() -> None:
    shape = cluster(2, 2)
    jobs = [running(1, [0], submit=0.0), running(2, [2], submit=0.0),
            pending(3, gpus=2, submit=1.0), pending(4, gpus=1, submit=2.0)]
    s = snapshot(shape, jobs, now=10.0)
    d = decide(s, comp("fifo", placement="consolidated", preemption="none"))
    assert started(d) == {4: (1,)}  # 3 waits for a whole node, 4 backfills


# --------------------------------------------------------------------------- scattered

def test_scattered_fits_a_4_gpu_job_into_3_plus_2_free_gpus() -> None:
    shape = cluster(4, 4)
    busy = {1: [0], 2: [4, 5]}  # free: node1 1,2,3 | node2 6,7
    got = choose(Scattered(), shape, busy, 4)
    # one at a time from the node with most free (ties: node order):
    # node1(3) -> 1; node1(2) vs node2(2) -> node1: 2; node2(2) -> 6; node1(1) vs node2(1) -> 3
    assert got == (1, 2, 3, 6)
    assert choose(consolidated(), shape, busy, 4) is None  # fits a node: consolidated waits


def test_scattered_puts_a_1_gpu_job_on_the_node_with_most_free() -> None:
    shape = cluster(4, 4, 4)
    busy = {1: [0, 1, 2], 2: [8]}  # free: node1 1 (3) | node2 4 | node3 3
    assert choose(Scattered(), shape, busy, 1) == (4,)
    assert choose(FirstFit(), shape, busy, 1) == (3,)  # Blox's first free GPU


def test_scattered_spreads_evenly_and_fails_only_on_count() -> None:
    shape = cluster(4, 4)
    assert choose(Scattered(), shape, {}, 2) == (0, 4)  # one per node
    assert choose(Scattered(), shape, {}, 3) == (0, 1, 4)
    busy = {1: [0, 1, 2, 3, 4, 5]}
    assert choose(Scattered(), shape, busy, 2) == (6, 7)
    assert choose(Scattered(), shape, busy, 3) is None


def test_scattered_in_a_round_starts_what_consolidated_cannot() -> None:
    shape = cluster(4, 4)
    jobs = [running(1, [0], submit=0.0), running(2, [4, 5], submit=0.0),
            pending(3, gpus=4, submit=1.0)]
    s = snapshot(shape, jobs, now=10.0)
    d = decide(s, comp("fifo", placement="scattered", preemption="none"))
    assert started(d) == {3: (1, 2, 3, 6)}
    assert decide(s, comp("fifo", placement="consolidated", preemption="none")).start == ()
