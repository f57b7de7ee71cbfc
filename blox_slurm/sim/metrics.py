"""Figures of merit for one run, computed only from a :class:`~blox_slurm.sim.records.RunResult`.

Why only from the records: the simulator and the controller's store (after an emulator or a
real run) both produce ``RunResult``; computing every figure here, the same way, is what makes
a simulated JCT and an emulated one comparable.

Definitions (all times in seconds; "measured" = ``result.measured``, ``None`` meaning every job):

* **JCT** ``finish - submit_time``; **responsiveness** ``first_start - submit_time``.
* **Percentiles** use linear interpolation between order statistics (numpy's default, Hyndman
  and Fan type 7): p50 of ``[1, 2, 3, 4]`` is 2.5, p99 of ``[1, 2, 3]`` is 2.98.
* **Makespan** last finish minus first submit, both among the measured jobs.
* **Queueing delay** ``JCT - gpu_seconds / num_gpus``: the wall time a job spent *not holding
  GPUs* (waiting before its first start and after each preemption). Restart/checkpoint time is
  spent holding GPUs, so it is not queueing; nor is a slowdown from a poor placement. It is
  *not* ``JCT - duration``, which would count those slowdowns as queueing. With elastic
  allocation (Optimus may give a job more GPUs than it asked for) ``gpu_seconds / num_gpus``
  overstates the time held, so the delay is clamped at 0.
* **GPU utilization** the time-weighted mean of the ``result.utilization`` step function over
  ``[first submit, last finish]`` of the measured jobs, divided by ``total_gpus`` (a fraction,
  0..1). It counts every busy GPU in that interval, measured job or not: it is the cluster's
  utilization while the measured jobs were in the system.
* **Finish-time fairness** (Themis): ``rho = JCT / (duration * N)``, where ``duration * N`` is the
  job's JCT on a dedicated ``1/N`` share of the cluster. Estimator of ``N``: the time average, over
  the job's own lifetime ``[submit, finish]``, of the number of jobs in the system (submitted, not
  yet finished; the job itself included, so ``N >= 1``), counted over every job that has a
  record, measured or not. Jobs still active when the run was cut off have no record and are
  not counted, so ``N`` is a lower bound in a truncated run. ``rho`` is undefined (``None``) when
  ``duration <= 0`` or ``JCT <= 0``. ``rho <= 1`` means the job did at least as well as with its
  fair share; Themis minimizes the maximum.
* **Unfinished** ids in ``result.unfinished`` that are measured (all of them when
  ``measured is None``): a non-zero count means the figures above are biased low.

Everything is vectorized with numpy: 100,000 jobs summarize in well under 0.2 s.
"""

from __future__ import annotations

import csv
import json
import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from itertools import chain
from pathlib import Path

import numpy as np
import numpy.typing as npt

from .records import JobRecord, RunResult

Array = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Metrics:
    """One run's figures; ``None`` where a figure is undefined (no measured job, zero span)."""

    name: str
    count: int
    avg_jct: float | None
    p50_jct: float | None
    p95_jct: float | None
    p99_jct: float | None
    makespan: float | None
    avg_responsiveness: float | None
    p50_responsiveness: float | None
    p99_responsiveness: float | None
    avg_queueing_delay: float | None
    utilization: float | None
    preemptions: int
    preemptions_per_job: float | None
    avg_fairness: float | None  # mean rho over jobs where rho is defined
    max_fairness: float | None
    unfair_fraction: float | None  # share of defined rho above 1
    unfinished: int

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def measured_jobs(result: RunResult) -> tuple[JobRecord, ...]:
    """The job records inside the measurement window, in record order."""
    if result.measured is None:
        return result.jobs
    window = result.measured
    return tuple(j for j in result.jobs if j.id in window)


_FIELDS = (
    "id",
    "submit_time",
    "first_start",
    "finish",
    "duration",
    "gpu_seconds",
    "num_gpus",
    "preemptions",
)
_ROW = operator.attrgetter(*_FIELDS)


