"""The event-driven simulator on tiny hand-made workloads, with expected times by hand."""

from __future__ import annotations

import dataclasses
import random

import pytest
from _core_helpers import cluster, comp, workload

from blox_slurm import loading
from blox_slurm.core.abstractions import SchedulingBase
from blox_slurm.core.model import build_cluster
from blox_slurm.core.registry import register
from blox_slurm.core.throughput import ParametricThroughput
from blox_slurm.policies.scheduling.fifo import Fifo
from blox_slurm.sim.config import ClusterSpec, SimConfig
from blox_slurm.sim.options import sim_table
from blox_slurm.sim.simulator import SimulationError, Simulator
from blox_slurm.workloads import generate
from blox_slurm.workloads.schema import JobSpec, Workload


@register("placement", "test-always-gpu0")
class AlwaysGpu0:
    """Deliberately broken placement: hands out GPUs 0.. whether or not they are free."""

    def __init__(self, params: object = None) -> None:
        pass

    def choose(self, snapshot, job, count, free):
        return tuple(range(count))


@register("scheduling", "test-fifo-time-dependent")
class FifoTimeDependent(Fifo):
    """FIFO declared time-dependent, so the simulator never skips a round for it."""

    time_dependent = True


def run(wl, c, shape, **cfg):
    throughput = cfg.pop("throughput", None)
    return Simulator(wl, c, shape, SimConfig(**cfg), throughput).run()


def by_id(result):
    return {r.id: r for r in result.jobs}


# --------------------------------------------------------------------------- exact times

def test_fifo_two_jobs_one_gpu_second_starts_at_the_next_round() -> None:
    wl = workload((0.0, 1, 1000.0), (0.0, 1, 500.0))
    r = by_id(run(wl, comp("fifo"), cluster(1)))
    # job 0: 0 -> 1000 exactly. Its GPU is reassigned at the first round >= 1000, i.e. 1200;
    # job 1: 1200 -> 1700.
    assert (r[0].first_start, r[0].finish) == (0.0, 1000.0)
    assert (r[1].first_start, r[1].finish) == (1200.0, 1700.0)
    assert r[1].jct == 1700.0 and r[1].responsiveness == 1200.0
    assert r[0].gpu_seconds == 1000.0 and r[1].gpu_seconds == 500.0


def test_arrival_waits_for_the_next_round_and_finish_on_a_boundary_frees_at_once() -> None:
    wl = workload((100.0, 1, 300.0), (150.0, 1, 50.0))
    r = by_id(run(wl, comp("fifo"), cluster(1)))
    # both arrive before the round at 300; job 0 runs 300 -> 600 (ends on a round boundary),
    # so job 1 starts at the round of 600 itself: 600 -> 650.
    assert (r[0].first_start, r[0].finish) == (300.0, 600.0)
    assert (r[1].first_start, r[1].finish) == (600.0, 650.0)


def test_round_duration_is_configurable() -> None:
    wl = workload((0.0, 1, 1000.0), (0.0, 1, 500.0))
    r = by_id(run(wl, comp("fifo"), cluster(1), round_duration=60.0))
    assert r[1].first_start == 1020.0 and r[1].finish == 1520.0  # ceil(1000 / 60) x 60


def test_restart_cost_is_charged_on_every_restart_after_a_preemption() -> None:
    # LAS, 1 GPU, 300 s rounds. A (t=0, 1000 s); B (t=100, 200 s); C (t=700, 100 s).
    #  0: A starts.              300: B (0 GPU-s) preempts A (300): A has 300 s of work.
    #  300-500: B.               600: A restarts; restores for `cost`, then 700 s left.
    #  900: C (0) preempts A (600 GPU-s); A's work = 300 + (900 - 600 - cost).
    #  900-1000: C.              1200: A restarts, restores for `cost` again.
    #  A's finish = 1200 + cost + (1000 - 300 - (300 - cost)) = 1600 + 2 x cost.
    wl = workload((0.0, 1, 1000.0), (100.0, 1, 200.0), (700.0, 1, 100.0))
    for cost in (0.0, 30.0, 45.0):
        r = by_id(run(wl, comp("las"), cluster(1), restart_cost=cost))
        assert r[0].preemptions == 2
        assert r[0].finish == pytest.approx(1600.0 + 2 * cost)
        assert (r[1].first_start, r[1].finish) == (300.0, 500.0)
        assert (r[2].first_start, r[2].finish) == (900.0, 1000.0)
        # A held its GPU 0-300, 600-900, 1200-finish: restore time is attained service too
        assert r[0].gpu_seconds == pytest.approx(600.0 + r[0].finish - 1200.0)


