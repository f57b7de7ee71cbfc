"""The simulated cluster: who holds which GPU, the active jobs, and when running jobs finish.

The world is the simulator's applier: it carries a round's :class:`Decisions` out (admissions,
marks, stops and moves, then starts) and is the referee that rejects impossible ones
(:class:`SimulationError`): a GPU given to two jobs, a running job started, a waiting one
stopped. It knows nothing of rounds or arrivals' order; :mod:`.simulator` drives it.

Completions are a heap keyed by finish time; a stop leaves its entry behind, dropped lazily
when popped (``finish_at`` says which entry is current). A run that stops jobs every round
(Gavel's, 355,000 stops on its largest trace) would leave the heap mostly stale entries far
in the future, each costing every push and pop: it is rebuilt from ``finish_at`` once stale
entries outnumber current ones.

A model that gives runs a :class:`~blox_slurm.core.throughput.ProgressCurve` (Pollux: speed
changes every epoch) sets when a run finishes and what work a stop keeps; the job record
then carries the run's average rate, so policies reading ``work_done`` see it exact at the
run's ends and interpolated between them.
"""

from __future__ import annotations

import heapq
import math

from ..core import transitions
from ..core.abstractions import FreeGpus
from ..core.accounting import DecayedUsage, run_service
from ..core.model import (
    ClusterSnapshot,
    Decisions,
    Gpu,
    Job,
    JobState,
    Node,
    NodeState,
    make_snapshot,
)
from ..core.service_index import ServiceIndex
from ..core.throughput import CurveModel, ProgressCurve, ThroughputModel
from .config import SimConfig
from .latency import SlurmLatency

#: Stale heap entries tolerated beyond the current ones before the heap is rebuilt: a
#: rebuild costs a pass over the running jobs, so a small run never pays for it.
_STALE_SLACK = 64


class SimulationError(RuntimeError):
    """A policy asked for something impossible; the message names the round and the job."""


def ceil_to(t: float, step: float) -> float:
    """``t`` rounded up to a multiple of ``step`` (a round boundary), tolerant of float noise."""
    return math.ceil(t / step - 1e-9) * step


