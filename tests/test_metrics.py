"""Metrics on hand-built runs whose every figure is worked out by hand in the comments."""

from __future__ import annotations

import csv
import dataclasses
import json

import pytest

from benchmarks.bench_metrics import synthetic_run
from blox_slurm.sim.metrics import (
    Metrics,
    fairness,
    job_rows,
    measured_jobs,
    summarize,
    summary_row,
    utilization_timeline,
    write_csv,
    write_json,
)
from blox_slurm.sim.records import JobRecord, RunResult

# Two GPUs. j1 runs 0-10. j2 runs 0-15 (restart included), is preempted, waits 15-30 so that
# the 2-GPU j3 (submitted at 10) can run 20-30, then resumes 30-40.
J1 = JobRecord(1, submit_time=0, num_gpus=1, duration=10, first_start=0, finish=10, gpu_seconds=10)
J2 = JobRecord(
    2,
    submit_time=0,
    num_gpus=1,
    duration=20,
    first_start=0,
    finish=40,
    preemptions=1,
    gpu_seconds=25,
)
J3 = JobRecord(
    3, submit_time=10, num_gpus=2, duration=10, first_start=20, finish=30, gpu_seconds=20
)
BUSY = ((0.0, 2), (10.0, 1), (15.0, 0), (20.0, 2), (30.0, 1), (40.0, 0))


def run(**kw: object) -> RunResult:
    args: dict[str, object] = dict(name="las", total_gpus=2, jobs=(J1, J2, J3), utilization=BUSY)
    args.update(kw)
    return RunResult(**args)  # type: ignore[arg-type]


def test_jct_percentiles_use_linear_interpolation() -> None:
    m = summarize(run())
    assert m.count == 3
    assert m.avg_jct == pytest.approx(70 / 3)  # JCTs 10, 40, 20
    assert m.p50_jct == pytest.approx(20)
    assert m.p95_jct == pytest.approx(38)  # rank 0.95 * 2 = 1.9 between 20 and 40
    assert m.p99_jct == pytest.approx(39.6)
    assert m.makespan == pytest.approx(40)


def test_responsiveness_and_queueing_delay() -> None:
    m = summarize(run())
    assert m.avg_responsiveness == pytest.approx(10 / 3)  # 0, 0, 10
    assert m.p50_responsiveness == pytest.approx(0)
    assert m.p99_responsiveness == pytest.approx(9.8)
    # Wall time not holding GPUs: 10-10, 40-25/1, 20-20/2. Not JCT - duration (0, 20, 10).
    assert m.avg_queueing_delay == pytest.approx(25 / 3)


def test_blox_responsiveness_counts_a_start_at_the_end_of_the_first_round() -> None:
    blox = summarize(dataclasses.replace(run(), responsiveness_offset=300.0))
    assert blox.avg_responsiveness == pytest.approx(10 / 3 + 300)
    assert blox.p50_responsiveness == pytest.approx(300)
    assert blox.avg_jct == summarize(run()).avg_jct  # nothing else moves


def test_utilization_is_time_weighted_step_function() -> None:
    # Busy GPU-seconds over [0, 40]: 2*10 + 1*5 + 0*5 + 2*10 + 1*10 = 55, of 2 * 40 available.
    assert summarize(run()).utilization == pytest.approx(55 / 80)


def test_utilization_tolerates_unsorted_points_and_duplicate_times() -> None:
    # At t=0 the later point (2 busy) wins; the order of the points must not matter.
    shuffled = ((30.0, 1), (0.0, 0), (0.0, 2), (20.0, 2), (10.0, 1), (40.0, 0), (15.0, 0))
    assert summarize(run(utilization=shuffled)).utilization == pytest.approx(55 / 80)


def test_utilization_timeline_bins() -> None:
    edges, util = utilization_timeline(run(), bins=4)
    assert edges == pytest.approx([0, 10, 20, 30, 40])
    assert util == pytest.approx([1.0, 0.25, 1.0, 0.5])
    assert utilization_timeline(run(jobs=(), utilization=()), bins=4) == ([], [])
    with pytest.raises(ValueError, match="bins"):
        utilization_timeline(run(), bins=0)


def test_finish_time_fairness_on_constructed_case() -> None:
    # Jobs in the system: 2 on [0,10) (j1, j2); at 10 j1 leaves as j3 arrives: 2 on [10,30);
    # 1 on [30,40). j1: N=2, rho=10/(10*2). j2: N=(20+40+10)/40=1.75, rho=40/(20*1.75)=8/7.
    # j3: N=2, rho=20/(10*2).
    rho = fairness(run())
    assert rho == pytest.approx({1: 0.5, 2: 8 / 7, 3: 1.0})
    m = summarize(run())
    assert m.avg_fairness == pytest.approx((0.5 + 8 / 7 + 1.0) / 3)
    assert m.max_fairness == pytest.approx(8 / 7)
    assert m.unfair_fraction == pytest.approx(1 / 3)


