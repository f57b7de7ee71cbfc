"""Slurm's part of a start (and of a stop) in the simulator: the calibrated medians, or a
draw from the latencies measured on the cluster.

Slurm's StartTime has whole seconds, and its batch scheduler starts released jobs on passes
that come at most every ``batch_sched_delay`` (3 s by default), so a job released in a round
shows a start latency of a few whole seconds less the round's fraction: on one emulator run
0.0, 0.77, 0.78 or 1.78 s, one start to the next. With the median for every start, every
simulated job crosses a policy's service threshold the same number of rounds after its
release; on Slurm some cross a round later, and at short rounds which ones decides who is
preempted next, and everything after it. Drawn from the measured latencies, each start gets
Slurm's spread, and a prediction is the median of several draws (``blox-slurm demo``).
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

    def of(self, preempted: bool) -> tuple[float, float]:
        """``(start, restart)``: a start's own latency (which a handover replaces) and what a
        restart adds to it. A drawn restart is one whole sample, split so that its first part
        is at most the median start: a restart's samples hold both."""
        if not preempted:
            return (self._rng.choice(self.starts) if self.starts else self.start), 0.0
        if not self.restarts:
            return self.start, self.restart
        total = self._rng.choice(self.restarts)
        part = min(total, self.start)
        return part, total - part

    def stop(self) -> float:
        """How long a stopped job runs on after its round (``SimConfig.stop_delay``)."""
        return self._rng.choice(self.delays) if self.delays else self.delay
