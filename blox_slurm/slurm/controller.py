"""The controller daemon: observe -> decide -> apply -> record, once per round.

* **observe**: one jobs call for the managed partitions and one nodes call (plus telemetry
  already pushed by the agents), folded into the store's job history;
* **decide**: the configured composition on the snapshot, ``decide(..., explain=True)`` —
  exactly the function the simulator calls;
* **apply**: the diff between what the policy wants and what Slurm shows (see
  :mod:`blox_slurm.slurm.apply`), batched;
* **record**: decisions, actions and their results in the store (the audit log).

Safety: only jobs in managed partitions that the job-submit plugin marked are ever touched;
``dry_run`` (shadow mode) records decisions and applies nothing and writes no heartbeat (so
the plugin does not hold jobs nobody will release); the heartbeat is written only after Slurm
answered, so a controller cut off from slurmctld lets the cluster fail open; a Slurm error
ends the round, never the daemon.
"""

from __future__ import annotations

import gc
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from types import MappingProxyType
from typing import TypeVar

from ..core.abstractions import FreeGpus
from ..core.composition import Composition
from ..core.fit import shares
from ..core.model import ClusterSnapshot, Decisions, GpuSample
from ..core.records import maker
from ..core.round import decide
from ..telemetry.buffer import TelemetryBuffer
from ..telemetry.prometheus import JOB_STATES, Metrics
from .active_lock import ActiveLock
from .apply import Applier, Plan, make_plan, waits_for_a_pass
from .arrays import bracket, held_back, splits
from .client import REVOKE_MARGIN, JobUpdate, SlurmClient, SlurmError, SlurmJob, SlurmNode
from .controller_config import ControllerConfig
from .crashpoints import crashpoint
from .in_flight import InFlight
from .job_submit import clear_heartbeat, heartbeat_age, parse_admin_comment, write_heartbeat
from .preflight import missing_partitions, plugin_disagreement
from .revocations import Revocations
from .snapshot import JobCache, build_snapshot
from .start_watch import StartWatch
from .store import Observed, Store
from .timed_client import timed

log = logging.getLogger("blox_slurm.slurm.controller")
_T = TypeVar("_T")
# Seconds past a now+2 begin time before the daemon nudges: Slurm reads "now+2" in whole
# seconds of its own clock
_NUDGE_SLACK = 0.5


@dataclass(frozen=True)
class RoundReport:
    round_id: int
    started: float
    seconds: float
    jobs: int
    pending: int
    running: int
    decisions: Decisions | None
    plan: Plan | None
    slurm_calls: int
    failures: int
    error: str = ""
    deferred: tuple[int, ...] = ()  # moved jobs stopped but not yet restarted (see Applier)
    # jobs pinned with StartTime=now+2, and when (time.monotonic) the last was: the daemon
    # nudges those Slurm has not started once that has passed (Controller.nudge)
    lifted: tuple[int, ...] = ()
    lifted_at: float | None = None
    # When the round had read the queue (its snapshot's time): a job submitted before then is
    # in the round, even if after ``started``. None when the round failed before reading.
    observed: float | None = None


class _RoundFailed(Exception):
    """Observing failed: the round ends with this message and decides nothing."""


@dataclass(frozen=True)
class _Seen:
    """What a round observed: when, the nodes, every job listed (ended ones too) and the
    managed ones the policy may see."""

    now: float
    nodes: list[SlurmNode]
    listed: list[SlurmJob]
    managed: dict[int, SlurmJob]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while the block runs, back on after (if it was
    on: a caller that turned it off keeps it off).

    A round on a long queue makes hundreds of thousands of objects (records, store rows, the
    snapshot) and drops most of the last round's: reference counting frees those, as they
    hold no cycles, yet the collector walks the young ones every 700 allocations and, every
    so often, everything alive, which with 20,000 jobs held between rounds is 0.05-0.1 s a
    pass: 0.1-0.4 s of a first round at 20,000 jobs (benchmarks/bench_controller_fake.py
    --world held). Paused, it runs after the round, at the next allocation, once over what
    the round left (and collects any cycle the round made), while the daemon waits for its
    next round; a round's own garbage stays bounded by the round."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


