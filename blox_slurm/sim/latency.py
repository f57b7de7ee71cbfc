"""Slurm's part of a start (and of a stop) in the simulator: the calibrated medians, or a
draw from the latencies measured on the cluster.

Slurm's StartTime has whole seconds, and its batch scheduler starts released jobs on passes
that come at most every ``batch_sched_delay`` (3 s by default), so a job released in a round
shows a start latency of a few whole seconds less the round's fraction: on one emulator run
0.0, 0.77, 0.78 or 1.78 s, one start to the next. With the median for every start, every
simulated job crosses a policy's service threshold the same number of rounds after its
release; on Slurm some cross a round later, and at short rounds which ones decides who is
preempted next, and everything after it. Drawn from the measured latencies, each start gets
Slurm's spread, and a prediction is the median of several draws (``blox-slurm demo``). The
jobs started in one round share a draw: on Slurm they start on the same pass.
"""

from __future__ import annotations

import random

from .config import SimConfig


class SlurmLatency:
    """Each start's latency from the round that decides it, as the world charges it."""

    def __init__(self, cfg: SimConfig) -> None:
        self.start, self.restart = cfg.start_latency, cfg.restart_latency
        self.starts = cfg.start_latency_samples
        self.restarts = cfg.restart_latency_samples
        self.delay, self.delays = cfg.stop_delay, cfg.stop_delay_samples
        self._rng = random.Random(cfg.latency_seed)
        self._round = -1.0
        self._drawn: dict[str, tuple[float, float]] = {}

    def of(self, preempted: bool, t: float) -> tuple[float, float]:
        """``(start, restart)`` of a start decided at ``t``: its own latency (which a
        handover replaces) and what a restart adds to it."""
        if not (self.starts or self.restarts):
            return self._draw("restart" if preempted else "start")
        return self._shared("restart" if preempted else "start", t)

    def stop(self, t: float) -> float:
        """How long a job stopped at ``t`` runs on (``SimConfig.stop_delay``)."""
        return self._shared("stop", t)[0] if self.delays else self.delay

    def _shared(self, kind: str, t: float) -> tuple[float, float]:
        """One draw per round and kind: Slurm's batch scheduler starts the jobs released
        together on one pass (first starts and restarts on their own, recorded runs show),
        and a round's stops end as its apply requeues them."""
        if t != self._round:
            self._round, self._drawn = t, {}
        drawn = self._drawn.get(kind)
        if drawn is None:
            drawn = self._drawn[kind] = self._draw(kind)
        return drawn

    def _draw(self, kind: str) -> tuple[float, float]:
        """A drawn restart is one whole sample, split so that its first part is at most the
        median start: a restart's samples hold both."""
        if kind == "stop":
            return self._rng.choice(self.delays), 0.0
        if kind == "start":
            return (self._rng.choice(self.starts) if self.starts else self.start), 0.0
        if not self.restarts:
            return self.start, self.restart
        total = self._rng.choice(self.restarts)
        part = min(total, self.start)
        return part, total - part
