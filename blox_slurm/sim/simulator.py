"""The event-driven simulator: the in-process world.

Events are job completions (a heap keyed by finish time, stale entries dropped lazily),
arrivals (a pointer into the time-sorted workload) and round ticks every
``round_duration``. Policies run only at ticks, as in Blox and as in the controller. A tick in
which nothing can change is skipped: when no job arrived or finished since the last round and
the composition is time-independent (or nothing waits), the clock jumps straight to the round
of the next event. That is exact, not an approximation: a pure, time-independent policy given
the same snapshot returns the same decisions.

Three parts: the event core here (:class:`Run`, advanced a round at a time with
:meth:`Run.step`, so a caller can stop, inspect or drive it), the world that carries out
decisions and referees them (:mod:`.world`), and what is kept of the run (:mod:`.recorder`).
A policy that forks the world (the synthesizer) starts a new run from a snapshot.
"""

from __future__ import annotations

import gc
import math
import time as _time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..core.accounting import DecayedUsage
from ..core.composition import Composition
from ..core.fit import sim_hints
from ..core.model import ClusterSnapshot, Gpu, Node, make_job
from ..core.round import decide
from ..core.throughput import DEFAULT_THROUGHPUT, ThroughputModel, for_rates, for_steps
from ..workloads.schema import JobSpec, Workload
from .config import SimConfig
from .recorder import Recorder
from .records import RunResult
from .world import SimulationError, World, ceil_to

ProgressFn = Callable[[int, int], None]  # (finished measured-or-all jobs, total)

#: The cyclic collector's first threshold while a run steps (CPython's default: 700). A run
#: makes millions of short-lived records and tuples, none in a cycle, and at the default the
#: collector ran ~6,000 times in a million-job LAS run, 4 % of its CPU, its full collections
#: walking every finished job's record; at this, 0.45 s instead of 1.3 s of 300,000 jobs'.
_YOUNG_OBJECTS = 20_000

__all__ = ["ProgressFn", "Run", "SimulationError", "Simulator"]


class Simulator:
    def __init__(
        self,
        workload: Workload,
        composition: Composition,
        cluster: tuple[tuple[Node, ...], tuple[Gpu, ...]],
        config: SimConfig | None = None,
        throughput: ThroughputModel | None = None,
        start: ClusterSnapshot | None = None,
    ) -> None:
        """``start``: continue from this state instead of an empty cluster at the first
        arrival -- its jobs are active at ``start.now`` (running ones keep their GPUs, rates
        and progress; every job needs a ``duration``) and its usage seeds fair share. This is
        how a policy forks the world it sees into the simulator (the policy synthesizer)."""
        self.workload = workload
        self.start = start
        self.comp = composition
        self.nodes, self.gpus = cluster
        self.cfg = config or SimConfig()
        self.model = for_rates(throughput or DEFAULT_THROUGHPUT, self.cfg.rates)
        too_big = [j.id for j in workload.jobs if j.num_gpus > len(self.gpus)]
        if too_big:
            raise SimulationError(f"jobs {too_big[:5]} ask for more GPUs than the cluster has "
                                  f"({len(self.gpus)})")
        _check_bound(workload, self.nodes)
        if start is not None:
            unknown = [j.id for j in start.jobs if j.duration is None]
            if unknown:
                raise SimulationError(f"jobs {unknown[:5]} of the start state have no duration "
                                      "to simulate")

    def begin(self, progress: ProgressFn | None = None) -> Run:
        """A new run of this simulation, before its first round."""
        return Run(self, progress)

    def run(self, progress: ProgressFn | None = None) -> RunResult:
        """The whole run: step until nothing is left to happen (or the horizon is reached)."""
        started_wall = _time.perf_counter()
        sim = self.begin(progress)
        with _rarer_collections():
            while sim.step():
                pass
        return sim.result(_time.perf_counter() - started_wall)


