"""Exact logic of the built-in placement policies (first_fit, consolidated, scattered), and
of the ``nodes`` constraint (a Slurm ``--gres=gpu:N`` job) in every built-in placement."""

from __future__ import annotations

import pytest
from _core_helpers import cluster, comp, free_of, pending, place, running, snapshot, started

from blox_slurm.core.model import NodeState
from blox_slurm.core.round import decide
from blox_slurm.policies.placement.consolidated import Consolidated
from blox_slurm.policies.placement.first_fit import FirstFit
from blox_slurm.policies.placement.scattered import Scattered
from blox_slurm.policies.placement.synergy import Synergy


def choose(policy, shape, busy: dict[int, list[int]], want: int, states=None, hints=()):
    """``busy``: running job id -> GPUs it holds."""
    jobs = [running(jid, gpus) for jid, gpus in busy.items()]
    s = snapshot(shape, jobs, states=states)
    return policy.choose(s, pending(99, want, hints=tuple(hints)), want, free_of(s))


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


# --------------------------------------------------------------------------- nodes constraint
# The Slurm snapshot gives a job that asked for GPUs per node (``--gres=gpu:N``, ``-N k``) the
# hint ("nodes", "k"): Slurm hands it N GPUs on EVERY node it is pinned to, so a placement
# must use exactly k nodes with the same share on each, never spread it further.

ALL = {"first_fit": FirstFit(), "consolidated": consolidated(),
       "consolidated_spread": consolidated(spread=True), "scattered": Scattered(),
       "synergy": Synergy(), "synergy_proportional": Synergy(Synergy.Params(mode="proportional"))}
ONE_NODE = (("nodes", "1"),)


@pytest.mark.parametrize("name", sorted(ALL))
def test_single_node_job_does_not_fit_two_half_free_nodes(name: str) -> None:
    policy = ALL[name]
    shape = cluster(4, 4)  # node1: 0-3, node2: 4-7
    busy = {1: [0, 1], 2: [4, 5]}  # free: node1 2,3 | node2 6,7
    assert choose(policy, shape, busy, 3, hints=ONE_NODE) is None
    assert choose(policy, shape, busy, 2, hints=ONE_NODE) in ((2, 3), (6, 7))
    if name != "consolidated":  # every other one spreads the same job without the hint
        assert choose(policy, shape, busy, 3) is not None


@pytest.mark.parametrize("name", sorted(ALL))
def test_single_node_job_goes_to_the_one_node_with_room(name: str) -> None:
    policy = ALL[name]
    shape = cluster(4, 4, 4)  # node1: 0-3, node2: 4-7, node3: 8-11
    busy = {1: [0, 1], 2: [8, 9, 10]}  # free: node1 2 | node2 4 | node3 1
    got = choose(policy, shape, busy, 3, hints=ONE_NODE)
    assert got is not None and len(got) == 3 and set(got) <= {4, 5, 6, 7}
    assert choose(policy, shape, busy, 4, hints=ONE_NODE) == (4, 5, 6, 7)
    assert choose(policy, shape, busy, 5, hints=ONE_NODE) is None  # 7 free, no node has 5


def test_single_node_job_takes_each_policys_usual_node() -> None:
    shape = cluster(4, 4, 4)
    busy = {1: [0], 2: [8, 9]}  # free: node1 1,2,3 | node2 4-7 | node3 10,11
    assert choose(FirstFit(), shape, busy, 2, hints=ONE_NODE) == (1, 2)  # first with room
    assert choose(consolidated(), shape, busy, 2, hints=ONE_NODE) == (10, 11)  # exact fit
    assert choose(consolidated(), shape, busy, 3, hints=ONE_NODE) == (1, 2, 3)
    assert choose(Scattered(), shape, busy, 2, hints=ONE_NODE) == (4, 5)  # emptiest node
    assert choose(Synergy(), shape, busy, 2, hints=ONE_NODE) == (10, 11)  # best fit