def test_start_latency_delays_the_progress_of_every_start() -> None:
    """The scenario above with Slurm's start latency L (calibrate): each of A's three runs
    and B's and C's one begin L after their round (its first start and its service count
    from then, as Slurm's StartTime does), and progress a launch cost S after that; A's
    restarts also restore."""
    wl = workload((0.0, 1, 1000.0), (100.0, 1, 200.0), (700.0, 1, 100.0))
    for latency, cost, launch in ((0.0, 0.0, 0.0), (7.5, 0.0, 0.0), (7.5, 30.0, 2.0)):
        r = by_id(run(wl, comp("las"), cluster(1), restart_cost=cost, start_latency=latency,
                      launch_cost=launch))
        delay = latency + launch
        assert r[0].finish == pytest.approx(1600.0 + 3 * delay + 2 * cost)
        assert r[0].first_start == latency
        assert (r[1].first_start, r[1].finish) == (300.0 + latency, 500.0 + delay)
        assert (r[2].first_start, r[2].finish) == (900.0 + latency, 1000.0 + delay)
        # service: A held its GPU from L after each of its rounds (0, 600, 1200) to the end
        assert r[0].gpu_seconds == pytest.approx(r[0].finish - 3 * latency - 600.0)


def test_a_restart_latency_comes_before_the_run_and_counts_no_service() -> None:
    """The scenario above with Slurm's restart latency R (the lifted requeue delay and the
    scheduling pass after it, ``calibrate``): A's restarts at 600 and 1200 begin R later and
    finish as late as with a restore of R, but the wait is not service, as Slurm's StartTime
    comes after it (the controller's service and Gavel's time on a type count from there):
    A holds 1000 GPU-seconds whatever R, not 1000 + 2R. First starts do not wait it."""
    wl = workload((0.0, 1, 1000.0), (100.0, 1, 200.0), (700.0, 1, 100.0))
    for wait in (0.0, 7.5, 40.0):
        r = by_id(run(wl, comp("las"), cluster(1), restart_cost=0.0, restart_latency=wait))
        assert r[0].preemptions == 2 and r[0].first_start == 0.0
        assert r[0].finish == pytest.approx(1600.0 + 2 * wait)
        assert r[0].gpu_seconds == pytest.approx(1000.0)
        assert (r[1].first_start, r[2].first_start) == (300.0, 900.0)


def test_a_job_stopped_within_its_start_latency_was_never_started() -> None:
    """SRTF, 1 GPU, 2 s rounds, start latency 5 s: A (1000 s) starts at 0 but would run only
    from 5; B (100 s) arrives at 1 and takes the GPU at 2. On Slurm A was released, never
    ran, and is held again: no preemption, no service, its first start is its real one."""
    wl = workload((0.0, 1, 1000.0), (1.0, 1, 100.0))
    r = by_id(run(wl, comp("srtf"), cluster(1), round_duration=2.0, start_latency=5.0,
                  restart_cost=30.0, stop_latency=3.0))
    assert (r[1].first_start, r[1].finish) == (7.0, 107.0)
    assert r[0].preemptions == 0 and r[0].gpu_seconds == pytest.approx(1000.0)
    assert (r[0].first_start, r[0].finish) == (113.0, 1113.0)  # round 108, no restart cost


