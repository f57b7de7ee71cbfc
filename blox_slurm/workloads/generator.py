"""Synthetic workloads the way Blox (EuroSys'24) generates them, reproducibly.

Blox's evaluation draws Poisson arrivals at λ jobs/hour, a duration mix in which 20 % of jobs
are long (``60 · 10^U(3,4)`` s, i.e. 17 h to 7 days) and the rest short (``60 · 10^U(1.5,3)`` s,
about 30 min to 17 h), and 1 GPU per job (its multi-GPU option: P(1,2,4,8) = .70, .10, .15,
.05). It simulates ~5,000 jobs and measures jobs 3000-4000, so the measured jobs see a loaded,
steady-state cluster while arrivals continue. :func:`generate` does exactly that.

Determinism: each attribute has its own ``random.Random`` stream derived from the seed (no
global state). So changing one parameter changes only what it governs -- a sweep over λ with
one seed gets the *same* jobs (durations, GPUs, models, users) with inter-arrival gaps scaled
by ``λ_old / λ_new`` -- which is what a fair load sweep wants.

The first job arrives at time 0; each next one after an exponential gap of mean 3600/λ s.
The config is a pydantic model so it can come from TOML (``[workload]`` tables, see
``docs/workloads.md``); every bad parameter is a :class:`WorkloadError` naming it.
"""

from __future__ import annotations

import itertools
import math
import random
import tomllib
from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .schema import JobSpec, Workload, WorkloadError

SINGLE_GPU: dict[int, float] = {1: 1.0}
BLOX_MULTI_GPU: dict[int, float] = {1: 0.70, 2: 0.10, 4: 0.15, 8: 0.05}
GPU_PRESETS = {"single": SINGLE_GPU, "blox-multi-gpu": BLOX_MULTI_GPU}


def _weights(name: str, weights: Mapping[Any, float]) -> None:
    if not weights:
        raise ValueError(f"{name} must not be empty")
    if any(not (w >= 0 and math.isfinite(w)) for w in weights.values()):
        raise ValueError(f"{name} weights must be finite and >= 0")
    if sum(weights.values()) <= 0:
        raise ValueError(f"{name} weights must not all be 0")


class DurationMix(BaseModel):
    """Durations ``60 · 10^U(lo, hi)`` seconds, long with probability ``p_long``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    p_long: float = Field(0.2, ge=0, le=1)
    long_log10_minutes: tuple[float, float] = (3.0, 4.0)
    short_log10_minutes: tuple[float, float] = (1.5, 3.0)

    @field_validator("long_log10_minutes", "short_log10_minutes")
    @classmethod
    def _ordered(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not v[0] <= v[1]:
            raise ValueError(f"range must be (low, high) with low <= high, got {v}")
        return v


BLOX_DURATIONS = DurationMix.model_validate({})


class Bursts(BaseModel):
    """Bursty arrivals: for the first ``hours`` of every ``every_hours``, jobs arrive ``factor``
    times faster than average, and slower the rest of the period, so the mean stays λ.

    The arrival stream is the same unit-rate Poisson process as without bursts, run through
    the inverse of the cumulative intensity: the jobs keep their order and attributes, only
    their submit times move (a fair steady-vs-bursty comparison).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    every_hours: float = Field(24.0, gt=0, allow_inf_nan=False)
    hours: float = Field(4.0, gt=0, allow_inf_nan=False)
    factor: float = Field(4.0, ge=1, allow_inf_nan=False)

    @model_validator(mode="after")
    def _rest_rate_positive(self) -> Bursts:
        if not self.hours * self.factor < self.every_hours:
            raise ValueError(f"hours x factor ({self.hours * self.factor:g}) must be below "
                             f"every_hours ({self.every_hours:g}): the rest of the period needs "
                             "a positive arrival rate")
        return self

    def warp(self, t: float) -> float:
        """Real time of mean-rate time ``t`` (seconds)."""
        period, burst = self.every_hours * 3600.0, self.hours * 3600.0
        k, r = divmod(t, period)
        fast = burst * self.factor  # mean-rate seconds the burst covers
        slow = (period - fast) / (period - burst)  # the rest's rate relative to the mean
        phase = r / self.factor if r < fast else burst + (r - fast) / slow
        return k * period + phase


