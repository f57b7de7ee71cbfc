"""Decisions -> Slurm verbs: diff what the policy wants against what Slurm shows, act on the
difference only, in batches.

Desired state of a managed job after a round:

* running, not preempted        -> leave it
* running, preempted            -> checkpoint signal, then ``requeuehold`` (pending, held again)
* running, moved                -> as preempted; once Slurm shows it pending, pinned to its new
                                   nodes with ``StartTime=now+2`` and released, in the same round
* pending, started by the round -> pinned to the chosen nodes (``ReqNodeList``; also
                                   ``StartTime=now+2`` if it was requeued) and released
* pending, not started          -> held

A job that asked for GPUs *per node* (``--gres=gpu:N``) carries the ``nodes`` hint: Slurm
applies its N to every node of ``ReqNodeList`` (pinned to k nodes it would hold k x N GPUs, or
wait forever for N free GPUs on each). The built-in placements honour the hint; a start that
does not (a third-party policy spreading such a job) is *refused*: the job stays held and the
refusal is recorded as a failed action. A job that asked ``--gpus=N`` (per job) may be pinned
to several nodes: Slurm keeps the total at N and picks the split over the pinned nodes itself.

An elastic job (``blox:elastic=1``) started or moved with another GPU count than it holds
gets its new request in the same call that pins it (``TresPerNode``/``TresPerJob``): a grow
or shrink of a running one is a move. Any other job is never resized: such a placement is
refused like a misfit one.

Because the plan is a diff, re-running a round against an unchanged Slurm is a no-op, and a
controller restarted mid-round simply finishes the job on its next round.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..core.model import ClusterSnapshot, Decisions, Drain
from .client import REVOKE_MARGIN, GpuRequest, JobUpdate, SlurmClient, SlurmError, SlurmJob
from .crashpoints import crashpoint
from .parse import ParsedJob


@dataclass(frozen=True)
class Plan:
    preempt: tuple[int, ...] = ()
    hold: tuple[int, ...] = ()
    release: Mapping[tuple[str, ...], tuple[int, ...]] = field(default_factory=dict)  # by nodes
    repin: Mapping[tuple[str, ...], tuple[int, ...]] = field(default_factory=dict)
    drain: tuple[Drain, ...] = ()
    refused: Mapping[int, str] = field(default_factory=dict)  # starts not applied: why
    # Of the jobs released or re-pinned, those requeued before: their pin also sets
    # StartTime=now+2, which lifts Slurm's ~120 s requeue delay. Never for a job that has not
    # run yet: its StartTime is the user's --begin.
    lift_delay: frozenset[int] = frozenset()
    # Running jobs moved elsewhere, by new nodes: stopped with the preempted ones, then, in
    # the same round, pinned there and released (see Applier._restart_moved)
    move: Mapping[tuple[str, ...], tuple[int, ...]] = field(default_factory=dict)
    # Elastic jobs started with another GPU count than they ask Slurm for: their pin also
    # sets the new request (see GpuRequest)
    resize: Mapping[int, GpuRequest] = field(default_factory=dict)
    # Of lift_delay, the jobs whose last run was revoked REVOKE_MARGIN seconds or more ago:
    # their pin sets StartTime=now instead, and Slurm starts them on the pass the release
    # sets off (a now+2 is still ahead then, and nothing else may wake Slurm for a round)
    lift_now: frozenset[int] = frozenset()
    # Released jobs whose lifted begin time has passed while Slurm still shows BeginTime:
    # they wait only for a scheduling pass, which StartTime=now (one call) sets off
    nudge: tuple[int, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.preempt or self.hold or self.release or self.repin or self.drain
                    or self.refused or self.move or self.nudge)

    @property
    def released(self) -> tuple[int, ...]:
        return tuple(j for ids in self.release.values() for j in ids)


def make_plan(managed: Mapping[int, SlurmJob], d: Decisions, snapshot: ClusterSnapshot,
              drained: frozenset[str] = frozenset(),
              revoked: Mapping[int, float] | None = None,
              in_flight: Mapping[int, tuple[str, ...]] | None = None) -> Plan:
    """The verbs that bring Slurm to what ``d`` wants. Pure. ``revoked``: a time by which
    requeued jobs' last runs had their credentials revoked (see
    :mod:`~blox_slurm.slurm.revocations`). ``in_flight``: released jobs Slurm has not run
    yet, shown to the policy as running (see :mod:`~blox_slurm.slurm.in_flight`), and where
    they are pinned: one the policy neither stops nor moves stays released there."""
    targets, refused = _targets(d, snapshot)
    stopped = set(d.preempt)
    for job_id, nodes in (in_flight or {}).items():
        if job_id not in stopped:
            targets.setdefault(job_id, nodes)
    resize = _resizes(managed, d, snapshot, targets, refused)
    preempt = tuple(j for j in d.preempt if j in managed and managed[j].active)
    stopping = set(preempt)
    move = _by_nodes((m.job_id, targets[m.job_id]) for m in d.move
                     if m.job_id in stopping and m.job_id in targets)
    v = _pending_verbs(managed, targets, resize, snapshot.now, revoked or {})
    drain = tuple(x for x in d.drain if x.node not in drained)
    return Plan(preempt, tuple(sorted(v.hold)), _by_nodes(v.release), _by_nodes(v.repin),
                drain, {j: why for j, why in refused.items() if j in managed},
                frozenset(v.lift_delay), move, resize, frozenset(v.lift_now),
                tuple(sorted(v.nudge)))


def _resizes(managed: Mapping[int, SlurmJob], d: Decisions, snapshot: ClusterSnapshot,
             targets: dict[int, tuple[str, ...]], refused: dict[int, str]
             ) -> dict[int, GpuRequest]:
    """The new GPU request of each job started, or moved (grown or shrunk while it runs:
    restarted with the new count), with another count than Slurm holds for it. Only an
    elastic job may be resized (the engine clamps every count into the job's
    ``min_gpus``/``max_gpus``; this is the adapter's own check, for any other caller): a
    placement that would resize another is refused (moved from ``targets`` to ``refused``)."""
    elastic = {j.id for j in snapshot.jobs if j.hint("elastic") is not None}
    out: dict[int, GpuRequest] = {}
    for s in d.placed:
        job = managed.get(s.job_id)
        if job is None or s.job_id not in targets or len(s.gpus) == job.num_gpus:
            continue
        if s.job_id not in elastic:
            del targets[s.job_id]
            refused[s.job_id] = (f"refused: the policy gave it {len(s.gpus)} GPU(s); it asked "
                                 f"for {job.num_gpus} and did not opt in to resizing "
                                 f"(elastic=1)")
            continue
        nodes = job.gpu_nodes if isinstance(job, ParsedJob) else 0  # > 0: asked per node
        try:
            out[s.job_id] = GpuRequest(len(s.gpus) // nodes if nodes else len(s.gpus),
                                       nodes > 0, job.gpu_type or None)
        except ValueError as e:  # a GPU type no scontrol field may carry
            del targets[s.job_id]
            refused[s.job_id] = f"refused: cannot resize it: {e}"
    return out


@dataclass
class _PendingVerbs:
    """What :func:`_pending_verbs` finds for the pending jobs (see :class:`Plan`)."""

    hold: list[int] = field(default_factory=list)
    release: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)
    repin: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)
    lift_delay: set[int] = field(default_factory=set)
    lift_now: set[int] = field(default_factory=set)
    nudge: list[int] = field(default_factory=list)


def _pending_verbs(managed: Mapping[int, SlurmJob], targets: Mapping[int, tuple[str, ...]],
                   resize: Collection[int], now: float, revoked: Mapping[int, float]
                   ) -> _PendingVerbs:
    """For the managed jobs Slurm shows pending: those to hold (not started, not yet held),
    to release (started, held) or re-pin (started, released but pinned elsewhere, kept
    waiting by a requeue delay, or resized), each with its nodes; those whose pin lifts
    the delay, and of them those it may lift to ``now``; and those to nudge."""
    out = _PendingVerbs()
    for job_id, job in managed.items():
        if not job.pending:
            continue
        nodes = targets.get(job_id)
        if nodes is None:
            if not job.held:
                out.hold.append(job_id)
            continue
        delayed = job.restart_cnt > 0 and (job.held or _kept_waiting(job, now))
        if delayed:  # ours, or its owner's requeue (a released job kept waiting ~120 s)
            out.lift_delay.add(job_id)
            if now - revoked.get(job_id, now) >= REVOKE_MARGIN:
                out.lift_now.add(job_id)
        if job.held:
            out.release.append((job_id, nodes))
        elif delayed or job_id in resize or tuple(sorted(job.req_nodes)) != nodes:
            out.repin.append((job_id, nodes))
        elif waits_for_a_pass(job, now):
            out.nudge.append(job_id)
    return out


def waits_for_a_pass(job: SlurmJob, now: float) -> bool:
    """Whether a pending released job waits only for Slurm's next scheduling pass: its begin time
    (a lift's now+2, or its owner's --begin) has passed, but Slurm, which evaluates begin
    times only when it schedules, still shows ``BeginTime`` (22.05, 24.11), or no reason
    at all for a requeued job (26.05). Slurm schedules on events (a submit, an end, any
    job update) at most every ``batch_sched_delay`` (3 s), and otherwise every 30-60 s:
    without a nudge the job and the GPUs it is pinned to idle until then (a median of
    13.7 s at 15 s rounds, measured). ``StartTime=now`` never moves a begin time earlier:
    scontrol reads "now" on this host, whose clock has passed the begin time here."""
    waiting = job.reason == "BeginTime" or (job.reason == "None" and job.restart_cnt > 0)
    return (job.pending and not job.held and waiting and job.eligible_time is not None
            and job.eligible_time <= now)


# What Slurm says of a job that is no longer pending (ESLURM_JOB_NOT_PENDING), as the fake
# says it too
_NOT_PENDING = "no longer pending"

# How far past our own clock a lifted begin time may read and still be ours: REVOKE_MARGIN,
# plus slurmctld's clock running up to 10 s ahead of the controller's host; Slurm's requeue
# delay (~120 s) is far beyond it.
_LIFTED_WITHIN = REVOKE_MARGIN + 10


def _kept_waiting(job: SlurmJob, now: float) -> bool:
    """Whether a released job waits for a begin time that is not ours: Slurm's ~120 s
    requeue delay, not the ``now+2`` an earlier round's pin set. Lifting ours again would
    push it 2 s out every round, and under rounds shorter than that the job never starts
    (seen with 1 s rounds once Slurm evaluates released jobs every second). Without an
    eligible time, lift: the delay is the likelier reading."""
    if job.reason != "BeginTime":
        return False
    return job.eligible_time is None or job.eligible_time > now + _LIFTED_WITHIN


def _targets(d: Decisions, snapshot: ClusterSnapshot
             ) -> tuple[dict[int, tuple[str, ...]], dict[int, str]]:
    """The nodes each started or moved job is to be pinned to, and the placements refused
    (see :func:`_misfit`), with why."""
    gpus = snapshot.gpus
    bound = {j.id: j.hint("nodes") for j in snapshot.jobs if j.hint("nodes") is not None}
    targets: dict[int, tuple[str, ...]] = {}
    refused: dict[int, str] = {}
    for s in d.placed:
        chosen = tuple(sorted({gpus[g].node for g in s.gpus}))
        why = _misfit(bound.get(s.job_id), chosen, [gpus[g].node for g in s.gpus])
        if why:
            refused[s.job_id] = why
        else:
            targets[s.job_id] = chosen
    return targets, refused


def _by_nodes(pairs: Iterable[tuple[int, tuple[str, ...]]]
              ) -> dict[tuple[str, ...], tuple[int, ...]]:
    """Job ids grouped by the nodes they are pinned to: one Slurm call per group."""
    groups: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for job_id, nodes in pairs:
        groups[nodes].append(job_id)
    return {nodes: tuple(ids) for nodes, ids in groups.items()}


def _misfit(bound: str | None, nodes: tuple[str, ...], per_gpu: Sequence[str]) -> str:
    """Why a start cannot be pinned as chosen ("" when it can): a job bound to ``bound``
    nodes (GPUs per node) must get the same number of GPUs on exactly that many nodes."""
    if bound is None:
        return ""
    want = int(bound) if bound.isdigit() and int(bound) > 0 else 1
    counts = {per_gpu.count(n) for n in nodes}
    if len(nodes) != want or len(counts) > 1:
        return (f"refused: the job asked for GPUs per node on {want} node(s), the policy "
                f"placed it on {len(nodes)} ({','.join(nodes)}); Slurm would give it its "
                f"per-node GPUs on every pinned node")
    return ""


Recorder = Callable[[str, Sequence[int], bool, str], None]


class Applier:
    """Carries out a :class:`Plan` with as few slurmctld calls as Slurm allows.

    A batched verb that fails is split in halves and retried, down to single jobs, so one
    vanished or invalid job cannot block the others; every attempt is recorded. Errors never
    escape: the controller's loop must survive any Slurm failure.
    """

    def __init__(self, client: SlurmClient, record: Recorder, *, dry_run: bool = False,
                 checkpoint_signal: str | None = None, grace_seconds: float = 10.0,
                 poll_seconds: float = 0.5, partitions: Sequence[str] | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.client = client
        self.record = record
        self.dry_run = dry_run
        self.signal = checkpoint_signal
        self.grace = grace_seconds
        self.poll = poll_seconds
        self.partitions = list(partitions) if partitions else None
        self.sleep = sleep
        self.failures = 0
        self.refused_starts: dict[int, str] = {}  # jobs Slurm would not pin or release: why
        self.restarted: list[int] = []  # moved jobs pinned to their new nodes and released
        self.deferred: list[int] = []  # moved jobs Slurm did not show pending in time
        self.stopped: list[int] = []  # running jobs stopped (requeued) by this applier
        # Jobs pinned with StartTime=now+2, and (time.monotonic) when the last such pin was
        # sent: once that has passed, they may wait for a scheduling pass (see Plan.nudge)
        self.lifted: list[int] = []
        self.lifted_at: float | None = None

    def apply(self, plan: Plan) -> None:
        for job_id, why in plan.refused.items():  # left held (make_plan did not release it)
            self.failures += 1
            self.record("release", [job_id], False, why)
        if plan.preempt:
            self._preempt(plan.preempt)
        if plan.move:
            self._restart_moved(plan.move, plan.resize)
        if plan.hold:
            self._batched("hold", plan.hold, self.client.hold)
        # Pins cost a call per job (Slurm takes no id list with ReqNodeList); the releases of
        # every placement are one call.
        pinned = [j for nodes, ids in plan.release.items()
                  for j in self._pin(nodes, ids, plan.lift_delay, plan.resize, plan.lift_now)]
        if pinned:
            crashpoint("pinned")
            self._batched("release", pinned, self.client.release)
        for nodes, ids in plan.repin.items():
            self._pin(nodes, ids, plan.lift_delay, plan.resize, plan.lift_now)
        if plan.nudge:
            self.nudge(plan.nudge)
        for dr in plan.drain:
            self._node("drain", dr.node, dr.reason)

    def nudge(self, ids: Sequence[int]) -> list[int]:
        """``StartTime=now`` for released jobs that wait only for a scheduling pass (see
        :func:`waits_for_a_pass`): one call, which sets the pass off. A job Slurm started
        since it was read is not pending any more and refuses the update: it needed no
        nudge, and that is no failure. Returns those nudged (or started)."""
        update = JobUpdate(start_now=True)

        def call(batch: Sequence[int]) -> None:
            try:
                self.client.update_jobs(batch, update)
            except SlurmError as exc:
                if not (exc.failed_ids and _NOT_PENDING in str(exc)):
                    raise
                rest = [i for i in batch if i not in exc.failed_ids]
                if rest:
                    call(rest)
        return self._batched("start now", ids, call)

    def _pin(self, nodes: tuple[str, ...], ids: Sequence[int], lift_delay: Collection[int],
             resize: Mapping[int, GpuRequest] | None = None,
             lift_now: Collection[int] = ()) -> list[int]:
        """``ReqNodeList=nodes``, one batch per kind of update: ``StartTime=now+2`` for
        requeued jobs, ``now`` for those of them in ``lift_now``, none for the rest, and a
        resized job's new GPU request. Returns the ids pinned."""
        resize = resize or {}
        where = f"pin {','.join(nodes)}"
        updates: dict[JobUpdate, list[int]] = defaultdict(list)
        for i in ids:
            now = i in lift_delay and i in lift_now
            updates[JobUpdate(req_nodes=nodes, gpus=resize.get(i), start_now=now,
                              lift_delay=i in lift_delay and not now)].append(i)
        pinned: list[int] = []
        for update, batch in updates.items():
            verb = where if update.gpus is None else f"{where} {update.gpus.field}"
            pinned += self._lifting(batch, verb, update)
        return pinned

    def _lifting(self, ids: list[int], verb: str, update: JobUpdate) -> list[int]:
        """Apply ``update`` to ``ids``; note those given ``now+2``, which may need a nudge
        once it has passed (:attr:`lifted`)."""
        done = self._batched(verb, ids, self._updater(update))
        if update.lift_delay and done:
            self.lifted += done
            self.lifted_at = time.monotonic()
        return done

    def _updater(self, update: JobUpdate) -> Callable[[Sequence[int]], None]:
        return lambda ids: self.client.update_jobs(ids, update)

    def _preempt(self, ids: Sequence[int]) -> None:
        remaining = list(ids)
        if self.signal and self.grace > 0:
            signalled = self._batched(f"signal {self.signal}", remaining,
                                      lambda b: self.client.signal(b, self.signal or ""))
            if signalled and not self.dry_run:
                remaining = self._wait_stopped(remaining)
        self.stopped += [i for i in ids if i not in remaining]  # stopped on their own
        if remaining:
            self.stopped += self._batched("requeuehold", remaining, self.client.requeue_hold)

    def _wait_stopped(self, ids: list[int]) -> list[int]:
        """Give signalled jobs ``grace`` seconds to checkpoint and exit on their own (with
        ``RequeueExitHold`` Slurm requeues them held); return those still running."""
        # SIGNALING: the signal is still being delivered, the job has not stopped yet
        return self._wait_while(ids, lambda j: j.active or j.state == "SIGNALING")

    def _restart_moved(self, moves: Mapping[tuple[str, ...], tuple[int, ...]],
                       resize: Mapping[int, GpuRequest]) -> None:
        """Restart moved jobs on their new nodes now: once requeued and shown pending (a
        ``StartTime=now+2`` sent while the job is still COMPLETING is overwritten), pin them
        with ``StartTime=now+2`` (and a resized job's new GPU request) and release them. One
        not pending within ``grace`` seconds stays held: the next round decides for it again
        (see ``deferred``)."""
        ids = [i for group in moves.values() for i in group]
        waiting = set() if self.dry_run else set(
            self._wait_while(ids, lambda j: not j.pending))
        self.deferred = sorted(waiting)
        for nodes, group in moves.items():
            ready = [i for i in group if i not in waiting]
            pinned = self._pin(nodes, ready, ready, resize) if ready else []
            if pinned:
                self.restarted += self._batched("release", pinned, self.client.release)

    def _wait_while(self, ids: Sequence[int], busy: Callable[[SlurmJob], bool]) -> list[int]:
        """Poll the queue for up to ``grace`` seconds while some of ``ids`` are ``busy``;
        return those still busy (a job gone from the queue is not)."""
        deadline = time.monotonic() + self.grace
        left = set(ids)
        while left and time.monotonic() < deadline:
            self.sleep(self.poll)
            try:
                jobs = {j.job_id: j for j in self.client.list_jobs(self.partitions)}
            except SlurmError:
                continue
            left = {i for i in left if i in jobs and busy(jobs[i])}
        return sorted(left)

    def _batched(self, verb: str, ids: Sequence[int],
                 call: Callable[[Sequence[int]], None]) -> list[int]:
        """Run ``call`` on ``ids``; on failure split and retry. Returns the ids that worked."""
        if self.dry_run:
            self.record(verb, ids, True, "dry-run: not applied")
            return list(ids)
        try:
            call(ids)
            crashpoint("acted")
        except SlurmError as exc:
            if len(ids) == 1:
                self._failed(verb, ids[0], str(exc))
                return []
            named = [i for i in exc.failed_ids if i in ids]
            if named:  # Slurm said which ones: retry the rest together, drop the named ones
                for i in named:
                    self._failed(verb, i, str(exc))
                rest = [i for i in ids if i not in named]
                return self._batched(verb, rest, call) if rest else []
            half = len(ids) // 2
            return self._batched(verb, ids[:half], call) + self._batched(verb, ids[half:], call)
        self.record(verb, ids, True, "")
        return list(ids)

    def _failed(self, verb: str, job_id: int, error: str) -> None:
        self.failures += 1
        self.record(verb, [job_id], False, error)
        if verb.startswith("pin ") or verb == "release":
            self.refused_starts[job_id] = error

    def _node(self, verb: str, node: str, reason: str) -> None:
        if self.dry_run:
            self.record(f"{verb} {node}", [], True, "dry-run: not applied")
            return
        try:
            self.client.update_nodes([node], "drain", reason or "blox-slurm")
            self.record(f"{verb} {node}", [], True, reason)
        except SlurmError as exc:
            self.failures += 1
            self.record(f"{verb} {node}", [], False, str(exc))
