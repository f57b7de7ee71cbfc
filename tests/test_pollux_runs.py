"""Pollux jobs in the simulator (``blox_slurm.pollux.runs``): progress curves that change
speed every epoch, how the world runs, stops and finishes them, on the toy fixture."""

from __future__ import annotations

from pathlib import Path

import pytest

from blox_slurm.core.accounting import DecayedUsage
from blox_slurm.core.model import Decisions, Job, Start, Stop, build_cluster
from blox_slurm.core.throughput import CurveModel, ProgressCurve
from blox_slurm.pollux.goodput import packed_placement
from blox_slurm.pollux.runs import ADAPTIVE, PolluxModel
from blox_slurm.sim.config import SimConfig
from blox_slurm.sim.world import World
from blox_slurm.workloads.pollux import load_pollux, pollux_model

FIXTURES = Path(__file__).parent / "fixtures" / "pollux"


@pytest.fixture(scope="module")
def loaded() -> tuple[PolluxModel, dict[int, Job]]:
    workload = load_pollux(FIXTURES / "workloads" / "workload.csv")
    jobs = {s.id: Job(s.id, s.submit_time, s.num_gpus, s.user, s.account, s.model, s.duration)
            for s in workload.jobs}
    return pollux_model(workload), jobs


def _adaptive(job: Job) -> Job:
    return Job(job.id, job.submit_time, job.num_gpus, job.user, job.account, job.model,
               job.duration, marks=((ADAPTIVE, 1.0),))


def test_the_model_gives_runs_curves(loaded: tuple[PolluxModel, dict[int, Job]]) -> None:
    model, jobs = loaded
    assert isinstance(model, CurveModel)
    assert isinstance(model.curve(jobs[0], (1,), "gpu"), ProgressCurve)


@pytest.mark.parametrize("adaptive", [False, True])
def test_a_curve_finishes_exactly_at_the_jobs_duration(
        loaded: tuple[PolluxModel, dict[int, Job]], adaptive: bool) -> None:
    model, jobs = loaded
    for job in jobs.values():
        job = _adaptive(job) if adaptive else job
        assert job.duration is not None
        for placement in {(1,), (4,), packed_placement(job.num_gpus, 4)}:
            curve = model.curve(job, placement, "gpu")
            for done in (0.0, 0.01 * job.duration, 0.5 * job.duration, 0.97 * job.duration):
                seconds = curve.seconds_to_finish(done)  # the model's seconds, not wall time
                assert seconds > 0
                assert curve.work_after(done, seconds) == pytest.approx(job.duration)
                assert curve.work_after(done, seconds / 2) < job.duration


def test_a_tuned_job_on_its_tuned_packed_request_runs_its_duration(
        loaded: tuple[PolluxModel, dict[int, Job]]) -> None:
    model, jobs = loaded
    for job in jobs.values():
        curve = model.curve(job, packed_placement(job.num_gpus, 4), "gpu")
        assert curve.seconds_to_finish(0.0) == pytest.approx(job.duration)
        assert model.rate(job, job.num_gpus, 1, "gpu") == pytest.approx(1.0)


def test_an_adaptive_job_is_no_slower_than_its_tuned_batch(
        loaded: tuple[PolluxModel, dict[int, Job]]) -> None:
    """It chooses its batch on the fitted model, so it may lose a little on the measured
    one, but not much: the toy's fit is close."""
    model, jobs = loaded
    for job in jobs.values():
        placement = packed_placement(job.num_gpus, 4)
        tuned = model.curve(job, placement, "gpu").seconds_to_finish(0.0)
        adaptive = model.curve(_adaptive(job), placement, "gpu").seconds_to_finish(0.0)
        assert adaptive <= 1.05 * tuned


def _world(model: PolluxModel, launch: float = 0.0) -> World:
    nodes, gpus = build_cluster([("gpu", 2, 4)])
    cfg = SimConfig(round_duration=60.0, restart_cost=0.0, launch_cost=launch)
    return World(nodes, gpus, cfg, model, DecayedUsage(cfg.usage_half_life))


def test_a_stopped_run_keeps_the_work_its_curve_did(
        loaded: tuple[PolluxModel, dict[int, Job]]) -> None:
    model, jobs = loaded
    job = jobs[2]  # 6 GPUs on two nodes
    assert job.duration is not None
    world = _world(model, launch=30.0)
    world.arrive(job)
    gpus = (0, 1, 2, 3, 4, 5)
    world.apply(Decisions(start=(Start(job.id, gpus),)), 0.0)
    curve = model.curve(job, (4, 2), "gpu")
    t = 30.0 + 0.4 * curve.seconds_to_finish(0.0)
    world.apply(Decisions(stop=(Stop(job.id),)), t)
    kept = world.active[job.id].work_base
    assert kept == pytest.approx(curve.work_after(0.0, t - 30.0))
    assert 0 < kept < job.duration
    # restarted on one node of 4: it finishes when that curve says, from the work kept
    world.apply(Decisions(start=(Start(job.id, (4, 5, 6, 7)),)), t + 60)
    end = t + 60 + 30.0 + model.curve(job, (4,), "gpu").seconds_to_finish(kept)
    assert world.finish_at[job.id] == pytest.approx(end)
    done = world.pop_completion(end + 1e-6)
    assert done is not None and done[0].id == job.id


def test_the_speedup_is_goodput_over_that_on_one_gpu(
        loaded: tuple[PolluxModel, dict[int, Job]]) -> None:
    model, jobs = loaded
    job = jobs[0]
    assert model.speedup(job, 1, 0.0) == pytest.approx(1.0)
    assert model.speedup(job, 4, 0.0) > 1.0
    assert model.speedup(job, 4, 0.0) == model.speedup(_adaptive(job), 4, 0.0)
