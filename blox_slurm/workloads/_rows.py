"""Row-error machinery shared by every trace loader.

Every loader has the same contract for a malformed row: raise a :class:`WorkloadError` that
names the file, the line and what is wrong, or -- when the caller asked for
``skip_bad_rows`` -- drop the row and count it. Keeping that contract in one place means the
loaders only say *what* is wrong with a field (by raising :class:`RowError`) and never decide
how errors are reported.

Two kinds of dropped rows are kept apart on purpose: *bad* rows (malformed, counted in
``Workload.skipped_rows`` or fatal) and *filtered* rows (well-formed but not a replayable GPU
job: a job that never started, a CPU-only job, a Slurm step). Filtering is a property of the
format, not an error, so it is counted in ``Workload.meta["filtered"]`` and never raises.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from math import isfinite
from os import PathLike
from typing import TYPE_CHECKING

from .schema import JobSpec, Workload, WorkloadError

if TYPE_CHECKING:
    from _csv import Reader


class RowError(ValueError):
    """What is wrong with one row; :class:`RowReporter` adds file and line."""


class RowReporter:
    """Collects the outcome of parsing each row of one file."""

    def __init__(self, source: str | PathLike[str], skip_bad_rows: bool) -> None:
        self.source = str(source)
        self.skip_bad_rows = skip_bad_rows
        self.skipped = 0
        self.filtered = 0

    def bad(self, line: int, problem: str) -> None:
        """Report a malformed row: raise, or count it when skipping."""
        if not self.skip_bad_rows:
            raise WorkloadError(f"{self.source}:{line}: {problem}")
        self.skipped += 1

    def workload(
        self,
        jobs: Iterable[JobSpec],
        measure: tuple[int, int] | None = None,
        **meta: str,
    ) -> Workload:
        """The :class:`Workload` of the rows that parsed, in the schema's order."""
        ordered = tuple(sorted(jobs, key=lambda j: (j.submit_time, j.id)))
        if self.filtered:
            meta["filtered"] = str(self.filtered)
        return Workload(
            ordered, measure=measure, source=self.source, skipped_rows=self.skipped, meta=meta
        )


def to_int(field: str, text: str, minimum: int | None = None) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise RowError(f"{field} must be an integer, got {text!r}") from None
    if minimum is not None and value < minimum:
        raise RowError(f"{field} must be >= {minimum}, got {value}")
    return value


def to_count(field: str, text: str) -> int:
    """A count >= 0 written as an integer or as a whole float (``8.0``): tables exported with
    pandas write an integer column that has a missing value as floats (PAI's ``inst_num``)."""
    value = to_float(field, text)
    if not value.is_integer():
        raise RowError(f"{field} must be a whole number, got {text!r}")
    return int(value)


def to_float(field: str, text: str, positive: bool = False) -> float:
    """A finite float; ``positive`` demands > 0, otherwise >= 0 (times and durations)."""
    try:
        value = float(text.strip())
    except ValueError:
        raise RowError(f"{field} must be a number, got {text!r}") from None
    if not isfinite(value):
        raise RowError(f"{field} must be finite, got {text!r}")
    if positive and not value > 0:
        raise RowError(f"{field} must be > 0, got {value:g}")
    if not positive and value < 0:
        raise RowError(f"{field} must be >= 0, got {value:g}")
    return value


def to_time(field: str, text: str, fmt: str | None = None) -> datetime:
    """A timestamp: ``fmt`` for ``strptime``, else ISO 8601 (what ``sacct`` prints)."""
    try:
        return datetime.strptime(text, fmt) if fmt else datetime.fromisoformat(text)
    except (TypeError, ValueError):
        expected = fmt or "ISO 8601 (YYYY-MM-DDTHH:MM:SS)"
        raise RowError(f"{field} must be a time like {expected}, got {text!r}") from None


def csv_rows(
    reader: Reader, rows: RowReporter, width: int, expected: str
) -> Iterator[tuple[int, int, list[str]]]:
    """``(index, line, fields)`` of each non-blank row of ``reader`` that has ``width`` fields;
    a row of another width is reported bad (``expected`` says what the fields are) and left
    out. ``index`` counts every non-blank row, so ids made from it do not shift when a bad row
    is skipped."""
    index = -1
    for fields in reader:
        if not fields:
            continue
        index += 1
        if len(fields) != width:
            rows.bad(reader.line_num, f"expected {width} fields ({expected}), got {len(fields)}")
            continue
        yield index, reader.line_num, [v.strip() for v in fields]
