"""The plain CSV loader, the shared bad-row contract, and the load_workload dispatcher."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blox_slurm.workloads import WorkloadError, load_workload
from blox_slurm.workloads.csv_trace import load_csv, write_csv
from blox_slurm.workloads.schema import JobSpec


def write(tmp_path: Path, text: str, name: str = "w.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_rows_parse_exactly_and_sort_by_submit_then_id(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "job_id,submit_time,num_gpus,duration,model,user\n"
        "7,20.5,4,100,ResNet-50 (batch size 64),bob\n"
        "3,0,1,3600.25,,alice\n"
        "5,20.5,2,1e3,LM,carol\n",
    )
    w = load_csv(p)
    assert [j.id for j in w.jobs] == [3, 5, 7]
    assert w.jobs[0] == JobSpec(3, 0.0, 1, 3600.25, model="", user="alice")
    assert w.jobs[2] == JobSpec(7, 20.5, 4, 100.0, model="ResNet-50 (batch size 64)", user="bob")
    assert w.jobs[1].duration == 1000.0
    assert w.skipped_rows == 0 and w.source == str(p)


def test_columns_may_come_in_any_order_and_optional_ones_may_be_absent(tmp_path: Path) -> None:
    p = write(tmp_path, "duration,num_gpus,job_id,submit_time\n50,2,1,9\n")
    assert load_csv(p).jobs == (JobSpec(1, 9.0, 2, 50.0),)


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ("2,5,x,10,m", "num_gpus must be an integer, got 'x'"),
        ("2,5,0,10,m", "num_gpus must be >= 1, got 0"),
        ("2,-1,1,10,m", "submit_time must be >= 0"),
        ("2,5,1,0,m", "duration must be > 0"),
        ("2,5,1,nan,m", "duration must be finite"),
        ("2,5,1,10", "expected 5 fields, got 4"),
        ("1,5,1,10,m", "duplicate job_id 1"),
    ],
)
def test_bad_row_names_file_line_and_problem(tmp_path: Path, row: str, problem: str) -> None:
    p = write(tmp_path, f"job_id,submit_time,num_gpus,duration,model\n1,0,1,5,m\n{row}\n")
    with pytest.raises(WorkloadError) as e:
        load_csv(p)
    assert str(e.value).startswith(f"{p}:3: ")
    assert problem in str(e.value)


def test_skip_bad_rows_keeps_the_good_ones_and_counts_the_rest(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "job_id,submit_time,num_gpus,duration\n1,0,1,5\nx,0,1,5\n2,0,1,-5\n1,3,1,5\n4,1,2,6\n",
    )
    w = load_workload(p, skip_bad_rows=True)
    assert [j.id for j in w.jobs] == [1, 4]
    assert w.skipped_rows == 3


@pytest.mark.parametrize(
    ("header", "problem"),
    [
        ("job_id,submit_time,num_gpus,duration,modle", "unknown column(s) modle"),
        ("job_id,submit_time,duration", "missing column(s) num_gpus"),
        ("job_id,submit_time,num_gpus,duration,model,model", "duplicate column names"),
    ],
)
def test_bad_header_is_fatal_even_when_skipping(tmp_path: Path, header: str, problem: str) -> None:
    p = write(tmp_path, header + "\n")
    with pytest.raises(WorkloadError) as e:
        load_csv(p, skip_bad_rows=True)
    assert str(e.value).startswith(f"{p}:1: ") and problem in str(e.value)


def test_empty_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(WorkloadError, match="empty file"):
        load_csv(write(tmp_path, ""))


def test_a_large_trace_loads_every_row_in_order(tmp_path: Path) -> None:
    # Speed is printed by benchmarks/bench_trace_load.py; here only what was loaded counts.
    lines = ["job_id,submit_time,num_gpus,duration,model,user"]
    lines += [f"{i},{i * 0.5},{1 << (i % 4)},{60 + i % 997},m{i % 7},u{i % 13}"
              for i in range(20_000)]
    w = load_csv(write(tmp_path, "\n".join(lines) + "\n"))
    assert [j.id for j in w.jobs] == list(range(20_000))
    last = w.jobs[-1]
    assert (last.submit_time, last.num_gpus, last.duration, last.model, last.user) == (
        19_999 * 0.5, 8, 60 + 19_999 % 997, "m0", f"u{19_999 % 13}")


names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=12
).map(str.strip)
job_specs = st.builds(
    JobSpec,
    id=st.integers(0, 10**9),
    submit_time=st.floats(0, 1e9, allow_nan=False),
    num_gpus=st.integers(1, 1024),
    duration=st.floats(1e-3, 1e9, allow_nan=False),
    model=names,
    user=names,
    account=names,
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(job_specs, max_size=30, unique_by=lambda j: j.id))
def test_written_rows_load_back_identically(tmp_path: Path, jobs: list[JobSpec]) -> None:
    p = tmp_path / "roundtrip.csv"
    write_csv(p, jobs)
    loaded = load_csv(p)
    assert loaded.jobs == tuple(sorted(jobs, key=lambda j: (j.submit_time, j.id)))


def test_dispatcher_chooses_by_extension_or_format_and_lists_formats(tmp_path: Path) -> None:
    p = write(tmp_path, "job_id,submit_time,num_gpus,duration\n1,0,1,5\n", name="w.txt")
    formats = "gavel, philly, csv, sacct, helios, pai, acme, synthetic"
    with pytest.raises(WorkloadError, match=f"formats: {formats}"):
        load_workload(p)
    assert load_workload(p, format="csv").jobs[0].id == 1
    with pytest.raises(WorkloadError, match="unknown format 'parquet'"):
        load_workload(p, format="parquet")
    with pytest.raises(WorkloadError, match="no such file"):
        load_workload(tmp_path / "absent.csv")
