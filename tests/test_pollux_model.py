"""The Pollux model on synthetic fixtures: trace parsing and its errors, the step-time fit,
statistical efficiency, the batch-size choice, and progress to completion."""

from __future__ import annotations

import shutil
from dataclasses import astuple
from pathlib import Path

import numpy as np
import pytest

from blox_slurm.pollux.application import Application
from blox_slurm.pollux.efficiency import GradStats, efficiency, gain
from blox_slurm.pollux.goodput import (
    best_config,
    goodput,
    packed_placement,
    split_local_batch,
    tuned_config,
)
from blox_slurm.pollux.measured import MeasuredSteps, normalize, step_seconds
from blox_slurm.pollux.progress import advance, isolated_seconds, rate_at
from blox_slurm.pollux.throughput import (
    PerfParams,
    fit_perf_params,
    relative_errors,
    step_time,
)
from blox_slurm.pollux.traces import StepSample, TraceError, load_application

TOY = Path(__file__).parent / "fixtures" / "pollux" / "traces" / "toy"
# The parameters tests/fixtures/pollux/traces/toy/placements.csv was generated from.
TRUE = PerfParams(0.05, 0.002, 0.3, 0.01, 0.05, 0.005, 2.0)


@pytest.fixture(scope="module")
def app() -> Application:
    return Application.of(load_application(TOY))


@pytest.fixture(scope="module")
def perf(app: Application) -> PerfParams:
    return fit_perf_params(app.trace.placements)


def test_traces_are_read_with_placement_shapes(app: Application) -> None:
    trace = app.trace
    assert (len(trace.placements), len(trace.scalability)) == (40, 4)
    shapes = {(s.num_nodes, s.num_replicas) for s in trace.placements}
    assert (2, 8) in shapes and (4, 16) in shapes and (4, 4) in shapes  # "44", "4444", "1111"
    assert list(trace.validation) == [16, 64, 256]
    assert [e.progress for e in trace.validation[64]] == [98.0, 201.0, 302.0]


def _copy_toy(tmp_path: Path) -> Path:
    target = tmp_path / "toy"
    shutil.copytree(TOY, target)
    return target


@pytest.mark.parametrize(
    ("file", "text", "message"),
    [
        ("placements.csv", "placement,bsz,step_time,sync_time\n",
         "placements.csv:1: expected the header"),
        ("placements.csv", "placement,local_bsz,step_time,sync_time\n1,8,0.1\n",
         "placements.csv:2: expected 4 fields"),
        ("placements.csv", "placement,local_bsz,step_time,sync_time\n1,8,fast,0\n",
         "placements.csv:2: step_time must be a number, got 'fast'"),
        ("placements.csv", "placement,local_bsz,step_time,sync_time\n10,8,0.1,0\n",
         "placements.csv:2: placement must be GPUs per node as digits 1-9, got '10'"),
        ("placements.csv", "placement,local_bsz,step_time,sync_time\n1,8.5,0.1,0\n",
         "placements.csv:2: local_bsz must be a whole number"),
        ("placements.csv", "placement,local_bsz,step_time,sync_time\n1,8,0,0\n",
         "placements.csv:2: step_time must be finite and > 0"),
        ("validation-16.csv", "progress,iteration,metric,grad_sqr,grad_var\n5,1,0,1,1\n5,2,0,1,1\n",
         "validation-16.csv:3: progress must increase"),
        ("validation-16.csv", "progress,iteration,metric,grad_sqr,grad_var\n5,1,0,-1,1\n",
         "validation-16.csv:2: grad_sqr must be finite and >= 0"),
        ("validation-x.csv", "progress,iteration,metric,grad_sqr,grad_var\n",
         "expected a name validation-<batch size>.csv"),
        ("scalability.csv", "num_nodes,num_replicas,local_bsz,step_time,sync_time\n2,nan,8,1,0\n",
         "scalability.csv:2: num_replicas must be finite"),
    ],
)
def test_a_malformed_trace_file_names_file_line_and_problem(
    tmp_path: Path, file: str, text: str, message: str
) -> None:
    root = _copy_toy(tmp_path)
    (root / file).write_text(text)
    with pytest.raises(TraceError, match="^" + str(root / file).replace(".", r"\.")) as err:
        load_application(root)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_missing_directory_or_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such trace directory"):
        load_application(tmp_path / "nope")
    root = _copy_toy(tmp_path)
    (root / "placements.csv").unlink()
    with pytest.raises(TraceError, match=r"placements\.csv: no such file"):
        load_application(root)
    for run in root.glob("validation-*.csv"):
        run.unlink()
    with pytest.raises(TraceError, match=r"no validation-<batch size>\.csv files"):
        load_application(root)