def _columns(jobs: Sequence[JobRecord], responsiveness_offset: float = 0.0
             ) -> dict[str, Array]:
    """The records as numpy columns, plus the per-job derived times: the one Python-level pass
    over the jobs (``fromiter`` over flattened ``attrgetter`` tuples, ~3x ``np.array``'s speed)."""
    flat = chain.from_iterable(map(_ROW, jobs))
    rows = np.fromiter(flat, dtype=np.float64, count=len(jobs) * len(_FIELDS))
    rows = rows.reshape(len(jobs), len(_FIELDS))
    c = {name: rows[:, i] for i, name in enumerate(_FIELDS)}
    c["jct"] = c["finish"] - c["submit_time"]
    c["responsiveness"] = c["first_start"] - c["submit_time"] + responsiveness_offset
    gpus = c["num_gpus"]
    held = np.divide(c["gpu_seconds"], gpus, out=np.zeros_like(gpus), where=gpus > 0)
    c["queueing"] = np.maximum(0.0, c["jct"] - held)
    return c


def _measured_mask(result: RunResult, ids: Array) -> npt.NDArray[np.bool_]:
    if result.measured is None:
        return np.ones(ids.shape, dtype=bool)
    window = np.fromiter(result.measured, dtype=np.float64, count=len(result.measured))
    return np.isin(ids, window)


def _step_integral(times: Array, values: Array, points: Array) -> Array:
    """``F(x) = integral of the step function from -inf to x`` at each of ``points``.

    The step function is 0 before ``times[0]`` and ``values[k]`` on ``[times[k], times[k+1])``;
    at duplicate times the later value wins (its predecessor's segment has zero width).
    """
    if times.size == 0:
        return np.zeros_like(points)
    cumulative = np.concatenate(([0.0], np.cumsum(values[:-1] * np.diff(times))))
    k = np.searchsorted(times, points, side="right") - 1
    inside = k >= 0
    kk = np.where(inside, k, 0)
    return np.where(inside, cumulative[kk] + values[kk] * (points - times[kk]), 0.0)


def _sorted_step(points: Sequence[tuple[float, float]]) -> tuple[Array, Array]:
    flat = np.fromiter(chain.from_iterable(points), dtype=np.float64, count=2 * len(points))
    pairs = flat.reshape(-1, 2)
    order = np.argsort(pairs[:, 0], kind="stable")
    return pairs[order, 0], pairs[order, 1]


def _mean_over(times: Array, values: Array, start: Array, end: Array) -> Array:
    """Time-average of the step function over each ``[start, end]`` (NaN where empty)."""
    width = end - start
    total = _step_integral(times, values, end) - _step_integral(times, values, start)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(width > 0, total / width, np.nan)


