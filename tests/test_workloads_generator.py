"""The Blox-style synthetic workload generator: statistics, determinism, validation."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from pathlib import Path

import pytest

from blox_slurm.workloads import WorkloadError, generate, load_workload
from blox_slurm.workloads.generator import BLOX_MULTI_GPU, config, load_config

N = 20_000


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def test_blox_figure6_defaults() -> None:
    w = generate(n_jobs=5000, jobs_per_hour=6, measure=(3000, 4000), seed=0)
    assert len(w.jobs) == 5000 and w.measure == (3000, 4000)
    assert w.jobs[0].submit_time == 0.0
    assert [j.id for j in w.jobs] == list(range(5000))  # arrival order is id order
    assert all(j.num_gpus == 1 for j in w.jobs)
    assert w.measured(3000) and not w.measured(4000) and not w.measured(2999)


@pytest.mark.parametrize("rate", [2.0, 6.0, 9.0])
def test_poisson_arrivals(rate: float) -> None:
    g = gaps([j.submit_time for j in generate(n_jobs=N, jobs_per_hour=rate, measure=None).jobs])
    mean = statistics.fmean(g)
    # Mean of N exponentials: standard error mean/sqrt(N) (~0.7 %); allow 4 of them.
    assert mean == pytest.approx(3600 / rate, rel=4 / math.sqrt(N))
    # Exponential, not e.g. uniform: the standard deviation equals the mean.
    assert statistics.stdev(g) == pytest.approx(mean, rel=0.05)


def test_duration_mix() -> None:
    d = [j.duration for j in generate(n_jobs=N, measure=None, seed=3).jobs]
    long = [x for x in d if x >= 60 * 10**3]
    # Long durations lie in [60·10^3, 60·10^4] s, short ones in [60·10^1.5, 60·10^3] s.
    assert len(long) / N == pytest.approx(0.2, abs=0.015)
    assert min(d) >= 60 * 10**1.5 and max(d) <= 60 * 10**4
    # log10(minutes) is uniform within each class: the mean of the short class is ~2.25.
    short = [math.log10(x / 60) for x in d if x < 60 * 10**3]
    assert statistics.fmean(short) == pytest.approx(2.25, abs=0.02)


def test_gpu_demand_frequencies() -> None:
    w = generate(n_jobs=N, measure=None, gpu_demand="blox-multi-gpu")
    freq = Counter(j.num_gpus for j in w.jobs)
    assert set(freq) == {1, 2, 4, 8}
    for gpus, p in BLOX_MULTI_GPU.items():
        assert freq[gpus] / N == pytest.approx(p, abs=0.015)


def test_model_and_user_mixes() -> None:
    w = generate(n_jobs=N, measure=None, models={"A": 3, "B": 1}, users=4)
    models = Counter(j.model for j in w.jobs)
    assert models["A"] / N == pytest.approx(0.75, abs=0.015)
    assert {j.user for j in w.jobs} == {"user0", "user1", "user2", "user3"}


def test_deterministic_for_a_seed_and_different_across_seeds() -> None:
    a = generate(n_jobs=500, measure=None, seed=7, gpu_demand=BLOX_MULTI_GPU)
    assert a == generate(n_jobs=500, measure=None, seed=7, gpu_demand=BLOX_MULTI_GPU)
    b = generate(n_jobs=500, measure=None, seed=8, gpu_demand=BLOX_MULTI_GPU)
    assert [j.duration for j in a.jobs] != [j.duration for j in b.jobs]
    assert [j.submit_time for j in a.jobs] != [j.submit_time for j in b.jobs]
    assert [j.num_gpus for j in a.jobs] != [j.num_gpus for j in b.jobs]


def test_a_load_sweep_keeps_the_jobs_and_scales_the_gaps() -> None:
    six = generate(n_jobs=300, measure=None, jobs_per_hour=6, seed=1)
    seven = generate(n_jobs=300, measure=None, jobs_per_hour=7, seed=1)
    assert [j.duration for j in six.jobs] == [j.duration for j in seven.jobs]
    for s, t in zip(six.jobs, seven.jobs, strict=True):
        assert t.submit_time == pytest.approx(s.submit_time * 6 / 7)


def test_bursts_keep_the_jobs_and_the_mean_rate_and_crowd_the_burst_hours() -> None:
    steady = generate(n_jobs=N, jobs_per_hour=6, measure=None, seed=2)
    bursty = generate(n_jobs=N, jobs_per_hour=6, measure=None, seed=2,
                      bursts={"every_hours": 24, "hours": 4, "factor": 4})
    assert [(j.duration, j.num_gpus) for j in bursty.jobs] == \
        [(j.duration, j.num_gpus) for j in steady.jobs]
    times = [j.submit_time for j in bursty.jobs]
    assert times == sorted(times) and bursty.meta["arrivals"] == "bursty"
    # Same mean rate: the last arrival lands where the steady stream's does, within a period.
    assert abs(times[-1] - steady.jobs[-1].submit_time) <= 24 * 3600
    in_burst = sum(1 for t in times if t % 86400 < 4 * 3600) / N
    # 4 h at 4x of 24 mean-rate hours: 16/24 of the jobs arrive in the burst (vs 4/24 steady).
    assert in_burst == pytest.approx(16 / 24, abs=0.02)


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({"n_jobs": 0}, "n_jobs: Input should be greater than or equal to 1"),
        ({"jobs_per_hour": 0}, "jobs_per_hour: Input should be greater than 0"),
        ({"n_jobs": 100, "measure": (50, 200)}, "measure must be (first, end)"),
        ({"gpu_demand": {1: 0.5, 0: 0.5}}, "GPU counts must be >= 1"),
        ({"gpu_demand": {1: -1.0}}, "weights must be finite and >= 0"),
        ({"gpu_demand": "many"}, "unknown preset 'many'; presets: single, blox-multi-gpu"),
        ({"models": {"A": 0}}, "models weights must not all be 0"),
        ({"durations": {"short_log10_minutes": (3, 1)}}, "low <= high"),
        ({"lambda": 6}, "lambda: Extra inputs are not permitted"),
        ({"bursts": {"every_hours": 10, "hours": 3, "factor": 4}},
         "hours x factor (12) must be below every_hours (10)"),
        ({"bursts": {"factor": 0.5}}, "bursts.factor: Input should be greater than or equal to 1"),
    ],
)
def test_bad_parameters_are_clear_errors(params: dict[str, object], problem: str) -> None:
    with pytest.raises(WorkloadError) as e:
        config(**params)
    assert str(e.value).startswith("generator: ") and problem in str(e.value)


def test_config_from_toml(tmp_path: Path) -> None:
    p = tmp_path / "gen.toml"
    p.write_text(
        "[workload]\nn_jobs = 2000\njobs_per_hour = 7\nmeasure = [100, 200]\nseed = 5\n"
        '[workload.gpu_demand]\n"1" = 0.5\n"4" = 0.5\n[workload.durations]\np_long = 0.5\n'
    )
    cfg = load_config(p)
    assert cfg.gpu_demand == {1: 0.5, 4: 0.5} and cfg.durations.p_long == 0.5
    w = load_workload(p, seed=6)  # the dispatcher; keyword overrides win
    assert w.measure == (100, 200) and len(w.jobs) == 2000
    assert w == generate(cfg, seed=6)
    p.write_text("[workload]\nn_jobs = -1\n")
    with pytest.raises(WorkloadError, match=r"gen.toml: generator: n_jobs"):
        load_config(p)
