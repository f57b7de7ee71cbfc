"""The Helios ``cluster_log.csv`` loader, on a fixture written from the trace's README schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from blox_slurm.workloads import WorkloadError, load_workload
from blox_slurm.workloads.helios import load_helios

FIXTURE = Path(__file__).parent / "fixtures" / "traces" / "helios_cluster_log.csv"
HEADER, *ROWS = FIXTURE.read_text().splitlines()


def row(
    gpus: str = "1",
    submit: str = "2020-06-01 01:00:00",
    start: str = "2020-06-01 01:00:00",
    end: str = "2020-06-01 01:00:10",
    job_id: str = "1020",
) -> str:
    return f"{job_id},u,vc,{gpus},4,1,COMPLETED,{submit},{start},{end},10,0"


GOOD = row(job_id="1013")


def jobs(w):
    return [
        (j.id, j.submit_time, j.num_gpus, j.duration, j.user, j.account, j.cpus) for j in w.jobs
    ]


def test_finished_gpu_jobs_become_jobs() -> None:
    w = load_workload(FIXTURE, format="helios")
    assert jobs(w) == [
        (1002, 0.0, 8, 249.0, "uBob", "vcB", 32),  # the earliest submission is time 0
        (1001, 10.0, 1, 3600.0, "uAlice", "vcA", 4),
        (1006, 600.0, 16, 86400.0, "uErin", "vcC", 64),  # queued 1h50m: run time only
        (1008, 1800.0, 4, 14400.0, "uFrank", "vcC", 16),
        (1009, 2400.0, 2, 600.0, "uGina", "vcA", 8),
        (1010, 2400.0, 1, 30.0, "uHal", "vcB", 1),
        (1012, 3600.0, 2, 1800.0, "uJon", "vcA", 8),
    ]
    # CPU-only 1003 and 1011, never started 1004, still running 1005, zero run time 1007.
    assert w.meta == {"format": "helios", "origin": "2020-06-01T00:00:00", "filtered": "5"}
    assert w.skipped_rows == 0 and all(j.model == "" and j.memory_mb == 0 for j in w.jobs)


def test_states_keeps_only_the_listed_ones() -> None:
    w = load_helios(FIXTURE, states=("COMPLETED",))
    assert [(j.id, j.submit_time) for j in w.jobs] == [
        (1001, 0.0), (1006, 590.0), (1010, 2390.0), (1012, 3590.0)
    ]
    assert w.meta["filtered"] == "8"


def write(tmp_path: Path, *rows: str, header: str = HEADER) -> Path:
    p = tmp_path / "cluster_log.csv"
    p.write_text("\n".join([header, *rows]) + "\n")
    return p


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ("1020,u,vc,1,4,1,COMPLETED,2020-06-01 01:00:00", "expected 12 fields"),
        (
            row(submit="06/01/2020 01:00"),
            "submit_time must be a time like %Y-%m-%d %H:%M:%S, got '06/01/2020 01:00'",
        ),
        (row(gpus="-2"), "gpu_num must be >= 0, got -2"),
        (row(gpus="1.5"), "gpu_num must be a whole number, got '1.5'"),
        (
            row(start="2020-06-01 03:00:00", end="2020-06-01 02:00:00"),
            "end_time 2020-06-01 02:00:00 is before start_time 2020-06-01 03:00:00",
        ),
        (ROWS[0], "duplicate job_id 1001"),
    ],
)
def test_bad_row_names_file_and_line(tmp_path: Path, row: str, problem: str) -> None:
    p = write(tmp_path, ROWS[0], row, GOOD)
    with pytest.raises(WorkloadError) as e:
        load_helios(p)
    assert str(e.value).startswith(f"{p}:3: {problem}")
    w = load_helios(p, skip_bad_rows=True)
    assert w.skipped_rows == 1 and [j.id for j in w.jobs] == [1001, 1013]


def test_a_malformed_row_is_reported_even_if_it_would_be_filtered(tmp_path: Path) -> None:
    p = write(tmp_path, "1020,u,vc,-1,4,1,CANCELLED,2020-06-01 01:00:00,,,0,0")
    with pytest.raises(WorkloadError, match=r":2: gpu_num must be >= 0"):
        load_helios(p)


def test_columns_are_found_by_name(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "2020-06-01 00:00:20,7,2020-06-01 00:00:00,2,FAILED,x,u,,2020-06-01 00:01:20",
        header="start_time,job_id,submit_time,gpu_num,state,vc,user,cpu_num,end_time",
    )
    (job,) = load_helios(p).jobs
    assert (job.id, job.num_gpus, job.duration, job.cpus, job.account) == (7, 2, 60.0, 0, "x")


def test_a_file_of_another_format_names_the_missing_columns(tmp_path: Path) -> None:
    p = write(tmp_path, header="job_id,submit_time,num_gpus,duration")
    with pytest.raises(WorkloadError) as e:
        load_workload(p, format="helios")
    problem = "not a job table of format 'helios' (header lacks user, gpu_num"
    assert str(e.value).startswith(f"{p}:1: {problem}")
    assert "cluster_log.csv from S-Lab-System-Group/HeliosData" in str(e.value)
