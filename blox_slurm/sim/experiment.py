"""Experiments: one simulation described by plain data, so it can run in a worker process.

``compare`` and ``sweep`` build a grid of :class:`Experiment` values (compositions x loads)
and :func:`run_all` runs them in a process pool. Each worker rebuilds its composition from the
normalized config and regenerates (or reloads) the workload from its spec; the generator is
deterministic for a seed, so every composition at one load sees the identical job stream.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from ..core import registry
from ..core.throughput import ThroughputModel
from ..loading import build
from ..workloads import format_of, generate, load_workload, loader_options
from ..workloads.runnable import Unrunnable, handle_unrunnable
from ..workloads.schema import Workload
from ..workloads.throughput_spec import ThroughputSpec
from .config import ClusterSpec, SimConfig
from .records import JobRecord, RunResult
from .simulator import ProgressFn, Simulator

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor


class WorkloadSpec(BaseModel):
    """A trace file (``path``, ``format``, the loader's ``options``) or, without a path,
    generator parameters; ``unrunnable`` says what becomes of jobs that make no progress on
    some GPU type of the cluster (:mod:`blox_slurm.workloads.runnable`)."""

    model_config = ConfigDict(extra="forbid")
    path: str | None = None
    format: str | None = None
    skip_bad_rows: bool = False
    options: dict[str, Any] = Field(default_factory=dict)
    unrunnable: Unrunnable = "error"
    generator: dict[str, Any] = Field(default_factory=dict)

    @property
    def is_gavel(self) -> bool:
        return self.format == "gavel" or (self.format is None and str(self.path).endswith(".trace"))

    def load(self, **opts: Any) -> Workload:
        if self.path is None:
            return generate(**self.generator)
        user = loader_options(format_of(self.path, self.format), self.options)
        return load_workload(self.path, self.format, self.skip_bad_rows, **user, **opts)


class Experiment(BaseModel):
    model_config = ConfigDict(extra="forbid")
    composition: dict[str, Any]
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    cluster: str = "gpu:4x32"
    sim: SimConfig = Field(default_factory=SimConfig)
    throughput: ThroughputSpec = Field(default_factory=ThroughputSpec)
    policy_paths: list[str] = Field(default_factory=list)
    label: dict[str, Any] = Field(default_factory=dict)


def prepare(exp: Experiment) -> tuple[Workload, ThroughputModel, int]:
    """The workload ``exp`` simulates, the throughput model it runs on, and how many of the
    trace's jobs made no progress on some GPU type (dropped or restricted as the workload
    spec says; under ``error`` they fail here, before any simulation). The command line calls
    it up front too, so a bad trace fails once, not in every worker."""
    throughput = exp.throughput.build()
    # A Gavel trace's durations come from the same measured table the simulator runs on.
    gavel = exp.workload.is_gavel and exp.throughput.kind == "gavel"
    workload = exp.workload.load(**({"throughputs": throughput} if gavel else {}))
    if workload.meta.get("format") == "pollux":  # a Pollux trace brings its own model
        from ..workloads.pollux import pollux_model  # SciPy and the traces: only for Pollux

        throughput = pollux_model(workload)
    gpus: dict[str, int] = {}
    for t, per, nodes in ClusterSpec.parse(exp.cluster).groups:
        gpus[t] = gpus.get(t, 0) + per * nodes
    workload, unrunnable = handle_unrunnable(workload, throughput, list(gpus),
                                             exp.workload.unrunnable, gpus)
    return workload, throughput, unrunnable


def run(exp: Experiment, progress: ProgressFn | None = None) -> RunResult:
    for path in exp.policy_paths:
        registry.load_policy_file(path)
    comp = build(exp.composition)
    workload, throughput, unrunnable = prepare(exp)
    cluster = ClusterSpec.parse(exp.cluster)
    result = Simulator(workload, comp, cluster.build(), exp.sim, throughput).run(progress)
    # the world's timing travels with the results: figures are only comparable under the same
    timing = {k: getattr(exp.sim, k) for k in ("round_duration", "start_latency", "restart_cost")}
    params: dict[str, Any] = {"composition": comp.name, "cluster": str(cluster),
                              "jobs": len(workload.jobs), **timing, **exp.label}
    if exp.workload.unrunnable != "error":  # the count is reported, 0 included
        params.update(unrunnable=exp.workload.unrunnable, unrunnable_jobs=unrunnable)
    if exp.workload.skip_bad_rows:
        params["skipped_rows"] = workload.skipped_rows
    return replace(result, params=params)


def worker_pool(processes: int) -> ProcessPoolExecutor:
    """A pool whose workers start from a clean server process (forkserver), not forked from
    this one: a command showing progress has threads (Rich's refresh, a controller's), and a
    fork taken while another thread holds a lock can deadlock the child (Python 3.12+ warns;
    3.14 made forkserver the default). Workers import what they run, so it must be a module
    function. Imported here, not at start-up: a single run never needs multiprocessing."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=processes,
                               mp_context=multiprocessing.get_context("forkserver"))


def run_all(exps: list[Experiment], processes: int | None = None,
            on_done: Callable[[Experiment], None] | None = None) -> list[RunResult]:
    """Run experiments in a process pool, results in the order of ``exps``; ``processes=1``
    runs inline. ``on_done`` hears of each experiment as it finishes (a progress display)."""
    n = processes or min(len(exps), os.cpu_count() or 1)
    done = on_done or (lambda exp: None)
    if n <= 1 or len(exps) == 1:
        results = []
        for e in exps:
            results.append(run(e))
            done(e)
        return results
    from concurrent.futures import as_completed

    with worker_pool(n) as pool:
        futures = {pool.submit(run, e): i for i, e in enumerate(exps)}
        for fut in as_completed(futures):
            fut.result()  # a failed run fails the whole comparison, as before
            done(exps[futures[fut]])
        return [fut.result() for fut in sorted(futures, key=futures.__getitem__)]


def save_runs(results: list[RunResult], path: str | Path) -> Path:
    """All runs with their per-job records, for ``blox-slurm plot`` to re-render later."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    data = [{
        "name": r.name, "total_gpus": r.total_gpus, "params": r.params,
        "measured": sorted(r.measured) if r.measured is not None else None,
        "unfinished": list(r.unfinished), "utilization": [list(p) for p in r.utilization],
        "responsiveness_offset": r.responsiveness_offset,
        "jobs": [[j.id, j.submit_time, j.num_gpus, j.duration, j.first_start, j.finish,
                  j.preemptions, j.gpu_seconds, j.model, j.user] for j in r.jobs],
    } for r in results]
    out.write_text(json.dumps(data))
    return out


def load_runs(path: str | Path) -> list[RunResult]:
    try:
        data = json.loads(Path(path).read_text())
        return [RunResult(
            name=d["name"], total_gpus=int(d["total_gpus"]),
            jobs=tuple(JobRecord(*row) for row in d["jobs"]),
            utilization=tuple((float(t), int(b)) for t, b in d["utilization"]),
            measured=frozenset(d["measured"]) if d["measured"] is not None else None,
            unfinished=tuple(d["unfinished"]), params=dict(d["params"]),
            responsiveness_offset=float(d.get("responsiveness_offset", 0.0)),
        ) for d in data]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a runs file written by blox-slurm ({exc})") from None
