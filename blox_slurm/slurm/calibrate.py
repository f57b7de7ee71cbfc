"""``blox-slurm calibrate``: the simulator's timing parameters, measured from what a controller
has recorded on a cluster (the emulator or a real one).

The simulator starts a job at its round's tick and counts progress from then; on Slurm the
controller's round takes time to observe, decide and apply, the batch scheduler starts a
released job on its next pass, and a requeued job is lifted to ``now+2`` (see
:data:`~blox_slurm.slurm.client.REVOKE_MARGIN`). Those delays are a large share of a short
job, and they are what ``start_latency`` and ``restart_latency`` model. Nothing is submitted to
measure them: every figure comes from the store (rounds, the ``release`` verbs and Slurm's
StartTime of every run), so calibrating a production cluster costs nothing and disturbs no one.

Slurm's StartTime has whole seconds (truncated): a latency is exact to within one second,
and the store counts a run's service from that same truncated time, so the median is what
the simulator should count from too. Several stores (runs) can be calibrated together,
their samples pooled (:func:`calibrate`). What a job does once Slurm runs it is not in the store:
its start-up (``launch_cost``) and its checkpoint restore (``restart_cost``) are the
job's own; add them by hand (``blox-slurm demo`` measures both for its fake job).
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# A run Slurm started in the second of the release shows a StartTime up to 1 s before it.
_STARTTIME_RESOLUTION = 1.0
# At most this many latency samples go to the simulator (see Calibration.samples).
SAMPLES = 101


@dataclass(frozen=True)
class Timings:
    """What a store holds for calibration (see :meth:`~blox_slurm.slurm.store.Store.timings`)."""

    rounds: Sequence[tuple[float, float]]  # (started, seconds) of each applying round, in order
    releases: Sequence[tuple[int, float]]  # (job, start of the round that released it)
    runs: Mapping[int, Sequence[float]]  # job -> its runs' StartTimes, ascending
    # (job, round start) of releases onto the GPUs of jobs that round stopped for it, or of
    # a job it moved: Slurm starts those once the stopped jobs have completed
    after_stop: frozenset[tuple[int, float]] = frozenset()
    # those of them that jobs were stopped for (not moves): the simulator's handovers
    handovers: frozenset[tuple[int, float]] = frozenset()
    # (job, round start) of every stop or move of a run that had begun, and each job's ended
    # runs as (start, end): the store ends a stopped run when the round's apply has
    # requeued it, and the job ran until then
    stops: Sequence[tuple[int, float]] = ()
    ended: Mapping[int, Sequence[tuple[float, float]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Calibration:
    """Measured figures; :meth:`simulation` turns them into ``[simulation]`` parameters."""

    rounds: int
    round_period: float | None  # median seconds between round starts
    round_seconds: float | None  # median seconds a round takes
    first_starts: tuple[float, ...]  # round start -> Slurm's StartTime, first runs
    restarts: tuple[float, ...]  # the same for later runs (a lifted requeue delay's 2 s too)
    after_stops: tuple[float, ...] = ()  # the same for first starts waiting for a stop
    handovers: tuple[float, ...] = ()  # those of them stops were for (moves left out)
    # The same for restarts waiting for a stop (a moved job's among them), and of those the
    # handovers: their latency holds the restart's own delay too (see simulation())
    restarts_after_stops: tuple[float, ...] = ()
    restart_handovers: tuple[float, ...] = ()
    stop_delays: tuple[float, ...] = ()  # the stopping round's start -> the stopped run's end

    def simulation(self) -> dict[str, float]:
        """``round_duration``, ``start_latency``, ``restart_latency`` (what a restart takes
        on Slurm beyond a first start, before it runs), ``stop_latency`` (how much longer a
        start waiting for a stop takes) and ``handover_latency`` (how long a start takes in
        all when jobs were stopped for it: often less than a first start, since the stops'
        completion sets off a scheduling pass), each only when measured.

        A restart waiting for a stop (every move is one) takes the restart's own delay as
        well (on Slurm the lifted requeue delay and the scheduling pass after it), which the
        simulator charges as ``restart_latency`` on every restart: its sample counts less that
        delay, as if it were a first start, or the delay would be charged twice. With the
        stop latency taken from the moves' whole restart, a Gavel move cost two 15 s rounds
        in the simulator where Slurm took one."""
        out: dict[str, float] = {}
        if self.round_period is not None:
            out["round_duration"] = round(self.round_period, 3)
        latency = statistics.median(self.first_starts) if self.first_starts else 0.0
        if self.first_starts:
            out["start_latency"] = round(latency, 3)
        restart = max(0.0, statistics.median(self.restarts) - latency) if self.restarts else 0.0
        if self.restarts:
            out["restart_latency"] = round(restart, 3)
        after_stops = (*self.after_stops, *(v - restart for v in self.restarts_after_stops))
        if after_stops:
            out["stop_latency"] = round(max(0.0, statistics.median(after_stops) - latency), 3)
        handovers = (*self.handovers, *(max(0.0, v - restart) for v in self.restart_handovers))
        if handovers:
            out["handover_latency"] = round(statistics.median(handovers), 3)
        if self.stop_delays:
            out["stop_delay"] = round(statistics.median(self.stop_delays), 3)
        return out

    def samples(self) -> dict[str, tuple[float, ...]]:
        """The first starts' and the plain restarts' latencies and the stop delays
        themselves, for a simulator that draws each start's and stop's
        (``start_latency_samples``, ``restart_latency_samples``, ``stop_delay_samples``):
        Slurm's vary by whole seconds from one start to the next, which a median hides (see
        :mod:`blox_slurm.sim.latency`). A long store's are cut to ``SAMPLES`` evenly spaced
        quantiles, so the file stays small and the draws keep their spread."""
        out: dict[str, tuple[float, ...]] = {}
        if self.first_starts:
            out["start_latency_samples"] = _spread(self.first_starts)
        if self.restarts:
            out["restart_latency_samples"] = _spread(self.restarts)
        if self.stop_delays:
            out["stop_delay_samples"] = _spread(self.stop_delays)
        return out

    def to_toml(self) -> str:
        lines = ["# written by `blox-slurm calibrate` from a controller's store: give it to",
                 "# `blox-slurm simulate --calibration FILE`. Slurm's part only: add your",
                 "# jobs' start-up as launch_cost and their checkpoint restore as restart_cost.",
                 "# Each start and stop draws its latency from the samples (latency_seed",
                 "# picks the draws); without them the simulator charges the medians",
                 "[simulation]"]
        lines += [f"{k} = {v!r}" for k, v in self.simulation().items()]
        lines += [f"{k} = [{', '.join(map(repr, v))}]" for k, v in self.samples().items()]
        return "\n".join(lines) + "\n"


def calibrate(*timings: Timings) -> Calibration:
    """Match every run to the release that led to it and measure from that round's start:
    first runs, restarts and starts that waited for a stop apart.

    Several stores' timings are pooled: one short run has few restarts and stops, so its
    medians depend on which jobs happened to be preempted; the medians of all the runs'
    samples together do not. Each store is matched on its own (job ids and rounds of two
    runs must not meet: a new cluster numbers its jobs from 1 again)."""
    if not timings:
        raise ValueError("calibrate needs the timings of at least one store")
    samples = [_samples(t) for t in timings]
    pooled = {key: tuple(v for s in samples for v in s[key]) for key in samples[0]}
    return Calibration(sum(len(t.rounds) for t in timings), _median(pooled["gap"]),
                       _median(pooled["round"]), pooled["first"], pooled["again"],
                       pooled["stop"], pooled["handover"], pooled["stop_again"],
                       pooled["handover_again"], pooled["stop_delay"])


def _samples(t: Timings) -> dict[str, list[float]]:
    """One store's samples by kind: ``gap`` between round starts, ``round`` seconds, and the
    latency from the releasing round's start of ``first`` runs, restarts (``again``),
    first starts that waited for a ``stop`` and of those the ``handover`` ones, and the
    same two for restarts (``stop_again``, ``handover_again``)."""
    starts = [s for s, _ in t.rounds]
    kinds: dict[str, list[float]] = {
        "gap": [b - a for a, b in zip(starts, starts[1:], strict=False) if b > a],
        "round": [s for _, s in t.rounds], "first": [], "again": [], "stop": [],
        "handover": [], "stop_again": [], "handover_again": [],
        "stop_delay": _stop_delays(t)}
    released: dict[int, list[float]] = {}
    for job_id, at in t.releases:
        released.setdefault(job_id, []).append(at)
    for job_id, runs in t.runs.items():
        rel = sorted(released.get(job_id, ()))
        for i, begun in enumerate(runs):
            release = _release_of(rel, begun, runs[i - 1] if i else None)
            if release is not None:
                stop = (job_id, release) in t.after_stop
                latency = max(0.0, begun - release)
                again = "_again" if i else ""
                kinds["stop" + again if stop else "again" if i else "first"].append(latency)
                if (job_id, release) in t.handovers:
                    kinds["handover" + again].append(latency)
    return kinds


def _stop_delays(t: Timings) -> list[float]:
    """For each stop, the time from its round's start to the end of the run it stopped (the
    last of the job's runs begun by then, if it ended at or after that round)."""
    out = []
    for job_id, at in t.stops:
        runs = [end for start, end in t.ended.get(job_id, ()) if start <= at <= end]
        if runs:
            out.append(max(runs) - at)
    return out


def _release_of(releases: Sequence[float], begun: float, previous: float | None
                ) -> float | None:
    """The last of the sorted ``releases`` before a run began at ``begun`` (up to a second
    later: a truncated StartTime) and after the previous run began; None for a run no
    release of ours led to (it ran while the controller failed open, or before it managed
    the job)."""
    k = bisect.bisect_right(releases, begun + _STARTTIME_RESOLUTION)
    if k == 0 or (previous is not None and releases[k - 1] <= previous):
        return None
    return releases[k - 1]


def _spread(values: Sequence[float]) -> tuple[float, ...]:
    """``values`` sorted and rounded to the millisecond, or ``SAMPLES`` evenly spaced
    order statistics of them when there are more."""
    ordered = sorted(round(v, 3) for v in values)
    n = len(ordered)
    if n <= SAMPLES:
        return tuple(ordered)
    return tuple(ordered[round(i * (n - 1) / (SAMPLES - 1))] for i in range(SAMPLES))


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None

