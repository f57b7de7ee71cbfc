"""Goodput, and the per-job choice of batch size and gradient accumulation.

Goodput is throughput (samples per second, :mod:`.throughput`) times statistical efficiency
(:mod:`.efficiency`). For a given allocation Pollux's agent picks the total batch size that
maximizes it: a bigger batch uses the GPUs better but each sample counts less. A local batch
beyond what fits on a GPU is split into ``accum_steps + 1`` atomic batches accumulated before
one all-reduce. A job alone on one GPU above its initial batch accumulates at least once,
as the artifact does: its learning-rate scaling needs two atomic batches to estimate the
gradient statistics from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .application import Application
from .efficiency import GradStats, efficiency
from .throughput import PerfParams, step_time

_EPS = 1e-8  # so that ceil(4.000000001) stays 4


@dataclass(frozen=True, slots=True)
class BatchConfig:
    """How a job trains on ``num_replicas`` GPUs."""

    num_replicas: int
    atomic_bsz: int
    accum_steps: int

    @property
    def batch_size(self) -> int:
        return self.num_replicas * self.atomic_bsz * (self.accum_steps + 1)


def goodput(
    perf: PerfParams,
    stats: GradStats,
    init_batch_size: int,
    num_nodes: ArrayLike,
    num_replicas: ArrayLike,
    atomic_bsz: ArrayLike,
    accum_steps: ArrayLike,
) -> NDArray[np.float64]:
    """Useful samples per second (samples at the initial batch size's worth)."""
    batch = np.asarray(num_replicas) * np.asarray(atomic_bsz) * (np.asarray(accum_steps) + 1)
    seconds = step_time(perf, num_nodes, num_replicas, atomic_bsz, accum_steps)
    return np.asarray(batch / seconds * efficiency(stats, batch, init_batch_size))


def split_local_batch(
    app: Application, num_replicas: int, batch_size: ArrayLike
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """``(atomic_bsz, accum_steps)`` that train ``batch_size`` on ``num_replicas`` GPUs:
    the fewest accumulation steps that keep atomic batches within the application's limit,
    the atomic batch rounded up, then trimmed so the total never exceeds the maximum batch
    (the artifact's rule, for chosen and tuned batch sizes alike)."""
    local = np.asarray(batch_size, dtype=np.float64) / num_replicas
    accum = np.ceil(local / app.max_local_bsz - _EPS) - 1
    if num_replicas == 1:
        accum = np.where(local > app.init_batch_size + _EPS, np.maximum(accum, 1), accum)
    atomic = np.ceil(local / (accum + 1) - _EPS)
    atomic = np.minimum(atomic, app.max_batch_size // (num_replicas * (accum + 1)))
    return atomic.astype(np.int64), accum.astype(np.int64)


def best_config(
    app: Application, perf: PerfParams, stats: GradStats, num_nodes: int, num_replicas: int
) -> tuple[BatchConfig, float] | None:
    """The configuration of highest goodput on this allocation and its goodput; ``None``
    when even the smallest local batches make the batch exceed the application's maximum.

    Every whole local batch from the smallest allowed to the largest is tried (at most the
    maximum batch size of candidates, a few thousand, evaluated at once): unlike the
    artifact's 50 geometric samples, no fixed request can beat the choice on its model."""
    smallest = max(app.init_batch_size, app.min_local_bsz * num_replicas)
    local = np.arange(math.ceil(smallest / num_replicas), app.max_batch_size // num_replicas + 1)
    atomic, accum = split_local_batch(app, num_replicas, local * num_replicas)
    value = goodput(perf, stats, app.init_batch_size, num_nodes, num_replicas, atomic, accum)
    value = np.where((app.min_local_bsz <= atomic) & (atomic <= app.max_local_bsz), value, 0.0)
    if not np.any(value > 0):
        return None
    i = int(np.argmax(value))
    return BatchConfig(num_replicas, int(atomic[i]), int(accum[i])), float(value[i])


def tuned_config(app: Application, num_replicas: int, batch_size: int) -> BatchConfig:
    """A fixed request (the TunedJobs baselines): ``batch_size`` split over the replicas."""
    atomic, accum = (int(v) for v in split_local_batch(app, num_replicas, batch_size))
    return BatchConfig(num_replicas, max(1, atomic), accum)


def packed_placement(num_replicas: int, gpus_per_node: int) -> tuple[int, ...]:
    """GPUs per node of the tightest placement: full nodes, then the remainder."""
    full, rest = divmod(num_replicas, gpus_per_node)
    return (gpus_per_node,) * full + ((rest,) if rest else ())