def _rho(c: Mapping[str, Array]) -> Array:
    """``rho`` per job of the columns ``c`` (all jobs with a record), NaN where undefined."""
    n = c["jct"].size
    # n(t): +1 at each submit, -1 at each finish. Finishes sort before submits at equal times,
    # so a job that ends exactly when another arrives is not counted as contending with it.
    times = np.concatenate((c["finish"], c["submit_time"]))
    deltas = np.concatenate((-np.ones(n), np.ones(n)))
    order = np.argsort(times, kind="stable")
    in_system = _mean_over(times[order], np.cumsum(deltas[order]), c["submit_time"], c["finish"])
    defined = (c["duration"] > 0) & (c["jct"] > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(defined, c["jct"] / (c["duration"] * in_system), np.nan)


def _optional(values: Array) -> list[float | None]:
    return [None if math.isnan(v) else v for v in values.tolist()]


def fairness(result: RunResult) -> dict[int, float | None]:
    """Themis' finish-time fairness ``rho`` of every job with a record (see module docstring)."""
    rho = _optional(_rho(_columns(result.jobs)))
    return {j.id: r for j, r in zip(result.jobs, rho, strict=True)}


def _stat(values: Array, q: float | None = None) -> float | None:
    if values.size == 0:
        return None
    return float(values.mean() if q is None else np.percentile(values, q))


def summarize(result: RunResult) -> Metrics:
    """Every figure in the module docstring, over the measured jobs."""
    window = result.measured
    unfinished = sum(1 for i in result.unfinished if window is None or i in window)
    everyone = _columns(result.jobs, result.responsiveness_offset)
    rho = _rho(everyone)
    c, count = everyone, len(result.jobs)  # every job measured: no masked copy (100 MB at 1M)
    if window is not None:
        mask = _measured_mask(result, everyone["id"])
        c = {name: column[mask] for name, column in everyone.items()}
        count, rho = int(mask.sum()), rho[mask]

    makespan = utilization = None
    if count:
        first, last = float(c["submit_time"].min()), float(c["finish"].max())
        makespan = last - first
        if last > first and result.total_gpus > 0:
            times, busy = _sorted_step(result.utilization)
            mean = _mean_over(times, busy, np.array([first]), np.array([last]))
            utilization = float(mean[0]) / result.total_gpus

    rho = rho[~np.isnan(rho)]
    jct, resp = c["jct"], c["responsiveness"]
    preemptions = int(c["preemptions"].sum())
    return Metrics(
        name=result.name,
        count=count,
        avg_jct=_stat(jct),
        p50_jct=_stat(jct, 50),
        p95_jct=_stat(jct, 95),
        p99_jct=_stat(jct, 99),
        makespan=makespan,
        avg_responsiveness=_stat(resp),
        p50_responsiveness=_stat(resp, 50),
        p99_responsiveness=_stat(resp, 99),
        avg_queueing_delay=_stat(c["queueing"]),
        utilization=utilization,
        preemptions=preemptions,
        preemptions_per_job=preemptions / count if count else None,
        avg_fairness=_stat(rho),
        max_fairness=float(rho.max()) if rho.size else None,
        unfair_fraction=float((rho > 1).mean()) if rho.size else None,
        unfinished=unfinished,
    )


def utilization_timeline(
    result: RunResult, bins: int, start: float | None = None, end: float | None = None
) -> tuple[list[float], list[float]]:
    """``(bin_edges, utilization)``: mean busy fraction of the cluster in each of ``bins`` equal
    bins over ``[start, end]`` (default: first submit to last finish of *all* jobs, the whole
    run), so ``len(bin_edges) == bins + 1``. Empty lists when the run has no extent."""
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    times, busy = _sorted_step(result.utilization)
    if start is None:
        start = min((j.submit_time for j in result.jobs), default=times[0] if times.size else 0.0)
    if end is None:
        end = max((j.finish for j in result.jobs), default=times[-1] if times.size else 0.0)
    if end <= start or result.total_gpus <= 0:
        return [], []
    edges = np.linspace(start, end, bins + 1)
    means = _mean_over(times, busy, edges[:-1], edges[1:]) / result.total_gpus
    return edges.tolist(), means.tolist()


def summary_row(result: RunResult, metrics: Metrics | None = None) -> dict[str, object]:
    """One results-table row: the run's scalar ``params`` (policy, load, seed...) and its metrics.

    Non-scalar params are left out: a CSV cell cannot hold them and they are in the JSON."""
    m = metrics if metrics is not None else summarize(result)
    row: dict[str, object] = {
        k: v for k, v in result.params.items() if isinstance(v, str | int | float | bool)
    }
    row.update(m.as_dict())
    row["wall_seconds"] = result.wall_seconds
    return row


def job_rows(result: RunResult) -> list[dict[str, object]]:
    """One row per job record: its fields, derived times, ``rho`` and whether it is measured."""
    c = _columns(result.jobs, result.responsiveness_offset)
    derived = zip(
        c["jct"].tolist(),
        c["responsiveness"].tolist(),
        c["queueing"].tolist(),
        _optional(_rho(c)),
        _measured_mask(result, c["id"]).tolist(),
        strict=True,
    )
    names = [f.name for f in fields(JobRecord)]
    rows = []
    for j, (jct, resp, queueing, rho, measured) in zip(result.jobs, derived, strict=True):
        row: dict[str, object] = {n: getattr(j, n) for n in names}
        row.update(
            jct=jct, responsiveness=resp, queueing_delay=queueing, fairness=rho, measured=measured
        )
        rows.append(row)
    return rows


def _jsonable(value: object) -> object:
    # JSON has no NaN/inf: write null rather than a file other tools refuse to parse.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(metrics_list: Iterable[Metrics | Mapping[str, object]], path: str | Path) -> Path:
    """A JSON array, one object per run (``Metrics`` or an already-built row)."""
    items = [m.as_dict() if isinstance(m, Metrics) else dict(m) for m in metrics_list]
    clean = [{k: _jsonable(v) for k, v in item.items()} for item in items]
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(clean, indent=2) + "\n")
    return out


def write_csv(rows: Iterable[Mapping[str, object]], path: str | Path) -> Path:
    """A CSV with the union of the rows' keys as header, in first-seen order; ``None`` -> empty."""
    materialized = list(rows)
    header: dict[str, None] = {}
    for row in materialized:
        header.update(dict.fromkeys(row))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(header), restval="")
        writer.writeheader()
        for row in materialized:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return out