class Run:
    """One simulation in progress: the clock, the arrivals still to come, the world and the
    recorder. Each :meth:`step` takes the completions and arrivals up to the clock's round and
    runs that round (or, when nothing can change, jumps to the round of the next event)."""

    def __init__(self, sim: Simulator, progress: ProgressFn | None) -> None:
        cfg, workload = sim.cfg, sim.workload
        self.comp, self.model, self.progress = sim.comp, sim.model, progress
        self.rd = cfg.round_duration
        self.specs = _in_arrival_order(workload.jobs)
        measured = (frozenset(j.id for j in self.specs if workload.measured(j.id))
                    if workload.measure is not None else None)
        self.goal = len(measured) if measured is not None else len(self.specs)
        self.stop_early = measured is not None and cfg.stop_when_measured
        self.max_time = cfg.max_time if cfg.max_time is not None else math.inf
        self.time_dependent = sim.comp.time_dependent
        # A policy that re-places running jobs with time alone (Gavel's rounds) needs every
        # round while jobs run, not only while some wait.
        self.every_round = getattr(sim.comp.scheduling, "moves_with_time", False)
        self.gavel_clock = cfg.clock == "gavel"
        self.next_spec = 0
        first = self.specs[0].submit_time if self.specs else 0.0
        self.t = first if self.gavel_clock else ceil_to(first, self.rd)
        if sim.start is not None:
            self.t = sim.start.now
        usage = DecayedUsage(cfg.usage_half_life, self.t)
        runs_on = for_steps(sim.model, cfg.steps, cfg.round_duration)  # policies: sim.model
        self.world = World(sim.nodes, sim.gpus, cfg, runs_on, usage,
                           getattr(sim.comp.scheduling, "reads_service_index", False))
        self.recorder = Recorder(measured)
        if sim.start is not None:
            usage.values = dict(sim.start.usage)
            self.world.state = dict(sim.start.state)
            self.world.resume(sim.start.jobs, self.t)
            self.recorder.busy(self.t, self.world.busy)
        self.rounds = 0
        self.dirty = True  # something arrived or changed since the last round
        self.done = False

    def peek(self) -> float:
        """The time of the round the next :meth:`step` looks at (infinity once done)."""
        return math.inf if self.done else self.t

    def step(self) -> bool:
        """Advance by one round or one jump; False once the run is over."""
        if self.done:
            return False
        # At the cut, completions up to max_time still count (a fork's horizon is exact).
        cut = self.t > self.max_time
        self._complete(self.max_time if cut else self.t)
        if not cut:
            self._arrive()
            if self.progress is not None and self.dirty:
                self.progress(self.recorder.done_goal, self.goal)
        if cut or self._over():
            self.done = True
        elif self.dirty or (self.time_dependent and (
                self.world.queued or (self.every_round and self.world.active))):
            self._round()
        else:
            self._jump()
        return not self.done

    def result(self, wall_seconds: float = 0.0) -> RunResult:
        rec = self.recorder
        return RunResult(
            name=self.comp.name, total_gpus=len(self.world.gpus), jobs=tuple(rec.records),
            utilization=tuple(rec.utilization), measured=rec.measured,
            unfinished=tuple(sorted(self.world.active))
            + tuple(s.id for s in self.specs[self.next_spec:]),
            rounds=self.rounds, decide_calls=self.rounds, wall_seconds=wall_seconds,
            responsiveness_offset=self.world.cfg.round_duration
            if self.world.cfg.responsiveness == "blox" else 0.0,
            choices=tuple(rec.choices))

    def _complete(self, upto: float) -> None:
        world, rec = self.world, self.recorder
        while (ended := world.pop_completion(upto)) is not None:
            job, at = ended
            rec.busy(at, world.busy)
            rec.finished(job, at)
            self.dirty = True

    def _arrive(self) -> None:
        specs, i, t, world = self.specs, self.next_spec, self.t, self.world
        while i < len(specs) and specs[i].submit_time <= t:
            s = specs[i]
            world.arrive(make_job(
                id=s.id, submit_time=s.submit_time, num_gpus=s.num_gpus, user=s.user,
                account=s.account, model=s.model, duration=s.duration, cpus=s.cpus,
                memory_mb=s.memory_mb, last_event=s.submit_time,
                hints=sim_hints(s.gpu_types, s.nodes)))
            i += 1
            self.dirty = True
        self.next_spec = i

    def _over(self) -> bool:
        if self.stop_early and self.recorder.done_goal >= self.goal:
            return True
        return not self.world.active and self.next_spec >= len(self.specs)

    def _round(self) -> None:
        self.rounds += 1
        world, t = self.world, self.t
        d = decide(world.snapshot(t, self.model), self.comp, rank_all=False)
        if d.state:
            self.recorder.chose(t, d.composition, d.state)
        if not d.empty:
            world.apply(d, t)
            self.recorder.busy(t, world.busy)
        # A round that changed something is followed by one more: the bundled compositions
        # are idempotent once their decisions are applied (tests/test_round.py), but a plug-in
        # need not be, so only a no-op round proves that a time-independent composition will
        # do nothing until the next event.
        self.dirty = bool(d.start or d.stop or d.move or d.admit)
        self.t = self._next_round(t)

    def _next_round(self, t: float) -> float:
        """The round after the one at ``t``: a round later, or on Gavel's clock (``clock =
        "gavel"``) when the last running job ends if sooner, and when nothing runs, at the
        next arrival. Gavel's waiting jobs may sit out an idle cluster until then (jobs that
        arrived since its last reset have no allocation), and on a light trace that wait
        was most of the difference from Gavel's own JCTs (2869ce: -11 %)."""
        nxt = t + self.rd
        if not self.gavel_clock:
            return nxt
        world = self.world
        if world.finish_at:
            return min(nxt, max(world.finish_at.values()))
        if world.busy == 0 and self.next_spec < len(self.specs):
            arrival = self.specs[self.next_spec].submit_time
            return arrival if arrival > t else nxt
        return nxt

    def _jump(self) -> None:
        """Nothing can change before the next event: go to its round (on Gavel's clock, to
        the event itself)."""
        nxt = self.world.next_completion()
        if self.next_spec < len(self.specs):
            nxt = min(nxt, self.specs[self.next_spec].submit_time)
        if nxt == math.inf:
            self.done = True  # jobs wait that no decision will ever start
        elif self.gavel_clock and nxt > self.t:
            self.t = nxt
        else:
            self.t = max(self.t + self.rd, ceil_to(nxt, self.rd))


