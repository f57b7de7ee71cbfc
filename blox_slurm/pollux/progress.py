"""How a job's progress advances, epoch by epoch, and when it completes.

A job earns progress at ``gain / step_time`` per second (:mod:`.efficiency`), where the
gain depends on the epoch it is in; :func:`advance` walks the epochs a stretch of time
covers, as the artifact's simulator does, and stops at the application's target (the job's
completion). :func:`isolated_seconds` is the same walk with unlimited time at one fixed
configuration: a job's run time alone, e.g. at its tuned request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .application import Application
from .efficiency import gain
from .goodput import BatchConfig
from .throughput import PerfParams, step_time


@dataclass(frozen=True, slots=True)
class Advance:
    """Where a job is after :func:`advance`: its progress, the seconds it trained, and
    whether it reached its target (then ``elapsed`` is when, within the stretch)."""

    progress: float
    elapsed: float
    complete: bool


def advance(
    app: Application, progress: float, seconds: float, rate: Callable[[int], float]
) -> Advance:
    """Train for up to ``seconds`` from ``progress``; ``rate(epoch)`` is the progress per
    second during that epoch (it must be > 0)."""
    elapsed = 0.0
    while progress < app.target:
        epoch = app.epoch_at(progress)
        speed = rate(epoch)
        if not speed > 0:
            raise ValueError(f"{app.name}: progress rate must be > 0, got {speed:g}")
        needed = (app.epoch_end(epoch) - progress) / speed
        if elapsed + needed > seconds:
            return Advance(progress + (seconds - elapsed) * speed, seconds, False)
        elapsed += needed
        progress = app.epoch_end(epoch)
    return Advance(progress, elapsed, True)


def fixed_rate(
    app: Application, perf: PerfParams, config: BatchConfig, num_nodes: int
) -> Callable[[int], float]:
    """``rate(epoch)`` of a job that keeps ``config`` on ``num_nodes`` nodes."""
    seconds = float(step_time(perf, num_nodes, config.num_replicas, config.atomic_bsz,
                              config.accum_steps))
    batch = min(max(config.batch_size, app.init_batch_size), app.max_batch_size)

    def rate(epoch: int) -> float:
        return float(gain(app.grad_stats(batch, epoch), batch, app.init_batch_size)) / seconds

    return rate


def isolated_seconds(
    app: Application, perf: PerfParams, config: BatchConfig, num_nodes: int
) -> float:
    """Seconds from start to completion at ``config``, alone and never rescaled."""
    return advance(app, 0.0, float("inf"), fixed_rate(app, perf, config, num_nodes)).elapsed