def test_a_start_on_a_stopped_jobs_gpus_waits_for_its_stop() -> None:
    """Stop latency T (Slurm's requeue: the victim completes before its GPUs are free): B,
    started at 300 on the GPU A is stopped from, begins T later; C likewise at 900; A's own
    restarts at 600 and 1200 come long after its stops are done, so only their start counts."""
    wl = workload((0.0, 1, 1000.0), (100.0, 1, 200.0), (700.0, 1, 100.0))
    stop, latency = 4.0, 1.5
    r = by_id(run(wl, comp("las"), cluster(1), restart_cost=0.0, start_latency=latency,
                  stop_latency=stop))
    assert (r[1].first_start, r[1].finish) == (300.0 + stop + latency, 500.0 + stop + latency)
    assert (r[2].first_start, r[2].finish) == (900.0 + stop + latency, 1000.0 + stop + latency)
    assert r[0].finish == pytest.approx(1600.0 + 3 * latency)
    # A holds its GPU while it stops (COMPLETING, checkpointing): its service counts T more
    # at each of its two stops, which keeps LAS from swapping it straight back
    assert r[0].gpu_seconds == pytest.approx(r[0].finish - 600.0 - 3 * latency + 2 * stop)


def test_a_handover_start_takes_its_own_latency_and_a_free_gpu_start_the_start_latency(
) -> None:
    """With a handover latency H, B and C (each started at a round that stops A for it)
    begin H after that round, and none of the start latency; a longer stop wait still wins.
    A's own restarts, which nobody was stopped for, wait the start latency as before."""
    wl = workload((0.0, 1, 1000.0), (100.0, 1, 200.0), (700.0, 1, 100.0))
    stop, latency, hand = 0.0, 1.5, 0.25
    r = by_id(run(wl, comp("las"), cluster(1), restart_cost=0.0, start_latency=latency,
                  stop_latency=stop, handover_latency=hand))
    assert (r[1].first_start, r[1].finish) == (300.0 + hand, 500.0 + hand)
    assert (r[2].first_start, r[2].finish) == (900.0 + hand, 1000.0 + hand)
    assert r[0].finish == pytest.approx(1600.0 + 3 * latency)
    slow = by_id(run(wl, comp("las"), cluster(1), restart_cost=0.0, start_latency=latency,
                     stop_latency=4.0, handover_latency=hand))
    assert slow[1].first_start == 304.0  # the stop still holds the GPU: the longer wait wins


def test_default_restart_cost_is_positive() -> None:
    assert SimConfig().restart_cost > 0


def test_quantize_to_rounds_ends_jobs_at_the_end_of_their_round() -> None:
    wl = workload((0.0, 1, 1000.0), (0.0, 1, 500.0))
    r = by_id(run(wl, comp("fifo"), cluster(1), quantize_to_rounds=True))
    # job 0 ends in round [900, 1200) -> 1200; job 1 runs 1200 -> 1700 -> round end 1800.
    assert r[0].finish == 1200.0 and r[1].first_start == 1200.0 and r[1].finish == 1800.0
    exact = by_id(run(wl, comp("fifo"), cluster(1)))
    assert exact[0].finish == 1000.0 and exact[1].finish == 1700.0


def test_locality_penalty_makes_a_spread_job_slower() -> None:
    wl = workload((0.0, 2, 1000.0))
    shape = cluster(2, 2)
    packed = by_id(run(wl, comp("fifo", placement="consolidated"), shape))
    # scattered puts the 2 GPUs on two nodes: rate 0.85 -> 1000 / 0.85
    spread = by_id(run(wl, comp("fifo", placement="scattered"), shape))
    assert packed[0].finish == 1000.0
    assert spread[0].finish == pytest.approx(1000.0 / 0.85)
    harsh = by_id(run(wl, comp("fifo", placement="scattered"), shape,
                      throughput=ParametricThroughput(spread_penalty=0.5)))
    assert harsh[0].finish == pytest.approx(2000.0)


