"""Alibaba PAI GPU trace 2020 (alibaba/clusterdata, ``cluster-trace-gpu-v2020``, NSDI'22).

Followed: ``cluster-trace-gpu-v2020/README.md`` ("pai_job_table", "pai_task_table") and the
column lists in ``data/pai_job_table.header`` and ``data/pai_task_table.header``. Both tables
are CSVs *without* a header (a copy of the ``.header`` line on top is accepted and skipped)::

    pai_job_table.csv:  job_name,inst_id,user,status,start_time,end_time
    pai_task_table.csv: job_name,task_name,inst_num,status,start_time,end_time,
                        plan_cpu,plan_mem,plan_gpu,gpu_type

The path given is the job table; the task table is ``pai_task_table.csv`` beside it, or
``task_table=``. A PAI job is several *tasks* (roles such as ``ps``, ``worker``, ``evaluator``),
each of ``inst_num`` instances that each ask for ``plan_gpu`` percent of one GPU, ``plan_cpu``
percent of a core and ``plan_mem`` GB. Times are seconds on a shifted clock; ``0`` or empty is
unknown (as the trace's own ``analysis/utils.py`` treats it).

What becomes a job, and why:

* The job is replayed as one gang holding all its tasks at once, as PAI launches a job's roles
  together: ``num_gpus`` sums every instance's GPUs, ``cpus`` and ``memory_mb`` every
  instance's ``plan_cpu`` (cores, rounded up) and ``plan_mem``.
* Fractional GPUs (``plan_gpu`` < 100, GPU sharing: the common case, AcmeTrace's
  ``data/cluster_summary.csv`` gives PAI's median request as 0.5 GPU): ``fractional="ceil"``
  (default) gives each instance ``ceil(plan_gpu / 100)`` whole GPUs, what a whole-GPU scheduler
  such as Slurm's ``gres/gpu`` must give it; filtering them instead would keep at most half of
  its GPU jobs. ``fractional="filter"`` keeps only jobs whose every instance asks for whole GPUs.
* ``submit_time``: the job table's ``start_time`` (documented as the *submission* time), in
  seconds since the earliest kept one. ``duration``: the latest ``end_time`` minus the earliest
  ``start_time`` of the job's GPU tasks (task ``start_time`` is the launch, so the wait before
  it is not run time).
* Jobs of status ``Terminated`` and ``Failed`` are kept (a failed job held its GPUs too);
  ``statuses=`` changes that.
* *Filtered* (``meta["filtered"]``): jobs ``Running`` or ``Waiting`` (not finished), with an
  unknown submission time, with no GPU task (CPU-only, or no task rows), whose GPU tasks never
  launched or have not ended, of zero run time, or with fractional GPUs under ``"filter"``.
* *Bad rows*: a wrong number of fields, a time or amount that is not a number, a negative
  amount, a task that ends before it starts. A job with a bad task row is bad too (replaying
  it without that task would replay the wrong job); ``skipped_rows`` counts both.
* Ids are 0-based positions in the job table (``job_name`` is a hash); ``user`` is ``user``.
"""

from __future__ import annotations

import csv
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from math import ceil
from os import PathLike
from pathlib import Path

from ._rows import RowError, RowReporter, csv_rows, to_count, to_float
from .schema import JobSpec, Workload, WorkloadError

JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
TASK_COLUMNS = (
    "job_name", "task_name", "inst_num", "status", "start_time", "end_time",
    "plan_cpu", "plan_mem", "plan_gpu", "gpu_type",
)  # fmt: skip
STATUSES = ("Terminated", "Failed")
FRACTIONAL = ("ceil", "filter")
_UNSET = ("", "nan", "NaN")


class _Filtered(Exception):
    """A well-formed job that is not a replayable GPU job."""


@dataclass(frozen=True, slots=True)
class _Task:
    instances: int
    gpu: float  # percent of one GPU per instance
    cpu: float  # percent of one core per instance
    mem: float  # GB per instance
    start: float | None
    end: float | None


@dataclass(frozen=True, slots=True)
class _Job:
    submit: float
    gpus: int
    run: float
    cpus: int
    memory_mb: int
    user: str


