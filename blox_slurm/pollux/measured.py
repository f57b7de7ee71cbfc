"""Step times as measured, the artifact simulator's ground truth.

The artifact's simulator runs jobs at the *measured* step times and leaves the fitted
model (:mod:`.throughput`) to the scheduler, which must predict placements it has not
seen; a simulator that ran jobs at the fitted times would grade the scheduler on its own
model. A measured placement is interpolated linearly over the local batch (clamped at the
measured ends, where the artifact would fail); other placements linearly over
``(nodes, replicas, local batch)`` between the mean of each measured shape and the
``scalability.csv`` rows. Placements are the same up to rotation (``(1, 4)`` is ``(4, 1)``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from .traces import ApplicationTrace, StepSample

MAX_NODES = 16  # the artifact's scalability rows stop at the published cluster's 16 nodes


class MeasuredSteps:
    """``(step_time, sync_time)`` of an application at any placement and local batch."""

    def __init__(self, trace: ApplicationTrace) -> None:
        # SciPy's interpolate takes 0.3 s to import: paid when a Pollux workload is read,
        # not by every command that imports the workload formats.
        from scipy.interpolate import LinearNDInterpolator

        self.name = trace.name
        by_placement: dict[tuple[int, ...], list[StepSample]] = defaultdict(list)
        for sample in trace.placements:
            by_placement[normalize(sample.placement)].append(sample)
        self._curves = {k: _curve(v) for k, v in by_placement.items()}
        shapes = _shape_means(trace.placements) + list(trace.scalability)
        points = np.array([(s.num_nodes, s.num_replicas, s.local_bsz) for s in shapes], float)
        values = np.array([(s.step_time, s.sync_time) for s in shapes], float)
        self._shapes = LinearNDInterpolator(points, values)

    def __call__(self, placement: Sequence[int], local_bsz: float) -> tuple[float, float]:
        """Step and synchronization seconds of ``local_bsz`` per GPU on ``placement``
        (GPUs per node); a shape outside every measurement is an error."""
        key = normalize(placement)
        if key in self._curves:
            bsz, step, sync = self._curves[key]
            return float(np.interp(local_bsz, bsz, step)), float(np.interp(local_bsz, bsz, sync))
        nodes = min(len(key), MAX_NODES)
        step, sync = self._shapes([nodes, sum(key), local_bsz])[0]
        if np.isnan(step):
            raise ValueError(f"{self.name}: no measurement near {len(key)} nodes, "
                             f"{sum(key)} GPUs, local batch {local_bsz:g}")
        return float(step), float(sync)


def step_seconds(
    steps: MeasuredSteps, placement: Sequence[int], atomic_bsz: int, accum_steps: int
) -> float:
    """Seconds per optimizer step: the measured step plus ``accum_steps`` compute-only
    passes (a step's time minus its synchronization), as the artifact's simulator runs it."""
    step, sync = steps(placement, atomic_bsz)
    return step + accum_steps * (step - sync)


def normalize(placement: Sequence[int]) -> tuple[int, ...]:
    """GPUs per node without empty nodes, rotated to the lexicographically smallest."""
    p = tuple(g for g in placement if g)
    return min((p[i:] + p[:i] for i in range(len(p))), default=())


def _curve(samples: list[StepSample]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean step and sync time per local batch, sorted by local batch."""
    table: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for s in samples:
        table[s.local_bsz].append((s.step_time, s.sync_time))
    bsz = np.array(sorted(table), float)
    means = np.array([np.mean(table[int(b)], axis=0) for b in bsz])
    return bsz, means[:, 0], means[:, 1]


def _shape_means(samples: Sequence[StepSample]) -> list[StepSample]:
    table: dict[tuple[int, int, int], list[StepSample]] = defaultdict(list)
    for s in samples:
        table[s.num_nodes, s.num_replicas, s.local_bsz].append(s)
    return [StepSample(n, r, b, float(np.mean([s.step_time for s in v])),
                       float(np.mean([s.sync_time for s in v])))
            for (n, r, b), v in table.items()]