def test_a_job_across_gpu_types_runs_at_the_slowest_types_rate() -> None:
    shape = build_cluster([("fast", 1, 1), ("slow", 1, 1)])
    model = ParametricThroughput(type_speed={"fast": 2.0})
    both = by_id(run(workload((0.0, 2, 1000.0)), comp("fifo"), shape, throughput=model))
    assert both[0].finish == pytest.approx(1000.0 / (1.0 * 0.85))  # slow type, two nodes
    one = by_id(run(workload((0.0, 1, 1000.0)), comp("fifo"), shape, throughput=model))
    assert one[0].finish == 500.0  # first fit: the fast GPU


def test_optimus_grown_job_runs_faster_in_the_simulator() -> None:
    wl = workload((0.0, 1, 1000.0))
    r = by_id(run(wl, loading.load("optimus"), cluster(4)))
    # grown to 4 GPUs on one node: rate 4 ** 0.8
    assert r[0].finish == pytest.approx(1000.0 / 4 ** 0.8)
    assert r[0].gpu_seconds == pytest.approx(4 * r[0].finish)


# --------------------------------------------------------------------------- blox compat

def test_blox_las_bundled_composition_reproduces_blox_accounting() -> None:
    table = sim_table("blox-las")
    assert table == {"quantize_to_rounds": True, "restart_cost": 0.0, "responsiveness": "blox"}
    c = loading.load("blox-las")
    assert c.preemption.spares_victims is False
    # 1 GPU. A (t=0, 1000 s), B (t=100, 200 s). 0: A. 300: B preempts A (work 300).
    # B 300 -> 500, counted to its round's end 600. 600: A restarts at no cost, 700 s left
    # -> 1300, counted 1500.
    wl = workload((0.0, 1, 1000.0), (100.0, 1, 200.0))
    r = by_id(run(wl, c, cluster(1), **table))
    assert r[1].finish == 600.0 and r[0].finish == 1500.0 and r[0].preemptions == 1


def test_blox_fifo_bundled_composition() -> None:
    table = sim_table("blox-fifo")
    c = loading.load("blox-fifo")
    assert isinstance(c.scheduling, Fifo) and c.preemption.spares_victims is False
    wl = workload((0.0, 1, 1000.0), (0.0, 1, 500.0), (10.0, 1, 100.0))
    r = by_id(run(wl, c, cluster(2), **table))
    # GPUs 0, 1 in node order: job 0 on GPU 0 (ends 1000 -> round end 1200), job 1 on GPU 1
    # (500 -> 600); job 2 (t=10) gets GPU 1 at 600 and runs 600 -> 700 -> round end 900.
    assert [r[i].finish for i in (0, 1, 2)] == [1200.0, 600.0, 900.0]
    assert r[2].first_start == 600.0


# --------------------------------------------------------------------------- referee

def test_simulator_rejects_a_policy_that_double_allocates_a_gpu() -> None:
    wl = workload((0.0, 1, 1000.0), (0.0, 1, 1000.0))
    c = comp("fifo", placement="test-always-gpu0")
    with pytest.raises(SimulationError, match="GPU 0 given to job 1 but job 0 holds it"):
        run(wl, c, cluster(2))


@pytest.mark.parametrize("gpus", [1, 2])
def test_a_start_where_a_job_makes_no_progress_is_a_clear_error(gpus: int) -> None:
    """The world names the job and the type, for a 1-GPU start (its own fast path) as for
    a larger one."""
    dead = ParametricThroughput(type_speed={"k80": 0.0})
    with pytest.raises(SimulationError, match=rf"job 0 would make no progress on {gpus} "
                                              r"GPU\(s\) of type \['k80'\]"):
        run(workload((0.0, gpus, 10.0)), comp("fifo"), cluster(2, gpu_type="k80"),
            throughput=dead)


def test_jobs_bigger_than_the_cluster_are_a_clear_error() -> None:
    wl = workload((0.0, 1, 10.0), (0.0, 5, 10.0))
    with pytest.raises(SimulationError, match=r"jobs \[1\] ask for more GPUs than the cluster "
                                              r"has \(4\)"):
        Simulator(wl, comp("fifo"), cluster(2, 2))


