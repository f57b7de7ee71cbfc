"""Slurm's batch scheduler as a clock: when a released job gets its StartTime.

On an idle-enough cluster a job released by ``scontrol release`` starts on the batch
scheduler's next pass, and those passes do not come when asked. Every submission, release,
update and job end only *asks* for one (``queue_job_scheduler``); slurmctld's background
loop looks about once a second (its tick) and runs a pass when one was asked for and
``batch_sched_delay`` (3 s by default) whole seconds of ``time()`` have passed since the last
pass. So a job released within three seconds of any such event waits for the pass three
seconds after it, and one released later starts on the next tick. Recorded emulator runs
(``docs/simulator.md``, "Slurm's batch scheduler as a clock") show exactly that: with one
tick phase per run, this clock gives every first start's whole-second StartTime in most
runs, where a latency drawn from the run's samples (0.2, 1.2 or 2.2 s) picks the wrong one
for a job in three.

Two phases place it on the simulator's clock: ``tick_phase`` (the background loop looks at
``tick_phase + k`` seconds) and ``second_phase`` (Slurm's whole seconds begin at
``second_phase + k``: StartTimes are floored to them, and the spacing between passes is
counted in them). The clock starts as if a pass ran at the last tick at or before time 0: a
controller starts beside a Slurm whose nodes and jobs have just set passes off.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence


class PassClock:
    """The passes of one Slurm's batch scheduler, fed the events that ask for them.

    Events may be fed in any order as long as none is earlier than a release already
    answered: they are kept in a heap and taken in time order when a release asks."""

    def __init__(self, delay: float, tick_phase: float, second_phase: float) -> None:
        self.delay = delay
        self.tick = tick_phase % 1.0
        self.second = second_phase % 1.0
        self._asks: list[float] = []
        first = self.tick + math.floor(-self.tick)  # the last tick at or before 0
        self._last = self._second_of(first)  # the whole second of the last pass
        self._due: float | None = None  # the tick of the pass asked for and not yet run

    def ask(self, t: float) -> None:
        """An event at ``t`` that asks for a pass (a submission, a job's end, an update)."""
        heapq.heappush(self._asks, t)

    def start_time(self, t: float) -> float:
        """The StartTime (on Slurm's whole seconds) of a job released at ``t``, every event
        before it taken into account; the release asks for a pass itself."""
        asks = self._asks
        while asks and asks[0] <= t:
            self._take(heapq.heappop(asks))
        self._take(t)
        assert self._due is not None
        return self.whole_second(self._due)

    def whole_second(self, t: float) -> float:
        """``t`` floored to Slurm's whole seconds, as its StartTime shows a job started at
        ``t``."""
        return self.second + self._second_of(t)

    def _take(self, t: float) -> None:
        """An ask at ``t``: it joins the pass already due after it, or sets one off at the
        first tick after ``t`` that is ``delay`` whole seconds past the last pass."""
        due = self._due
        if due is not None and due > t:
            return
        if due is not None:
            self._last = self._second_of(due)
        after = self.tick + math.floor(t - self.tick) + 1.0  # the first tick after t
        spaced = self.second + self._last + self.delay  # Slurm's second the spacing allows
        self._due = max(after, self.tick + math.ceil(spaced - self.tick))

    def _second_of(self, t: float) -> int:
        return math.floor(t - self.second)


def fit_tick_phase(asks: Iterable[float], starts: Sequence[tuple[float, float]], delay: float,
                   second_phase: float, step: float = 0.02) -> tuple[float, int]:
    """The tick phase that gives the most of ``starts`` (release time, Slurm's StartTime)
    exactly, with ``asks`` the other events that asked for passes, and how many it gives.
    Every phase of one run of matches is as good as the others: the middle one is taken,
    the farthest from the phases where the count drops."""
    asks = sorted(asks)
    phases = [i * step for i in range(round(1.0 / step))]
    hits = [_hits(asks, starts, delay, p, second_phase) for p in phases]
    best = max(hits)
    n = len(phases)
    # the longest run of best phases, around the circle
    runs: list[tuple[int, int]] = []
    for i in range(n):
        if hits[i] == best and hits[i - 1] != best:
            length = 0
            while length < n and hits[(i + length) % n] == best:
                length += 1
            runs.append((length, i))
    if not runs:  # every phase equally good
        return 0.5, best
    length, begin = max(runs)
    return phases[(begin + length // 2) % n], best


def _hits(asks: Sequence[float], starts: Sequence[tuple[float, float]], delay: float,
          tick_phase: float, second_phase: float) -> int:
    """How many of ``starts`` a clock with this tick phase gives to the second."""
    clock = PassClock(delay, tick_phase, second_phase)
    for t in asks:
        clock.ask(t)
    hits = 0
    for released, start in sorted(starts):
        hits += abs(clock.start_time(released) - start) < 1e-6
    return hits
