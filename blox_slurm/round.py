"""One scheduling round: ``decide(snapshot, composition) -> Decisions``. Pure.

The engine walks the scheduler's priority order once:

* a running job keeps its GPUs, unless it is preempted (a victim restarts at once on GPUs
  left over, or on those of jobs ranked below it, see ``spare_victims``), or the scheduler
  chose a GPU type for it (``Schedule.types``) other than the one it runs on: then, at its
  rank, it *moves* there if placement finds it room on free GPUs of that type, or on those
  of lower-ranked jobs that are leaving the type themselves (a swap; jobs that stay are never
  stopped for a move). A move is a preemption and a start of the same job in one decision
  (its old GPUs are free for the jobs ranked below); each world carries it out as a
  checkpoint and a restart on the new GPUs;
* a pending job gets GPUs from the placement policy; if it does not fit, the preemption policy
  may name running jobs ranked *below* it to stop, and only when stopping them makes it fit;
* when a job cannot be placed, lower-ranked jobs are still tried if the preemption policy
  backfills, otherwise the walk stops starting jobs (strict order);
* placement only ever sees the GPUs a job can use (:func:`blox_slurm.fit.allowed`: its GPU
  type, or the one its scheduler chose this round in ``Schedule.types``, and nodes with its
  CPUs and memory free), so every placement policy honours them unchanged.

Walking the order instead of Blox's "take the top-N jobs that fit by GPU count, preempt the
rest" is what lets consolidation and fragmentation matter: a job the count says fits may not
fit any node, and then nothing is preempted for it. With 1-GPU jobs the two are identical.

Cost: a world that does not read ``Decisions.order`` (the simulator, ``rank_all=False``) and a
scheduler that ranks by a per-job key (``keyed``) get the round in O(pending jobs) whenever
every pending job fits where it is ranked -- the usual round of a cluster with spare GPUs;
otherwise, and always for the controller, the whole order is walked as above.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Collection, Mapping, Sequence
from itertools import filterfalse
from operator import attrgetter

from .abstractions import ClusterView, FreeGpus
from .composition import Composition
from .fit import allowed
from .model import ClusterSnapshot, Decisions, Job, Start

# C-level field getters: the round touches every job a few times, so these matter.
_admitted, _id = attrgetter("admitted"), attrgetter("id")



def _place(comp: Composition, snapshot: ClusterSnapshot, types: Mapping[int, str], job: Job,
           count: int, pool: FreeGpus) -> tuple[int, ...] | None:
    """Placement's choice for ``job`` among the GPUs of ``pool`` it can use (the filter
    stage, :func:`blox_slurm.fit.allowed`, with the type its scheduler chose)."""
    return comp.placement.choose(snapshot, job, count,
                                 allowed(snapshot, job, pool, types.get(job.id)))


def decide(snapshot: ClusterSnapshot, comp: Composition, explain: bool = False,
           rank_all: bool = True) -> Decisions:
    """The round's decisions. ``explain`` fills ``Decisions.reasons``. ``rank_all=False`` is
    for a world that never reads ``Decisions.order`` (the simulator): the engine may then rank
    only the pending jobs (see :func:`_pending_only`), and ``order`` lists just those."""
    comp = comp.for_round(snapshot)
    view = comp.cluster.manage(snapshot)
    forced: dict[int, Job] = {}
    if view.preempt:
        wanted_out = set(view.preempt)
        forced = {j.id: j for j in snapshot.jobs if j.running and j.id in wanted_out}

    jobs = snapshot.jobs
    pending: Sequence[Job] = (snapshot.pending if snapshot.pending is not None
                              else [j for j in jobs if not j.gpus])  # gpus <=> running
    waiting = list(filterfalse(_admitted, pending))
    admit = tuple(comp.admission.admit(snapshot, waiting)) if waiting else ()
    admitted = set(admit)
    if not (rank_all or explain or forced) and comp.scheduling.keyed:
        quick = _pending_only(snapshot, comp, view, pending, admit, admitted)
        if quick is not None:
            return quick
    if not forced and len(admitted) == len(waiting):
        active: Sequence[Job] = jobs  # the common case: everyone is in the scheduler's view
    else:
        active = [j for j in jobs
                  if (j.admitted or j.gpus or j.id in admitted) and j.id not in forced]
    schedule = comp.scheduling.order(snapshot, active)
    order = schedule.order
    alloc = schedule.gpus
    types = schedule.types

    free = FreeGpus.of(snapshot, view.unschedulable)
    for job in forced.values():
        free.give(job.gpus)

    preemption = comp.preemption

    def place(job: Job, count: int, pool: FreeGpus) -> tuple[int, ...] | None:
        return _place(comp, snapshot, types, job, count, pool)
    # Only pending jobs need work; running ones keep their GPUs unless preempted. Walking the
    # pending positions alone keeps a round cheap when hundreds of jobs run.
    pending_pos = [i for i, j in enumerate(order) if not j.gpus]
    n_running = len(order) - len(pending_pos)
    walk = pending_pos
    leaving: set[int] = set()  # running jobs the scheduler wants on another type
    if types:  # they take part in the walk
        gpus_ = snapshot.gpus
        # Types compare case-insensitively, as placement matches them (Slurm's gres names
        # are lower case, node types may not be): "v100" on a "V100" GPU is not a move.
        move_pos = [i for i, j in enumerate(order) if j.gpus and j.id in types
                    and any(gpus_[g].type.casefold() != types[j.id].casefold()
                            for g in j.gpus)]
        if move_pos:
            walk = sorted(pending_pos + move_pos)
            leaving = {order[i].id for i in move_pos}
    running: list[Job] | None = None  # running jobs in rank order, built on first need
    running_pos: list[int] = []
    rank: dict[int, int] = {}  # running job id -> its position in the order
    preempted: dict[int, int] = {}  # victim id -> job it made room for
    moved: list[int] = []  # running jobs moved to the type the scheduler chose
    restarted: set[int] = set()  # victims restarted on GPUs left over in the round
    victims_due: list[tuple[int, Job]] = []  # (rank position, victim): re-checked in rank order
    starts: list[Start] = []
    reasons: dict[int, str] = {}
    blocker: Job | None = None

    spare = preemption.spares_victims  # Blox (minimize = false) stops every victim it tried

    def restart(job: Job) -> bool:
        """Start running ``job`` again at its size on free GPUs (a move, or a victim's restart
        on GPUs left over), if placement finds them."""
        n = len(job.gpus)
        gpus = place(job, n, free) if n <= free.count else None
        if gpus is None:
            return False
        free.take(gpus)
        starts.append(Start(job.id, gpus))
        return True

    def make_room(job: Job, want: int, pos: int,
                  among: Collection[int] | None = None) -> bool:
        """Let the preemption policy stop running jobs ranked below ``pos`` (and in ``among``,
        if given) so that ``job`` fits; their GPUs join the free set. False if no choice of
        victims makes it fit."""
        nonlocal running, running_pos, rank
        if running is None:
            running_pos = [i for i, j in enumerate(order) if j.gpus]
            running = [order[i] for i in running_pos]
            rank = {order[i].id: i for i in running_pos}
        below = bisect.bisect_right(running_pos, pos)
        candidates = [v for v in running[below:] if v.id not in preempted
                      and (among is None or v.id in among)]
        if not candidates:
            return False

        def fits(trial: FreeGpus) -> bool:
            return place(job, want, trial) is not None

        victims = preemption.victims(job, candidates, free, want, fits)
        for v in victims:
            preempted[v.id] = job.id
            free.give(v.gpus)
            heapq.heappush(victims_due, (rank[v.id], v))
        return bool(victims)

    def relocate(job: Job, pos: int, among: Collection[int] | None = None) -> bool:
        """Restart running ``job`` on free GPUs or, failing that, on GPUs of jobs ranked
        below ``pos`` (and in ``among``) that the preemption policy stops for it."""
        return restart(job) or (
            make_room(job, len(job.gpus), pos, among) and restart(job))

    def spare_victims(upto: int) -> None:
        """Victims ranked above ``upto`` get another look, in rank order: the job a victim was
        stopped for may have found room elsewhere (placement chooses from the augmented free
        set), and a victim whose GPUs nobody used then keeps running. One whose GPUs were
        used restarts at once (a move) on GPUs left over or, failing that, on GPUs of jobs
        ranked below it, which it may stop in turn exactly as a pending job of its rank
        would: so the next round has nothing left to undo. Otherwise it waits, pending."""
        while victims_due and victims_due[0][0] < upto:
            at, v = heapq.heappop(victims_due)
            if all(g in free.by_node.get(snapshot.gpus[g].node, ()) for g in v.gpus):
                del preempted[v.id]
                free.take(v.gpus)
            elif relocate(v, at):
                restarted.add(v.id)

    k = 0  # pending jobs walked so far
    for pos in walk:
        job = order[pos]
        if victims_due and spare:
            spare_victims(pos)
        # Running jobs ranked below this one (preempted ones included: an upper bound).
        moving = bool(job.gpus)
        running_below = n_running - (pos - k) - moving
        k += not moving
        if not explain and free.count == 0 and running_below <= 0:
            break  # nothing is free and nothing below can be stopped: no later job can start
        if blocker is not None:
            if explain and not moving:
                reasons[job.id] = f"strict order: waiting behind job {blocker.id}"
            continue
        if moving:
            # (One already stopped for a higher-ranked job is a victim: see spare_victims.)
            # Without free GPUs of its new type, a move may stop lower-ranked jobs that are
            # leaving that type themselves: two jobs that should swap types swap (the victim
            # restarts on the mover's old GPUs at its rank). Jobs that stay are never stopped
            # for a move: it would cost them a restart to end up where they were.
            if job.id not in preempted and (
                    relocate(job, pos, leaving) if spare else restart(job)):
                free.give(job.gpus)
                moved.append(job.id)
                if explain:
                    reasons[job.id] = (f"moved to {types[job.id]}, the type its scheduler "
                                       "chose: checkpointed and restarted there")
            continue
        want = alloc.get(job.id, job.num_gpus)
        gpus = None
        if want <= free.count:
            gpus = place(job, want, free)
        if gpus is None and running_below > 0 and make_room(job, want, pos):
            gpus = place(job, want, free)
        if gpus is not None:
            free.take(gpus)
            starts.append(Start(job.id, gpus))
        else:
            if explain:
                reasons[job.id] = (f"needs {want} GPU(s); {free.count} free on schedulable nodes"
                                   " and preempting lower-ranked jobs would not make it fit")
            if not preemption.backfill:
                blocker = job

    if spare:
        spare_victims(len(order))

    if explain:
        for victim, beneficiary in preempted.items():
            reasons[victim] = f"preempted so job {beneficiary} (ranked higher) can run"
            if victim in restarted:
                reasons[victim] += "; restarted on GPUs left over"
        for job_id in forced:
            reasons[job_id] = "preempted by the cluster manager"
        started = {s.job_id for s in starts}
        for j in waiting:
            if j.id not in admitted:
                reasons[j.id] = f"not admitted by {comp.config.get('admission', {}).get('policy')}"
        for j in order:
            if not j.running and j.id not in started and j.id not in reasons:
                reasons[j.id] = "no GPUs free for it this round"

    return Decisions(
        admit=admit,
        start=tuple(starts),
        preempt=(*preempted, *moved, *(f for f in forced if f not in preempted)),
        order=tuple(map(_id, order)),
        drain=view.drain,
        flag=view.flag,
        marks=schedule.marks,
        reasons=reasons,
        composition=comp.name,
    )


def _pending_only(snapshot: ClusterSnapshot, comp: Composition, view: ClusterView,
                  pending: Sequence[Job], admit: tuple[int, ...],
                  admitted: set[int]) -> Decisions | None:
    """The round when every pending job fits where it is ranked, or ``None`` to walk it all.

    With a ``keyed`` scheduler the order of the pending jobs alone is the full order
    restricted to them, and the walk changes nothing between two pending jobs (running ones
    keep their GPUs). So if each pending job, in that order, gets GPUs from placement, the
    full walk would start exactly these jobs on exactly these GPUs and stop nobody; ranking
    the hundreds of running jobs is only needed when someone does not fit (preemption,
    strict order). The common round of a cluster with spare GPUs then costs O(pending).
    """
    queue = [j for j in pending if j.admitted or j.id in admitted]
    schedule = comp.scheduling.order(snapshot, queue)
    alloc, types = schedule.gpus, schedule.types
    free = FreeGpus.of(snapshot, view.unschedulable)
    starts: list[Start] = []
    for job in schedule.order:
        want = alloc.get(job.id, job.num_gpus)
        if want > free.count:
            return None
        gpus = _place(comp, snapshot, types, job, want, free)
        if gpus is None:
            return None
        free.take(gpus)
        starts.append(Start(job.id, gpus))
    return Decisions(admit=admit, start=tuple(starts), order=tuple(map(_id, schedule.order)),
                     drain=view.drain, flag=view.flag, marks=schedule.marks,
                     composition=comp.name)