#: The plugin's mark of an admin comment: the same few strings on every job, every round.
_mark = lru_cache(maxsize=4096)(parse_admin_comment)


def user_held(job: SlurmJob) -> bool:
    """Held by its owner: never released by us.

    Only possible for jobs the plugin did not mark: on a marked job the plugin refuses holds
    and releases from anyone but root and the operators, so every hold on it is ours — the
    plugin's at submission (Slurm reports ``priority = 0`` as ``JobHeldUser``), a
    ``requeuehold``, or a checkpoint exit under ``RequeueExitHold`` (SPECIAL_EXIT).
    """
    return job.reason == "JobHeldUser" and _mark(job.admin_comment) is None


class Controller:
    def __init__(self, cfg: ControllerConfig, comp: Composition, client: SlurmClient,
                 store: Store, *, telemetry: TelemetryBuffer | None = None,
                 metrics: Metrics | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.cfg = cfg
        self.comp = comp
        self.store = store
        self.telemetry = telemetry
        self.metrics = metrics if metrics is not None else Metrics()
        self.clock = clock
        families = self.metrics.controller
        families.heartbeat_age.set_function(self._heartbeat_age)
        self.client = timed(client, families.slurm_call_seconds)
        self.throughput = cfg.throughput.build()
        self.watch = StartWatch(cfg.start_timeout, cfg.unstartable_backoff)
        # newest telemetry sample already in the store, per (node, GPU index)
        self._stored_until: dict[tuple[str, int], float] = {}
        # each managed job's record and what the store was told of it, from the last round
        self._observations: dict[int, tuple[SlurmJob, Observed]] = {}
        self._core_jobs = JobCache()  # each waiting job's core record, while it is unchanged
        # by when each requeued job's last run was revoked: a restart REVOKE_MARGIN s later
        # may start at once (StartTime=now)
        self._revoked = Revocations()
        self._in_flight = InFlight(cfg.start_timeout)  # released jobs Slurm has not run yet

    # ------------------------------------------------------------------ one round

    def managed_jobs(self, jobs: list[SlurmJob]) -> dict[int, SlurmJob]:
        parts = set(self.cfg.partitions)
        out = {}
        for j in jobs:
            if j.partition not in parts or user_held(j):
                continue
            if self.cfg.require_mark and _mark(j.admin_comment) is None:
                continue
            out[j.job_id] = j
        return out

    def round(self) -> RoundReport:
        """One round as a pipeline of values: observe -> fold history -> snapshot -> decide
        -> plan -> record -> apply. A Slurm error or a misconfiguration while observing ends
        the round before anything is decided (and before the heartbeat, for the latter).
        Python's garbage collector waits until the round is over (:func:`collector_paused`)."""
        with collector_paused():
            return self._round()

    def _round(self) -> RoundReport:
        started = self.clock()
        calls0 = self.client.calls
        rid = self.store.begin_round(started, self.cfg.dry_run, self.comp.name)
        try:
            seen = self._observe(rid)
        except _RoundFailed as exc:
            return self._failed(rid, started, calls0, str(exc))
        self._count_jobs(seen.managed)
        self._fold_history(seen)
        # runnable: what the policy may start
        aside = {**held_back(seen.managed), **self.watch.update(seen.managed, seen.now)}
        shown = self._in_flight.view({k: j for k, j in seen.managed.items() if k not in aside},
                                     seen.nodes, seen.now)
        snapshot = self.snapshot(shown, seen.nodes, seen.now)
        crashpoint("observed")
        d = decide(snapshot, self.comp, explain=True)
        self._revoked.observe(seen.managed, seen.now)
        plan = make_plan(seen.managed, d, snapshot,
                         frozenset(n.name for n in seen.nodes if n.draining),
                         self._revoked.times(), self._in_flight.nodes())
        self._record_decisions(rid, d, plan, snapshot, aside)
        crashpoint("decided")
        applier = self._apply(rid, plan, seen.managed)
        if not self.cfg.dry_run:
            self._in_flight.released(d, _started(plan, applier), seen.managed, snapshot,
                                     self.clock())
        return self._finished(rid, started, calls0, snapshot, d, plan, applier)

    def _observe(self, rid: int) -> _Seen:
        """Nodes, then jobs (ended ones too), and which jobs are ours; arrays split first."""
        # Nodes first: a job Slurm starts between the two reads is then seen RUNNING with its
        # GPUs; read the other way round it looks pending while its GPUs look taken, and the
        # plan would hold a job that has just started.
        nodes = self._read(self.client.list_nodes)
        # Ended jobs too (the same squeue call): a job that ran and ended between two looks,
        # e.g. while no controller was up, still gets its run into the history.
        listed = self._read(self._list_jobs)
        problem = self.misconfigured(nodes)
        if problem is not None:  # before the heartbeat: the plugin must fail open
            raise _RoundFailed(f"config: {problem}")
        now = self.clock()
        if not self.cfg.dry_run:
            write_heartbeat(self.cfg.heartbeat, now)
        managed = self.managed_jobs([j for j in listed if j.queued])
        if self._split_arrays(rid, managed):  # new job records: read the queue again
            listed = self._read(self._list_jobs)
            managed = self.managed_jobs([j for j in listed if j.queued])
        # the policy sees array tasks, never an array's unsplit rest
        managed = {k: j for k, j in managed.items() if not j.unsplit_array}
        return _Seen(now, nodes, listed, managed)

    def _list_jobs(self) -> list[SlurmJob]:
        return self.client.list_jobs(self.cfg.partitions, finished=True)

    @staticmethod
    def _read(call: Callable[[], _T]) -> _T:
        try:
            return call()
        except SlurmError as exc:
            raise _RoundFailed(f"observe: {exc}") from None

    def _fold_history(self, seen: _Seen) -> None:
        managed = seen.managed.values()
        # The queue read hands back the very record it gave last round while a job's line in
        # squeue stays the same: its observation is the same too, and the pair is kept as it
        # was (a new pair per job and round was 20,000 allocations, and the garbage
        # collections they set off, in a round in which nothing changed).
        last = self._observations
        self._observations = {j.job_id: o if (o := last.get(j.job_id)) and o[0] is j
                              else (j, _observed(j)) for j in managed}
        self.store.observe(seen.now, [o for _, o in self._observations.values()],
                           {j.job_id: _allocated_gpus(j) for j in managed if j.active},
                           {j.job_id: run for j in seen.listed
                            if (run := j.ended_run) is not None})

    def _record_decisions(self, rid: int, d: Decisions, plan: Plan, snapshot: ClusterSnapshot,
                          aside: Mapping[int, str]) -> None:
        gpu_nodes = {s.job_id: sorted({snapshot.gpus[g].node for g in s.gpus})
                     for s in d.placed}
        self.store.record_decisions(rid, d, plan.hold, gpu_nodes, self._in_flight.nodes())
        self.store.update_policy_state(d.admit, d.marks,
                                       {j: r for r, j in enumerate(d.order)},
                                       {**d.reasons, **aside}, d.state)

    def _applier(self, rid: int) -> Applier:
        """An applier whose actions go to round ``rid`` in the audit."""
        return Applier(self.client, lambda verb, ids, ok, err: self.store.record_action(
            rid, verb, ids, ok, err, self.cfg.dry_run), dry_run=self.cfg.dry_run,
            checkpoint_signal=self.cfg.checkpoint_signal, grace_seconds=self.cfg.grace_seconds,
            partitions=self.cfg.partitions)

    def _apply(self, rid: int, plan: Plan, managed: Mapping[int, SlurmJob]) -> Applier:
        applier = self._applier(rid)
        applier.apply(plan)
        if not self.cfg.dry_run:
            self._after_apply(plan, applier, managed)
            if not applier.failures:
                # Slurm answered every verb: refresh the lease, which the wait for a moved
                # job's requeue (up to grace_seconds) would otherwise have aged.
                write_heartbeat(self.cfg.heartbeat, self.clock())
        return applier

    def _split_arrays(self, rid: int, managed: Mapping[int, SlurmJob]) -> bool:
        """Give the next tasks of every held array their own job records (see
        :mod:`blox_slurm.slurm.arrays`): one call per array, and the caller reads the queue
        again, only in rounds that act (True). An array Slurm was left to run (submitted
        while the cluster failed open) is held whole first, as the plan holds any such job;
        its tasks already running stay the policy's to keep or preempt. A verb Slurm refuses
        is in the audit and tried again next round."""
        if self.cfg.dry_run:
            return False
        pending = [j for j in managed.values() if j.pending]
        todo = [(f"split {bracket(s.tasks)}", s.array_job_id,
                 partial(self.client.split_array, s.array_job_id, s.tasks))
                for s in splits(pending, self.cfg.array_window)]
        todo += [("hold", j.job_id, partial(self.client.hold, [j.job_id]))
                 for j in pending if j.unsplit_array and not j.held]
        for verb, array_id, act in todo:
            try:
                act()
            except SlurmError as exc:
                self.store.record_action(rid, verb, [array_id], False, str(exc))
            else:
                self.store.record_action(rid, verb, [array_id], True)
        return bool(todo)

    def _after_apply(self, plan: Plan, applier: Applier,
                     managed: Mapping[int, SlurmJob]) -> None:
        now = self.clock()
        if plan.preempt:
            self.store.note_preempted(plan.preempt, now)
        self._revoked.stopped((managed[j] for j in applier.stopped if j in managed), now)
        self.watch.released(_started(plan, applier), now)
        self.watch.refused(applier.refused_starts, now)

    def misconfigured(self, nodes: list[SlurmNode]) -> str | None:
        """Why this controller must not heartbeat (see :mod:`blox_slurm.slurm.preflight`). A dry
        run writes no heartbeat, so the plugin's config is not its business."""
        if not self.cfg.dry_run and (problem := plugin_disagreement(self.cfg)):
            return problem
        return missing_partitions(self.cfg.partitions, nodes)

    def snapshot(self, managed: Mapping[int, SlurmJob], nodes: list[SlurmNode],
                 now: float) -> ClusterSnapshot:
        snap = build_snapshot(managed.values(), nodes, self.cfg.partitions, now=now,
                              extras=self.store.extras(now),
                              usage=self.store.usage(now, self.cfg.usage_half_life),
                              cache=self._core_jobs)
        cpus_free, memory_free = _room_left(snap, nodes, self._in_flight.nodes())
        return replace(snap, free=FreeGpus(_free_index(snap, nodes), snap.gpus),
                       state=self.store.composition_state(),
                       telemetry=self._samples(snap, now), throughput=self.throughput,
                       cpus_free=cpus_free, memory_free=memory_free)

    def _samples(self, snap: ClusterSnapshot, now: float) -> tuple[GpuSample, ...]:
        """The telemetry window, with agents' (node, local index) turned into GPU ids; newly
        arrived samples are also written to the store (bounded retention)."""
        if self.telemetry is None:
            return ()
        gpu_id = {(g.node, g.index): g.id for g in snap.gpus}
        out: list[GpuSample] = []
        fresh: list[tuple[str, int, GpuSample]] = []
        for key, series in self.telemetry.window(self.cfg.telemetry_window, now).items():
            gid = gpu_id.get(key)
            stored = self._stored_until.get(key, 0.0)  # per GPU: late agents are not lost
            for sample in series:
                if sample.time > stored:
                    fresh.append((*key, sample))
                if gid is not None:
                    out.append(replace(sample, gpu=gid))
            if series:
                self._stored_until[key] = max(stored, series[-1].time)
        self.store.record_telemetry(fresh, self.cfg.telemetry_retention, now)
        return tuple(out)

    def _finished(self, rid: int, started: float, calls0: int, snap: ClusterSnapshot,
                  d: Decisions, plan: Plan, applier: Applier) -> RoundReport:
        seconds = self.clock() - started
        pending = sum(1 for j in snap.jobs if not j.running)
        calls = self.client.calls - calls0
        # A meta-policy (the synthesizer) names the candidate that decided: "synth:las".
        decided_by = self.comp.name if d.composition in ("", self.comp.name) else \
            f"{self.comp.name}:{d.composition}"
        self.store.finish_round(rid, finished=started + seconds, composition=decided_by,
                                jobs=len(snap.jobs),
                                pending=pending, running=len(snap.jobs) - pending,
                                starts=len(d.start), preempts=len(plan.preempt),
                                holds=len(plan.hold), slurm_calls=calls, seconds=seconds)
        self._export_round(seconds, calls, snap, d, plan, applier.failures)
        return RoundReport(rid, started, seconds, len(snap.jobs), pending,
                           len(snap.jobs) - pending, d, plan, calls, applier.failures,
                           deferred=tuple(applier.deferred), observed=snap.now,
                           lifted=tuple(applier.lifted), lifted_at=applier.lifted_at)

    def _failed(self, rid: int, started: float, calls0: int, error: str) -> RoundReport:
        log.warning("round %d failed: %s", rid, error)
        seconds = self.clock() - started
        calls = self.client.calls - calls0
        self.store.finish_round(rid, finished=started + seconds, seconds=seconds,
                                slurm_calls=calls, error=error[:2000])
        self._count_round(seconds, calls)
        self.metrics.controller.round_errors.inc()
        return RoundReport(rid, started, seconds, 0, 0, 0, None, None, calls, 0, error)

    # ------------------------------------------------------------------ metrics

    def _count_round(self, seconds: float, calls: int) -> None:
        m = self.metrics.controller
        m.rounds.inc()
        m.round_seconds.observe(seconds)
        m.slurm_calls_last_round.set(calls)

    def _export_round(self, seconds: float, calls: int, snap: ClusterSnapshot, d: Decisions,
                      plan: Plan, failures: int) -> None:
        self._count_round(seconds, calls)
        m = self.metrics.controller
        m.decisions.labels("start").inc(len(d.start))
        m.decisions.labels("preempt").inc(len(plan.preempt))
        m.decisions.labels("move").inc(len(d.move))
        m.actions_failed.inc(failures)
        used = sum(len(j.gpus) for j in snap.jobs)
        m.gpu_allocated_fraction.set(used / len(snap.gpus) if snap.gpus else 0.0)
        samples = snap.telemetry
        m.gpu_utilization_percent.set(
            sum(s.utilization for s in samples) / len(samples) if samples else math.nan)

    def _count_jobs(self, managed: Mapping[int, SlurmJob]) -> None:
        """Every (partition, state) is set each round, zeros included: a state that emptied
        must read 0, not its last count."""
        counts = Counter((j.partition, _standing(j)) for j in managed.values())
        gauge = self.metrics.controller.managed_jobs
        for partition in self.cfg.partitions:
            for state in JOB_STATES:
                gauge.labels(partition, state).set(counts[partition, state])

    def _heartbeat_age(self) -> float:
        """Read at scrape time, so a controller stuck inside a round shows its lease aging;
        +Inf without a heartbeat (dry run, or after exit), as the plugin reads it."""
        age = heartbeat_age(self.cfg.heartbeat, self.clock())
        return math.inf if age is None else age

    # ------------------------------------------------------------------ the daemon

    def run(self, stop: threading.Event, max_rounds: int | None = None,
            on_round: Callable[[RoundReport], None] | None = None,
            on_active: Callable[[], None] | None = None) -> int:
        """Rounds every ``round_seconds`` until ``stop`` is set (a round in progress is
        finished first). Only one controller per heartbeat runs rounds: another one stands by
        until it can take over (:mod:`active_lock`), and ``on_active`` runs once it is the
        active one (the CLI starts its telemetry endpoint there, so a standby on the same
        host does not hold the port). However the active one ends, it removes the heartbeat
        first (the plugin fails open at once), hands back if configured, and only then lets
        a standby in. Never raises on a Slurm error; raises :class:`StoreGone` if the store's
        file disappears. Returns the number of rounds run."""
        lock = None if self.cfg.dry_run else ActiveLock(self.cfg.heartbeat)
        if lock is not None and not self._stand_by(lock, stop):
            return 0
        try:
            if on_active is not None:
                on_active()
            return self._rounds(stop, max_rounds, on_round)
        finally:
            if lock is not None:
                clear_heartbeat(self.cfg.heartbeat)
                if self.cfg.handback_on_exit:
                    self._handback()
                lock.release()

    def _rounds(self, stop: threading.Event, max_rounds: int | None,
                on_round: Callable[[RoundReport], None] | None) -> int:
        n = 0
        followup = False  # the last round was a follow-up: never two in a row
        while not stop.is_set() and (max_rounds is None or n < max_rounds):
            t0 = time.monotonic()
            self.store.check_present()
            report = self._guarded_round()
            n += 1
            if report is not None and on_round is not None:
                on_round(report)
            period = self.cfg.round_seconds
            followup = not followup and report is not None and bool(report.deferred)
            if followup and self.cfg.followup_seconds > 0:
                period = min(period, self.cfg.followup_seconds)
            if report is not None and report.lifted_at is not None:
                self._nudge_later(report, t0 + period, stop)
            stop.wait(max(0.0, period - (time.monotonic() - t0)))
        return n

    def _nudge_later(self, report: RoundReport, next_round: float,
                     stop: threading.Event) -> None:
        """Wait until the round's now+2 begin times have passed and nudge the jobs still
        waiting for them, unless the next round comes first (it nudges them itself,
        :attr:`Plan.nudge`) or follow-ups, the other Slurm calls between rounds, are off.
        Like a round, it never takes the daemon down."""
        assert report.lifted_at is not None
        due = report.lifted_at + REVOKE_MARGIN + _NUDGE_SLACK
        if self.cfg.followup_seconds <= 0 or self.cfg.dry_run or due >= next_round:
            return
        if stop.wait(max(0.0, due - time.monotonic())):
            return
        try:
            self.nudge(report.round_id, report.lifted)
        except Exception:  # a bug must not take the cluster's scheduler down silently
            log.exception("nudge after round %d crashed; continuing", report.round_id)

    def nudge(self, rid: int, ids: Sequence[int]) -> list[int]:
        """Of ``ids``, set off a scheduling pass for those Slurm shows waiting only for one
        (:func:`~blox_slurm.slurm.apply.waits_for_a_pass`): one read of the queue and at
        most one update, recorded with round ``rid``. Returns the ids nudged; a Slurm error
        leaves them to the next round."""
        try:
            jobs = self.client.list_jobs(self.cfg.partitions)
        except SlurmError as exc:
            log.warning("nudge: reading the queue failed: %s", exc)
            return []
        now, wanted = self.clock(), set(ids)
        waiting = [j.job_id for j in jobs if j.job_id in wanted and waits_for_a_pass(j, now)]
        return self._applier(rid).nudge(waiting) if waiting else []

    def _handback(self) -> None:
        try:
            handback(self.client, self.cfg.partitions, self._revoked.times(), self.clock())
        except SlurmError as exc:  # the heartbeat is gone: the watchdog hands back instead
            log.warning("handback on exit failed: %s", exc)

    def _stand_by(self, lock: ActiveLock, stop: threading.Event) -> bool:
        """Wait (a round period at a time) until this controller is the active one; False if
        stopped first. A standby writes no heartbeat and touches no job."""
        if lock.try_acquire():
            return True
        log.warning("another controller is active (%s): standing by", lock.holder() or "?")
        while not stop.wait(self.cfg.round_seconds):
            if lock.try_acquire():
                log.warning("the other controller is gone: taking over")
                return True
        return False

    def _guarded_round(self) -> RoundReport | None:
        try:
            return self.round()
        except Exception:  # a bug must not take the cluster's scheduler down silently
            log.exception("round crashed; continuing")
            self.metrics.controller.rounds.inc()
            self.metrics.controller.round_errors.inc()
            return None


def _observed(j: SlurmJob) -> Observed:
    """What the store folds. A COMPLETING job is still in its run: seen as "not running" it
    was counted as preempted (requeued) when it merely finished."""
    in_run = j.in_run
    return _make_observed(
        job_id=j.job_id, user=j.user, partition=j.partition, num_gpus=j.num_gpus,
        submit_time=j.submit_time if j.submit_time is not None else 0.0, running=in_run,
        run_start=j.start_time if in_run else None, held=j.held,
        hints=_hints(j.admin_comment), account=j.account, restarts=j.restart_cnt)


#: ``Observed(**fields)``, 0.7 us instead of 1.2 (:mod:`blox_slurm.core.records`): one for
#: every managed job of a first round.
_make_observed = maker(Observed)


@lru_cache(maxsize=4096)
def _hints(admin_comment: str) -> Mapping[str, str]:
    """The hints of the plugin's mark in an admin comment, as the store keeps them: one
    read-only map per comment (the same few on every job), not a new dict per job, 20,000
    of them in a first round."""
    mark = _mark(admin_comment)
    return MappingProxyType({k: str(v) for k, v in mark.hints.items()}
                            if mark is not None else {})


def _standing(j: SlurmJob) -> str:
    """The job's ``state`` label in ``blox_managed_jobs`` (one of ``JOB_STATES``)."""
    return "running" if j.in_run else "held" if j.held else "released"


def _allocated_gpus(j: SlurmJob) -> int:
    return sum(a.count for a in j.gpu_alloc.values()) or j.num_gpus


def _free_index(snap: ClusterSnapshot, nodes: list[SlurmNode]) -> dict[str, tuple[int, ...]]:
    """Free GPUs per UP node: neither held by a managed job nor reported used by Slurm (jobs
    of other partitions, or unmarked jobs, hold GPUs the policies must not hand out)."""
    used_idx = {n.name: set(n.gpus_used_indices) for n in nodes}
    busy = {g for j in snap.jobs for g in j.gpus}
    return {n.name: tuple(g for g in n.gpu_ids
                          if g not in busy and snap.gpus[g].index not in used_idx.get(n.name, ()))
            for n in snap.nodes if n.schedulable}


def _room_left(snap: ClusterSnapshot, nodes: list[SlurmNode], in_flight: Collection[int]
               ) -> tuple[dict[str, int], dict[str, int]]:
    """Free CPUs and memory per node as Slurm counts them, less what the starts in flight
    will take: Slurm has given a pending job nothing yet, but the policy sees it holding its
    GPUs, and a job placed beside it on CPUs it is about to take would be refused."""
    cpus = {n.name: n.cpus - n.cpus_alloc for n in nodes if n.cpus > 0}
    memory = {n.name: n.memory_mb - n.memory_alloc for n in nodes if n.memory_mb > 0}
    if in_flight:
        for job in (j for j in snap.jobs if j.id in in_flight):
            for node, (c, m) in shares(snap, job, job.gpus).items():
                if node in cpus:
                    cpus[node] -= c
                if node in memory:
                    memory[node] -= m
    return ({k: max(0, v) for k, v in cpus.items()}, {k: max(0, v) for k, v in memory.items()})


def _started(plan: Plan, applier: Applier) -> list[int]:
    """The jobs a round pinned and released (or re-pinned, or restarted after a move) and
    Slurm did not refuse."""
    repinned = (j for ids in plan.repin.values() for j in ids)
    return [j for j in (*plan.released, *repinned, *applier.restarted)
            if j not in applier.refused_starts]


def held_by_us(job: SlurmJob) -> bool:
    """A marked job on hold: the plugin's hold or ours (see :func:`user_held`)."""
    return job.pending and job.held and _mark(job.admin_comment) is not None


def handback(client: SlurmClient, partitions: list[str],
             revoked: Mapping[int, float] | None = None, now: float = 0.0) -> list[int]:
    """Release every job the controller holds in ``partitions``; leave everything else.
    Slurm then schedules them on its own (the fail-open path). A requeued job's delay is
    lifted: to ``now`` if ``revoked`` dates its last run's revocation REVOKE_MARGIN s or
    more before ``now`` (a controller handing back on exit knows; nothing wakes Slurm after
    it for a ``now+2``), else to ``now+2``. Returns the released ids."""
    jobs = [j for j in client.list_jobs(partitions) if j.partition in partitions]
    held = [j for j in jobs if held_by_us(j)]
    revoked = revoked or {}
    requeued = [j.job_id for j in held if j.restart_cnt > 0]
    at_once = sorted(j for j in requeued if now - revoked.get(j, now) >= REVOKE_MARGIN)
    for ids, lift in ((at_once, JobUpdate(start_now=True)),
                      (sorted(set(requeued) - set(at_once)), JobUpdate(lift_delay=True))):
        if not ids:
            continue
        try:  # a requeued job would otherwise wait ~120 s (never a fresh job: its --begin)
            client.update_jobs(ids, lift)
        except SlurmError as exc:
            log.warning("handback: lifting the requeue delay failed (%s); releasing anyway",
                        exc)
    ids = sorted(j.job_id for j in held)
    if ids:
        client.release(ids)
    return ids