@pytest.mark.parametrize("name", sorted(ALL))
def test_job_bound_to_two_nodes_gets_its_share_on_each(name: str) -> None:
    """``-N 2 --gres=gpu:2``: 4 GPUs, 2 on each of exactly 2 nodes."""
    policy = ALL[name]
    shape = cluster(4, 4, 4)
    busy = {1: [0, 1, 2], 2: [8, 9]}  # free: node1 3 | node2 4-7 | node3 10,11
    got = choose(policy, shape, busy, 4, hints=(("nodes", "2"),))
    assert got is not None and len(got) == 4
    per_node = sorted(sum(1 for g in got if g // 4 == n) for n in range(3))
    assert per_node == [0, 2, 2]
    assert choose(policy, shape, busy, 3, hints=(("nodes", "2"),)) is None  # uneven split
    assert choose(policy, shape, busy, 6, hints=(("nodes", "3"),)) is None  # node1 has 1


def test_nodes_constraint_in_a_round_waits_instead_of_spreading() -> None:
    shape = cluster(4, 4)
    jobs = [running(1, [0, 1]), running(2, [4, 5]),
            pending(3, 3, submit=1.0, hints=ONE_NODE), pending(4, 3, submit=2.0)]
    d = decide(snapshot(shape, jobs), comp(placement="scattered"))
    assert set(started(d)) == {4}  # job 3 (one node) waits; job 4 may spread


# --------------------------------------------------------------------------- CPUs (Slurm)

@pytest.mark.parametrize("policy", [FirstFit(), consolidated(), Scattered(), Synergy()])
def test_every_placement_skips_nodes_without_the_jobs_cpus(policy) -> None:
    """Red team item 2: where the world counts CPUs (Slurm), a node whose CPUs are taken
    holds free GPUs no job can use; a job bound to one node needs all its CPUs there."""
    s = snapshot(cluster(2, 2, 2), [], cpus_free={"node1": 0, "node2": 3, "node3": 8})
    one_cpu = pending(99, 1, cpus=1)
    assert s.gpus[place(policy, s, one_cpu, 1, free_of(s))[0]].node != "node1"
    bound = pending(98, 2, cpus=6, hints=(("nodes", "1"),))
    got = place(policy, s, bound, 2, free_of(s))
    assert got is not None and {s.gpus[g].node for g in got} == {"node3"}
    assert place(policy, s, pending(97, 2, cpus=9, hints=(("nodes", "1"),)), 2,
                         free_of(s)) is None
    assert place(FirstFit(), snapshot(cluster(2, 2, 2), []), one_cpu, 1) == (0,)  # no CPU model


@pytest.mark.parametrize("policy", [FirstFit(), consolidated(), Scattered(), Synergy()])
def test_every_placement_skips_nodes_without_the_jobs_memory(policy) -> None:
    """Item 2's other half: a node whose memory is taken (``--mem``) holds free GPUs no job
    needing memory there can use. A job bound to nodes needs its share on each; one that may
    spread is not checked (its share per node is Slurm's choice)."""
    s = snapshot(cluster(2, 2, 2), [], memory_free={"node1": 1000, "node2": 8000,
                                                    "node3": 32000})
    one_node = (("nodes", "1"),)
    got = place(policy, s, pending(99, 1, memory_mb=4000, hints=one_node), 1, free_of(s))
    assert got is not None and s.gpus[got[0]].node != "node1"
    two = place(policy, s, pending(98, 2, memory_mb=20000, hints=one_node), 2, free_of(s))
    assert two is not None and {s.gpus[g].node for g in two} == {"node3"}
    split = place(policy, s, pending(96, 2, memory_mb=16000, hints=(("nodes", "2"),)), 2,
                          free_of(s))  # 8000 on each of two nodes: node2 and node3
    assert split is not None and {s.gpus[g].node for g in split} == {"node2", "node3"}
    assert place(policy, s, pending(97, 2, memory_mb=40000, hints=one_node), 2,
                         free_of(s)) is None
