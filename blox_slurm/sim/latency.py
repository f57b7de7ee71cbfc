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

With ``batch_sched_delay`` set, a first start is not drawn: it gets the StartTime of the
pass the clock of :mod:`.passes` gives it (restarts are still drawn: their wait holds the
requeue's own delay and the stopped jobs' completion as well).
"""

from __future__ import annotations

import random

from .config import SimConfig
from .passes import PassClock


class SlurmLatency:
    """Each start's latency from the round that decides it, as the world charges it."""

    def __init__(self, cfg: SimConfig) -> None:
        self.start, self.restart = cfg.start_latency, cfg.restart_latency
        self.starts = cfg.start_latency_samples
        self.restarts = cfg.restart_latency_samples
        self.delay, self.delays = cfg.stop_delay, cfg.stop_delay_samples
        self.stop_latency = cfg.stop_latency
        self._rng = random.Random(cfg.latency_seed)
        self._round = -1.0
        self._drawn: dict[str, tuple[float, float]] = {}
        self.passes = (None if cfg.batch_sched_delay is None else PassClock(
            cfg.batch_sched_delay, cfg.sched_tick_phase, cfg.slurm_second_phase))

    @property
    def instant(self) -> bool:
        """No latency, drawn or fixed, and no batch passes: every start runs and every stop
        ends in the round that decides it (Gavel's world), and nothing is drawn, so the
        world need not ask at each of its starts and stops."""
        return (self.passes is None and not (self.starts or self.restarts or self.delays)
                and self.start == 0.0 and self.restart == 0.0 and self.delay == 0.0)

    def of(self, preempted: bool, t: float, stopped: bool = False) -> tuple[float, float]:
        """``(start, restart)`` of a start decided at ``t`` (in a round that ``stopped``
        running jobs): its own latency (which a handover replaces) and what a restart adds
        to it. A StartTime in the release's own second, before the release, counts as no
        latency: the simulator runs nothing in the past."""
        if self.passes is not None:
            if not preempted:
                return max(0.0, self._pass_start(t, stopped) - t), 0.0
            self.passes.ask(t)
        if not (self.starts or self.restarts):
            return self._draw("restart" if preempted else "start")
        return self._shared("restart" if preempted else "start", t)

    def _pass_start(self, t: float, stopped: bool) -> float:
        """The StartTime of a first start released at ``t``: its batch pass's, or, in a
        round that stopped running jobs, the pass their completion sets off at once (the
        epilog's ``schedule()``, which starts every released job that fits, not only the
        ones the stops were for), if that comes first."""
        passes = self.passes
        assert passes is not None
        start = passes.start_time(t)
        if stopped:
            start = min(start, passes.whole_second(t + self.stop_latency))
        return start

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
