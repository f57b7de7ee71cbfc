"""Cluster managers: ``telemetry_guard``'s idle and GPU-error rules, alone and inside decide()."""

from __future__ import annotations

import pytest
from _core_helpers import cluster, comp, pending, running, snapshot, started

from blox_slurm.core.composition import CompositionError
from blox_slurm.core.model import ClusterSnapshot, Drain, GpuSample, Job, NodeState
from blox_slurm.core.registry import get
from blox_slurm.core.round import decide

NOW = 10_000.0
WINDOW = 100.0


def guard(**params: object):
    return get("cluster", "telemetry_guard").build(
        {"idle_window": WINDOW, "max_sample_gap": 30.0, **params})


def readings(gpu: int, start: float, end: float = NOW, util: float = 0.0, step: float = 10.0,
             errors: int = 0) -> list[GpuSample]:
    """Samples of ``gpu`` every ``step`` seconds from ``start`` up to ``end``."""
    n = int((end - start) // step)
    return [GpuSample(gpu, start + i * step, util, errors=errors) for i in range(n + 1)]


def snap(jobs: list[Job], samples: list[GpuSample], **kw: object) -> ClusterSnapshot:
    return snapshot(cluster(2, 2), jobs, now=NOW, telemetry=tuple(samples), **kw)


def job(gpus: list[int], jid: int = 1, since: float = 0.0) -> Job:
    return running(jid, gpus, since=since)


# ------------------------------------------------------------------ idle detection


def test_a_job_idle_on_every_gpu_for_the_whole_window_is_flagged_by_default() -> None:
    view = guard().manage(snap([job([0, 1])], readings(0, NOW - WINDOW) + readings(1, 0.0)))
    assert [j for j, _ in view.flag] == [1]
    assert "100 s" in view.flag[0][1] and "dry-run" in view.flag[0][1]
    assert view.preempt == () and view.drain == () and view.unschedulable == frozenset()


def test_window_boundary_a_reading_exactly_at_the_window_start_covers_it() -> None:
    exactly = readings(0, NOW - WINDOW)
    assert exactly[0].time == NOW - WINDOW
    assert guard().manage(snap([job([0])], exactly)).flag
    late = readings(0, NOW - WINDOW + 0.5)  # the first 0.5 s of the window are unobserved
    assert guard().manage(snap([job([0])], late)).flag == ()


def test_threshold_is_inclusive_and_accepts_a_small_float() -> None:
    at = readings(0, NOW - WINDOW, util=0.5)
    assert guard().manage(snap([job([0])], at)).flag == ()  # default threshold 0.0
    assert guard(idle_threshold=0.5).manage(snap([job([0])], at)).flag
    assert guard(idle_threshold=0.49).manage(snap([job([0])], at)).flag == ()


def test_one_busy_reading_inside_the_window_is_not_idle() -> None:
    samples = readings(0, NOW - WINDOW)
    samples[5] = GpuSample(0, samples[5].time, 40.0)
    assert guard().manage(snap([job([0])], samples)).flag == ()


def test_the_reading_in_force_when_the_window_opened_must_be_idle_too() -> None:
    busy_before = [GpuSample(0, NOW - WINDOW - 5, 80.0)] + readings(0, NOW - WINDOW + 5)
    assert guard().manage(snap([job([0])], busy_before)).flag == ()


def test_no_samples_for_one_gpu_is_not_idleness() -> None:
    # GPU 1's agent is silent: the job is never flagged, however idle GPU 0 is.
    assert guard().manage(snap([job([0, 1])], readings(0, 0.0))).flag == ()
    assert guard().manage(snap([job([0])], [])).flag == ()


def test_partial_coverage_gaps_and_stale_data_are_not_idleness() -> None:
    half = readings(0, NOW - WINDOW / 2)
    assert guard().manage(snap([job([0])], half)).flag == ()
    gap = [s for s in readings(0, NOW - WINDOW) if not NOW - 60 < s.time < NOW - 20]
    assert guard().manage(snap([job([0])], gap)).flag == ()  # 40 s without data > 30 s gap
    stale = readings(0, NOW - WINDOW, end=NOW - 40)  # the agent stopped 40 s ago
    assert guard().manage(snap([job([0])], stale)).flag == ()


def test_one_gpu_idle_of_two_is_not_idle() -> None:
    samples = readings(0, 0.0) + readings(1, 0.0, util=70.0)
    assert guard().manage(snap([job([0, 1])], samples)).flag == ()


def test_only_readings_of_the_current_run_count() -> None:
    # The GPU read 0% while it was free, before the job took it 50 s ago.
    samples = readings(0, 0.0)
    assert guard().manage(snap([job([0], since=NOW - 50)], samples)).flag == ()
    assert guard().manage(snap([job([0], since=NOW - WINDOW)], samples)).flag


def test_pending_jobs_and_busy_neighbours_are_left_alone() -> None:
    jobs = [job([0], jid=1), job([2], jid=2), pending(3)]
    samples = readings(0, 0.0) + readings(2, 0.0, util=90.0)
    assert [j for j, _ in guard().manage(snap(jobs, samples)).flag] == [1]


def test_preempt_action_stops_the_idle_job_instead_of_flagging_it() -> None:
    view = guard(idle_action="preempt").manage(snap([job([0])], readings(0, 0.0)))
    assert view.preempt == (1,) and view.flag == ()


def test_params_are_validated_strictly() -> None:
    with pytest.raises(CompositionError, match="unknown key 'idle_windw'"):
        comp(cluster={"policy": "telemetry_guard", "idle_windw": 5})
    with pytest.raises(CompositionError, match="idle_action"):
        comp(cluster={"policy": "telemetry_guard", "idle_action": "kill"})
    defaults = get("cluster", "telemetry_guard").build({}).p
    assert (defaults.idle_window, defaults.idle_threshold, defaults.idle_action,
            defaults.error_window, defaults.drain_on_errors) == (1800.0, 0.0, "flag", 600.0, True)


# ------------------------------------------------------------------ GPU errors


def test_a_gpu_error_drains_its_node_and_makes_it_unschedulable() -> None:
    samples = readings(3, NOW - 50, util=90.0) + [GpuSample(3, NOW - 20, 90.0, errors=2)]
    view = guard().manage(snap([], samples))
    assert view.drain == (Drain("node2", "blox-slurm: GPU errors on node2: gpu 1: 2 error(s) "
                                         "in the last 600 s"),)
    assert view.unschedulable == frozenset({"node2"})


def test_errors_older_than_the_error_window_are_forgotten() -> None:
    old = [GpuSample(3, NOW - 601, 90.0, errors=1), GpuSample(3, NOW - 5, 90.0)]
    assert guard().manage(snap([], old)).drain == ()
    assert guard(error_window=700).manage(snap([], old)).drain[0].node == "node2"


def test_nodes_already_drained_or_down_are_not_drained_again() -> None:
    samples = [GpuSample(0, NOW - 1, 0.0, errors=1), GpuSample(2, NOW - 1, 0.0, errors=1)]
    for state in (NodeState.DRAIN, NodeState.DOWN):
        view = guard().manage(snap([], samples, states={"node1": state}))
        assert [d.node for d in view.drain] == ["node2"]


def test_drain_on_errors_false_only_watches_idleness() -> None:
    samples = [GpuSample(0, NOW - 1, 0.0, errors=5)]
    view = guard(drain_on_errors=False).manage(snap([], samples))
    assert view.drain == () and view.unschedulable == frozenset()


# ------------------------------------------------------------------ inside decide()


def guarded(**params: object):
    return comp("fifo", cluster={"policy": "telemetry_guard", "idle_window": WINDOW, **params})


def test_decide_records_a_flag_and_the_flagged_job_keeps_running() -> None:
    s = snap([job([0]), pending(2, submit=1.0)], readings(0, 0.0))
    d = decide(s, guarded(), explain=True)
    assert [j for j, _ in d.flag] == [1]
    assert 1 not in d.preempt
    assert started(d) == {2: (1,)}  # the flag frees nothing: the newcomer takes another GPU


def test_decide_preempts_the_idle_job_with_the_cluster_manager_reason() -> None:
    s = snap([job([0, 1, 2, 3]), pending(2, gpus=4, submit=1.0)],
             [x for g in range(4) for x in readings(g, 0.0)])
    d = decide(s, guarded(idle_action="preempt"), explain=True)
    assert d.preempt == (1,)
    assert d.reasons[1] == "preempted by the cluster manager"
    assert started(d) == {2: (0, 1, 2, 3)}  # its GPUs went back to the queue this round


def test_decide_starts_nothing_on_a_node_being_drained() -> None:
    s = snap([pending(1, gpus=1), pending(2, gpus=2, submit=1.0)],
             [GpuSample(0, NOW - 1, 0.0, errors=1)])
    d = decide(s, guarded(), explain=True)
    assert d.drain[0].node == "node1"
    assert all(g in (2, 3) for gpus in started(d).values() for g in gpus)
    assert started(d) == {1: (2,)}  # job 2 needs 2 GPUs: only node2's one is left