def test_fairness_undefined_without_isolated_time() -> None:
    zero = JobRecord(7, submit_time=5, num_gpus=1, duration=0, first_start=5, finish=6)
    result = run(jobs=(zero,), utilization=((5.0, 1), (6.0, 0)))
    assert fairness(result) == {7: None}
    m = summarize(result)
    assert (m.avg_fairness, m.max_fairness, m.unfair_fraction) == (None, None, None)
    assert m.avg_jct == pytest.approx(1)


def test_measured_window_filters_jobs_but_not_contention() -> None:
    result = run(measured=frozenset({2, 3, 4}), unfinished=(4, 5))
    assert [j.id for j in measured_jobs(result)] == [2, 3]
    m = summarize(result)
    assert m.count == 2
    assert m.avg_jct == pytest.approx(30)
    assert m.p50_jct == pytest.approx(30)
    assert m.makespan == pytest.approx(40)  # j2 submitted at 0, finished at 40
    assert m.preemptions == 1 and m.preemptions_per_job == pytest.approx(0.5)
    # j1 is outside the window yet still contends with j2: j2's rho is unchanged.
    assert m.max_fairness == pytest.approx(8 / 7)
    assert m.unfinished == 1  # 4 is measured and unfinished; 5 is outside the window


def test_unfinished_counts_all_when_no_window() -> None:
    m = summarize(run(unfinished=(4, 5)))
    assert m.unfinished == 2
    assert m.preemptions == 1 and m.preemptions_per_job == pytest.approx(1 / 3)


def test_empty_window_gives_none_not_errors() -> None:
    m = summarize(run(measured=frozenset()))
    assert m.count == 0
    assert m.avg_jct is None and m.p99_jct is None and m.makespan is None
    assert m.utilization is None and m.avg_fairness is None and m.preemptions_per_job is None
    assert m.preemptions == 0


def test_job_rows_carry_derived_values() -> None:
    rows = {r["id"]: r for r in job_rows(run(measured=frozenset({2})))}
    assert rows[2]["jct"] == 40 and rows[2]["queueing_delay"] == 15
    assert rows[3]["responsiveness"] == 10 and rows[3]["queueing_delay"] == 10
    assert rows[2]["fairness"] == pytest.approx(8 / 7)
    assert (rows[1]["measured"], rows[2]["measured"]) == (False, True)


def test_write_json_and_csv_round_trip(tmp_path) -> None:
    m = summarize(run())
    row = summary_row(run(params={"policy": "las", "load": 6.0, "nested": {"x": 1}}), m)
    assert row["load"] == 6.0 and "nested" not in row and row["avg_jct"] == m.avg_jct

    out = write_json([m, {"name": "nan", "avg_jct": float("nan")}], tmp_path / "a" / "m.json")
    data = json.loads(out.read_text())
    assert data[0] == m.as_dict()
    assert data[1]["avg_jct"] is None  # NaN is not JSON: written as null

    empty = summarize(run(measured=frozenset()))
    path = write_csv([summary_row(run(), m), empty.as_dict()], tmp_path / "rows.csv")
    with path.open() as fh:
        got = list(csv.DictReader(fh))
    assert float(got[0]["p99_jct"]) == pytest.approx(39.6)
    assert got[1]["avg_jct"] == ""  # None -> empty cell
    assert got[1]["wall_seconds"] == ""  # key missing from the second row

    jobs = write_csv(job_rows(run()), tmp_path / "jobs.csv")
    with jobs.open() as fh:
        assert [r["id"] for r in csv.DictReader(fh)] == ["1", "2", "3"]


def test_metrics_is_frozen() -> None:
    m = summarize(run())
    assert isinstance(m, Metrics)
    with pytest.raises(AttributeError):
        m.count = 0  # type: ignore[misc]


def test_summarize_counts_only_the_measured_window_of_a_large_run() -> None:
    """How fast this is belongs to benchmarks/bench_metrics.py; here, that it is right."""
    window = range(3_000, 90_000)
    m = summarize(synthetic_run(100_000, window))
    assert m.count == 87_000
    # Job i waits i % 13 s and runs 200 + i % 97 - i % 13 s: the means over jobs 3000..89999.
    assert m.avg_jct == pytest.approx(sum(200 + i % 97 for i in window) / len(window))