def test_workload_out_of_order_is_simulated_by_submit_time() -> None:
    specs = (JobSpec(0, 1000.0, 1, 100.0), JobSpec(1, 0.0, 1, 100.0))
    r = by_id(run(Workload(specs), comp("fifo"), cluster(1)))
    assert r[1].first_start == 0.0 and r[1].finish == 100.0
    assert r[0].first_start == 1200.0  # first round at or after its arrival at 1000


# --------------------------------------------------------------------------- runs

def test_same_seed_gives_identical_records() -> None:
    def once():
        wl = generate(n_jobs=150, jobs_per_hour=12.0, seed=7, measure=None,
                      durations={"p_long": 0.0},
                      gpu_demand={1: 0.7, 2: 0.1, 4: 0.15, 8: 0.05})
        return run(wl, loading.load("las"), ClusterSpec.parse("gpu:4x4").build())

    a, b = once(), once()
    assert a.jobs == b.jobs and a.utilization == b.utilization and a.rounds == b.rounds
    assert len(a.jobs) == 150 and a.unfinished == ()
    assert any(j.preemptions for j in a.jobs)  # LAS preempted: a non-trivial run


def test_stop_when_measured_ends_the_run_once_the_window_is_done() -> None:
    wl = workload((0.0, 1, 100.0), (0.0, 1, 100.0), (0.0, 1, 5000.0), (50.0, 1, 100.0),
                  (9000.0, 1, 100.0), measure=(0, 2))
    r = run(wl, comp("fifo"), cluster(2))
    # jobs 0 and 1 run 0 -> 100 on the two GPUs; the run stops at the next round (300)
    assert sorted(j.id for j in r.jobs) == [0, 1]
    assert r.measured == frozenset({0, 1})
    assert sorted(r.unfinished) == [2, 3, 4]
    full = run(wl, comp("fifo"), cluster(2), stop_when_measured=False)
    assert sorted(j.id for j in full.jobs) == [0, 1, 2, 3, 4] and full.unfinished == ()


def test_max_time_cuts_the_run_and_reports_unfinished_jobs() -> None:
    wl = workload((0.0, 1, 100.0), (0.0, 1, 1e6))
    r = run(wl, comp("fifo"), cluster(1), max_time=1000.0)
    assert [j.id for j in r.jobs] == [0] and r.unfinished == (1,)


def _random_case(seed: int):
    """The small random workloads on which round-skipping once diverged."""
    rng = random.Random(seed)
    groups = [(rng.choice(["a", "b"]), 1, rng.randint(1, 8)) for _ in range(rng.randint(1, 4))]
    shape = build_cluster(groups)
    total = len(shape[1])
    specs, t = [], 0.0
    for k in range(rng.randint(1, 30)):
        t += rng.expovariate(1 / 400)
        specs.append(JobSpec(k, round(t, 1), rng.randint(1, min(8, total)),
                             rng.uniform(100, 5000)))
    return Workload(tuple(specs)), shape


class _TimeDependent(SchedulingBase):
    time_dependent = True

    def __init__(self, inner) -> None:
        self.inner = inner

    def order(self, snapshot, jobs):
        return self.inner.order(snapshot, jobs)


def test_round_skipping_for_fifo_gives_the_records_of_running_every_round() -> None:
    wl = generate(n_jobs=200, jobs_per_hour=20.0, seed=3, measure=None,
                  gpu_demand={1: 0.7, 2: 0.1, 4: 0.15, 8: 0.05})
    shape = ClusterSpec.parse("gpu:4x3").build()
    fast = run(wl, comp("fifo"), shape)
    every = run(wl, comp("test-fifo-time-dependent"), shape)
    assert comp("fifo").time_dependent is False
    assert comp("test-fifo-time-dependent").time_dependent is True
    assert fast.jobs == every.jobs and fast.utilization == every.utilization
    assert fast.decide_calls < every.decide_calls  # the skipping really happened


