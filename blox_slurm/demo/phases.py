"""Where one emulator run's batch scheduler passes fall, on the simulator's clock.

The simulator's pass clock (:mod:`blox_slurm.sim.passes`) needs two phases that belong to
the run, not to Slurm: where slurmctld's background loop ticks (set when slurmctld
started: it drifts little over a demo) and where Slurm's whole seconds fall (the epoch's,
from the run's origin). The second is arithmetic; the first is fitted to the run's first
starts, the way ``calibrate`` takes Slurm's latencies from the same run.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..sim.passes import fit_tick_phase
from ..slurm.calibrate import Timings

#: Slurm's ``batch_sched_delay``, which the emulator leaves at its default.
BATCH_SCHED_DELAY = 3.0


def pass_phases(asks: Iterable[float], timings: Timings, origin: float,
                first_round: float) -> tuple[float, float]:
    """``(tick phase, second phase)`` of a run whose simulator clock starts at ``origin``
    (epoch seconds) with its first round where the controller's began (``first_round``).

    ``asks``: the submissions and job ends (epoch seconds); the store's stops and releases
    ask too. Each job's first StartTime is paired with its last release before it (a job
    held again before it started was released more than once; StartTime's whole second
    may precede its release by less than a second)."""
    by_job: dict[int, list[float]] = {}
    for job, at in timings.releases:  # a round's time on the simulator's clock
        by_job.setdefault(job, []).append(at - first_round)
    starts: list[tuple[float, float]] = []
    others = [t - origin for t in asks] + [at - first_round for _, at in timings.stops]
    for job, released in by_job.items():
        runs = timings.runs.get(job, ())
        if runs:  # its first StartTime, paired with the last release before it
            start = runs[0] - origin
            paired = max((r for r in released if r <= start + 1.0), default=None)
            if paired is not None:
                starts.append((paired, start))
                released.remove(paired)
        others += released
    second = (-origin) % 1.0
    tick, _ = fit_tick_phase(others, starts, BATCH_SCHED_DELAY, second)
    return tick, second
