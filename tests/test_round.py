"""The round engine: decide() purity, idempotence, node states, cluster views, explanations."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
from _core_helpers import apply, cluster, comp, pending, running, snapshot, started
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blox_slurm import loading
from blox_slurm.core import composition
from blox_slurm.core.abstractions import ClusterView, FreeGpus, Schedule, SchedulingBase
from blox_slurm.core.model import ClusterSnapshot, Drain, Job, JobState, NodeState, build_cluster
from blox_slurm.core.registry import register
from blox_slurm.core.round import decide
from blox_slurm.core.throughput import ParametricThroughput

BUNDLED = composition.bundled_names()
COMPS = {name: loading.load(name) for name in BUNDLED}
ELASTIC = {name for name, c in COMPS.items() if type(c.scheduling).__name__ == "Pollux"}


@register("cluster", "test-cordon-node1")
class CordonNode1:
    """Test cluster manager: node1 takes no new work; asks Slurm to drain it."""

    def __init__(self, params: object = None) -> None:
        pass

    def manage(self, snapshot: ClusterSnapshot) -> ClusterView:
        return ClusterView(unschedulable=frozenset({"node1"}),
                           drain=(Drain("node1", "test"),), flag=((1, "cordoned"),))


@register("cluster", "test-evict-job1")
class EvictJob1:
    """Test cluster manager: job 1 must stop (e.g. its GPUs report errors)."""

    def __init__(self, params: object = None) -> None:
        pass

    def manage(self, snapshot: ClusterSnapshot) -> ClusterView:
        return ClusterView(preempt=(1,))


def busy_snapshot(now: float = 4000.0) -> ClusterSnapshot:
    """2 x 4 GPUs, a mix of running / admitted waiting / new jobs, durations known."""
    shape = cluster(4, 4)
    jobs = [
        running(1, [0, 1], submit=0.0, since=100.0, duration=20_000.0),
        running(2, [4], submit=50.0, since=200.0, duration=3000.0, attained_base=500.0,
                work_base=500.0, preemptions=1),
        running(3, [2], submit=300.0, since=300.0, duration=9000.0),
        pending(4, gpus=2, submit=1000.0, duration=600.0),
        pending(5, gpus=4, submit=1500.0, duration=50_000.0),
        pending(6, gpus=1, submit=3900.0, duration=100.0, admitted=False),
        pending(7, gpus=3, submit=3950.0, duration=700.0, admitted=False),
    ]
    return snapshot(shape, jobs, now=now, throughput=ParametricThroughput())


# --------------------------------------------------------------------------- purity

@pytest.mark.parametrize("name", BUNDLED)
def test_decide_leaves_the_snapshot_unchanged_and_is_deterministic(name) -> None:
    s = busy_snapshot()
    before = copy.deepcopy(s)
    d1 = decide(s, COMPS[name])
    d2 = decide(s, COMPS[name])
    d3 = decide(s, COMPS[name], explain=True)
    assert s == before
    assert d1 == d2
    assert replace(d3, reasons={}) == d1
    assert d1.start or d1.preempt  # the snapshot gives every composition something to do


@pytest.mark.parametrize("name", BUNDLED)
def test_decide_is_idempotent_once_its_decisions_are_applied(name) -> None:
    # Tiresias stops job 2 for job 5, and job 2 restarts at once on a GPU left over.
    c = COMPS[name]
    s = busy_snapshot()
    d = decide(s, c)
    after = apply(s, d)
    again = decide(after, c)
    assert again.start == () and again.preempt == () and again.admit == ()


def test_a_job_preempted_in_a_round_restarts_on_gpus_left_over_before_lower_ranked_jobs(
) -> None:
    shape = cluster(5)
    # FIFO ranks: P1 (t=1, 1 GPU) > P2 (t=3, 2 GPUs) > VC (t=4, 4 GPUs running) >
    # V (t=10, 1 GPU running) > P3 (t=11, 1 GPU). Nothing free.
    jobs = [pending(1, 1, submit=1.0), pending(2, 2, submit=3.0),
            running(3, [0, 1, 2, 3], submit=4.0), running(4, [4], submit=10.0),
            pending(5, 1, submit=11.0)]
    s = snapshot(shape, jobs, now=100.0)
    c = comp("fifo")
    d = decide(s, c, explain=True)
    # P1 stops V (the tail, enough), P2 stops VC (4 GPUs for 2): 2 GPUs are left over.
    assert sorted(d.preempt) == [3, 4]
    starts = started(d)
    # VC (4 GPUs) fits nowhere; V, ranked above P3, takes a leftover GPU before P3 does.
    assert set(starts) == {1, 2, 4, 5} and 3 not in starts
    assert len({g for gs in starts.values() for g in gs}) == 1 + 2 + 1 + 1
    assert d.reasons[4].endswith("restarted on GPUs left over")
    again = decide(apply(s, d), c)
    assert again.start == () and again.preempt == ()


def test_a_victim_that_fits_nowhere_free_stops_a_lower_ranked_job_in_the_same_round(
) -> None:
    # node1: 2 V100 (GPUs 0-1), node2: 2 K80 (GPUs 2-3). FIFO ranks P (t=1, wants 2 V100) >
    # A (t=2, running on the V100s, any type) > B (t=5, running on the K80s). Only stopping
    # A makes P fit; A then fits nowhere free, so it stops B, ranked below it, and restarts
    # on the K80s at once, as a pending job of A's rank would. B waits.
    shape = build_cluster([("v100", 1, 2), ("k80", 1, 2)])
    jobs = [pending(1, 2, submit=1.0, hints=(("gpu_type", "v100"),)),
            running(2, [0, 1], submit=2.0), running(3, [2, 3], submit=5.0)]
    s = snapshot(shape, jobs, now=100.0)
    c = comp("fifo")
    d = decide(s, c, explain=True)
    assert sorted(d.preempt) == [2, 3]
    assert started(d) == {1: (0, 1), 2: (2, 3)}
    assert d.reasons[2] == ("preempted so job 1 (ranked higher) can run; "
                            "restarted on GPUs left over")
    assert d.reasons[3] == "preempted so job 2 (ranked higher) can run"
    again = decide(apply(s, d), c)
    assert again.start == () and again.preempt == ()


# --------------------------------------------------------------------------- node states

@pytest.mark.parametrize("state", [NodeState.DRAIN, NodeState.DOWN])
def test_jobs_on_unschedulable_nodes_keep_running_and_no_new_work_lands_there(state) -> None:
    shape = cluster(2, 2)
    jobs = [running(1, [0], submit=0.0), pending(2, 1, submit=1.0), pending(3, 1, submit=2.0),
            pending(4, 1, submit=3.0)]
    s = snapshot(shape, jobs, now=10.0, states={"node1": state})
    d = decide(s, comp("fifo"), explain=True)
    assert d.preempt == ()
    assert started(d) == {2: (2,), 3: (3,)}  # GPU 1 (node1) stays idle
    assert 1 in d.order
    assert d.reasons[4].startswith("needs 1 GPU(s); 0 free")


def test_cluster_view_unschedulable_drain_and_flags_pass_through() -> None:
    shape = cluster(2, 2)
    s = snapshot(shape, [pending(1, 2, submit=0.0), pending(2, 2, submit=1.0)], now=0.0)
    d = decide(s, comp("fifo", cluster="test-cordon-node1"))
    assert started(d) == {1: (2, 3)}  # node1 is cordoned although UP
    assert d.drain == (Drain("node1", "test"),) and d.flag == ((1, "cordoned"),)


@register("scheduling", "test-fifo-seeing-nodes")
class FifoSeeingNodes(SchedulingBase):
    """Test scheduler: arrival order; remembers the node states it was shown."""

    time_dependent = False
    keyed = True  # rank_all=False then takes the pending-only path
    seen: list[dict[str, NodeState]] = []

    def __init__(self, params: object = None) -> None:
        pass

    def order(self, snapshot: ClusterSnapshot, jobs) -> Schedule:
        self.seen.append({n.name: n.state for n in snapshot.nodes})
        return Schedule(sorted(jobs, key=lambda j: (j.submit_time, j.id)))


@pytest.mark.parametrize("rank_all", [True, False])
def test_the_scheduler_sees_nodes_the_cluster_manager_cordons_as_draining(rank_all) -> None:
    # Gavel and Pollux size their allocation by the GPUs of UP nodes: a cordoned node's
    # GPUs are none placement may use, so they must not count.
    s = snapshot(cluster(2, 2, 2), [pending(1, 2)], states={"node2": NodeState.DOWN})
    FifoSeeingNodes.seen.clear()
    d = decide(s, comp("test-fifo-seeing-nodes", cluster="test-cordon-node1"),
               rank_all=rank_all)
    assert FifoSeeingNodes.seen == [
        {"node1": NodeState.DRAIN, "node2": NodeState.DOWN, "node3": NodeState.UP}]
    assert started(d) == {1: (4, 5)} and d.drain == (Drain("node1", "test"),)
    assert s.nodes[0].state is NodeState.UP  # the world's snapshot is untouched


def test_cluster_view_preempt_stops_a_job_and_reuses_its_gpus() -> None:
    shape = cluster(2)
    jobs = [running(1, [0, 1], submit=0.0), pending(2, 2, submit=5.0)]
    s = snapshot(shape, jobs, now=10.0)
    d = decide(s, comp("fifo", cluster="test-evict-job1"), explain=True)
    assert d.preempt == (1,)
    assert started(d) == {2: (0, 1)}
    assert 1 not in d.order
    assert d.reasons[1] == "preempted by the cluster manager"


@register("scheduling", "test-fifo-not-job1")
class FifoNotJob1(SchedulingBase):
    """Test scheduler: arrival order, and running job 1 is not run this round."""

    time_dependent = False

    def __init__(self, params: object = None) -> None:
        pass

    def order(self, snapshot: ClusterSnapshot, jobs) -> Schedule:
        return Schedule(sorted(jobs, key=lambda j: (j.submit_time, j.id)), stop=frozenset({1}))


def test_a_job_its_scheduler_stops_frees_its_gpus_without_a_preemption_search() -> None:
    # Job 1 ranks first, yet its scheduler does not run it: job 2 takes its GPUs even under
    # a preemption policy that never stops anyone for a waiting job.
    jobs = [running(1, [0, 1], submit=0.0), pending(2, 2, submit=5.0)]
    d = decide(snapshot(cluster(2), jobs, now=10.0),
               comp("test-fifo-not-job1", preemption="none"), explain=True)
    assert started(d) == {2: (0, 1)} and d.preempt == (1,)
    assert d.reasons[1] == "stopped by its scheduler: not run this round"


def test_a_job_its_scheduler_stops_keeps_running_if_nobody_takes_its_gpus() -> None:
    jobs = [running(1, [0], submit=0.0), pending(2, 1, submit=5.0)]
    s = snapshot(cluster(1, 1), jobs, now=10.0)
    # job 2 goes to node1 first, job 1's GPU: job 1 is stopped, and not restarted on node2
    assert decide(s, comp("test-fifo-not-job1", placement="first_fit")).preempt == (1,)
    alone = snapshot(cluster(1, 1), jobs[:1], now=10.0)
    assert decide(alone, comp("test-fifo-not-job1")).preempt == ()  # its GPU stays idle
    # Blox's preemption (minimize = false) stops what it is told to
    blox = comp("test-fifo-not-job1", preemption={"policy": "priority", "minimize": False})
    assert decide(alone, blox).preempt == (1,)


# --------------------------------------------------------------------------- explain

def test_explain_gives_a_reason_for_every_job_that_does_not_run() -> None:
    shape = cluster(2)
    jobs = [running(1, [0], submit=0.0, since=0.0), running(2, [1], submit=1.0, since=0.0),
            pending(3, 1, submit=2.0, attained_base=0.0), pending(4, 2, submit=3.0),
            pending(5, 1, submit=4.0, admitted=False)]
    s = snapshot(shape, jobs, now=600.0)
    c = comp("las", admission={"policy": "load_based", "k": 1.0})
    d = decide(s, c, explain=True)
    # LAS: 3 (0) < 4 (0, t=3) < 1 (600) = 2 (600, t=1 after t=0). 3 stops 2 (the tail) and
    # takes GPU 1; 4 needs 2 GPUs: only stopping 1 remains -> 1 free, does not fit.
    # Admission: demand 1 + 1 + 1 + 2 = 5 > 2 -> 5 is not admitted.
    assert started(d) == {3: (1,)} and d.preempt == (2,)
    assert d.reasons == {
        2: "preempted so job 3 (ranked higher) can run",
        4: "needs 2 GPU(s); 0 free on schedulable nodes and preempting lower-ranked jobs "
           "would not make it fit",
        5: "not admitted by load_based",
    }
    assert decide(s, c).reasons == {}


def test_explain_no_gpus_free_reason_for_jobs_cut_off_by_the_walk() -> None:
    shape = cluster(1)
    jobs = [pending(1, 1, submit=0.0), pending(2, 1, submit=1.0)]
    d = decide(snapshot(shape, jobs), comp("fifo", preemption="none"), explain=True)
    assert started(d) == {1: (0,)}
    assert d.reasons[2].startswith("needs 1 GPU(s); 0 free")


# --------------------------------------------------------------------------- early exit

def test_no_free_gpus_does_not_stop_the_walk_while_lower_jobs_can_be_preempted() -> None:
    shape = cluster(2)
    # LAS: P1, P2 (service 0) above R (1 GPU for 1000 s). One GPU free: P1 takes it, leaving
    # none free -- P2 must still get R's GPU.
    r = running(1, [0], submit=0.0, since=0.0)
    jobs = [r, pending(2, 1, submit=10.0), pending(3, 1, submit=20.0)]
    d = decide(snapshot(shape, jobs, now=1000.0), comp("las"))
    assert started(d) == {2: (1,), 3: (0,)} and d.preempt == (1,)


def test_walk_stops_only_when_nothing_below_can_be_stopped() -> None:
    shape = cluster(2)
    # FIFO: R1 (t=0) and R2 (t=5) both rank above P (t=10): nothing can start, nothing stops.
    jobs = [running(1, [0]), running(2, [1], submit=5.0), pending(3, 1, submit=10.0)]
    d = decide(snapshot(shape, jobs, now=50.0), comp("fifo"))
    assert d.start == () and d.preempt == () and d.order == (1, 2, 3)


# --------------------------------------------------------------------------- properties

@st.composite
def snapshots(draw) -> ClusterSnapshot:
    sizes = draw(st.lists(st.integers(1, 6), min_size=1, max_size=3))
    types = draw(st.lists(st.sampled_from(["a", "b"]), min_size=len(sizes),
                          max_size=len(sizes)))
    nodes, gpus = build_cluster([(t, 1, n) for t, n in zip(types, sizes, strict=True)])
    states = draw(st.lists(st.sampled_from([NodeState.UP] * 4 + [NodeState.DRAIN,
                                                                 NodeState.DOWN]),
                           min_size=len(nodes), max_size=len(nodes)))
    nodes = tuple(replace(n, state=s) for n, s in zip(nodes, states, strict=True))
    now = 10_000.0
    free = list(range(len(gpus)))
    free = draw(st.permutations(free))
    jobs: list[Job] = []
    for jid in range(draw(st.integers(0, 10))):
        n = draw(st.integers(1, len(gpus)))
        submit = draw(st.floats(0, now, allow_nan=False).map(lambda x: round(x, 1)))
        duration = draw(st.none() | st.floats(10, 1e5))
        base = draw(st.sampled_from([0.0, 50.0, 4000.0, 40_000.0]))
        if draw(st.booleans()) and len(free) >= n:
            held, free = tuple(sorted(free[:n])), free[n:]
            since = draw(st.floats(submit, now))
            jobs.append(Job(jid, submit, n, duration=duration, state=JobState.RUNNING,
                            admitted=True, gpus=held, run_since=since, work_since=since,
                            attained_base=base, first_start=since, last_event=since))
        else:
            jobs.append(Job(jid, submit, n, duration=duration, attained_base=base,
                            admitted=draw(st.booleans()), last_event=submit))
    # unequal types, so that Gavel moves running jobs between them
    return ClusterSnapshot(now, nodes, gpus, tuple(jobs),
                           throughput=ParametricThroughput(type_speed={"a": 1.0, "b": 0.3}))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_decisions_are_valid_pure_and_independent_of_explain(s: ClusterSnapshot) -> None:
    before = copy.deepcopy(s)
    jobs = {j.id: j for j in s.jobs}
    up = {n.name for n in s.nodes if n.state is NodeState.UP}
    held = {g for j in s.jobs for g in j.gpus}
    for name, c in COMPS.items():
        d = decide(s, c, explain=True)
        assert replace(d, reasons={}) == decide(s, c), name
        assert set(d.preempt) <= {j.id for j in s.jobs if j.running}, name
        freed = {g for jid in d.preempt for g in jobs[jid].gpus}
        taken: list[int] = []
        for st_ in d.start:
            j = jobs[st_.job_id]
            if j.running:  # a move (another GPU type, or a victim onto GPUs left over)
                assert j.id in d.preempt, name
            else:
                assert j.admitted or j.id in d.admit, name
            if name not in ELASTIC:  # Optimus may grow; only Pollux resizes both ways
                assert len(st_.gpus) >= j.num_gpus, name
            for g in st_.gpus:
                assert s.gpus[g].node in up, name
                assert g not in held or g in freed, name
            taken.extend(st_.gpus)
        assert len(taken) == len(set(taken)), name
        rank = {jid: i for i, jid in enumerate(d.order)}
        for victim, why in d.reasons.items():
            if why.startswith("preempted so job "):
                beneficiary = int(why.split()[3])
                assert rank[victim] > rank[beneficiary], name
    assert s == before


KEYED = {name: c for name, c in COMPS.items() if getattr(c.scheduling, "keyed", False)}


def test_the_per_job_key_schedulers_say_so() -> None:
    """The fast path below is only as good as these declarations: a wrong ``keyed = True``
    (Gavel, Optimus, Themis and fair share rank jobs against each other) would change
    simulation results silently."""
    keyed = {type(c.scheduling).__name__ for c in KEYED.values()}
    assert keyed == {"Fifo", "Las", "Srtf", "Tiresias"}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots(), st.data())
def test_a_keyed_scheduler_orders_any_subset_as_the_whole(s: ClusterSnapshot, data) -> None:
    subset = data.draw(st.lists(st.sampled_from(s.jobs), unique_by=lambda j: j.id)
                       if s.jobs else st.just([]))
    for name, c in KEYED.items():
        whole = c.scheduling.order(s, s.jobs)
        part = c.scheduling.order(s, subset)
        ids = {j.id for j in subset}
        assert [j.id for j in part.order] == [j.id for j in whole.order if j.id in ids], name
        assert set(part.marks) == {m for m in whole.marks if m[0] in ids}, name


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_ranking_only_pending_jobs_decides_the_same_round(s: ClusterSnapshot) -> None:
    """``rank_all=False`` (what the simulator asks) may skip ranking running jobs; the starts,
    preemptions, admissions and marks must be exactly the full round's, with or without the
    world's pending index, for every composition."""
    indexed = replace(s, pending=tuple(j for j in s.jobs if not j.gpus))
    for name, c in COMPS.items():
        full = decide(s, c)
        for snap in (s, indexed):
            quick = decide(snap, c, rank_all=False)
            assert (quick.start, quick.preempt, quick.admit, quick.marks, quick.drain) == (
                full.start, full.preempt, full.admit, full.marks, full.drain), name
            assert set(quick.order) <= set(full.order), name


