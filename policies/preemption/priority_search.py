"""The ``priority`` preemption policy's choice, found with a logarithmic number of placement
trials instead of one per candidate.

``priority`` stops the lowest-ranked running jobs, one more at a time, until the waiting job
fits, then tries to spare each chosen victim again: with ``k`` candidates that is up to ``k``
placement trials and, sparing, ``k`` trials of ``k`` GPU returns each. Under Gavel's rounds
(every round re-picks which jobs run on which type, dozens of waiting jobs each needing room on
one type while the tail of the order holds jobs of every type) that search was most of a
simulation's time: 0e4a51 spent 480 of its 600 profiled seconds in it.

When placement's success only grows with free GPUs (true of every bundled placement: more free
GPUs never make a job fit less), both loops can search instead of walk, and find the same
victims: the smallest tail prefix that fits by bisection; then, sparing in the same order,
the longest run of next victims that can all be spared at once (galloping, then bisection),
which are exactly the ones the one-at-a-time loop spares, since every state it passes through
holds at least the GPUs of the batch's. A trial is one copy of the pool and one return of the
GPUs it adds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from blox_slurm.core.abstractions import Fits, FreeView
from blox_slurm.core.model import Job
from blox_slurm.core.registry import register

from .priority import PriorityPreemption


def _first_true(lo: int, hi: int, ok: Callable[[int], bool]) -> int:
    """The smallest ``m`` in ``[lo, hi]`` with ``ok(m)``, for ``ok`` false then true."""
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


@register("preemption", "priority_search")
class PrioritySearchPreemption(PriorityPreemption):
    """``priority``'s victims (tail of the order, spared again where unneeded) in O(log k)
    placement trials per victim kept; for placements that fit at least as well with more free
    GPUs."""

    def victims(
        self, job: Job, candidates: Sequence[Job], free: FreeView, count: int, fits: Fits
    ) -> Sequence[Job]:
        tail = list(reversed(candidates))

        def fits_with(jobs: Sequence[Job]) -> bool:
            trial = free.copy()
            trial.give([g for v in jobs for g in v.gpus])
            return trial.count >= count and fits(trial)

        if not tail or not fits_with(tail):
            return ()
        m = _first_true(1, len(tail), lambda n: fits_with(tail[:n]))
        chosen = tail[:m]
        if not self.spares_victims or m == 1:
            return chosen
        return self._spare(chosen, fits_with)

    @staticmethod
    def _spare(chosen: list[Job], fits_with: Callable[[Sequence[Job]], bool]) -> list[Job]:
        """``priority``'s sparing: from the second-highest-ranked victim down, each is spared
        when the others still make room; a batch that can all be spared is spared in one
        trial."""
        order = list(reversed(chosen[:-1]))  # the order in which priority tries them
        spared: set[int] = set()
        i = 0
        while i < len(order):
            def without(n: int, start: int = i) -> bool:
                out = spared | {v.id for v in order[start:start + n]}
                return fits_with([v for v in chosen if v.id not in out])

            if not without(1):
                i += 1  # kept
                continue
            step = 1
            while i + 2 * step <= len(order) and without(2 * step):
                step *= 2
            hi = min(2 * step, len(order) - i)

            def last(n: int, hi: int = hi) -> bool:
                return n >= hi or not without(n + 1)

            # the longest n in [step, hi] that can all be spared (without: true, then false)
            n = _first_true(step, hi, last)
            spared.update(v.id for v in order[i:i + n])
            i += n + 1  # the next one (if any) is kept: sparing it failed
        return [v for v in chosen if v.id not in spared]
