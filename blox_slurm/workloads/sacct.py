"""Slurm accounting history (``sacct --parsable2``): replay a cluster's own past.

An admin dumps the jobs of a period with::

    sacct -a -X --parsable2 --starttime=2024-01-01 --endtime=2024-02-01 \\
        --format=JobID,User,Account,Partition,Submit,Start,End,Elapsed,AllocTRES,ReqTRES,State \\
        > history.sacct

(``-a`` all users, ``-X`` allocations only -- no steps; ``--parsable2`` ``|``-separated with a
header and no trailing ``|``). Columns are found by header name, so more may be added or the
order changed; ``JobID``, ``Submit``, ``Start``, ``End`` and one of ``AllocTRES``/``ReqTRES``
are required, ``User``, ``Account``, ``Partition`` are used when present.

What becomes a job, and why:

* ``num_gpus`` is ``gres/gpu=N`` from ``AllocTRES`` (what the job really held), else from
  ``ReqTRES``; with only typed entries (``gres/gpu:a100=2``) their sum. ``cpu=`` and ``mem=``
  fill ``cpus`` and ``memory_mb``.
* ``duration = End - Start`` (the run as it happened: the best estimate of its isolated run
  time Slurm has); ``submit_time`` is seconds since the earliest kept ``Submit``.
* *Filtered* (``meta["filtered"]``, not errors): job steps (``123.batch``, ``123.0``; present
  without ``-X``), jobs that never started (``Start`` ``Unknown``/``None``: pending or
  cancelled while queued), jobs still running (``End`` ``Unknown``), jobs without GPUs, jobs
  of zero run time, and jobs outside ``partition`` when one is given.
* Ids are 0-based positions of the kept jobs in the file (array and heterogeneous job ids such
  as ``123_4`` or ``123+1`` are not integers).
"""

from __future__ import annotations

from datetime import datetime
from os import PathLike
from pathlib import Path

from ._rows import RowError, RowReporter, to_int, to_time
from .schema import JobSpec, Workload, WorkloadError

SACCT_COMMAND = (
    "sacct -a -X --parsable2 --starttime=YYYY-MM-DD --endtime=YYYY-MM-DD "
    "--format=JobID,User,Account,Partition,Submit,Start,End,Elapsed,AllocTRES,ReqTRES,State"
)
REQUIRED = ("JobID", "Submit", "Start", "End")
UNSET = ("", "Unknown", "None")
_MEM_MB = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


class _Filtered(Exception):
    """A well-formed row that is not a finished GPU job."""


def load_sacct(
    path: str | PathLike[str],
    partition: str | None = None,
    skip_bad_rows: bool = False,
) -> Workload:
    path = Path(path)
    rows = RowReporter(path, skip_bad_rows)
    parsed: list[tuple[datetime, float, dict[str, int], str, str]] = []
    with path.open(encoding="utf-8", newline="") as f:
        index = _header(path, f.readline())
        for line_no, line in enumerate(f, start=2):
            line = line.rstrip("\r\n")
            if not line:
                continue
            try:
                parsed.append(_job(line.split("|"), index, partition))
            except _Filtered:
                rows.filtered += 1
            except ValueError as e:
                rows.bad(line_no, str(e))
    origin = min((p[0] for p in parsed), default=datetime.min)
    jobs = [
        JobSpec(
            id=i,
            submit_time=(submit - origin).total_seconds(),
            num_gpus=tres["gpu"],
            duration=run,
            user=user,
            account=account,
            cpus=tres["cpu"],
            memory_mb=tres["mem"],
        )
        for i, (submit, run, tres, user, account) in enumerate(parsed)
    ]
    return rows.workload(jobs, format="sacct", origin=origin.isoformat())


def _header(path: Path, line: str) -> dict[str, int]:
    names = line.rstrip("\r\n").split("|")
    missing = [n for n in REQUIRED if n not in names]
    if "AllocTRES" not in names and "ReqTRES" not in names:
        missing.append("AllocTRES or ReqTRES")
    if missing:
        raise WorkloadError(
            f"{path}:1: not a `sacct --parsable2` header (missing {', '.join(missing)}); "
            f"produce the file with: {SACCT_COMMAND}"
        )
    return {name: i for i, name in enumerate(names)}


def _job(
    fields: list[str], index: dict[str, int], partition: str | None
) -> tuple[datetime, float, dict[str, int], str, str]:
    if len(fields) != len(index):
        raise RowError(f"expected {len(index)} '|'-separated fields, got {len(fields)}")

    def get(name: str) -> str:
        i = index.get(name)
        return fields[i].strip() if i is not None else ""

    job_id = get("JobID")
    if not job_id:
        raise RowError("empty JobID")
    if "." in job_id or get("Start") in UNSET or get("End") in UNSET:
        raise _Filtered
    if partition is not None and get("Partition") != partition:
        raise _Filtered
    submit = to_time("Submit", get("Submit"))
    start = to_time("Start", get("Start"))
    end = to_time("End", get("End"))
    run = (end - start).total_seconds()
    if run < 0:
        raise RowError(f"job {job_id}: End {end.isoformat()} is before Start {start.isoformat()}")
    tres = parse_tres(get("AllocTRES") or get("ReqTRES"))
    if run == 0 or tres["gpu"] == 0:
        raise _Filtered
    return submit, run, tres, get("User"), get("Account")


def parse_tres(text: str) -> dict[str, int]:
    """``{"gpu", "cpu", "mem"}`` (mem in MB) from a TRES string like
    ``billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1``."""
    gpu_total: int | None = None
    gpu_typed = cpus = mem = 0
    for item in filter(None, text.split(",")):
        name, sep, value = item.partition("=")
        if not sep:
            raise RowError(f"TRES entry {item!r} is not name=value")
        if name == "gres/gpu":
            gpu_total = to_int(name, value, minimum=0)
        elif name.startswith("gres/gpu:"):
            gpu_typed += to_int(name, value, minimum=0)
        elif name == "cpu":
            cpus = to_int(name, value, minimum=0)
        elif name == "mem":
            mem = _megabytes(value)
    return {"gpu": gpu_total if gpu_total is not None else gpu_typed, "cpu": cpus, "mem": mem}


def _megabytes(value: str) -> int:
    unit = value[-1:].upper()
    number = value[:-1] if unit in _MEM_MB else value
    try:
        amount = float(number)
    except ValueError:
        raise RowError(f"mem must be like 16G or 4000M, got {value!r}") from None
    return round(amount * _MEM_MB.get(unit, 1))