class World:
    """GPUs, active jobs and pending completions; ``busy`` counts GPUs in use."""

    def __init__(self, nodes: tuple[Node, ...], gpus: tuple[Gpu, ...], cfg: SimConfig,
                 model: ThroughputModel, usage: DecayedUsage, by_service: bool = False) -> None:
        """``by_service``: keep the running jobs by attained service for the snapshots
        (``ClusterSnapshot.by_service``), for a scheduler that reads it."""
        self.nodes, self.gpus, self.cfg, self.model, self.usage = nodes, gpus, cfg, model, usage
        self.by_service = ServiceIndex() if by_service else None
        self._gpu_node = [g.node for g in gpus]
        self._gpu_type = [g.type for g in gpus]
        self._curve_of = model.curve if isinstance(model, CurveModel) else None
        self._curves: dict[int, ProgressCurve] = {}  # running job -> its run's curve
        self.owner: list[int | None] = [None] * len(gpus)
        self.active: dict[int, Job] = {}
        # The jobs of ``active`` without GPUs, in ``active`` order: the snapshot's pending
        # index. A stopped job re-enters at the end, so the order is repaired before the next
        # snapshot (``_requeued``).
        self.queued: dict[int, Job] = {}
        self._requeued = False
        self._seq: dict[int, int] = {}  # active job -> its place in ``active`` (arrival count)
        self._arrivals = 0
        self.finish_at: dict[int, float] = {}
        self._heap: list[tuple[float, int]] = []
        self.busy = 0
        self.state: dict[str, float] = {}  # the composition's (Decisions.state), kept for it
        # When a stopped job's GPUs, and the job itself, are ready again (SimConfig's
        # stop_latency): a start on them, or of it, waits until then. Times past are inert;
        # a job's entry goes when it starts again.
        self._gpu_ready = [0.0] * len(gpus)
        self._job_ready: dict[int, float] = {}
        # The jobs this round's stops were for: their starts are handovers
        # (SimConfig.handover_latency). Kept only when that latency is set and Slurm's batch
        # passes are not modelled (with them, every first start of a stopping round is one).
        self._handed: frozenset[int] = frozenset()
        self._stopped = False  # this round stopped or moved running jobs
        self._latency = SlurmLatency(cfg)
        self._passes = self._latency.passes  # Slurm's batch scheduler (SimConfig), if modelled
        # No wait before any start and no run-on after any stop (a Gavel-mode world): its
        # 355,000 starts and stops ask nothing
        self._instant = (self._latency.instant and not cfg.stop_latency
                         and cfg.handover_latency is None)
        # The free-GPU index handed to policies with each snapshot (see ClusterSnapshot.free).
        self.free = FreeGpus({n.name: n.gpu_ids for n in nodes if n.state is NodeState.UP}, gpus)

    # ------------------------------------------------------------------ jobs entering

    def arrive(self, job: Job) -> None:
        if self._passes is not None:  # a submission asks Slurm for a pass
            self._passes.ask(job.submit_time)
        self._enter(job)
        self.queued[job.id] = job

    def _enter(self, job: Job) -> None:
        self.active[job.id] = job
        self._seq[job.id] = self._arrivals
        self._arrivals += 1

    def resume(self, jobs: tuple[Job, ...], t: float) -> None:
        """The jobs of a start state (a fork): running ones keep their GPUs and progress."""
        owner = self.owner
        for job in jobs:
            for g in job.gpus:
                if owner[g] is not None:
                    raise SimulationError(f"start state: GPU {g} held by jobs {owner[g]} and "
                                          f"{job.id}")
                owner[g] = job.id
        self.free = FreeGpus({n.name: tuple(g for g in n.gpu_ids if owner[g] is None)
                              for n in self.nodes if n.state is NodeState.UP}, self.gpus)
        for job in jobs:
            if not job.gpus:
                self.arrive(job)
                continue
            self._enter(job)
            self._ran(None, job, t)
            self.busy += len(job.gpus)
            self._run_curve(job, job.gpus)
            self._schedule(job, t)

    # ------------------------------------------------------------------ completions

    def next_completion(self) -> float:
        return self._heap[0][0] if self._heap else math.inf

    def pop_completion(self, upto: float) -> tuple[Job, float] | None:
        """The next job that finishes by ``upto``, removed from the world, and its end."""
        heap = self._heap
        while heap and heap[0][0] <= upto:
            ft, jid = heapq.heappop(heap)
            if self.finish_at.get(jid) != ft:
                continue  # superseded by a stop
            del self.finish_at[jid], self._seq[jid]
            self._curves.pop(jid, None)
            job = self.active.pop(jid)
            self._ran(job, None, ft)
            self._end_run(job, ft)
            if self._passes is not None:  # so does a job's end
                self._passes.ask(ft)
            return job, ft
        return None

    # ------------------------------------------------------------------ rounds

    def snapshot(self, t: float, throughput: ThroughputModel) -> ClusterSnapshot:
        if self._requeued:  # stopped jobs went to the end: back to ``active`` order
            queued = self.queued
            self.queued = {jid: queued[jid] for jid in sorted(queued, key=self._seq.__getitem__)}
            self._requeued = False
        jobs = tuple(self.active.values())
        if self.by_service is not None:
            self.by_service.seal(jobs)
        return make_snapshot(now=t, nodes=self.nodes, gpus=self.gpus, jobs=jobs,
                             throughput=throughput, usage=self.usage.at(t), free=self.free,
                             pending=tuple(self.queued.values()), state=dict(self.state),
                             by_service=self.by_service)

    def apply(self, d: Decisions, t: float) -> None:
        """Admissions, then stops and moves (freeing GPUs), then starts and the moved jobs'
        restarts. A job admitted and started in the same round is admitted by the start."""
        self.state.update(d.state)
        starting = {st.job_id for st in d.start} if d.admit else ()
        for jid in d.admit:
            if jid not in starting:
                self._replace(transitions.admit(self.active[jid]), t)
        for jid, key, value in d.marks:
            self._replace(transitions.mark(self.active[jid], ((key, value),)), t)
        # d.preempt and d.placed, read in place (a Gavel run moves 150,000 jobs: a record
        # each, rebuilt only to be read here)
        for sp in d.stop:
            self._stop(sp.job_id, t)
        for m in d.move:
            self._stop(m.job_id, t)
        if self.cfg.handover_latency is not None and self._passes is None:
            self._handed = frozenset(s.for_job for s in d.stop if s.for_job is not None)
        self._stopped = bool(d.stop or d.move)
        for st in d.start:
            self._start(st.job_id, st.gpus, t)
        for m in d.move:
            self._start(m.job_id, m.gpus, t)

    # ------------------------------------------------------------------ internals

    def _replace(self, job: Job, t: float) -> None:
        if job.gpus:
            self._ran(self.active[job.id], job, t)
        self.active[job.id] = job
        if job.id in self.queued:
            self.queued[job.id] = job

    def _ran(self, old: Job | None, new: Job | None, t: float) -> None:
        """At ``t``, a running job's record ``old`` goes (it stopped, finished or was
        replaced) and ``new`` runs: the index of running jobs follows."""
        index = self.by_service
        if index is not None:
            if old is not None:
                index.remove(old)
            if new is not None:
                index.add(new, t)

    def _stop(self, jid: int, t: float) -> None:
        """A stop; one before the job's run began (within its start latency) undoes the
        start instead, as holding a released job again does on Slurm."""
        job = self._check(jid, JobState.RUNNING, t)
        if self._passes is not None:  # and a requeue
            self._passes.ask(t)
        begun = job.run_since is None or t >= job.run_since
        stopping = self.cfg.stop_latency if begun else 0.0
        if stopping:
            for g in job.gpus:
                self._gpu_ready[g] = t + stopping
            self._job_ready[jid] = t + stopping
        if self.by_service is not None:  # (a call for nothing at 355,000 stops otherwise)
            self._ran(job, None, t)
        # It runs on until Slurm requeues it (SimConfig.stop_delay), then holds its GPUs,
        # its service counted, for what is left of the stop latency
        ran = t
        if begun and not self._instant and (delay := self._latency.stop(t)):
            ran += delay
            stopping = max(0.0, stopping - delay)
        self._end_run(job, ran + stopping)
        del self.finish_at[jid]
        curve = self._curves.pop(jid, None)
        work = None
        if curve is not None and job.work_since is not None:
            work = curve.work_after(job.work_base, max(0.0, ran - job.work_since))
        self.active[jid] = self.queued[jid] = (
            transitions.preempt(job, ran, stopping, work) if begun else transitions.unstart(job))
        self._requeued = True

    def _start(self, jid: int, gpus: tuple[int, ...], t: float) -> None:
        job = self._check(jid, JobState.PENDING, t)
        self._take(jid, gpus, t)
        rate = self._rate(job, gpus, t)
        self.busy += len(gpus)
        del self.queued[job.id]
        cfg = self.cfg
        self.active[job.id] = job = transitions.start(
            job, gpus, t, rate, cfg.restart_cost, self._wait(job, gpus, t), cfg.launch_cost)
        if self.by_service is not None:  # as in _stop
            self._ran(None, job, t)
        self._schedule(job, t)

    def _wait(self, job: Job, gpus: tuple[int, ...], t: float) -> float:
        """Seconds from the round at ``t`` to Slurm running ``job`` on ``gpus``: the stopped
        jobs' GPUs freeing, then its own latency, or for a handover whichever is longer.
        With Slurm's batch passes modelled, every first start of a round that stopped jobs
        is such a handover (the stops' completion runs the pass that starts it), and its
        pass's StartTime replaces the calibrated handover latency."""
        if self._instant:
            return 0.0
        cfg = self.cfg
        latency = self._stopping(job.id, gpus, t) if cfg.stop_latency else 0.0
        first = not job.preemptions
        # A restart's own delay on Slurm comes before its run (see SimConfig)
        start, restart = self._latency.of(not first, t, self._stopped)
        if job.id in self._handed:
            handover: float | None = cfg.handover_latency
        else:
            handover = start if first and self._stopped and self._passes is not None else None
        return (latency + start if handover is None else max(latency, handover)) + restart

    def _stopping(self, jid: int, gpus: tuple[int, ...], t: float) -> float:
        """Seconds until the GPUs of jobs stopped before ``t``, and job ``jid`` if it was
        stopped, are free: on Slurm a requeued job holds its GPUs while it completes. Asked
        only with a ``stop_latency``: a start is not charged a call for nothing."""
        ready = max(self._job_ready.pop(jid, t), *(self._gpu_ready[g] for g in gpus))
        return max(0.0, ready - t)

    def _rate(self, job: Job, gpus: tuple[int, ...], t: float) -> float:
        """Progress per second on ``gpus``; a job spread over types runs at the slowest. A
        run with a progress curve runs at its average, from the work done to completion."""
        curve = self._run_curve(job, gpus)
        if curve is not None:
            left = (job.duration or 0.0) - job.work_base
            seconds = curve.seconds_to_finish(job.work_base)
            return left / seconds if seconds > 0 and left > 0 else math.inf
        n, gpu_type = len(gpus), self._gpu_type
        if n == 1:  # most starts of a large run: no sets to build
            rate = self.model.rate(job, 1, 1, gpu_type[gpus[0]])
        else:  # most multi-GPU starts are on one type: no generator for it
            types = {gpu_type[g] for g in gpus}
            spans = len({self._gpu_node[g] for g in gpus})
            rate_of = self.model.rate
            rate = (rate_of(job, n, spans, *types) if len(types) == 1
                    else min(rate_of(job, n, spans, ty) for ty in types))
        if rate <= 0:
            raise SimulationError(f"t={t}: job {job.id} would make no progress on {n} GPU(s) "
                                  f"of type {sorted({gpu_type[g] for g in gpus})}")
        return rate

    def _run_curve(self, job: Job, gpus: tuple[int, ...]) -> ProgressCurve | None:
        """The curve of ``job``'s run on ``gpus`` (kept for its stop), if the model has one."""
        if self._curve_of is None:
            return None
        per_node: dict[str, int] = {}
        for g in gpus:
            per_node[self._gpu_node[g]] = per_node.get(self._gpu_node[g], 0) + 1
        curve = self._curve_of(job, tuple(per_node.values()), self._gpu_type[gpus[0]])
        if curve is not None:
            self._curves[job.id] = curve
        return curve

    def _schedule(self, job: Job, t: float) -> None:
        """Queue the completion of running ``job`` (started or seen at ``t``) at its rate."""
        since = job.work_since if job.work_since is not None else t
        ft = since + ((job.duration or 0.0) - job.work_base) / job.rate
        if self.cfg.quantize_to_rounds:
            ft = ceil_to(ft, self.cfg.round_duration)
        self.finish_at[job.id] = ft
        heap = self._heap
        heapq.heappush(heap, (ft, job.id))
        if len(heap) > 2 * len(self.finish_at) + _STALE_SLACK:
            self._heap = [(at, jid) for jid, at in self.finish_at.items()]
            heapq.heapify(self._heap)

    def _end_run(self, job: Job, at: float) -> None:
        """The current run of ``job`` ends at ``at``: its GPUs free, its usage counted."""
        if job.run_since is not None:
            self.usage.add(job.user, job.account, run_service(len(job.gpus), job.run_since, at),
                           at)
        for g in job.gpus:
            self.owner[g] = None
        self.free.give(job.gpus)
        self.busy -= len(job.gpus)

    def _take(self, job_id: int, gpus: tuple[int, ...], t: float) -> None:
        owner = self.owner
        for g in gpus:
            if owner[g] is not None:
                raise SimulationError(f"t={t}: GPU {g} given to job {job_id} but job "
                                      f"{owner[g]} holds it")
            owner[g] = job_id
        self.free.take(gpus)

    def _check(self, jid: int, want: JobState, t: float) -> Job:
        job = self.active.get(jid)
        if job is None or job.state is not want:
            have = "unknown" if job is None else job.state.value
            raise SimulationError(f"t={t}: decision needs job {jid} {want.value}, it is {have}")
        return job
