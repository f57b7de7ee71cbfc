"""Gavel traces and Gavel's measured throughputs as a throughput model."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from _gavel_data import GAVEL, THROUGHPUTS, needs_gavel

from blox_slurm.core.model import Job
from blox_slurm.core.throughput import ParametricThroughput, ThroughputModel
from blox_slurm.workloads import WorkloadError, load_workload
from blox_slurm.workloads.gavel import load_gavel
from blox_slurm.workloads.gavel_throughput import GavelThroughput

# A tiny hand-written throughput table: steps/s alone ("null") per (job_type, GPUs).
TABLE = {
    "v100": {
        "('A', 1)": {"null": 10.0},
        "('A', 2)": {"null": 16.0},
        "('A', 8)": {"null": 40.0},
        "('B', 1)": {"null": 5.0},
    },
    "v100_unconsolidated": {"('A', 2)": {"null": 12.0}},
    "k80": {"('A', 1)": {"null": 2.0}, "('A', 2)": {"null": 0.0}, "('B', 1)": {"null": 1.0}},
}


@pytest.fixture
def table(tmp_path: Path) -> Path:
    p = tmp_path / "simulation_throughputs.json"
    p.write_text(json.dumps(TABLE))
    return p


def line(job_type: str = "A", steps: str = "1000", arrival: str = "0", gpus: str = "1") -> str:
    return "\t".join([job_type, "cd %s && python3 train.py", "--steps", "1", steps, arrival, gpus])


def test_duration_is_steps_over_reference_throughput(tmp_path: Path, table: Path) -> None:
    trace = tmp_path / "t.trace"
    trace.write_text(
        "\n".join([line(), line("A", "3200", "6.5", "2"), line("B", "50", "3")]) + "\n"
    )
    w = load_workload(trace)  # throughputs found beside the trace
    assert [(j.id, j.submit_time, j.num_gpus, j.duration, j.model) for j in w.jobs] == [
        (0, 0.0, 1, 100.0, "A"),
        (2, 3.0, 1, 10.0, "B"),
        (1, 6.5, 2, 200.0, "A"),
    ]


def test_unmeasured_gpu_count_uses_the_estimated_throughput(tmp_path: Path, table: Path) -> None:
    trace = tmp_path / "t.trace"
    trace.write_text(line("A", "1000", "0", "4") + "\n")
    # 4 GPUs lies between measured 2 (16/s) and 8 (40/s): power law through both.
    slope = math.log(40 / 16) / math.log(8 / 2)
    expected = 16.0 * (4 / 2) ** slope
    assert load_gavel(trace).jobs[0].duration == pytest.approx(1000 / expected)


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ("A\tcmd\t-n\t1\t1000\t0", "expected 7 tab-separated fields, got 6"),
        (line("Nope"), "unknown job type 'Nope'; known job types: A, B"),
        (line(steps="many"), "total_steps must be an integer, got 'many'"),
        (line(gpus="0"), "scale_factor must be >= 1"),
        (line(arrival="-4"), "arrival_time_s must be >= 0"),
    ],
)
def test_bad_row_names_file_and_line(tmp_path: Path, table: Path, row: str, problem: str) -> None:
    trace = tmp_path / "t.trace"
    trace.write_text(f"{line()}\n\n{row}\n")
    with pytest.raises(WorkloadError) as e:
        load_gavel(trace)
    assert str(e.value).startswith(f"{trace}:3: ") and problem in str(e.value)
    assert load_gavel(trace, skip_bad_rows=True).skipped_rows == 1


def test_a_job_that_cannot_run_on_the_reference_type_is_a_bad_row(
    tmp_path: Path, table: Path
) -> None:
    trace = tmp_path / "t.trace"
    trace.write_text(line("A", gpus="2") + "\n")
    with pytest.raises(WorkloadError, match="does not run on k80"):
        load_gavel(trace, reference_type="k80")


def test_missing_throughputs_file_is_a_clear_error(tmp_path: Path) -> None:
    trace = tmp_path / "t.trace"
    trace.write_text(line() + "\n")
    with pytest.raises(WorkloadError, match="needs measured throughputs"):
        load_gavel(trace)


def job(model: str, gpus: int) -> Job:
    return Job(id=1, submit_time=0.0, num_gpus=gpus, model=model)


def test_rate_rules_on_a_hand_written_table(table: Path) -> None:
    thr = GavelThroughput(table)
    assert isinstance(thr, ThroughputModel)
    assert thr.job_types == ("A", "B") and thr.gpu_types == ("k80", "v100")
    assert thr.rate(job("A", 2), 2, 1, "v100") == 1.0
    assert thr.rate(job("A", 2), 2, 2, "v100") == 12 / 16  # spread table
    assert thr.rate(job("A", 1), 8, 2, "v100") == 40 / 10  # spread table lacks 8: consolidated
    assert thr.rate(job("A", 1), 1, 1, "k80") == 2 / 10
    assert thr.rate(job("A", 1), 2, 1, "k80") == 0.0  # measured 0.0: does not run
    assert thr.rate(job("A", 1), 4, 1, "k80") == 0.0  # estimate above a 0.0 is 0.0
    assert thr.rate(job("A", 1), 0, 1, "v100") == 0.0
    assert thr.rate(job("B", 1), 3, 1, "v100") == 3.0  # only 1 measured: linear
    # Above the largest measured count: the last two counts' slope, clamped to [0, 1].
    slope = math.log(40 / 16) / math.log(8 / 2)
    assert thr.steps_per_second("A", 16) == pytest.approx(40 * 2**slope)


def test_unknown_model_and_type_errors_list_what_is_known(table: Path) -> None:
    thr = GavelThroughput(table)
    with pytest.raises(WorkloadError, match="unknown job type 'C'; known job types: A, B"):
        thr.rate(job("C", 1), 1, 1, "v100")
    with pytest.raises(WorkloadError, match="unknown job type 'C'"):
        thr.require_all(["A", "C"])
    with pytest.raises(WorkloadError, match="unknown GPU type 'a100'; known GPU types: k80, v100"):
        thr.rate(job("A", 1), 1, 1, "a100")
    with pytest.raises(WorkloadError, match="unknown GPU type 'p100'"):
        GavelThroughput(table, reference_type="p100")


def test_fallback_and_aliases(table: Path) -> None:
    thr = GavelThroughput(
        table, fallback=ParametricThroughput(scaling=1.0), type_aliases={"gpu": "v100"}
    )
    assert thr.rate(job("C", 1), 2, 1, "gpu") == 2.0  # parametric, not an error
    thr.require_all(["C"])  # a fallback makes every model acceptable
    assert thr.rate(job("A", 1), 2, 1, "gpu") == 1.6


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ({"v100": {"ResNet, 1": {"null": 1.0}}}, "is not \"('<job_type>', <gpus>)\""),
        ({"v100": {"('A', 0)": {"null": 1.0}}}, "is not"),
        ({"v100": {"('A', 1)": {"null": "fast"}}}, '"null" must be a throughput >= 0'),
        ({"v100": {"('A', 1)": {}}}, '"null" must be a throughput'),
        ([], "expected an object of GPU types"),
    ],
)
def test_malformed_throughput_files(tmp_path: Path, raw: object, problem: str) -> None:
    p = tmp_path / "thr.json"
    p.write_text(json.dumps(raw))
    with pytest.raises(WorkloadError, match=re.escape(problem)):
        GavelThroughput(p)


@needs_gavel
@pytest.mark.parametrize(("name", "count"), [("0e4a51", 1181), ("2869ce", 533), ("e13805", 607)])
def test_real_traces_load_every_job(name: str, count: int) -> None:
    w = load_workload(GAVEL / f"msr_seed0_{name}.trace")
    assert len(w.jobs) == count and w.skipped_rows == 0
    assert max(j.num_gpus for j in w.jobs) >= 8
    assert all(j.duration > 0 for j in w.jobs)


@needs_gavel
def test_real_trace_first_job_matches_the_json() -> None:
    raw = json.loads(THROUGHPUTS.read_text())
    first = (GAVEL / "msr_seed0_0e4a51.trace").read_text().splitlines()[0].split("\t")
    steps, gpus = int(first[4]), int(first[6])
    expected = steps / raw["v100"][f"('{first[0]}', {gpus})"]["null"]
    job0 = next(j for j in load_gavel(GAVEL / "msr_seed0_0e4a51.trace").jobs if j.id == 0)
    assert job0.model == first[0] and job0.duration == pytest.approx(expected)


@needs_gavel
def test_real_throughputs() -> None:
    thr = GavelThroughput(THROUGHPUTS)
    raw = json.loads(THROUGHPUTS.read_text())
    assert thr.gpu_types == ("k80", "p100", "v100") and len(thr.job_types) == 26
    resnet = "ResNet-50 (batch size 64)"
    key = f"('{resnet}', 4)"
    assert thr.rate(job(resnet, 1), 4, 1, "p100") == pytest.approx(
        raw["p100"][key]["null"] / raw["v100"][f"('{resnet}', 1)"]["null"]
    )
    lm = job("LM (batch size 20)", 4)
    assert thr.rate(lm, 4, 1, "v100") == 1.0
    assert thr.rate(lm, 4, 2, "v100") < thr.rate(lm, 4, 1, "v100")  # spread is slower
    transformer = job("Transformer (batch size 128)", 1)
    assert thr.rate(transformer, 1, 1, "k80") < thr.rate(transformer, 1, 1, "p100") < 1.0
    # Traces ask for 32 GPUs, which Gavel never measured: estimated, more than 8 GPUs give.
    assert thr.steps_per_second(resnet, 32) > thr.steps_per_second(resnet, 8)
