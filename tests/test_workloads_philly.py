"""The Philly cluster_job_log loader, on a fixture written from the trace's documented format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from blox_slurm.workloads import WorkloadError, load_workload
from blox_slurm.workloads.philly import load_philly


def attempt(start: str | None, end: str | None, *machines: int) -> dict[str, Any]:
    detail = [
        {"ip": f"m{i}", "gpus": [f"gpu{g}" for g in range(n)]} for i, n in enumerate(machines)
    ]
    return {"start_time": start, "end_time": end, "detail": detail}


def entry(
    jobid: str, submitted: str, attempts: list[Any], status: str = "Pass", user: str = "u1"
) -> dict[str, Any]:
    return {
        "status": status,
        "vc": "ee9e8c",
        "jobid": jobid,
        "attempts": attempts,
        "submitted_time": submitted,
        "user": user,
    }


JOBS = [
    # Retried: the last attempt (8 GPUs over two machines, 2 h) is the job.
    entry(
        "application_1_1",
        "2017-10-07 01:11:39",
        [
            attempt("2017-10-07 01:12:09", "2017-10-07 01:13:23", 8),
            attempt("2017-10-07 02:00:00", "2017-10-07 04:00:00", 4, 4),
        ],
    ),
    entry(
        "application_1_2",
        "2017-10-07 01:10:39",
        [attempt("2017-10-07 01:20:00", "2017-10-07 01:30:30", 1)],
        status="Killed",
        user="u2",
    ),
    entry(
        "application_1_3",
        "2017-10-07 01:15:00",
        [attempt("2017-10-07 01:16:00", "2017-10-07 01:17:00", 2)],
        status="Failed",
    ),
    entry("application_1_4", "2017-10-07 01:15:00", []),  # never scheduled
    entry(
        "application_1_5", "2017-10-07 01:15:00", [attempt("2017-10-07 01:16:00", None, 2)]
    ),  # still running at snapshot
    entry(
        "application_1_6",
        "2017-10-07 01:15:00",
        [attempt("2017-10-07 01:16:00", "2017-10-07 01:17:00")],
    ),  # no GPUs
]


def write(tmp_path: Path, jobs: list[Any], name: str = "cluster_job_log") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(jobs, indent=4))
    return p


def test_jobs_from_last_attempt_relative_to_first_submit(tmp_path: Path) -> None:
    w = load_workload(write(tmp_path, JOBS))  # recognised by its file name
    got = [(j.id, j.submit_time, j.num_gpus, j.duration, j.user, j.account) for j in w.jobs]
    assert got == [
        (1, 0.0, 1, 630.0, "u2", "ee9e8c"),
        (0, 60.0, 8, 7200.0, "u1", "ee9e8c"),
        (2, 261.0, 2, 60.0, "u1", "ee9e8c"),
    ]
    assert w.meta["filtered"] == "3" and w.skipped_rows == 0
    assert w.meta["origin"] == "2017-10-07 01:10:39"


def test_status_filter(tmp_path: Path) -> None:
    w = load_philly(write(tmp_path, JOBS), statuses=("Pass",))
    assert [j.id for j in w.jobs] == [0]
    assert w.meta["filtered"] == "5"


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ({**JOBS[1], "submitted_time": "07/10/2017"}, "submitted_time must be a time like"),
        ({k: v for k, v in JOBS[1].items() if k != "attempts"}, "missing key 'attempts'"),
        (
            entry(
                "application_9",
                "2017-10-07 01:10:39",
                [attempt("2017-10-07 02:00:00", "2017-10-07 01:00:00", 1)],
            ),
            "ends before it starts",
        ),
        (
            entry(
                "application_9",
                "2017-10-07 01:10:39",
                [
                    {
                        "start_time": "2017-10-07 02:00:00",
                        "end_time": "2017-10-07 03:00:00",
                        "detail": [{"ip": "m1"}],
                    }
                ],
            ),
            "needs a 'gpus' list",
        ),
        ("not a job", "a job must be a JSON object"),
    ],
)
def test_bad_job_names_file_and_the_line_it_starts_on(
    tmp_path: Path, bad: object, problem: str
) -> None:
    p = write(tmp_path, [JOBS[0], bad, JOBS[2]], name="log.json")
    lines = p.read_text().splitlines()
    # The bad job is the second top-level element: find the line it starts on.
    starts = [i + 1 for i, text in enumerate(lines) if text in ("    {", '    "not a job",')]
    bad_line = starts[1]
    with pytest.raises(WorkloadError) as e:
        load_philly(p)
    assert str(e.value).startswith(f"{p}:{bad_line}: ") and problem in str(e.value)
    w = load_philly(p, skip_bad_rows=True)
    assert w.skipped_rows == 1 and [j.id for j in w.jobs] == [0, 2]


def test_invalid_json_is_fatal_with_its_line(tmp_path: Path) -> None:
    p = tmp_path / "log.json"
    p.write_text('[\n{"jobid": "a"},\n{"jobid": \n]')
    with pytest.raises(WorkloadError, match=r"log.json:4: invalid JSON"):
        load_philly(p, skip_bad_rows=True)
    p.write_text('{"jobid": "a"}')
    with pytest.raises(WorkloadError, match="expected a JSON array of jobs"):
        load_philly(p)
