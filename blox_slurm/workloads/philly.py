"""Microsoft Philly ``cluster_job_log`` (msr-fiddle/philly-traces, ATC'19).

The file is one JSON array of jobs::

    {"status": "Pass", "vc": "ee9e8c", "jobid": "application_1506638472019_14199",
     "user": "ce2f4c", "submitted_time": "2017-10-07 01:11:39",
     "attempts": [{"start_time": "2017-10-07 01:13:30", "end_time": "2017-10-09 06:53:12",
                   "detail": [{"ip": "m412", "gpus": ["gpu0", "gpu1"]}]}]}

What becomes a job, and why:

* ``duration`` is the *last* attempt's ``end_time - start_time``: earlier attempts were cut
  short by failures or preemption and rerun, so the last one is the closest thing to the
  job's isolated run time. ``num_gpus`` counts the GPUs listed over all of that attempt's
  ``detail`` entries (a job may span machines).
* Jobs of every status -- ``Pass``, ``Killed`` and ``Failed`` -- are kept by default: a killed or
  failed job occupied its GPUs just the same, and replaying the cluster's load is the point.
  ``statuses=("Pass",)`` keeps only successful jobs.
* *Filtered* (counted in ``meta["filtered"]``, not errors): jobs with no attempts, whose last
  attempt has no ``start_time`` or ``end_time`` (the README documents both as logging gaps or
  still running at snapshot time), with no GPUs, with a zero run time, or of an unwanted status.
* *Bad rows* (errors, or skipped with ``skip_bad_rows``): anything else malformed, e.g. a time
  not in ``YYYY-MM-DD HH:MM:SS``, a missing key, or an attempt that ends before it starts.

``submit_time`` is seconds since the earliest kept submission; ids are 0-based positions in the
file (Philly's own ids are strings) and ``account`` is the virtual cluster. Error lines are the
line on which the job's object starts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from datetime import datetime
from os import PathLike
from pathlib import Path
from typing import Any

from ._rows import RowError, RowReporter, to_time
from .schema import JobSpec, Workload, WorkloadError

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
STATUSES = ("Pass", "Killed", "Failed")
_WS = re.compile(r"[ \t\r\n]*")


class _Filtered(Exception):
    """A well-formed job that is not a replayable GPU job."""


def load_philly(
    path: str | PathLike[str],
    statuses: Sequence[str] = STATUSES,
    skip_bad_rows: bool = False,
) -> Workload:
    path = Path(path)
    rows = RowReporter(path, skip_bad_rows)
    parsed: list[tuple[int, datetime, int, float, str, str]] = []
    for index, line, entry in _array(path):
        try:
            parsed.append((index, *_job(entry, statuses)))
        except _Filtered:
            rows.filtered += 1
        except ValueError as e:
            rows.bad(line, str(e))
    origin = min((p[1] for p in parsed), default=datetime.min)
    jobs = [
        JobSpec(
            id=index,
            submit_time=(submitted - origin).total_seconds(),
            num_gpus=gpus,
            duration=duration,
            user=user,
            account=vc,
        )
        for index, submitted, gpus, duration, user, vc in parsed
    ]
    return rows.workload(jobs, format="philly", origin=str(origin))


def _job(entry: object, statuses: Sequence[str]) -> tuple[datetime, int, float, str, str]:
    """(submitted, GPUs, run time, user, vc) of one job; a :class:`RowError` names the job by
    its ``jobid``, :class:`_Filtered` when it is not one to replay (module docstring)."""
    job = _job_object(entry)
    label = f"job {job['jobid']!r}: "
    try:
        if job.get("status") not in statuses:
            raise _Filtered
        submitted = to_time("submitted_time", job["submitted_time"], TIME_FORMAT)
        gpus, run = _last_run(job["attempts"])
    except RowError as e:
        raise RowError(label + str(e)) from None
    return submitted, gpus, run, str(job.get("user") or ""), str(job.get("vc") or "")


def _job_object(entry: object) -> dict[str, Any]:
    """``entry`` as a job object with the keys every job has: checked before anything else,
    since the job's errors are named by its ``jobid``."""
    if not isinstance(entry, dict):
        raise RowError("a job must be a JSON object")
    for key in ("jobid", "submitted_time", "attempts"):
        if key not in entry:
            raise RowError(f"missing key {key!r}")
    return entry


def _last_run(attempts: object) -> tuple[int, float]:
    """GPUs and seconds of the last attempt (the module docstring says why the last);
    :class:`_Filtered` when it ran on no GPU or for no time."""
    last = _last_attempt(attempts)
    start = to_time("start_time", last["start_time"], TIME_FORMAT)
    end = to_time("end_time", last["end_time"], TIME_FORMAT)
    gpus = _gpu_count(last.get("detail"))
    run = (end - start).total_seconds()
    if run < 0:
        raise RowError(f"last attempt ends before it starts ({start} > {end})")
    if run == 0 or gpus == 0:
        raise _Filtered
    return gpus, run


def _last_attempt(attempts: object) -> dict[str, Any]:
    """The last attempt, if it ran: one with no start or end time is a logging gap or was
    still running at snapshot time, so the job is filtered, not bad."""
    if not isinstance(attempts, list):
        raise RowError("attempts must be a list")
    if not attempts:
        raise _Filtered
    last = attempts[-1]
    if not isinstance(last, dict):
        raise RowError("an attempt must be an object")
    if last.get("start_time") is None or last.get("end_time") is None:
        raise _Filtered
    return last


def _gpu_count(detail: object) -> int:
    if not isinstance(detail, list):
        raise RowError("attempt detail must be a list of {ip, gpus}")
    total = 0
    for machine in detail:
        gpus = machine.get("gpus") if isinstance(machine, dict) else None
        if not isinstance(gpus, list):
            raise RowError("each attempt detail needs a 'gpus' list")
        total += len(gpus)
    return total


def _array(path: Path) -> Iterator[tuple[int, int, object]]:
    """``(index, line, element)`` for each element of the top-level JSON array.

    Decoding one element at a time (rather than ``json.load`` of the whole array) is what
    lets a bad job be reported by its line, and skipped, without losing the others.
    """
    text = path.read_text(encoding="utf-8")
    decoder = json.JSONDecoder()
    pos = _skip_ws(text, 0)
    if not text.startswith("[", pos):
        raise WorkloadError(f"{path}:1: expected a JSON array of jobs")
    pos = _skip_ws(text, pos + 1)
    line, counted, index = 1, 0, 0
    while not text.startswith("]", pos):
        line += text.count("\n", counted, pos)
        counted = pos
        try:
            element, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            # Invalid JSON cannot be resynchronised reliably, so this is fatal even when skipping.
            raise WorkloadError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
        yield index, line, element
        index += 1
        pos = _skip_ws(text, pos)
        if text.startswith(",", pos):
            pos = _skip_ws(text, pos + 1)
        elif not text.startswith("]", pos):
            lineno = text.count("\n", 0, pos) + 1
            raise WorkloadError(f"{path}:{lineno}: expected ',' or ']' after a job")


def _skip_ws(text: str, pos: int) -> int:
    return _WS.match(text, pos).end()  # type: ignore[union-attr]  # \s* always matches
