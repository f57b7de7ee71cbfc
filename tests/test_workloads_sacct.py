"""The Slurm accounting loader, on `sacct -a -X --parsable2` output written by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from blox_slurm.workloads import WorkloadError, load_workload
from blox_slurm.workloads.sacct import SACCT_COMMAND, load_sacct, parse_tres

HEADER = "JobID|User|Account|Partition|Submit|Start|End|Elapsed|AllocTRES|ReqTRES|State"
ROWS = [
    "101|alice|ml|gpu|2024-01-05T10:00:00|2024-01-05T10:05:00|2024-01-05T11:05:00|01:00:00|"
    "billing=8,cpu=8,gres/gpu=2,mem=64G,node=1|billing=8,cpu=8,gres/gpu=2,mem=64G,node=1|COMPLETED",
    "101.batch|alice|ml||2024-01-05T10:05:00|2024-01-05T10:05:00|2024-01-05T11:05:00|01:00:00|"
    "cpu=8,gres/gpu=2,mem=64G,node=1||COMPLETED",  # a step: not a job
    "102|bob|vision|gpu|2024-01-05T09:59:30|2024-01-05T10:00:00|2024-01-05T10:00:45|00:00:45|"
    "cpu=4,gres/gpu:a100=1,gres/gpu:v100=2,mem=4000M|cpu=4,gres/gpu=3|FAILED",
    "103|carol|ml|gpu|2024-01-05T10:01:00|Unknown|Unknown|00:00:00||cpu=4,gres/gpu=1|PENDING",
    "104|dave|ml|gpu|2024-01-05T10:01:00|None|2024-01-05T10:02:00|00:00:00||gres/gpu=1|"
    "CANCELLED by 0",
    "105|erin|ml|gpu|2024-01-05T10:01:00|2024-01-05T10:02:00|Unknown|00:10:00|gres/gpu=1||RUNNING",
    "106|frank|ml|cpu|2024-01-05T10:01:00|2024-01-05T10:02:00|2024-01-05T10:03:00|00:01:00|"
    "cpu=16,mem=8G||COMPLETED",  # no GPUs
    "107_3|gina|ml|debug|2024-01-05T10:02:00|2024-01-05T10:02:10|2024-01-05T10:12:10|00:10:00|"
    "|billing=1,gres/gpu=1|TIMEOUT",  # AllocTRES empty: ReqTRES
]


def write(tmp_path: Path, rows: list[str], header: str = HEADER) -> Path:
    p = tmp_path / "history.sacct"
    p.write_text("\n".join([header, *rows]) + "\n")
    return p


def test_finished_gpu_jobs_become_jobs(tmp_path: Path) -> None:
    w = load_workload(write(tmp_path, ROWS))
    got = [
        (j.id, j.submit_time, j.num_gpus, j.duration, j.user, j.account, j.cpus, j.memory_mb)
        for j in w.jobs
    ]
    assert got == [
        (1, 0.0, 3, 45.0, "bob", "vision", 4, 4000),  # typed gres summed; earliest submit
        (0, 30.0, 2, 3600.0, "alice", "ml", 8, 65536),
        (2, 150.0, 1, 600.0, "gina", "ml", 0, 0),
    ]
    assert w.meta["filtered"] == "5" and w.meta["origin"] == "2024-01-05T09:59:30"


def test_partition_filter(tmp_path: Path) -> None:
    w = load_sacct(write(tmp_path, ROWS), partition="debug")
    assert [j.user for j in w.jobs] == ["gina"] and w.jobs[0].submit_time == 0.0


def test_columns_are_found_by_name(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        ["2024-01-01T00:00:10|2024-01-01T00:00:00|7|gres/gpu=4|2024-01-01T01:00:00"],
        header="End|Start|JobID|ReqTRES|Submit",
    )
    (job,) = load_sacct(p).jobs
    assert (job.num_gpus, job.duration, job.user) == (4, 10.0, "")


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        (
            "9|u|a|gpu|yesterday|2024-01-05T10:05:00|2024-01-05T11:05:00|1|gres/gpu=1||X",
            "Submit must be a time like ISO 8601",
        ),
        (
            "9|u|a|gpu|2024-01-05T10:00:00|2024-01-05T10:05:00|2024-01-05T10:04:00|1|gres/gpu=1||X",
            "job 9: End 2024-01-05T10:04:00 is before Start",
        ),
        (
            "9|u|a|gpu|2024-01-05T10:00:00|2024-01-05T10:05:00|2024-01-05T11:05:00|1|gres/gpu=two||X",
            "gres/gpu must be an integer, got 'two'",
        ),
        (
            "9|u|a|gpu|2024-01-05T10:00:00|2024-01-05T10:05:00|2024-01-05T11:05:00|1|gres/gpu=1,mem=lots||X",
            "mem must be like 16G",
        ),
        ("9|u|a|gpu|2024-01-05T10:00:00", "expected 11 '|'-separated fields, got 5"),
    ],
)
def test_bad_row_names_file_and_line(tmp_path: Path, row: str, problem: str) -> None:
    p = write(tmp_path, [ROWS[0], row, ROWS[2]])
    with pytest.raises(WorkloadError) as e:
        load_sacct(p)
    assert str(e.value).startswith(f"{p}:3: ") and problem in str(e.value)
    w = load_sacct(p, skip_bad_rows=True)
    assert w.skipped_rows == 1 and len(w.jobs) == 2


def test_wrong_header_shows_the_command_to_run(tmp_path: Path) -> None:
    p = write(tmp_path, [], header="JobID|User|Submit|Start")
    with pytest.raises(WorkloadError, match="missing End, AllocTRES or ReqTRES") as e:
        load_sacct(p)
    assert SACCT_COMMAND in str(e.value)


def test_parse_tres() -> None:
    assert parse_tres("") == {"gpu": 0, "cpu": 0, "mem": 0}
    assert parse_tres("cpu=2,mem=1T,gres/gpu:a100=1,gres/gpu=1") == {
        "gpu": 1,
        "cpu": 2,
        "mem": 1024 * 1024,
    }
    assert parse_tres("mem=512K,gres/gpu:a=2,gres/gpu:b=3")["gpu"] == 5
