"""Slurm's start latencies and stop delays, drawn from measured samples
(``SimConfig.start_latency_samples``, ``stop_delay``, ``blox_slurm.sim.latency``), their
calibration and the demo's prediction over several draws."""

from __future__ import annotations

import statistics
import tomllib

import pytest
from _core_helpers import cluster, comp, workload
from hypothesis import given, settings
from hypothesis import strategies as st

from blox_slurm.demo.run import DRAWS, Replay
from blox_slurm.sim.config import SimConfig
from blox_slurm.sim.simulator import Simulator
from blox_slurm.slurm.calibrate import SAMPLES, Calibration, Timings, calibrate

# LAS on one GPU: A (1000 s) is preempted twice by B and C and restarted twice.
SWAPS = workload((0.0, 1, 1000.0), (100.0, 1, 200.0), (700.0, 1, 100.0))
# Tiresias at short rounds on 4 GPUs: thresholds crossed a round apart with the latencies.
BUSY = workload(*((float(i), 1 + i % 2, 20.0 + 7 * i) for i in range(10)))
TIRESIAS = {"policy": "tiresias", "thresholds": [10.0, 60.0]}


def records(wl, c, shape, **cfg):
    result = Simulator(wl, c, shape, SimConfig(restart_cost=0.0, **cfg)).run()
    return sorted((r.id, r.first_start, r.finish, r.preemptions, r.gpu_seconds)
                  for r in result.jobs)


@settings(deadline=None, max_examples=25)
@given(start=st.sampled_from([0.0, 0.5, 1.0, 2.5]), extra=st.sampled_from([0.0, 1.5, 7.0]),
       seed=st.integers(0, 5))
def test_one_sample_is_the_median_model(start: float, extra: float, seed: int) -> None:
    """A single sample is a constant latency: the same run as the medians, whatever the
    seed, for first starts and for restarts (a restart's sample is its whole latency)."""
    medians = records(SWAPS, comp("las"), cluster(1), start_latency=start,
                      restart_latency=extra)
    drawn = records(SWAPS, comp("las"), cluster(1), start_latency=start,
                    start_latency_samples=(start,), restart_latency_samples=(start + extra,),
                    latency_seed=seed)
    assert drawn == medians
    # the samples replace the medians: a first start no longer waits the median
    other = records(SWAPS, comp("las"), cluster(1), start_latency=9.0,
                    start_latency_samples=(start,), restart_latency=extra + 9.0 - start)
    assert [r[1] for r in other] == [r[1] for r in medians]


def test_each_start_waits_one_of_the_samples() -> None:
    """One job, 1 s rounds: its run begins one of the samples after the round that started
    it, each of them for some seed, and its service counts from there."""
    wl = workload((0.0, 1, 10.0))
    seen = set()
    for seed in range(20):
        ((_, first, finish, _, service),) = records(
            wl, comp("fifo"), cluster(1), round_duration=1.0,
            start_latency_samples=(0.5, 2.5), latency_seed=seed)
        assert first in (0.5, 2.5) and finish == first + 10.0 and service == 10.0
        seen.add(first)
    assert seen == {0.5, 2.5}


def test_starts_of_one_round_share_their_draw() -> None:
    """Slurm's batch scheduler starts the jobs released together on one pass: four jobs
    started in one round begin at the same instant for every seed, one of the samples; a
    job started in a later round draws again, so over the seeds its latency is sometimes
    not the first round's."""
    together = workload(*((0.0, 1, 10.0) for _ in range(4)), (5.0, 1, 10.0))
    pairs = set()
    for seed in range(30):
        runs = records(together, comp("fifo"), cluster(5), round_duration=1.0,
                       start_latency_samples=(0.5, 2.5), latency_seed=seed)
        firsts = {r[1] for r in runs[:4]}
        assert len(firsts) == 1 and firsts <= {0.5, 2.5}
        later = runs[4][1] - 5.0
        assert later in (0.5, 2.5)
        pairs.add((min(firsts), later))
    assert pairs == {(0.5, 0.5), (0.5, 2.5), (2.5, 0.5), (2.5, 2.5)}


def test_stops_of_one_round_share_their_delay() -> None:
    """Two jobs stopped in one round (LAS on 2 GPUs, A and B stopped at 300 for C and D)
    run on the same delay, one of the samples, for every seed: a round's apply requeues
    them together. Both samples appear over the seeds."""
    wl = workload((0.0, 1, 1000.0), (0.0, 1, 1000.0), (100.0, 1, 50.0), (100.0, 1, 50.0))
    delays = set()
    for seed in range(12):
        runs = records(wl, comp("las"), cluster(2), stop_delay_samples=(0.1, 3.0),
                       latency_seed=seed)
        (a, b) = ({r[2] for r in runs[:2]}, {r[3] for r in runs[:2]})
        assert len(a) == 1 and b == {1}
        delays.add(round(1300.0 - a.pop(), 6))  # restarted at 600, 700 - delay to go
    assert delays == {0.1, 3.0}


