"""How a job's progress advances, epoch by epoch, and when it completes.

A job earns progress at ``gain / step_time`` per second (:mod:`.efficiency`), where the
gain depends on the epoch it is in; :func:`advance` walks the epochs a stretch of time
covers, as the artifact's simulator does, and stops at the application's target (the job's
completion). :func:`isolated_seconds` is the same walk with unlimited time at one fixed
configuration (:func:`rate_at`): a job's run time alone, e.g. at its tuned request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .application import Application
from .efficiency import gain
from .goodput import BatchConfig


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
    epoch = app.epoch_at(progress)
    while epoch < app.max_epochs:
        speed = rate(epoch)
        if not speed > 0:
            raise ValueError(f"{app.name}: progress rate must be > 0, got {speed:g}")
        end = app.epoch_end(epoch)
        if elapsed + (end - progress) / speed > seconds:
            return Advance(progress + (seconds - elapsed) * speed, seconds, False)
        elapsed += (end - progress) / speed
        progress, epoch = end, epoch + 1
    return Advance(progress, elapsed, True)


def rate_at(app: Application, config: BatchConfig, step_seconds: float) -> Callable[[int], float]:
    """``rate(epoch)`` of a job that keeps ``config`` at ``step_seconds`` per step: the gain
    of its batch size in that epoch per step."""
    batch = min(max(config.batch_size, app.init_batch_size), app.max_batch_size)

    def rate(epoch: int) -> float:
        return float(gain(app.grad_stats(batch, epoch), batch, app.init_batch_size)) / step_seconds

    return rate


def isolated_seconds(app: Application, rate: Callable[[int], float]) -> float:
    """Seconds from start to completion at ``rate``, alone and never rescaled."""
    return advance(app, 0.0, float("inf"), rate).elapsed