def test_the_fit_recovers_the_parameters_the_table_was_generated_from(
    perf: PerfParams,
) -> None:
    assert np.allclose(astuple(perf), astuple(TRUE), rtol=1e-2)


def test_the_fit_predicts_placements_it_never_saw(app: Application, perf: PerfParams) -> None:
    assert relative_errors(perf, app.trace.placements).max() < 1e-3
    assert relative_errors(perf, app.trace.scalability).max() < 1e-3  # 12 and 24 replicas


def test_without_multi_gpu_samples_communication_is_free() -> None:
    single = [StepSample(1, 1, b, float(step_time(TRUE, 1, 1, b)), 0.0) for b in (8, 16, 32)]
    perf = fit_perf_params(single)
    assert max(perf.alpha_n, perf.beta_n, perf.alpha_r, perf.beta_r) < 1e-6
    assert perf.beta_c == pytest.approx(TRUE.beta_c, rel=1e-2)


def test_step_time_adds_overlap_and_accumulation() -> None:
    compute, network = 0.05 + 0.002 * 32, 0.3 + 0.01 * (8 - 2)
    one = float(step_time(TRUE, 2, 8, 32))
    assert one == pytest.approx((compute**2 + network**2) ** 0.5)
    assert float(step_time(TRUE, 2, 8, 32, 3)) == pytest.approx(one + 3 * compute)
    assert float(step_time(TRUE, 1, 4, 32)) < one  # intra-node is cheaper here


def test_efficiency_is_one_at_the_initial_batch_and_falls_with_the_batch() -> None:
    stats = GradStats(sqr=1.0, var=4.0)
    batches = np.array([16, 32, 64, 128, 256])
    eff = efficiency(stats, batches, 16)
    assert eff[0] == pytest.approx(1.0)
    assert np.all(np.diff(eff) < 0)
    g = gain(stats, batches, 16)
    assert np.all((g >= 1.0) & (g <= batches / 16 + 1e-12))
    noisier = efficiency(GradStats(sqr=1.0, var=40.0), batches, 16)
    assert np.all(noisier[1:] > eff[1:])  # more gradient noise: big batches lose less
    assert GradStats(1.0, 4.0).noise_scale(16) == 64.0


def test_gradient_statistics_interpolate_between_validated_batches(app: Application) -> None:
    assert app.grad_stats(64, 1) == GradStats(sqr=1.5, var=10.0)
    assert app.grad_stats(40, 0) == GradStats(sqr=3.5, var=5.0)  # halfway 16..64
    assert app.grad_stats(64, 99) == app.grad_stats(64, 2)  # beyond the last epoch: the last
    with pytest.raises(ValueError, match="batch size 512 is outside the validated 16..256"):
        app.grad_stats(512, 0)


def test_limits_progress_target_and_epochs(app: Application) -> None:
    assert (app.init_batch_size, app.max_batch_size) == (16, 256)
    assert (app.min_local_bsz, app.max_local_bsz, app.max_epochs) == (8, 64, 3)
    assert [app.epoch_end(e) for e in range(3)] == [98.0, 199.0, 300.0]  # smallest of the runs
    assert app.target == 300.0
    assert [app.epoch_at(p) for p in (0.0, 97.9, 98.0, 250.0, 300.0)] == [0, 0, 1, 2, 3]


def test_advance_walks_epochs_and_stops_at_the_target(app: Application) -> None:
    rates = {0: 1.0, 1: 2.0, 2: 4.0}
    part = advance(app, 0.0, 100.0, rates.__getitem__)
    assert part == pytest.approx(type(part)(98.0 + 2 * 2.0, 100.0, False))
    whole = advance(app, 0.0, float("inf"), rates.__getitem__)
    assert whole.complete and whole.progress == 300.0
    assert whole.elapsed == pytest.approx(98.0 / 1 + 101.0 / 2 + 101.0 / 4)
    with pytest.raises(ValueError, match="progress rate must be > 0"):
        advance(app, 0.0, 1.0, lambda epoch: 0.0)


def test_isolated_seconds_sums_each_epoch_at_its_efficiency(app: Application) -> None:
    config = tuned_config(app, 4, 64)
    assert (config.atomic_bsz, config.accum_steps, config.batch_size) == (16, 0, 64)
    seconds_per_step = 0.25
    expected = 0.0
    for epoch, span in enumerate((98.0, 101.0, 101.0)):
        s = app.grad_stats(64, epoch)
        gain_64 = (s.var + s.sqr) / (s.var / 4 + s.sqr)  # the published formula, scale 64/16
        expected += span * seconds_per_step / gain_64
    assert isolated_seconds(app, rate_at(app, config, seconds_per_step)) == pytest.approx(expected)