def test_a_seed_draws_the_same_run_and_seeds_differ() -> None:
    """Draws are reproducible (a seed is a run), and at 1 s rounds with thresholds the
    latencies change the runs."""
    kw = {"round_duration": 1.0, "start_latency_samples": (0.0, 1.0, 2.0),
          "restart_latency_samples": (0.5, 3.0)}
    runs = [records(BUSY, comp(TIRESIAS), cluster(2, 2), latency_seed=s, **kw)
            for s in range(8)]
    again = records(BUSY, comp(TIRESIAS), cluster(2, 2), latency_seed=3, **kw)
    assert again == runs[3]
    assert len({tuple(r) for r in runs}) > 1


def test_a_stopped_job_runs_on_for_the_stop_delay() -> None:
    """LAS on one GPU, A stopped at 300 and 900 (for B and C): with a stop delay D, A runs,
    progresses and is served D longer at each stop, so it ends 2D sooner with the same
    1000 GPU-seconds; B and C still start at their rounds. One sample is the same run."""
    base = {r[0]: r for r in records(SWAPS, comp("las"), cluster(1))}
    for delay in (0.1, 0.58, 4.0):
        runs = {r[0]: r for r in records(SWAPS, comp("las"), cluster(1), stop_delay=delay)}
        assert runs[0][3] == base[0][3] == 2
        assert runs[0][2] == pytest.approx(base[0][2] - 2 * delay)
        assert runs[0][4] == pytest.approx(1000.0)
        assert (runs[1][1], runs[2][1]) == (base[1][1], base[2][1])
        drawn = records(SWAPS, comp("las"), cluster(1), stop_delay_samples=(delay,))
        assert drawn == sorted(runs.values())


def test_calibrate_measures_each_stop_to_the_end_of_the_run_it_stopped() -> None:
    """A stop's delay is its round's start to the end of the run it stopped; a stop whose
    job has no ended run spanning that round (a run of an unseen end) gives none."""
    t = Timings(rounds=[(10.0, 0.1), (20.0, 0.6), (30.0, 0.1)], releases=[], runs={},
                stops=[(1, 10.0), (2, 20.0), (3, 30.0)],
                ended={1: [(0.0, 5.0), (8.0, 10.3)], 2: [(15.0, 20.58)], 3: [(0.0, 29.0)]})
    cal = calibrate(t)
    assert cal.stop_delays == pytest.approx((0.3, 0.58))
    assert cal.simulation()["stop_delay"] == pytest.approx(0.44)
    assert cal.samples()["stop_delay_samples"] == (0.3, 0.58)


def test_calibration_samples_are_sorted_and_spread_when_many() -> None:
    """Few samples go as they are (sorted, to the millisecond); more than ``SAMPLES`` become
    that many evenly spaced order statistics, the least and the greatest kept."""
    few = Calibration(3, 1.0, 0.1, first_starts=(1.7777, 0.0, 0.77), restarts=())
    assert few.samples() == {"start_latency_samples": (0.0, 0.77, 1.778)}
    many = Calibration(3, 1.0, 0.1, first_starts=tuple(i / 10 for i in range(1000, -1, -1)),
                       restarts=(3.0, 1.0))
    out = many.samples()
    spread = out["start_latency_samples"]
    assert len(spread) == SAMPLES and spread == tuple(sorted(spread))
    assert (spread[0], spread[SAMPLES // 2], spread[-1]) == (0.0, 50.0, 100.0)
    assert out["restart_latency_samples"] == (1.0, 3.0)


def test_the_calibration_file_gives_the_simulator_its_samples() -> None:
    """``blox-slurm calibrate --out`` writes TOML whose table the simulator takes whole."""
    cal = Calibration(3, 2.0, 0.1, first_starts=(0.0, 0.77, 1.78), restarts=(2.5,),
                      stop_delays=(0.06, 0.58, 0.07))
    table = tomllib.loads(cal.to_toml())["simulation"]
    cfg = SimConfig(**table)
    assert (cfg.stop_delay, cfg.stop_delay_samples) == (0.07, (0.06, 0.07, 0.58))
    assert cfg.start_latency_samples == (0.0, 0.77, 1.78)
    assert cfg.restart_latency_samples == (2.5,)
    assert (cfg.start_latency, cfg.restart_latency) == (0.77, 1.73)


def test_the_demo_predicts_each_jobs_median_over_draws() -> None:
    """With samples, the prediction is each job's median JCT (and median preemptions) over
    ``DRAWS`` seeds; with none, the one run the medians give."""
    replay = Replay(BUSY, comp(TIRESIAS), "gpu:2x2", None)
    cfg = SimConfig(round_duration=1.0, restart_cost=0.0, start_latency=1.0,
                    start_latency_samples=(0.0, 1.0, 2.0))
    runs = [replay._run(cfg.model_copy(update={"latency_seed": s})) for s in range(DRAWS)]
    predicted = replay.simulate(cfg)
    for jid, (jct, preemptions) in predicted.items():
        assert jct == statistics.median(r[jid][0] for r in runs)
        assert preemptions == statistics.median_low(r[jid][1] for r in runs)
    assert sorted(predicted) == sorted(runs[0])
    plain = cfg.model_copy(update={"start_latency_samples": ()})
    assert replay.simulate(plain) == replay._run(plain)
