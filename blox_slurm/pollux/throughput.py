"""Pollux's step-time model and its fit to measured placements.

The published form (Pollux, OSDI'21, section 3.2): a step's compute time grows linearly
with the local (atomic) batch, ``T_c = alpha_c + beta_c * b``; the all-reduce costs a
constant plus a retrogression per replica beyond two, ``T_n = alpha + beta * (R - 2)``,
with inter-node parameters when the job spans nodes, intra-node ones when it has several
replicas on one node, and nothing for one replica; compute and communication overlap to a
degree ``gamma`` in ``[1, 10]``: ``T_step = (T_c^gamma + T_n^gamma)^(1/gamma)`` (1 adds
them, 10 is nearly their max). With ``s`` accumulation steps the job first runs ``s``
compute-only passes, so ``T = s * T_c + T_step``. Fitting minimizes the root-mean-square
log error of both the compute and the step times, as the artifact does, so short and long
steps weigh alike; the few parameters are what make the model usable for placements never
measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple, dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .traces import StepSample

FloatArray = NDArray[np.float64]
MAX_GAMMA = 10.0
_TINY = 1e-8  # a lower bound that keeps logs finite


@dataclass(frozen=True, slots=True)
class PerfParams:
    """The seven parameters of the step-time model (seconds, seconds per sample)."""

    alpha_c: float
    beta_c: float
    alpha_n: float  # inter-node all-reduce: constant
    beta_n: float  # inter-node: per replica beyond two
    alpha_r: float  # intra-node all-reduce: constant
    beta_r: float  # intra-node: per replica beyond two
    gamma: float  # overlap of compute and communication, 1 (none) .. 10 (nearly full)


def compute_time(p: PerfParams, atomic_bsz: ArrayLike) -> FloatArray:
    """Forward and backward passes over one atomic batch."""
    return p.alpha_c + p.beta_c * np.asarray(atomic_bsz, dtype=np.float64)


def network_time(p: PerfParams, num_nodes: ArrayLike, num_replicas: ArrayLike) -> FloatArray:
    """All-reduce time, set by the slowest link the replicas use."""
    nodes, replicas = np.asarray(num_nodes), np.asarray(num_replicas)
    conds = [nodes > 1, replicas > 1]
    alpha = np.select(conds, [p.alpha_n, p.alpha_r], _TINY)
    beta = np.select(conds, [p.beta_n, p.beta_r], _TINY)
    return np.asarray(alpha + beta * np.maximum(replicas - 2, 0), dtype=np.float64)


def step_time(
    p: PerfParams,
    num_nodes: ArrayLike,
    num_replicas: ArrayLike,
    atomic_bsz: ArrayLike,
    accum_steps: ArrayLike = 0,
) -> FloatArray:
    """Seconds per optimizer step: ``accum_steps`` compute-only passes, then one pass
    overlapped with the all-reduce."""
    compute = compute_time(p, atomic_bsz)
    sync = network_time(p, num_nodes, num_replicas)
    overlapped = (compute**p.gamma + sync**p.gamma) ** (1.0 / p.gamma)
    return np.asarray(np.asarray(accum_steps) * compute + overlapped, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Measurements:
    """Samples as columns, the shape the fit works on."""

    num_nodes: FloatArray
    num_replicas: FloatArray
    local_bsz: FloatArray
    step_time: FloatArray
    compute_time: FloatArray

    @classmethod
    def of(cls, samples: Sequence[StepSample]) -> Measurements:
        """Columns of ``samples``; compute time is step minus synchronization time, floored
        so a sample whose sync exceeds its step (measurement noise) keeps a finite log."""
        if not samples:
            raise ValueError("cannot fit the step-time model to no samples")
        col = {k: np.array([getattr(s, k) for s in samples], dtype=np.float64)
               for k in ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")}
        floor = 0.01 * col["step_time"]
        return cls(col["num_nodes"], col["num_replicas"], col["local_bsz"], col["step_time"],
                   np.maximum(col["step_time"] - col["sync_time"], floor))


def fit_perf_params(samples: Sequence[StepSample]) -> PerfParams:
    """The parameters minimizing the log error over ``samples``; parameters the samples
    cannot inform (no multi-node or no multi-replica single-node rows) stay at their lower
    bound, i.e. that communication is taken to be free, as the artifact does."""
    from scipy.optimize import minimize  # 0.3 s to import: only when fitting, not on loading

    m = Measurements.of(samples)
    lower, upper = _bounds(m)
    start = np.clip([0.1, 0.01, 0.1, 0.01, 0.1, 0.01, 1.5], lower, upper)
    result = minimize(_loss, start, args=(m,), method="L-BFGS-B",
                      bounds=list(zip(lower, upper, strict=True)))
    return PerfParams(*(float(x) for x in result.x))


def _bounds(m: Measurements) -> tuple[list[float], list[float]]:
    lower = [_TINY] * 6 + [1.0]
    upper = [np.inf] * 6 + [MAX_GAMMA]
    pinned: list[int] = []
    if not np.any(m.num_nodes > 1):
        pinned += [2, 3]
    if not np.any((m.num_nodes == 1) & (m.num_replicas > 1)):
        pinned += [4, 5]
    if not np.any(m.num_replicas > 2):
        pinned += [3, 5]
    for i in pinned:
        upper[i] = lower[i]
    return lower, upper


def _loss(x: FloatArray, m: Measurements) -> float:
    """RMS log error of compute and step times, plus the artifact's light pull of gamma
    towards 1 (the alphas and betas are easier to place when the overlap is small)."""
    p = PerfParams(*(float(v) for v in x))
    compute = compute_time(p, m.local_bsz)
    step = step_time(p, m.num_nodes, m.num_replicas, m.local_bsz)
    err_c = np.sqrt(np.mean((np.log(compute) - np.log(m.compute_time)) ** 2))
    err_s = np.sqrt(np.mean((np.log(step) - np.log(m.step_time)) ** 2))
    return float(err_c + err_s + 1e-3 * (p.gamma - 1.0) ** 2)


def relative_errors(p: PerfParams, samples: Sequence[StepSample]) -> FloatArray:
    """``|predicted - measured| / measured`` step time of each sample."""
    m = Measurements.of(samples)
    predicted = step_time(p, m.num_nodes, m.num_replicas, m.local_bsz)
    return np.asarray(np.abs(predicted - m.step_time) / m.step_time, dtype=np.float64)


def as_tuple(p: PerfParams) -> tuple[float, ...]:
    """The parameters in declaration order (for printing and storing)."""
    return astuple(p)
