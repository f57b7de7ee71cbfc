"""The event-driven simulator: the in-process world.

Events are job completions (a heap keyed by finish time, stale entries dropped lazily),
arrivals (a pointer into the time-sorted workload) and round ticks every
``round_duration``. Policies run only at ticks, as in Blox and as in the controller. A tick in
which nothing can change is skipped: when no job arrived or finished since the last round and
the composition is time-independent (or nothing waits), the clock jumps straight to the round
of the next event. That is exact, not an approximation: a pure, time-independent policy given
the same snapshot returns the same decisions.

The simulator is also the referee: it rejects decisions that would give a GPU to two jobs,
start a running job or preempt a waiting one (:class:`SimulationError`), so a faulty policy
fails loudly instead of producing impossible numbers.
"""

from __future__ import annotations

import heapq
import math
import time as _time
from collections.abc import Callable

from .. import transitions
from ..abstractions import FreeGpus
from ..composition import Composition
from ..model import ClusterSnapshot, Gpu, Job, JobState, Node, NodeState, usage_key
from ..round import decide
from ..throughput import DEFAULT_THROUGHPUT, ThroughputModel
from ..workloads.schema import Workload
from .config import SimConfig
from .records import JobRecord, RunResult

ProgressFn = Callable[[int, int], None]  # (finished measured-or-all jobs, total)


class SimulationError(RuntimeError):
    """A policy asked for something impossible; the message names the round and the job."""


def _ceil_to(t: float, step: float) -> float:
    return math.ceil(t / step - 1e-9) * step


