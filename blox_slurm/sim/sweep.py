"""A sweep: compositions x loads x seeds x traces x cluster shapes, from one TOML file.

A sweep is planned once into *cells*, each a plain :class:`Experiment`, and written to the
output directory as ``sweep.json``. Everything after that reads the plan, never the TOML: a
cell runs the same way in a local process pool and in a Slurm array task on another node,
and a sweep resumed after its file changed cannot mix the old plan's results with the new.

A cell's id is a hash of its experiment, so a finished cell is recognised by its result file
(``cells/<id>.json``, written atomically once the run ends) and never run twice; a cell whose
parameters changed has another id and runs afresh.

Why a cell per (composition, load, seed, trace, cluster) and not one per composition: cells of
similar cost are what a process pool and a job array balance well, and a failed cell costs one
run to redo.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..core import registry
from ..core.tomlfile import read_toml
from ..loading import load
from ..workloads.runnable import Unrunnable
from ..workloads.schema import WorkloadError
from ..workloads.throughput_spec import ThroughputSpec
from .config import MODES, ClusterSpec, SimConfig, mode_settings
from .experiment import Experiment, WorkloadSpec, load_runs, prepare, run, save_runs
from .options import measure_window, sim_table
from .records import RunResult

PLAN = "sweep.json"
CELLS = "cells"


class SweepError(ValueError):
    """A sweep file or directory that cannot be used, with what to fix."""


class Unfinished(RuntimeError):
    """Cells that failed or have not run yet: the sweep is incomplete."""


class Synthetic(BaseModel):
    """The generated workload of every load x seed cell (Blox's Poisson arrivals)."""

    model_config = ConfigDict(extra="forbid")
    jobs: int = Field(default=5000, gt=0)
    measure: str | None = Field(default=None, description="FIRST:END, 'all', or Blox's default")
    gpu_demand: str = "single"

    def window(self) -> tuple[int, int] | None:
        return measure_window(self.measure, self.jobs)


class TraceOptions(BaseModel):
    """How the ``traces`` of a sweep are read: ``options`` go to the loader
    (:mod:`blox_slurm.workloads.loader_options`), ``unrunnable`` says what becomes of jobs
    that make no progress on some GPU type (:mod:`blox_slurm.workloads.runnable`)."""

    model_config = ConfigDict(extra="forbid")
    format: str | None = None
    skip_bad_rows: bool = False
    throughputs: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    unrunnable: Unrunnable = "error"


class SweepSpec(BaseModel):
    """A sweep file's content. Paths are relative to the file."""

    model_config = ConfigDict(extra="forbid")
    name: str = "sweep"
    compositions: list[str] = Field(min_length=1)
    loads: list[float] = Field(default_factory=list)
    seeds: list[int] = Field(default_factory=lambda: [0])
    traces: list[str] = Field(default_factory=list)
    clusters: list[str] = Field(default_factory=lambda: ["gpu:4x32"])
    workload: Synthetic = Field(default_factory=Synthetic)
    trace: TraceOptions = Field(default_factory=TraceOptions)
    mode: str | None = Field(default=None, description="a world preset, as simulate --mode")
    simulation: dict[str, Any] = Field(default_factory=dict)
    policy_paths: list[str] = Field(default_factory=list)

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, mode: str | None) -> str | None:
        if mode is not None and mode not in MODES:
            raise ValueError(f"must be one of {', '.join(MODES)}")
        return mode

    @field_validator("loads")
    @classmethod
    def _positive(cls, loads: list[float]) -> list[float]:
        if any(x <= 0 for x in loads):
            raise ValueError("every load (jobs/hour) must be positive")
        return loads


def read_spec(path: Path) -> tuple[SweepSpec, Path]:
    """The sweep file at ``path`` and the directory its relative paths start from."""
    try:
        spec = SweepSpec.model_validate(read_toml(path, SweepError, "sweep file"))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "file"
        raise SweepError(f"{path}: {where}: {first['msg']}") from None
    if not spec.loads and not spec.traces:
        raise SweepError(f"{path}: give loads (jobs/hour, synthetic) or traces (files)")
    if spec.loads and spec.traces:
        raise SweepError(f"{path}: loads apply to the synthetic workload: give loads or traces")
    return spec, path.resolve().parent


def _resolve(base: Path, name: str) -> str:
    """A path given in the sweep file, absolute (array tasks run elsewhere), with
    ``$VARIABLE``s from the environment (data kept outside the repository, e.g.
    ``$GAVEL_DATA/msr_seed0_2869ce.trace``); a bundled composition name stays a name, even
    beside a directory of that name (the report of a sweep named after it)."""
    expanded = os.path.expandvars(name)
    if "$" in expanded:
        var = expanded[expanded.index("$"):].split("/")[0]
        raise SweepError(f"{name}: {var} is not set: export it (the directory it names)")
    candidate = base / expanded
    return str(candidate.resolve()) if candidate.is_file() or "/" in expanded else expanded