def test_a_single_gpu_above_the_initial_batch_accumulates(app: Application) -> None:
    atomic, accum = split_local_batch(app, 1, np.array([16, 32, 256]))
    assert list(accum) == [0, 1, 3] and list(atomic) == [16, 16, 64]
    atomic, accum = split_local_batch(app, 2, np.array([32, 256]))
    assert list(accum) == [0, 1] and list(atomic) == [16, 64]


@pytest.mark.parametrize("replicas", [1, 2, 4, 8, 12])
def test_the_chosen_batch_beats_every_tuned_batch_on_its_own_model(
    app: Application, perf: PerfParams, replicas: int
) -> None:
    nodes = len(packed_placement(replicas, 4))
    for epoch in range(app.max_epochs):
        stats = app.grad_stats(app.init_batch_size, epoch)
        chosen = best_config(app, perf, stats, nodes, replicas)
        assert chosen is not None
        config, value = chosen
        assert app.min_local_bsz <= config.atomic_bsz <= app.max_local_bsz
        assert app.init_batch_size <= config.batch_size <= app.max_batch_size
        assert value == pytest.approx(float(goodput(perf, stats, 16, nodes, replicas,
                                                    config.atomic_bsz, config.accum_steps)))
        for batch in range(max(16, 8 * replicas), 257, 8):
            tuned = tuned_config(app, replicas, batch)
            if tuned.atomic_bsz < app.min_local_bsz:
                continue
            other = float(goodput(perf, stats, 16, nodes, replicas, tuned.atomic_bsz,
                                  tuned.accum_steps))
            assert value >= other * (1 - 1e-9), (replicas, epoch, batch)


def test_the_choice_follows_the_noise_scale(app: Application, perf: PerfParams) -> None:
    early = best_config(app, perf, GradStats(sqr=1.0, var=0.01), 1, 4)
    late = best_config(app, perf, GradStats(sqr=1.0, var=100.0), 1, 4)
    assert early is not None and late is not None
    assert early[0].batch_size < late[0].batch_size


def test_no_configuration_when_the_smallest_local_batches_exceed_the_maximum(
    app: Application, perf: PerfParams
) -> None:
    assert best_config(app, perf, GradStats(1.0, 1.0), 9, 33) is None  # 33 x 8 > 256


def test_packed_placement_fills_nodes_first() -> None:
    assert packed_placement(6, 4) == (4, 2)
    assert packed_placement(8, 4) == (4, 4)
    assert packed_placement(1, 4) == (1,)


def test_measured_steps_interpolate_a_measured_placement(app: Application) -> None:
    steps = MeasuredSteps(app.trace)
    at_16 = (float(step_time(TRUE, 2, 8, 16)), float(step_time(TRUE, 2, 8, 16)) - 0.082)
    assert steps((4, 4), 16) == pytest.approx(at_16)
    halfway = (float(step_time(TRUE, 2, 8, 16)) + float(step_time(TRUE, 2, 8, 32))) / 2
    assert steps((4, 4), 24)[0] == pytest.approx(halfway)
    assert steps((4, 4), 1000) == steps((4, 4), 64)  # clamped at the measured end
    assert normalize((0, 4, 1)) == (1, 4) and steps((2, 1, 1), 8) == steps((1, 1, 2), 8)


def test_measured_steps_of_unmeasured_shapes_come_from_neighbours(app: Application) -> None:
    steps = MeasuredSteps(app.trace)
    assert steps((4, 4, 4), 8)[0] == pytest.approx(float(step_time(TRUE, 3, 12, 8)))  # a row
    between = steps((4, 4, 4, 4, 4), 8)[0]  # 5 nodes: between 4x16 and the 6x24 row
    assert float(step_time(TRUE, 4, 16, 8)) < between < float(step_time(TRUE, 6, 24, 8))
    with pytest.raises(ValueError, match="toy: no measurement near 9 nodes, 36 GPUs"):
        steps((4,) * 9, 8)


def test_accumulation_adds_compute_only_passes(app: Application) -> None:
    steps = MeasuredSteps(app.trace)
    step, sync = steps((4,), 32)
    assert step_seconds(steps, (4,), 32, 2) == pytest.approx(step + 2 * (step - sync))