def test_a_round_where_a_pending_job_does_not_fit_still_preempts_with_rank_all_false() -> None:
    """The fast path hands over to the full walk as soon as one pending job does not fit."""
    s = snapshot(cluster(2), [running(1, (0, 1), since=0.0), pending(2, submit=10.0)],
                 now=5000.0)
    d = decide(s, comp("las"), rank_all=False)
    assert d.preempt == (1,) and [st_.job_id for st_ in d.start] == [2]
    assert d.order == (2,)  # the full walk ran; the order lists the pending jobs it walked


def test_a_victims_cpus_come_back_with_its_gpus() -> None:
    """Review of the CPU filter: a node whose CPUs a running job holds looked full to every
    preemption trial (the CPUs were not given back with the victim's GPUs), so preemptive
    policies stopped preempting on Slurm."""
    nodes, gpus = cluster(2)
    victim = running(1, [0, 1], since=0.0, cpus=8)
    s = snapshot((nodes, gpus), [victim, pending(2, 2, submit=50.0, cpus=1)], now=100.0)
    s = replace(s, free=FreeGpus.of(s), cpus_free={"node1": 0})
    d = decide(s, loading.load("las"), explain=True)
    assert d.preempt == (1,) and [x.job_id for x in d.start] == [2], d


@pytest.mark.parametrize("rank_all", [True, False])
def test_two_jobs_started_in_one_round_do_not_overbook_a_nodes_cpus_or_memory(rank_all) -> None:
    """The snapshot's free CPUs and memory are those of the round's start: the round books
    what each start takes, so the second of two 6-CPU jobs goes to the other 8-CPU node
    (first fit would put both on node1, and Slurm would refuse the second), and a node-bound
    job's memory is booked the same way. Both paths: the full walk and the pending-only one."""
    shape = cluster(4, 4)
    one_node = (("nodes", "1"),)  # --gres=gpu:1: Slurm's per-node request
    jobs = [pending(1, 1, cpus=6, hints=one_node), pending(2, 1, submit=1.0, cpus=6,
                                                          hints=one_node),
            pending(3, 1, submit=2.0, memory_mb=3000, hints=one_node),
            pending(4, 1, submit=3.0, memory_mb=3000, hints=one_node)]
    s = snapshot(shape, jobs, now=10.0, cpus_free={"node1": 8, "node2": 8},
                 memory_free={"node1": 4000, "node2": 4000})
    d = decide(replace(s, free=FreeGpus.of(s)), loading.load("fifo"), rank_all=rank_all)
    node = {st_.job_id: s.gpus[st_.gpus[0]].node for st_ in d.start}
    assert node[1] != node[2] and node[3] != node[4], node
    # Without the CPU and memory model (the simulator) the same jobs share node1.
    plain = decide(snapshot(shape, jobs, now=10.0), loading.load("fifo"), rank_all=rank_all)
    assert {s.gpus[st_.gpus[0]].node for st_ in plain.start} == {"node1"}