def plan(spec: SweepSpec, base: Path) -> list[Experiment]:
    """Every cell of the sweep, in a stable order: composition, cluster, then load x seed or
    trace. Bad compositions, clusters, throughputs and simulation settings fail here, before
    any cell runs."""
    paths = [_resolve(base, p) for p in spec.policy_paths]
    for p in paths:
        registry.load_policy_file(p)
    for shape in spec.clusters:
        ClusterSpec.parse(shape)
    thr = (ThroughputSpec(kind="gavel", path=_resolve(base, spec.trace.throughputs))
           if spec.trace.throughputs else ThroughputSpec())
    thr.build()
    cells = []
    world = mode_settings(spec.mode)
    for name, cluster in itertools.product(spec.compositions, spec.clusters):
        source = _resolve(base, name)
        comp = load(source)
        sim = SimConfig.model_validate({**sim_table(source), **world, **spec.simulation})
        for workload, label in _workloads(spec, base):
            cells.append(Experiment(
                composition=comp.config, workload=workload, cluster=cluster, sim=sim,
                throughput=thr, policy_paths=paths,
                label={"sweep": spec.name, "cluster": cluster, **label}))
    _check_traces(cells)
    return cells


def _check_traces(cells: list[Experiment]) -> None:
    """Read every (trace, cluster) once: a malformed trace, a bad loader option or a job
    that makes no progress on some GPU type (under ``unrunnable = "error"``) fails the
    plan, not each of its cells."""
    seen = set()
    for exp in cells:
        key = (exp.workload.path, exp.cluster)
        if exp.workload.path is not None and key not in seen:
            seen.add(key)
            try:
                prepare(exp)
            except WorkloadError as exc:
                raise SweepError(f"trace {Path(exp.workload.path).name}: {exc}") from None


def _workloads(spec: SweepSpec, base: Path) -> list[tuple[WorkloadSpec, dict[str, Any]]]:
    if spec.traces:
        opts = spec.trace
        return [(WorkloadSpec(path=_resolve(base, t), format=opts.format,
                              skip_bad_rows=opts.skip_bad_rows, options=opts.options,
                              unrunnable=opts.unrunnable),
                 {"trace": Path(t).name}) for t in spec.traces]
    window = spec.workload.window()
    return [(WorkloadSpec(generator={
        "n_jobs": spec.workload.jobs, "jobs_per_hour": load_, "seed": seed,
        "gpu_demand": spec.workload.gpu_demand, "measure": window}),
        {"jobs_per_hour": load_, "seed": seed})
        for load_, seed in itertools.product(spec.loads, spec.seeds)]


def cell_id(exp: Experiment) -> str:
    """A cell's name: a hash of everything that decides its result."""
    text = json.dumps(exp.model_dump(mode="json"), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def write_plan(out: Path, cells: list[Experiment]) -> None:
    """Write the plan; a directory already holding another sweep's plan is refused, so its
    results are never mixed with these (an unchanged plan is simply resumed)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / CELLS).mkdir(exist_ok=True)
    data = [{"id": cell_id(c), "experiment": c.model_dump(mode="json")} for c in cells]
    existing = out / PLAN
    if existing.exists() and json.loads(existing.read_text()) != data:
        raise SweepError(f"{out} holds another sweep's plan: use a new --out directory "
                         "(or delete it to start over)")
    _atomic_write(existing, json.dumps(data))


def read_plan(out: Path) -> list[tuple[str, Experiment]]:
    try:
        data = json.loads((out / PLAN).read_text())
        return [(d["id"], Experiment.model_validate(d["experiment"])) for d in data]
    except FileNotFoundError:
        raise SweepError(f"{out}: no {PLAN} (run `blox-slurm sweep run` first)") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise SweepError(f"{out / PLAN}: not a sweep plan ({exc})") from None


def result_path(out: Path, cid: str) -> Path:
    return out / CELLS / f"{cid}.json"


def pending(out: Path, cells: list[tuple[str, Experiment]]) -> list[tuple[str, Experiment]]:
    return [(cid, exp) for cid, exp in cells if not result_path(out, cid).exists()]


def run_cell(out: Path, cid: str, exp: Experiment) -> Path:
    """Run one cell and write its result where :func:`pending` looks, atomically: a task
    killed mid-write leaves no result, so the cell runs again."""
    result = run(exp)
    path = result_path(out, cid)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{cid}.")
    os.close(fd)
    save_runs([result], tmp)
    os.replace(tmp, path)
    return path


def results(out: Path) -> tuple[list[RunResult], list[str]]:
    """The finished cells' runs in plan order, and the ids of the cells not finished."""
    done, missing = [], []
    for cid, _ in read_plan(out):
        path = result_path(out, cid)
        if path.exists():
            done.extend(load_runs(path))
        else:
            missing.append(cid)
    return done, missing


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
