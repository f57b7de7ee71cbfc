"""Pollux artifact workloads (OSDI'21): ``name,time,application,num_replicas,batch_size``.

Each row is a job arriving at ``time`` seconds to train ``application`` (a directory of the
artifact's ``traces/``); ``num_replicas`` and ``batch_size`` are its *tuned* request, what
the non-adaptive baselines (Tiresias and Optimus+Oracle, "TunedJobs") run it with, while
Pollux chooses both itself. The job's ``num_gpus`` is that request, its ``model`` the
application, and its ``duration`` the seconds it needs alone at the request on the tightest
placement (4 GPUs a node, as published): the *measured* step time of the tuned batch split
(:mod:`blox_slurm.pollux.measured`, the artifact simulator's ground truth), the progress per
step from the gradient noise scale epoch by epoch, until the application's progress target
(:mod:`blox_slurm.pollux.progress`). The tuned batch sizes travel in the workload's
``meta["batch_sizes"]`` (JSON, job id -> batch size; :func:`tuned_batch_sizes` reads them)
and the rows' names in ``meta["names"]``.

The traces are found at ``traces=`` or, by default, at ``../traces`` beside the workload's
directory, as the artifact lays them out (``simulator/workloads/`` and ``simulator/traces/``).
"""

from __future__ import annotations

import csv
import json
from functools import lru_cache
from os import PathLike
from pathlib import Path

from ..pollux.application import GPUS_PER_NODE, Application
from ..pollux.goodput import packed_placement, tuned_config
from ..pollux.measured import MeasuredSteps, step_seconds
from ..pollux.progress import isolated_seconds, rate_at
from ..pollux.runs import PolluxModel
from ..pollux.traces import TraceError, load_application
from ._rows import RowError, RowReporter, csv_rows, to_float, to_int
from .schema import JobSpec, Workload, WorkloadError

COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")


def load_pollux(
    path: str | PathLike[str],
    traces: str | PathLike[str] | None = None,
    skip_bad_rows: bool = False,
) -> Workload:
    """Load a Pollux workload CSV, timing each job with the traces in ``traces``."""
    path = Path(path)
    root = Path(traces) if traces is not None else path.resolve().parent.parent / "traces"
    if not root.is_dir():
        raise WorkloadError(f"{path}: the Pollux traces directory {root} does not exist "
                            "(pass traces=DIR, the artifact's simulator/traces)")
    rows = RowReporter(path, skip_bad_rows)
    jobs: list[JobSpec] = []
    names: dict[int, str] = {}
    batches: dict[int, int] = {}
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        _header(path, next(reader, None))
        for index, line, fields in csv_rows(reader, rows, len(COLUMNS), ",".join(COLUMNS)):
            try:
                job, batch = _job(index, fields, root)
            except ValueError as e:  # RowError, WorkloadError from JobSpec, TraceError
                rows.bad(line, str(e))
                continue
            jobs.append(job)
            names[index], batches[index] = fields[0], batch
    return rows.workload(jobs, format="pollux", traces=str(root),
                         batch_sizes=json.dumps(batches), names=json.dumps(names))


def tuned_batch_sizes(workload: Workload) -> dict[int, int]:
    """Job id -> the tuned batch size of a workload :func:`load_pollux` made."""
    if "batch_sizes" not in workload.meta:
        raise WorkloadError(f"{workload.source or 'workload'}: not a Pollux workload "
                            "(no tuned batch sizes)")
    return {int(k): int(v) for k, v in json.loads(workload.meta["batch_sizes"]).items()}


def pollux_model(workload: Workload) -> PolluxModel:
    """The world's throughput model for a workload :func:`load_pollux` made: its jobs' speed
    depends on placement, batch size and epoch, which no table of rates describes, so the
    trace brings its own model."""
    batches = tuned_batch_sizes(workload)  # fails on any other workload
    traces = workload.meta["traces"]
    apps = {j.model: _application(traces, j.model) for j in workload.jobs}
    return PolluxModel(apps, batches)


def _header(path: Path, header: list[str] | None) -> None:
    if header is None or tuple(h.strip() for h in header) != COLUMNS:
        got = ",".join(header) if header else "nothing"
        raise WorkloadError(f"{path}:1: expected the header {','.join(COLUMNS)}, got {got}")


def _job(index: int, fields: list[str], traces: Path) -> tuple[JobSpec, int]:
    _name, time, application, replicas, batch = fields
    gpus = to_int("num_replicas", replicas, minimum=1)
    batch_size = to_int("batch_size", batch, minimum=1)
    app, steps = _application(str(traces), application)
    if not app.init_batch_size <= batch_size <= app.max_batch_size:
        raise RowError(f"batch_size {batch_size} is outside {application}'s validated "
                       f"{app.init_batch_size}..{app.max_batch_size}")
    config = tuned_config(app, gpus, batch_size)
    step = step_seconds(steps, packed_placement(gpus, GPUS_PER_NODE), config.atomic_bsz,
                        config.accum_steps)
    seconds = isolated_seconds(app, rate_at(app, config, step))
    spec = JobSpec(id=index, submit_time=to_float("time", time), num_gpus=gpus,
                   duration=seconds, model=application)
    return spec, batch_size


@lru_cache(maxsize=64)
def _application(traces: str, application: str) -> tuple[Application, MeasuredSteps]:
    """An application's traces and measured step times, read once per process: a workload
    names each application many times."""
    root = Path(traces)
    if not application or not (root / application).is_dir():
        known = ", ".join(sorted(p.name for p in root.iterdir() if p.is_dir()))
        raise RowError(f"unknown application {application!r}; {root} has {known}")
    try:
        app = Application.of(load_application(root / application))
    except TraceError as e:  # a broken trace fails the whole workload, not one row
        raise WorkloadError(str(e)) from None
    return app, MeasuredSteps(app.trace)