def load_pai(
    path: str | PathLike[str],
    task_table: str | PathLike[str] | None = None,
    statuses: Collection[str] = STATUSES,
    fractional: str = "ceil",
    skip_bad_rows: bool = False,
) -> Workload:
    path = Path(path)
    if fractional not in FRACTIONAL:
        raise WorkloadError(
            f"fractional must be one of {', '.join(FRACTIONAL)}, got {fractional!r}")
    task_path = Path(task_table) if task_table else path.with_name("pai_task_table.csv")
    if task_path.resolve() == path.resolve():
        raise WorkloadError(
            f"{path}: this is the task table; give pai_job_table.csv (its tasks are then read "
            f"from {task_path.name} beside it)"
        )
    if not task_path.is_file():
        raise WorkloadError(
            f"{task_path}: no such file; PAI jobs need their tasks: put pai_task_table.csv "
            f"beside {path.name} or pass task_table="
        )
    task_rows = RowReporter(task_path, skip_bad_rows)
    tasks = _tasks(task_path, task_rows)
    rows = RowReporter(path, skip_bad_rows)
    kept: list[tuple[int, _Job]] = []
    for position, line, fields in _table(path, JOB_COLUMNS, rows):
        try:
            kept.append((position, _job(fields, tasks, statuses, fractional)))
        except _Filtered:
            rows.filtered += 1
        except ValueError as e:
            rows.bad(line, str(e))
    rows.skipped += task_rows.skipped
    origin = min((j.submit for _, j in kept), default=0.0)
    jobs = [
        JobSpec(
            id=position,
            submit_time=j.submit - origin,
            num_gpus=j.gpus,
            duration=j.run,
            user=j.user,
            cpus=j.cpus,
            memory_mb=j.memory_mb,
        )
        for position, j in kept
    ]
    return rows.workload(jobs, format="pai", origin=f"{origin:g}", tasks=str(task_path))


def _table(
    path: Path, columns: tuple[str, ...], rows: RowReporter
) -> Iterator[tuple[int, int, list[str]]]:
    """``(position, line, fields)`` of each data row of a header-less table; a first row that
    is the ``.header`` file's column list is skipped (positions count data rows only)."""
    with path.open(encoding="utf-8", newline="") as f:
        header = 0
        for index, line, fields in csv_rows(csv.reader(f), rows, len(columns), ",".join(columns)):
            if index == 0 and tuple(fields) == columns:
                header = 1
                continue
            yield index - header, line, fields


def _tasks(path: Path, rows: RowReporter) -> dict[str, list[_Task] | None]:
    """Each job's tasks; ``None`` for a job one of whose task rows is bad (and was skipped)."""
    tasks: dict[str, list[_Task] | None] = {}
    for _, line, fields in _table(path, TASK_COLUMNS, rows):
        try:
            task = _task(fields)
        except ValueError as e:
            rows.bad(line, str(e))
            tasks[fields[0]] = None
            continue
        known = tasks.setdefault(fields[0], [])
        if known is not None:
            known.append(task)
    return tasks


def _task(fields: list[str]) -> _Task:
    _, name, inst_num, _, start, end, cpu, mem, gpu, _ = fields
    task = _Task(
        instances=to_count("inst_num", inst_num),
        gpu=_amount("plan_gpu", gpu),
        cpu=_amount("plan_cpu", cpu),
        mem=_amount("plan_mem", mem),
        start=_moment("start_time", start),
        end=_moment("end_time", end),
    )
    if task.start is not None and task.end is not None and task.end < task.start:
        raise RowError(f"task {name!r}: end_time {end} is before start_time {start}")
    return task


def _job(
    fields: list[str],
    tasks: dict[str, list[_Task] | None],
    statuses: Collection[str],
    fractional: str,
) -> _Job:
    """The job of one job-table row, or :class:`_Filtered` (module docstring)."""
    name, _, user, status, submitted, _ = fields
    submit = _moment("start_time", submitted)
    own = tasks.get(name, [])
    if own is None:
        raise RowError(f"job {name}: one of its rows in the task table is malformed")
    if status not in statuses or submit is None:
        raise _Filtered
    gpu_tasks = [t for t in own if t.gpu > 0 and t.instances > 0]
    starts = [t.start for t in gpu_tasks if t.start is not None]
    ends = [t.end for t in gpu_tasks if t.end is not None]
    if not gpu_tasks or len(starts) < len(gpu_tasks) or len(ends) < len(gpu_tasks):
        raise _Filtered
    if fractional == "filter" and any(t.gpu % 100 for t in gpu_tasks):
        raise _Filtered
    run = max(ends) - min(starts)
    if run == 0:
        raise _Filtered
    return _Job(
        submit=submit,
        gpus=sum(t.instances * ceil(t.gpu / 100) for t in gpu_tasks),
        run=run,
        cpus=ceil(sum(t.instances * t.cpu for t in own) / 100),
        memory_mb=round(sum(t.instances * t.mem for t in own) * 1024),
        user=user,
    )


def _amount(field: str, text: str) -> float:
    """A requested amount; empty (a CPU-only task's ``plan_gpu``) is none."""
    return 0.0 if text in _UNSET else to_float(field, text)


def _moment(field: str, text: str) -> float | None:
    """Seconds on the trace's clock; ``None`` when unknown (empty or ``0``)."""
    if text in _UNSET:
        return None
    return to_float(field, text) or None
