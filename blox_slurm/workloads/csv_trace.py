"""The plain CSV workload: the simplest format a person can write or export by hand.

A header row is required; columns are found by name, so their order is free::

    job_id,submit_time,num_gpus,duration,model,user
    0,0,1,3600,ResNet-50 (batch size 64),alice

``job_id`` (integer), ``submit_time`` (seconds, >= 0), ``num_gpus`` (>= 1) and ``duration``
(isolated seconds, > 0) are required; ``model``, ``user`` and ``account`` are optional. An
unknown column is an error rather than ignored, because a misspelt ``modle`` column silently
dropped would change every simulated speed. Rows may come in any order; the workload is sorted.
"""

from __future__ import annotations

import csv
from os import PathLike
from pathlib import Path

from ._rows import RowError, RowReporter, to_float, to_int
from .schema import JobSpec, Workload, WorkloadError

REQUIRED = ("job_id", "submit_time", "num_gpus", "duration")
OPTIONAL = ("model", "user", "account")
COLUMNS = REQUIRED + OPTIONAL


def load_csv(path: str | PathLike[str], skip_bad_rows: bool = False) -> Workload:
    path = Path(path)
    rows = RowReporter(path, skip_bad_rows)
    jobs: list[JobSpec] = []
    seen: set[int] = set()
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        index = _header(path, next(reader, None))
        width = len(index)
        for row in reader:
            if not row:
                continue
            try:
                if len(row) != width:
                    raise RowError(f"expected {width} fields, got {len(row)}")
                job = _job(row, index)
                if job.id in seen:
                    raise RowError(f"duplicate job_id {job.id}")
            except ValueError as e:  # RowError, or WorkloadError from JobSpec
                rows.bad(reader.line_num, str(e))
                continue
            seen.add(job.id)
            jobs.append(job)
    return rows.workload(jobs, format="csv")


def _header(path: Path, header: list[str] | None) -> dict[str, int]:
    if header is None:
        raise WorkloadError(f"{path}: empty file; expected a header {','.join(REQUIRED)},...")
    names = [h.strip() for h in header]
    unknown = [n for n in names if n not in COLUMNS]
    missing = [n for n in REQUIRED if n not in names]
    if unknown or missing or len(set(names)) != len(names):
        problem = (
            f"unknown column(s) {', '.join(unknown)}"
            if unknown
            else f"missing column(s) {', '.join(missing)}"
            if missing
            else "duplicate column names"
        )
        raise WorkloadError(
            f"{path}:1: {problem}; columns are {', '.join(REQUIRED)} (required) "
            f"and {', '.join(OPTIONAL)} (optional)"
        )
    return {name: i for i, name in enumerate(names)}


def _job(row: list[str], index: dict[str, int]) -> JobSpec:
    job_id, submit, gpus, duration = (row[index[name]] for name in REQUIRED)
    model, user, account = (row[index[n]].strip() if n in index else "" for n in OPTIONAL)
    return JobSpec(
        id=to_int("job_id", job_id, minimum=0),
        submit_time=to_float("submit_time", submit),
        num_gpus=to_int("num_gpus", gpus, minimum=1),
        duration=to_float("duration", duration, positive=True),
        model=model,
        user=user,
        account=account,
    )


def write_csv(path: str | PathLike[str], jobs: list[JobSpec] | tuple[JobSpec, ...]) -> None:
    """Write jobs in this format (e.g. to freeze a generated workload for other tools)."""
    with Path(path).open("w", encoding="utf-8", newline="") as f:
        out = csv.writer(f)
        out.writerow(("job_id", "submit_time", "num_gpus", "duration", *OPTIONAL))
        for j in jobs:
            out.writerow(
                (
                    j.id,
                    repr(j.submit_time),
                    j.num_gpus,
                    repr(j.duration),
                    j.model,
                    j.user,
                    j.account,
                )
            )