@contextmanager
def _rarer_collections() -> Iterator[None]:
    """The cyclic collector runs after :data:`_YOUNG_OBJECTS` new objects (unless set
    higher), and as before afterwards: it collects the same cycles, less often."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], _YOUNG_OBJECTS), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _check_bound(workload: Workload, nodes: tuple[Node, ...]) -> None:
    """Jobs bound to k nodes must fit on the k largest ones, or they would wait forever."""
    sizes = sorted((len(n.gpu_ids) for n in nodes), reverse=True)
    never = [j.id for j in workload.jobs
             if j.nodes is not None and (j.nodes > len(sizes) or j.num_gpus > sum(sizes[:j.nodes]))]
    if never:
        raise SimulationError(f"jobs {never[:5]} are bound to fewer nodes than their GPUs need "
                              f"(largest node: {sizes[0] if sizes else 0} GPUs)")


def _in_arrival_order(specs: tuple[JobSpec, ...]) -> tuple[JobSpec, ...]:
    """Arrivals are consumed by a pointer: a workload built by hand out of order would
    otherwise hold early jobs back behind a later one (and silently inflate JCTs)."""
    if any(a.submit_time > b.submit_time for a, b in zip(specs, specs[1:], strict=False)):
        return tuple(sorted(specs, key=lambda s: (s.submit_time, s.id)))
    return specs
