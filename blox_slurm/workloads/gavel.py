"""Gavel ``.trace`` files: the Philly-derived job streams Gavel (OSDI'20) evaluates on.

One job a line, 7 tab-separated fields::

    job_type  command  num_steps_arg  needs_data_dir  total_steps  arrival_time_s  scale_factor

A trace gives work in *steps*, not seconds, so the duration needs a throughput: ``duration =
total_steps / steps_per_second(job_type, scale_factor)`` on the reference GPU type (V100 by
default), consolidated -- exactly the definition of ``JobSpec.duration``, so a simulator using
the same :class:`GavelThroughput` runs each job at rate 1.0 at its request. The job's model is
its ``job_type``; ids are the 0-based line index, so they stay stable when bad rows are skipped.
The command is never executed or interpreted.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path

from ._rows import RowError, RowReporter, to_float, to_int
from .gavel_throughput import GavelThroughput
from .schema import JobSpec, Workload, WorkloadError

FIELDS = 7
THROUGHPUTS_FILE = "simulation_throughputs.json"


def load_gavel(
    path: str | PathLike[str],
    throughputs: GavelThroughput | str | PathLike[str] | None = None,
    reference_type: str = "v100",
    skip_bad_rows: bool = False,
) -> Workload:
    """Load a Gavel trace.

    ``throughputs`` is a :class:`GavelThroughput` or the path of its JSON; by default the
    ``simulation_throughputs.json`` beside the trace, as Gavel's repository lays them out
    (``reference_type`` applies only when the JSON is loaded here).
    """
    path = Path(path)
    thr = _throughputs(path, throughputs, reference_type)
    rows = RowReporter(path, skip_bad_rows)
    jobs: list[JobSpec] = []
    with path.open(encoding="utf-8", newline="") as f:
        for line_no, line in enumerate(f, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            try:
                jobs.append(_job(line_no - 1, line.split("\t"), thr))
            except ValueError as e:  # RowError, or WorkloadError from JobSpec / the model
                rows.bad(line_no, str(e))
    return rows.workload(
        jobs, reference_type=thr.reference_type, throughputs=thr.source, format="gavel"
    )


def _job(job_id: int, fields: list[str], thr: GavelThroughput) -> JobSpec:
    if len(fields) != FIELDS:
        raise RowError(f"expected {FIELDS} tab-separated fields, got {len(fields)}")
    job_type, _command, _steps_arg, needs_data, steps, arrival, scale = fields
    if needs_data.strip() not in ("0", "1"):
        raise RowError(f"needs_data_dir must be 0 or 1, got {needs_data!r}")
    thr.require(job_type)
    total_steps = to_int("total_steps", steps, minimum=1)
    gpus = to_int("scale_factor", scale, minimum=1)
    speed = thr.steps_per_second(job_type, gpus)
    if speed == 0.0:
        raise RowError(
            f"{job_type!r} on {gpus} GPUs does not run on {thr.reference_type} (throughput 0)"
        )
    return JobSpec(
        id=job_id,
        submit_time=to_float("arrival_time_s", arrival),
        num_gpus=gpus,
        duration=total_steps / speed,
        model=job_type,
    )


def _throughputs(
    trace: Path,
    throughputs: GavelThroughput | str | PathLike[str] | None,
    reference_type: str,
) -> GavelThroughput:
    if isinstance(throughputs, GavelThroughput):
        return throughputs
    source = Path(throughputs) if throughputs is not None else trace.parent / THROUGHPUTS_FILE
    if not source.exists():
        raise WorkloadError(
            f"{trace}: a Gavel trace needs measured throughputs to turn steps into seconds; "
            f"{source} does not exist (pass throughputs=...)"
        )
    return GavelThroughput(source, reference_type=reference_type)
