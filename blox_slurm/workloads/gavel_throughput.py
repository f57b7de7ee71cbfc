"""Gavel's measured throughputs as a :class:`~blox_slurm.core.throughput.ThroughputModel`.

``simulation_throughputs.json`` (Gavel, OSDI'20) holds steps/s per GPU type (``k80``, ``p100``,
``v100``) and, under ``<type>_unconsolidated``, for the same job spread over several nodes.
Keys are ``"('<job_type>', <gpus>)"``; inside each entry ``"null"`` is the job running alone
(the other keys are co-located pairs, which we do not model). Using these numbers makes the
simulator's speeds, Optimus' marginal gains and the Gavel loader's durations all agree.

A rate is relative to the job's reference: ``thr[type][(model, gpus)] /
thr[reference][(model, job.num_gpus)]``, so a job at its request on the reference type runs
at exactly 1.0, which is how ``JobSpec.duration`` is defined.

GPU counts the table does not list (Gavel's traces ask for 12, 16, 24 and 32 GPUs; several
models are measured only on 1 GPU) are estimated from the measured counts of that model and
table with a power law ``thr(n) = thr(a) * (n / a) ** s``:

* between two measured counts ``a < n < b``: ``s`` is the log-log slope from ``a`` to ``b``
  (so interpolation is exact at both ends and follows the model's own scaling);
* above the largest measured count: ``s`` is the slope of the last two measured counts,
  clamped to ``[0, 1]`` (a job never scales super-linearly nor slows down with more GPUs); with
  a single measured count there is no evidence of scaling loss and ``s = 1`` (linear);
* below the smallest measured count: linear, ``thr(a) * n / a``.

A measured ``0.0`` means the configuration does not run (ResNet-50 at batch 128 does not fit on
several K80s); any estimate that leans on a 0.0 is 0.0 too. A spread lookup uses the
``_unconsolidated`` measurements, completed by the consolidated ones for counts it lacks (Gavel
did not measure K80 spread placements of models that do not fit consolidated).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING

from .schema import WorkloadError

if TYPE_CHECKING:  # annotations only: loading throughputs must not need the policy core
    from ..core.model import Job
    from ..core.throughput import ThroughputModel

_KEY = re.compile(r"\('(?P<model>[^']+)', (?P<gpus>[1-9][0-9]*)\)")
_SPREAD = "_unconsolidated"

Table = dict[str, dict[int, float]]  # model -> gpus -> steps/s


def _parse_tables(raw: object, source: str) -> dict[str, Table]:
    if not isinstance(raw, dict) or not raw:
        raise WorkloadError(f"{source}: expected an object of GPU types")
    tables: dict[str, Table] = {}
    for gpu_type, entries in raw.items():
        if not isinstance(entries, dict):
            raise WorkloadError(f"{source}: {gpu_type!r} must map job keys to throughputs")
        table: Table = {}
        for key, entry in entries.items():
            m = _KEY.fullmatch(key)
            if m is None:
                raise WorkloadError(
                    f"{source}: {gpu_type}: key {key!r} is not \"('<job_type>', <gpus>)\""
                )
            alone = entry.get("null") if isinstance(entry, dict) else None
            if isinstance(alone, bool) or not isinstance(alone, int | float) or alone < 0:
                raise WorkloadError(
                    f'{source}: {gpu_type}: {key}: "null" must be a throughput >= 0'
                )
            table.setdefault(m["model"], {})[int(m["gpus"])] = float(alone)
        tables[gpu_type] = table
    return tables


def _power_law(base: float, a: int, n: int, slope: float) -> float:
    return base * (n / a) ** slope


def _estimate(measured: Mapping[int, float], n: int) -> float:
    """Steps/s at ``n`` GPUs from the measured counts of one model (see module docstring)."""
    if n in measured:
        return measured[n]
    counts = sorted(measured)
    below = [c for c in counts if c < n]
    above = [c for c in counts if c > n]
    if not below:
        b = above[0]
        return measured[b] * n / b
    a = below[-1]
    if measured[a] == 0.0:
        return 0.0
    if above:
        b = above[0]
        if measured[b] == 0.0:
            return 0.0
        slope = math.log(measured[b] / measured[a]) / math.log(b / a)
        return _power_law(measured[a], a, n, slope)
    if len(below) == 1:
        return measured[a] * n / a
    p = below[-2]
    if measured[p] == 0.0:
        return 0.0
    slope = math.log(measured[a] / measured[p]) / math.log(a / p)
    return _power_law(measured[a], a, n, min(1.0, max(0.0, slope)))


class GavelThroughput:
    """Measured throughputs from Gavel's ``simulation_throughputs.json``.

    ``fallback`` handles jobs whose ``model`` Gavel did not measure (e.g. a
    :class:`~blox_slurm.core.throughput.ParametricThroughput` for Slurm jobs); without it such a job
    is an error naming the known job types. ``type_aliases`` maps cluster GPU type names to
    Gavel's (``{"gpu": "v100", "V100-SXM2-32GB": "v100"}``).
    """

    def __init__(
        self,
        path: str | PathLike[str],
        reference_type: str = "v100",
        fallback: ThroughputModel | None = None,
        type_aliases: Mapping[str, str] | None = None,
    ) -> None:
        source = str(path)
        try:
            raw = json.loads(Path(path).read_text())
        except OSError as e:
            raise WorkloadError(f"{source}: cannot read throughputs: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise WorkloadError(f"{source}:{e.lineno}: invalid JSON: {e.msg}") from None
        self.source = source
        self._tables = _parse_tables(raw, source)
        self._aliases = dict(type_aliases or {})
        self.fallback = fallback
        self.reference_type = self._base_type(reference_type)
        self._rates: dict[tuple[str, int, int, bool, str], float] = {}

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """GPU types with consolidated measurements (``k80``, ``p100``, ``v100``)."""
        return tuple(sorted(t for t in self._tables if not t.endswith(_SPREAD)))

    @property
    def job_types(self) -> tuple[str, ...]:
        """Job types (models) measured on the reference GPU type."""
        return tuple(sorted(self._tables[self.reference_type]))

    def gpu_counts(self, model: str, gpu_type: str | None = None) -> tuple[int, ...]:
        """The GPU counts measured for ``model`` (consolidated) on ``gpu_type``."""
        table = self._tables[self._base_type(gpu_type or self.reference_type)]
        return tuple(sorted(table.get(self.require(model), {})))

    def knows(self, model: str) -> bool:
        return model in self._tables[self.reference_type]

    def require(self, model: str) -> str:
        """``model`` if measured, else a :class:`WorkloadError` listing the known job types."""
        if not self.knows(model):
            known = ", ".join(self.job_types)
            raise WorkloadError(
                f"{self.source}: unknown job type {model!r}; known job types: {known}"
            )
        return model

    def require_all(self, models: Iterable[str]) -> None:
        """Check a workload's models up front, so a simulation cannot fail mid-run."""
        if self.fallback is None:
            for model in set(models):
                self.require(model)

    def steps_per_second(
        self, model: str, gpus: int, gpu_type: str | None = None, spread: bool = False
    ) -> float:
        """Steps/s of ``model`` alone on ``gpus`` GPUs; estimated for unmeasured counts."""
        if gpus < 1:
            raise ValueError(f"gpus must be >= 1, got {gpus}")
        base = self._base_type(gpu_type or self.reference_type)
        measured = self._tables[base].get(self.require(model), {})
        if spread:
            measured = {**measured, **self._tables.get(base + _SPREAD, {}).get(model, {})}
        return _estimate(measured, gpus) if measured else 0.0

    def rate(self, job: Job, gpus: int, nodes: int, gpu_type: str) -> float:
        if gpus <= 0:
            return 0.0
        # Cached per (model, request, allocation): the simulator asks at every start.
        key = (job.model, job.num_gpus, gpus, nodes > 1, gpu_type)
        cached = self._rates.get(key)
        if cached is not None:
            return cached
        if not self.knows(job.model):
            if self.fallback is not None:
                return self.fallback.rate(job, gpus, nodes, gpu_type)
            self.require(job.model)
        reference = self.steps_per_second(job.model, job.num_gpus)
        if reference == 0.0:
            raise WorkloadError(
                f"job {job.id}: {job.model!r} on {job.num_gpus} GPUs does not run on the "
                f"reference type {self.reference_type}, so it has no reference rate"
            )
        value = self.steps_per_second(job.model, gpus, gpu_type, spread=nodes > 1) / reference
        self._rates[key] = value
        return value

    def _base_type(self, gpu_type: str) -> str:
        name = self._aliases.get(gpu_type, gpu_type)
        if name not in self._tables or name.endswith(_SPREAD):
            known = ", ".join(self.gpu_types)
            raise WorkloadError(
                f"{self.source}: unknown GPU type {gpu_type!r}; known GPU types: {known}"
            )
        return name
