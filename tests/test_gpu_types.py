"""GPU types: placements honour a job's required type (user hint or the scheduler's choice)."""

from __future__ import annotations

import pytest
from _core_helpers import comp, free_of, pending, place, running, snapshot, started

from blox_slurm.core.abstractions import Schedule, SchedulingBase
from blox_slurm.core.fit import NODES, TYPES, allowed, sim_hints
from blox_slurm.core.model import build_cluster
from blox_slurm.core.registry import register
from blox_slurm.core.round import decide
from blox_slurm.policies.placement.consolidated import Consolidated
from blox_slurm.policies.placement.first_fit import FirstFit
from blox_slurm.policies.placement.scattered import Scattered

# node1, node2: k80 GPUs 0-3, 4-7; node3: V100 GPUs 8-11 (upper case on purpose)
SHAPE = build_cluster([("k80", 2, 4), ("V100", 1, 4)])
PLACEMENTS = [FirstFit(), Consolidated(), Consolidated(Consolidated.Params(spread_if_needed=True)),
              Scattered()]


def typed(jid: int, gpus: int, gpu_type: str, **kw):
    return pending(jid, gpus, hints=(("gpu_type", gpu_type),), **kw)


def test_allowed_is_the_free_set_itself_without_a_hint() -> None:
    s = snapshot(SHAPE, [])
    free = free_of(s)
    assert allowed(s, pending(1), free) is free


def test_allowed_keeps_only_nodes_of_the_type_case_insensitively() -> None:
    s = snapshot(SHAPE, [running(1, [8])])
    view = allowed(s, typed(2, 1, "v100"), free_of(s))
    assert view.by_node == {"node3": (9, 10, 11)}
    assert view.count == 3
    assert allowed(s, typed(2, 1, "K80"), free_of(s)).count == 8


def test_allowed_answers_for_the_nodes_of_each_snapshot_not_an_earlier_one() -> None:
    """The nodes of a type are remembered per node list: the same names with other types
    (a controller's next round after an admin retyped a node) get their own answer."""
    retyped = build_cluster([("V100", 1, 4), ("k80", 2, 4)])  # node1 is the V100 now
    for shape, node in ((SHAPE, "node3"), (retyped, "node1"), (SHAPE, "node3")):
        s = snapshot(shape, [])
        assert set(allowed(s, typed(2, 1, "v100"), free_of(s)).by_node) == {node}


def test_giving_back_gpus_of_several_nodes_keeps_each_node_sorted_and_counted() -> None:
    s = snapshot(SHAPE, [running(1, [0, 1, 5, 8]), running(2, [2, 9])])
    free = free_of(s)
    free.give([9, 5, 0, 8])  # jobs' GPUs in any order, over three nodes
    assert free.by_node == {"node1": (0, 3), "node2": (4, 5, 6, 7), "node3": (8, 9, 10, 11)}
    assert free.count == 10


@pytest.mark.parametrize("policy", PLACEMENTS, ids=lambda p: type(p).__name__)
def test_every_placement_puts_a_typed_job_on_its_type_only(policy) -> None:
    s = snapshot(SHAPE, [running(1, [8])])
    free = free_of(s)
    assert set(place(policy, s, typed(2, 2, "v100"), 2, free) or ()) <= {9, 10, 11}
    assert place(policy, s, typed(2, 4, "v100"), 4, free) is None  # 8 k80s free, 3 V100s
    assert place(policy, s, typed(2, 1, "a100"), 1, free) is None  # no such node


@pytest.mark.parametrize("policy", PLACEMENTS, ids=lambda p: type(p).__name__)
def test_an_untyped_job_may_use_any_type(policy) -> None:
    s = snapshot(SHAPE, [running(1, list(range(8)))])  # only V100s free
    assert policy.choose(s, pending(2, 2), 2, free_of(s)) is not None


@register("scheduling", "test-types-v100")
class WantsV100(SchedulingBase):
    """Test policy: FIFO, and every job must run on V100 this round."""

    time_dependent = False

    def __init__(self, params: object = None) -> None:
        pass

    def order(self, snapshot, jobs) -> Schedule:
        ranked = sorted(jobs, key=lambda j: (j.submit_time, j.id))
        return Schedule(ranked, types={j.id: "v100" for j in ranked})


def test_schedule_types_reach_placement_and_override_the_user_hint() -> None:
    s = snapshot(SHAPE, [typed(1, 2, "k80", submit=0.0), pending(2, 1, submit=1.0)])
    d = decide(s, comp("test-types-v100"))
    assert started(d) == {1: (8, 9), 2: (10,)}


def test_a_type_named_in_another_case_is_no_move() -> None:
    # The scheduler says "v100", the node says "V100": the job is where it should be. Taken
    # as a move it would be checkpointed and restarted onto the free V100 next to it.
    d = decide(snapshot(SHAPE, [running(1, [8], submit=0.0)]), comp("test-types-v100"))
    assert (d.preempt, d.start) == ((), ())


