"""Statistical efficiency from the gradient noise scale.

Training at batch ``M`` instead of the initial batch ``M0`` makes each step worth
``gain = (var + sqr) / (var / scale + sqr)`` steps at ``M0`` (``scale = M / M0``;
``sqr`` is the squared gradient norm, ``var`` the gradient variance at ``M0``). ``gain``
lies in ``[1, scale]``: close to ``scale`` while the noise dominates (early in training a
bigger batch is nearly free), close to 1 once the gradient is clean. Efficiency is
``gain / scale``, the fraction of the extra samples that still count; goodput is throughput
times efficiency. The gradient statistics change as training proceeds, so both depend on the
epoch the job is in (:meth:`blox_slurm.pollux.application.Application.grad_stats`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray


@dataclass(frozen=True, slots=True)
class GradStats:
    """Gradient square norm and variance, as measured at the initial batch size."""

    sqr: float
    var: float

    def noise_scale(self, init_batch_size: int) -> float:
        """The gradient noise scale ``var / sqr * M0`` (samples): the batch size beyond
        which doubling the batch stops nearly halving the steps."""
        return self.var / self.sqr * init_batch_size if self.sqr > 0 else float("inf")


def gain(stats: GradStats, batch_size: ArrayLike, init_batch_size: int) -> NDArray[np.float64]:
    """Steps at the initial batch size that one step at ``batch_size`` is worth."""
    scale = np.asarray(batch_size, dtype=np.float64) / init_batch_size
    denom = stats.var / scale + stats.sqr
    safe = np.where(denom > 0, denom, 1.0)
    return np.asarray(np.where(denom > 0, (stats.var + stats.sqr) / safe, 1.0), dtype=np.float64)


def efficiency(
    stats: GradStats, batch_size: ArrayLike, init_batch_size: int
) -> NDArray[np.float64]:
    """``gain / scale``: 1 at the initial batch size, falling as the batch grows."""
    scale = np.asarray(batch_size, dtype=np.float64) / init_batch_size
    return np.asarray(gain(stats, batch_size, init_batch_size) / scale, dtype=np.float64)