@pytest.mark.parametrize(("name", "seeds"), [("srtf", [64, 72, 115]),
                                             ("blox-fifo", [8, 26, 44, 48, 51]),
                                             ("fifo", [0, 1, 2])])
def test_round_skipping_is_exact_where_one_round_leaves_work_for_the_next(name, seeds) -> None:
    # decide() is not always idempotent (a victim left idle beside GPUs freed later in the
    # same walk); these seeds once made the skipping simulator diverge from one that runs
    # every round.
    c = loading.load(name)
    every_round = dataclasses.replace(c, scheduling=_TimeDependent(c.scheduling))
    cfg = sim_table(name)
    for seed in seeds:
        wl, shape = _random_case(seed)
        a, b = run(wl, c, shape, **cfg), run(wl, every_round, shape, **cfg)
        assert sorted(a.jobs, key=lambda j: j.id) == sorted(b.jobs, key=lambda j: j.id), seed


# A job bound to one node (as Slurm binds ``--gres=gpu:N``): two 3-GPU jobs leave one GPU
# free on each of two 4-GPU nodes; the 2-GPU job may take them only if it may spread.
FRAGMENTED = (JobSpec(1, 0, 3, 1000), JobSpec(2, 0, 3, 1000))


@pytest.mark.parametrize("nodes, first_start", [(None, 300.0), (1, 1200.0)])
def test_a_job_bound_to_one_node_waits_for_one(nodes: int | None, first_start: float) -> None:
    specs = (*FRAGMENTED, JobSpec(3, 10, 2, 100, nodes=nodes))
    result = Simulator(Workload(specs), loading.load("tiresias"),
                       ClusterSpec.parse("gpu:4x2").build()).run()
    assert {r.id: r.first_start for r in result.jobs}[3] == first_start


def test_optimus_grows_a_bound_job_only_within_its_nodes() -> None:
    """Optimus grew a 2-GPU job to 8 GPUs, which one 4-GPU node cannot hold: it waited on an
    idle cluster forever."""
    specs = (*FRAGMENTED, JobSpec(3, 10, 2, 100, nodes=1))
    result = Simulator(Workload(specs), loading.load("optimus"),
                       ClusterSpec.parse("gpu:4x2").build(), SimConfig(max_time=1e6)).run()
    assert sorted(r.id for r in result.jobs) == [1, 2, 3] and result.unfinished == ()


def test_bound_jobs_that_cannot_fit_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="nodes must be 1..num_gpus"):
        JobSpec(1, 0, 2, 100, nodes=3)
    with pytest.raises(SimulationError, match=r"jobs \[1\] are bound to fewer nodes"):
        Simulator(Workload((JobSpec(1, 0, 8, 100, nodes=1),)), loading.load("fifo"),
                  ClusterSpec.parse("gpu:4x2").build())


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_rebuilding_the_completion_heap_gives_the_records_of_never_rebuilding(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Gavel's max-min stops jobs every round, leaving stale completions behind: the world
    # rebuilds its heap without them (after every push here), which must change nothing.
    from blox_slurm.sim import world

    wl = generate(n_jobs=60, jobs_per_hour=30.0, seed=seed, measure=None,
                  gpu_demand={1: 0.7, 2: 0.2, 4: 0.1})
    shape = ClusterSpec.parse("v100:4x2,k80:4x2").build()
    c, cfg = loading.load("gavel-max-min"), sim_table("gavel-max-min")
    monkeypatch.setattr(world, "_STALE_SLACK", 10**9)
    never = run(wl, c, shape, **cfg)
    monkeypatch.setattr(world, "_STALE_SLACK", 0)
    always = run(wl, loading.load("gavel-max-min"), shape, **cfg)
    assert sum(r.preemptions for r in never.jobs) > 0  # stale entries were left behind
    assert never.jobs == always.jobs and never.utilization == always.utilization