def test_a_move_stops_no_job_that_stays_on_the_type() -> None:
    # Job 1 runs on a k80 and is wanted on V100; the V100 jobs below it are wanted there too.
    # No V100 is free: a move may only stop jobs leaving the type, so nothing changes.
    jobs = [running(1, [0], submit=0.0)] + [running(i, [6 + i], submit=float(i))
                                            for i in (2, 3, 4, 5)]
    d = decide(snapshot(SHAPE, jobs), comp("test-types-v100"))
    assert (d.preempt, d.start) == ((), ())


def test_preemption_for_a_typed_job_stops_only_jobs_on_that_type() -> None:
    # A k80 job and a V100 job run (both ranked below, the k80 one last); the new job wants
    # 4 V100s: stopping the k80 job frees 4 GPUs, but not of its type.
    jobs = [pending(1, 4, submit=0.0), running(2, [0, 1, 2, 3], submit=5.0),
            running(3, [8, 9, 10, 11], submit=6.0)]
    d = decide(snapshot(SHAPE, jobs), comp("test-types-v100"))
    assert d.preempt == (3,)  # job 2's k80s would not help
    assert started(d) == {1: (8, 9, 10, 11)}


@pytest.mark.parametrize("minimize", [True, False])
def test_a_policy_that_spares_is_offered_only_victims_of_the_type(minimize: bool) -> None:
    """Stopping job 2 (k80s) frees nothing a V100 job can use: a policy that spares what it
    did not need is not offered it (fewer trials, same victims); one that stops every victim
    it tries (Blox) still is, and stops it."""
    c = comp("test-types-v100", preemption={"policy": "priority", "minimize": minimize})
    offered: list[list[int]] = []
    victims = c.preemption.victims

    def spy(job, candidates, free, count, fits):
        offered.append([v.id for v in candidates])
        return victims(job, candidates, free, count, fits)

    c.preemption.victims = spy
    jobs = [pending(1, 4, submit=0.0), running(2, [0, 1, 2, 3], submit=6.0),
            running(3, [8, 9, 10, 11], submit=5.0)]  # the k80 job is ranked last
    d = decide(snapshot(SHAPE, jobs), c)
    assert offered == ([[3]] if minimize else [[3, 2]])  # ranked highest first
    assert set(d.preempt) == ({3} if minimize else {2, 3})


# ------------------------------------------------------------ movers freed before the walk

TWO = build_cluster([("k80", 1, 1), ("v100", 1, 1)])  # GPU 0: k80, GPU 1: v100


@register("scheduling", "test-gavel-like")
class GavelLike(SchedulingBase):
    """Test policy: arrival order; each job on the type of its ``want`` hint, if any; movers
    freed before the walk, as Gavel's rounds ask."""

    time_dependent = False

    def __init__(self, params: object = None) -> None:
        pass

    def order(self, snapshot, jobs) -> Schedule:
        ranked = sorted(jobs, key=lambda j: (j.submit_time, j.id))
        types = {j.id: j.hint("want") for j in ranked if j.hint("want")}
        return Schedule(ranked, types=types, free_movers=True)


def wants(gpu_type: str) -> dict[str, object]:
    return {"hints": (("want", gpu_type),)}


def test_freed_movers_swap_types_without_a_preemption_policy() -> None:
    # Job 1 on the K80 wants the V100, job 2 on the V100 wants the K80: freed before the
    # walk, they swap even under a preemption policy that never stops anyone.
    jobs = [running(1, [0], submit=0.0, **wants("v100")),
            running(2, [1], submit=1.0, **wants("k80"))]
    d = decide(snapshot(TWO, jobs), comp("test-gavel-like", preemption="none"))
    assert started(d) == {1: (1,), 2: (0,)} and d.stop == ()


def test_a_freed_mover_without_room_keeps_its_gpus_if_nobody_took_them() -> None:
    # Job 1 wants the V100, which job 2 keeps (ranked first, on its type): job 1 stays.
    jobs = [running(2, [1], submit=0.0), running(1, [0], submit=1.0, **wants("v100"))]
    d = decide(snapshot(TWO, jobs), comp("test-gavel-like", preemption="none"))
    assert (d.start, d.stop, d.move) == ((), (), ())


def test_a_freed_mover_without_room_waits_if_its_gpus_were_taken() -> None:
    # Pending job 3, ranked first, takes the K80 job 1 left; the V100 stays job 2's: job 1
    # is stopped (by its scheduler, for nobody in particular) and waits.
    jobs = [pending(3, 1, submit=0.0, **wants("k80")), running(2, [1], submit=0.5),
            running(1, [0], submit=1.0, **wants("v100"))]
    d = decide(snapshot(TWO, jobs), comp("test-gavel-like", preemption="none"),
               explain=True)
    assert started(d) == {3: (0,)} and d.preempt == (1,)
    assert d.reasons[1] == "stopped by its scheduler: not run this round"


@pytest.mark.parametrize(("types", "nodes"), [((), None), (("v100",), None), ((), 1),
                                              (("k80", "v100"), 2)])
def test_a_simulated_jobs_hints_are_its_types_and_node_count_sorted(types, nodes) -> None:
    """None for a job free of both (most trace jobs: no list built), else both, sorted."""
    want = ([(TYPES, ",".join(types))] if types else []) + (
        [(NODES, str(nodes))] if nodes is not None else [])
    assert sim_hints(types, nodes) == tuple(sorted(want))
