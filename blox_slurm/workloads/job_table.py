"""Job tables: a CSV with a header and one row per scheduler job, as Helios and AcmeTrace ship.

Both traces come from the same group and share one layout -- ``user``, ``gpu_num``,
``cpu_num``, ``state``, ``submit_time``, ``start_time``, ``end_time`` per job, columns named in
a header -- so one reader serves both, and :class:`TableFormat` holds what differs (which
columns give the id, the account and the model label, and how times are written). The
per-format modules (:mod:`.helios`, :mod:`.acme`) say which document each follows.

What becomes a job, and why (both formats):

* ``duration = end_time - start_time``: the run as it happened, the best estimate of the job's
  isolated run time the trace has (the trace's own ``duration`` column is this difference).
* ``submit_time`` is seconds since the earliest kept ``submit_time``; ``num_gpus`` is
  ``gpu_num`` and ``cpus`` is ``cpu_num``.
* Jobs of every ``state`` are kept by default (``COMPLETED``, ``CANCELLED``, ``FAILED``,
  ``TIMEOUT``, ``NODE_FAIL``): a cancelled or failed job held its GPUs just the same, and
  replaying the load is the point; ``states=("COMPLETED",)`` keeps only successful ones.
* *Filtered* (``meta["filtered"]``, not errors): jobs that never started (``start_time``
  empty), jobs still running (``end_time`` empty), CPU-only jobs (``gpu_num`` 0), jobs of zero
  run time, and jobs of a state not in ``states``.
* *Bad rows* (errors, or skipped with ``skip_bad_rows``): a wrong number of fields, a time not
  in the format's layout, a count that is negative or not a whole number, an end before the
  start, a duplicate id.
"""

from __future__ import annotations

import csv
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from datetime import datetime
from os import PathLike
from pathlib import Path

from ._rows import RowError, RowReporter, csv_rows, to_count, to_time
from .schema import JobSpec, Workload, WorkloadError

# How an export writes a missing time: pandas (``NaT``/``nan``) or Slurm (``Unknown``/``None``).
UNSET = frozenset({"", "NaT", "nan", "NaN", "None", "Unknown"})
COLUMNS = ("user", "gpu_num", "cpu_num", "state", "submit_time", "start_time", "end_time")


@dataclass(frozen=True, slots=True)
class TableFormat:
    """What one trace's job table adds to the shared layout."""

    name: str  # meta["format"]
    time_format: str  # for strptime, as the trace's README shows its times
    origin: str  # where the file comes from, said when its header is wrong
    id_column: str | None = None  # integer job ids; None: 0-based row positions in the file
    account_column: str | None = None
    model_column: str | None = None

    @property
    def required(self) -> tuple[str, ...]:
        extra = (self.id_column, self.account_column, self.model_column)
        return COLUMNS + tuple(c for c in extra if c is not None)


class _Filtered(Exception):
    """A well-formed row that is not a finished GPU job."""


@dataclass(frozen=True, slots=True)
class _Row:
    """One kept job before submit times are made relative to the earliest."""

    id: int
    submit: datetime
    gpus: int
    run: float
    cpus: int
    user: str
    account: str
    model: str


def load_job_table(
    path: str | PathLike[str],
    fmt: TableFormat,
    states: Collection[str] | None = None,
    skip_bad_rows: bool = False,
) -> Workload:
    path = Path(path)
    rows = RowReporter(path, skip_bad_rows)
    kept: list[_Row] = []
    seen: set[int] = set()
    for position, line, row in _records(path, fmt, rows):
        try:
            job = _job(row, position, fmt, states)
            if job.id in seen:
                raise RowError(f"duplicate {fmt.id_column} {job.id}")
        except _Filtered:
            rows.filtered += 1
            continue
        except ValueError as e:
            rows.bad(line, str(e))
            continue
        seen.add(job.id)
        kept.append(job)
    origin = min((j.submit for j in kept), default=datetime.min)
    jobs = [
        JobSpec(
            id=j.id,
            submit_time=(j.submit - origin).total_seconds(),
            num_gpus=j.gpus,
            duration=j.run,
            model=j.model,
            user=j.user,
            account=j.account,
            cpus=j.cpus,
        )
        for j in kept
    ]
    return rows.workload(jobs, format=fmt.name, origin=origin.isoformat())


def _records(
    path: Path, fmt: TableFormat, rows: RowReporter
) -> Iterator[tuple[int, int, dict[str, str]]]:
    """``(position, line, {column: value})`` per data row; the position counts every data row,
    so a job keeps its id whatever is filtered or skipped around it."""
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        names = [n.strip() for n in next(reader, [])]
        missing = [c for c in fmt.required if c not in names]
        if missing:
            lacks = ", ".join(missing)
            raise WorkloadError(
                f"{path}:1: not a job table of format {fmt.name!r} (header lacks {lacks}); "
                f"expected {fmt.origin}"
            )
        expected = "one per header column"
        for position, line, fields in csv_rows(reader, rows, len(names), expected):
            yield position, line, dict(zip(names, fields, strict=True))


def _job(
    row: dict[str, str], position: int, fmt: TableFormat, states: Collection[str] | None
) -> _Row:
    """The job of one row, or :class:`_Filtered` (module docstring); values are checked before
    the filters, so a malformed row is reported even when it would have been filtered."""
    gpus = to_count("gpu_num", row["gpu_num"])
    cpus = to_count("cpu_num", row["cpu_num"]) if row["cpu_num"] not in UNSET else 0
    job_id = to_count(fmt.id_column, row[fmt.id_column]) if fmt.id_column else position
    submit = to_time("submit_time", row["submit_time"], fmt.time_format)
    if row["start_time"] in UNSET or row["end_time"] in UNSET:
        raise _Filtered
    start = to_time("start_time", row["start_time"], fmt.time_format)
    end = to_time("end_time", row["end_time"], fmt.time_format)
    run = (end - start).total_seconds()
    if run < 0:
        raise RowError(f"end_time {row['end_time']} is before start_time {row['start_time']}")
    if gpus == 0 or run == 0 or (states is not None and row["state"] not in states):
        raise _Filtered
    return _Row(
        id=job_id,
        submit=submit,
        gpus=gpus,
        run=run,
        cpus=cpus,
        user=row["user"],
        account=row[fmt.account_column] if fmt.account_column else "",
        model=row[fmt.model_column] if fmt.model_column else "",
    )