class DecayedUsage:
    """Decayed GPU-seconds per ``usage_key``, kept incrementally: O(parties) per round.

    Values are stored as of ``self.t``. A run's GPU-seconds added at ``at`` (a completion
    between rounds) are pre-scaled by 2^((at - t) / half_life), so the next :meth:`at` decays
    every entry with one multiplication and no per-job pass.
    """

    _MAX_PRESCALE = 64.0  # half-lives; beyond this, decay first so 2^x stays far from overflow

    def __init__(self, half_life: float, t: float = 0.0) -> None:
        self.half_life = half_life
        self.t = t
        self.values: dict[str, float] = {}
        self._keys: dict[tuple[str, str], tuple[str, str]] = {}  # (user, account) -> keys

    def add(self, job: Job, at: float) -> None:
        """Count ``job``'s current run, ended at ``at``, for its user and account."""
        if job.run_since is None:
            return
        gpu_seconds = len(job.gpus) * (at - job.run_since)
        if (at - self.t) / self.half_life > self._MAX_PRESCALE:
            self.at(at)
        scaled = gpu_seconds * 2.0 ** ((at - self.t) / self.half_life)
        party = (job.user, job.account)
        keys = self._keys.get(party)
        if keys is None:
            keys = self._keys[party] = (usage_key("user", job.user),
                                        usage_key("account", job.account))
        values = self.values
        for key in keys:
            values[key] = values.get(key, 0.0) + scaled

    def at(self, t: float) -> dict[str, float]:
        """The decayed values at ``t`` (a copy: snapshots are immutable)."""
        if t != self.t and self.values:
            f = 0.5 ** ((t - self.t) / self.half_life)
            self.values = {k: v * f for k, v in self.values.items()}
        self.t = t
        return dict(self.values)


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
        self.model = throughput or DEFAULT_THROUGHPUT
        too_big = [j.id for j in workload.jobs if j.num_gpus > len(self.gpus)]
        if too_big:
            raise SimulationError(f"jobs {too_big[:5]} ask for more GPUs than the cluster has "
                                  f"({len(self.gpus)})")
        if start is not None:
            unknown = [j.id for j in start.jobs if j.duration is None]
            if unknown:
                raise SimulationError(f"jobs {unknown[:5]} of the start state have no duration "
                                      "to simulate")

    def _finish_time(self, job: Job, t: float) -> float:
        """When running ``job`` (started or seen at ``t``) completes at its current rate."""
        since = job.work_since if job.work_since is not None else t
        ft = since + ((job.duration or 0.0) - job.work_base) / job.rate
        if self.cfg.quantize_to_rounds:
            ft = _ceil_to(ft, self.cfg.round_duration)
        return ft

    def run(self, progress: ProgressFn | None = None) -> RunResult:
        started_wall = _time.perf_counter()
        cfg, comp, model = self.cfg, self.comp, self.model
        rd = cfg.round_duration
        specs = self.workload.jobs
        # Arrivals are consumed by a pointer: a workload built by hand out of order would
        # otherwise hold early jobs back behind a later one (and silently inflate JCTs).
        if any(a.submit_time > b.submit_time for a, b in zip(specs, specs[1:], strict=False)):
            specs = tuple(sorted(specs, key=lambda s: (s.submit_time, s.id)))
        n_specs = len(specs)
        measured = (frozenset(j.id for j in specs if self.workload.measured(j.id))
                    if self.workload.measure is not None else None)
        goal = len(measured) if measured is not None else n_specs
        stop_early = measured is not None and cfg.stop_when_measured
        gpu_node = [g.node for g in self.gpus]
        gpu_type = [g.type for g in self.gpus]
        owner: list[int | None] = [None] * len(self.gpus)
        start_jobs = self.start.jobs if self.start is not None else ()
        for job in start_jobs:
            for g in job.gpus:
                if owner[g] is not None:
                    raise SimulationError(f"start state: GPU {g} held by jobs {owner[g]} and "
                                          f"{job.id}")
                owner[g] = job.id
        # The free-GPU index handed to policies with each snapshot (see ClusterSnapshot.free).
        free = FreeGpus({n.name: tuple(g for g in n.gpu_ids if owner[g] is None)
                         for n in self.nodes if n.state is NodeState.UP}, self.gpus)

        def release(gpus: tuple[int, ...]) -> None:
            for g in gpus:
                owner[g] = None
            free.give(gpus)

        def take(job_id: int, gpus: tuple[int, ...]) -> None:
            for g in gpus:
                if owner[g] is not None:
                    raise SimulationError(f"t={t}: GPU {g} given to job {job_id} but job "
                                          f"{owner[g]} holds it")
                owner[g] = job_id
            free.take(gpus)

        time_dependent = comp.time_dependent

        active: dict[int, Job] = {}
        # The jobs of ``active`` without GPUs, in ``active`` order: the snapshot's pending
        # index. A preempted job re-enters at the end, so the order is repaired before the
        # next snapshot (``requeued``).
        queued: dict[int, Job] = {}
        requeued = False
        finish_at: dict[int, float] = {}
        heap: list[tuple[float, int]] = []
        records: list[JobRecord] = []
        util: list[tuple[float, int]] = [(0.0, 0)]
        busy = 0
        done_goal = 0
        rounds = decisions = 0
        i = 0
        t = _ceil_to(specs[0].submit_time, rd) if specs else 0.0
        usage = DecayedUsage(cfg.usage_half_life, t)
        dirty = True

        def note_busy(at: float) -> None:
            if util[-1][0] == at:
                util[-1] = (at, busy)
            else:
                util.append((at, busy))

        if self.start is not None:
            t = self.start.now
            usage = DecayedUsage(cfg.usage_half_life, t)
            usage.values = dict(self.start.usage)
            for job in start_jobs:
                active[job.id] = job
                if not job.gpus:
                    queued[job.id] = job
                    continue
                busy += len(job.gpus)
                finish_at[job.id] = ft = self._finish_time(job, t)
                heapq.heappush(heap, (ft, job.id))
            note_busy(t)

        max_time = cfg.max_time if cfg.max_time is not None else math.inf
        while True:
            # At the cut, completions up to max_time still count (a fork's horizon is exact).
            cut = t > max_time
            upto = max_time if cut else t
            while heap and heap[0][0] <= upto:
                ft, jid = heapq.heappop(heap)
                if finish_at.get(jid) != ft:
                    continue  # superseded by a preemption
                del finish_at[jid]
                job = active.pop(jid)
                usage.add(job, ft)
                release(job.gpus)
                busy -= len(job.gpus)
                note_busy(ft)
                records.append(JobRecord(
                    jid, job.submit_time, job.num_gpus, job.duration or 0.0,
                    job.first_start if job.first_start is not None else ft, ft,
                    job.preemptions, job.attained_service(ft), job.model, job.user))
                if measured is None or jid in measured:
                    done_goal += 1
                dirty = True
            if cut:
                break
            while i < n_specs and specs[i].submit_time <= t:
                s = specs[i]
                active[s.id] = queued[s.id] = Job(
                    s.id, s.submit_time, s.num_gpus, s.user, s.account, s.model, s.duration,
                    s.cpus, s.memory_mb, last_event=s.submit_time)
                i += 1
                dirty = True
            if progress is not None and dirty:
                progress(done_goal, goal)
            if stop_early and done_goal >= goal:
                break
            if not active and i >= n_specs:
                break

            if dirty or (time_dependent and queued):
                rounds += 1
                if requeued:
                    queued = {jid: active[jid] for jid in active if jid in queued}
                    requeued = False
                snap = ClusterSnapshot(t, self.nodes, self.gpus, tuple(active.values()),
                                       throughput=model, usage=usage.at(t), free=free,
                                       pending=tuple(queued.values()))
                d = decide(snap, comp, rank_all=False)
                decisions += 1
                if not d.empty:
                    # Apply: admissions, then stops and moves (freeing GPUs), then starts and
                    # the moved jobs' restarts. A job admitted and started in the same round
                    # is admitted by the start.
                    starting = {st.job_id for st in d.start} if d.admit else ()
                    for jid in d.admit:
                        if jid not in starting:
                            active[jid] = queued[jid] = transitions.admit(active[jid])
                    for jid, key, value in d.marks:
                        active[jid] = job = transitions.mark(active[jid], ((key, value),))
                        if jid in queued:
                            queued[jid] = job
                    for jid in d.preempt:
                        job = self._check(active, jid, JobState.RUNNING, t)
                        usage.add(job, t)
                        release(job.gpus)
                        busy -= len(job.gpus)
                        del finish_at[jid]
                        active[jid] = queued[jid] = transitions.preempt(job, t)
                        requeued = True
                    for st in d.placed:
                        job = self._check(active, st.job_id, JobState.PENDING, t)
                        take(st.job_id, st.gpus)
                        n = len(st.gpus)
                        types = {gpu_type[g] for g in st.gpus}
                        spans = len({gpu_node[g] for g in st.gpus})
                        rate = (model.rate(job, n, spans, *types) if len(types) == 1
                                else min(model.rate(job, n, spans, ty) for ty in types))
                        if rate <= 0:
                            raise SimulationError(f"t={t}: job {job.id} would make no progress "
                                                  f"on {n} GPU(s) of type {sorted(types)}")
                        busy += n
                        del queued[job.id]
                        active[job.id] = job = transitions.start(job, st.gpus, t, rate,
                                                                 cfg.restart_cost)
                        finish_at[job.id] = ft = self._finish_time(job, t)
                        heapq.heappush(heap, (ft, job.id))
                    note_busy(t)
                # A round that changed something is followed by one more: the bundled
                # compositions are idempotent once their decisions are applied (tests/
                # test_round.py), but a plug-in need not be, so only a no-op round proves
                # that a time-independent composition will do nothing until the next event.
                dirty = bool(d.start or d.stop or d.move or d.admit)
                t += rd
            else:
                # Nothing can change before the next event: jump to its round.
                nxt = math.inf
                if heap:
                    nxt = heap[0][0]
                if i < n_specs:
                    nxt = min(nxt, specs[i].submit_time)
                if nxt == math.inf:
                    break  # jobs wait that no decision will ever start
                t = max(t + rd, _ceil_to(nxt, rd))

        return RunResult(
            name=comp.name,
            total_gpus=len(self.gpus),
            jobs=tuple(records),
            utilization=tuple(util),
            measured=measured,
            unfinished=tuple(sorted(active)) + tuple(s.id for s in specs[i:]),
            rounds=rounds,
            decide_calls=decisions,
            wall_seconds=_time.perf_counter() - started_wall,
        )

    @staticmethod
    def _check(active: dict[int, Job], jid: int, want: JobState, t: float) -> Job:
        job = active.get(jid)
        if job is None or job.state is not want:
            have = "unknown" if job is None else job.state.value
            raise SimulationError(f"t={t}: decision needs job {jid} {want.value}, it is {have}")
        return job