class GeneratorConfig(BaseModel):
    """All generator parameters; the defaults are Blox's Figure-6 workload at λ = 6."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n_jobs: int = Field(5000, ge=1)
    jobs_per_hour: float = Field(6.0, gt=0, allow_inf_nan=False)
    measure: tuple[int, int] | None = (3000, 4000)
    seed: int = 0
    durations: DurationMix = Field(default_factory=lambda: BLOX_DURATIONS)
    gpu_demand: dict[int, float] = Field(default_factory=lambda: dict(SINGLE_GPU))
    models: dict[str, float] = Field(default_factory=dict)  # empty: model ""
    users: dict[str, float] = Field(default_factory=dict)  # empty: user ""
    bursts: Bursts | None = None  # None: homogeneous Poisson arrivals

    @field_validator("gpu_demand", mode="before")
    @classmethod
    def _preset(cls, v: object) -> object:
        if isinstance(v, str):
            if v not in GPU_PRESETS:
                raise ValueError(f"unknown preset {v!r}; presets: {', '.join(GPU_PRESETS)}")
            return dict(GPU_PRESETS[v])
        return v

    @field_validator("gpu_demand")
    @classmethod
    def _gpus(cls, v: dict[int, float]) -> dict[int, float]:
        _weights("gpu_demand", v)
        if min(v) < 1:
            raise ValueError("GPU counts must be >= 1")
        return v

    @field_validator("users", mode="before")
    @classmethod
    def _n_users(cls, v: object) -> object:
        """``users = 8`` is shorthand for eight equally likely users ``user0..user7``."""
        if isinstance(v, int) and not isinstance(v, bool):
            if v < 0:
                raise ValueError("number of users must be >= 0")
            return {f"user{i}": 1.0 for i in range(v)}
        return v

    @field_validator("models", "users")
    @classmethod
    def _mix(cls, v: dict[str, float], info: Any) -> dict[str, float]:
        if v:
            _weights(info.field_name, v)
        return v

    @model_validator(mode="after")
    def _window(self) -> GeneratorConfig:
        if self.measure is not None:
            lo, hi = self.measure
            if not 0 <= lo < hi <= self.n_jobs:
                raise ValueError(
                    f"measure must be (first, end) with 0 <= first < end <= n_jobs "
                    f"({self.n_jobs}), got {self.measure}"
                )
        return self


def config(**params: Any) -> GeneratorConfig:
    """A validated :class:`GeneratorConfig`; errors become one :class:`WorkloadError`."""
    try:
        return GeneratorConfig(**params)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'config'}: {err['msg']}"
            for err in e.errors()
        )
        raise WorkloadError(f"generator: {problems}") from None


def load_config(path: str | PathLike[str]) -> GeneratorConfig:
    """A config from TOML: top-level keys, or a ``[workload]`` table."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise WorkloadError(f"{path}: invalid TOML: {e}") from None
    table = data.get("workload", data)  # gpu_demand's TOML string keys ("4") become ints
    try:
        return config(**table)
    except WorkloadError as e:
        raise WorkloadError(f"{path}: {e}") from None


def _categorical(rng: random.Random, mix: Mapping[Any, float], n: int) -> list[Any]:
    values = list(mix)
    cum = list(itertools.accumulate(mix[v] for v in values))
    return rng.choices(values, cum_weights=cum, k=n)


def generate(cfg: GeneratorConfig | None = None, **params: Any) -> Workload:
    """A synthetic workload: ``generate(n_jobs=5000, jobs_per_hour=6, measure=(3000, 4000))``
    or ``generate(cfg)``. Deterministic for ``seed``."""
    if cfg is None:
        cfg = config(**params)
    elif params:
        cfg = config(**{**cfg.model_dump(), **params})
    n, seed = cfg.n_jobs, cfg.seed

    def stream(name: str) -> random.Random:
        return random.Random(f"blox-slurm/{seed}/{name}")

    arrivals = stream("arrivals")
    mean_gap = 3600.0 / cfg.jobs_per_hour
    times = [0.0, *itertools.accumulate(arrivals.expovariate(1.0) * mean_gap for _ in range(n - 1))]
    if cfg.bursts is not None:
        times = [cfg.bursts.warp(t) for t in times]
    mix, rng = cfg.durations, stream("durations")
    durations = []
    for _ in range(n):
        lo, hi = mix.long_log10_minutes if rng.random() < mix.p_long else mix.short_log10_minutes
        durations.append(60.0 * 10 ** rng.uniform(lo, hi))
    gpus = _categorical(stream("gpus"), cfg.gpu_demand, n)
    models = _categorical(stream("models"), cfg.models, n) if cfg.models else [""] * n
    users = _categorical(stream("users"), cfg.users, n) if cfg.users else [""] * n
    # Positional, through map: a fifth faster than keywords per job at a million jobs.
    jobs = tuple(map(JobSpec, range(n), times, gpus, durations, models, users))
    return Workload(
        jobs,
        measure=cfg.measure,
        source=f"generator(seed={seed})",
        meta={"format": "synthetic", "jobs_per_hour": f"{cfg.jobs_per_hour:g}",
              "arrivals": "bursty" if cfg.bursts is not None else "poisson"},
    )
