"""One scheduling round: ``decide(snapshot, composition) -> Decisions``. Pure.

The engine walks the scheduler's priority order once:

* a running job keeps its GPUs, unless it is preempted (a victim restarts at once on GPUs
  left over, or on those of jobs ranked below it, see ``spare_victims``), or the scheduler
  chose another GPU count for it (``Schedule.gpus``, within the job's bounds: it is resized
  at its rank, among the free GPUs and its own) or a GPU type for it (``Schedule.types``)
  other than the one it runs on: then, at its
  rank, it *moves* there if placement finds it room on free GPUs of that type, or on those
  of lower-ranked jobs that are leaving the type themselves (a swap; jobs that stay are never
  stopped for a move). A move is its own decision (``Decisions.move``: the job and its new
  GPUs; its old GPUs are free for the jobs ranked below); each world carries it out as a
  checkpoint and a restart on the new GPUs;
* running jobs the scheduler does not run this round (``Schedule.stop``: Gavel's rounds) are
  stopped before the walk, and keep running after it if nobody took their GPUs; with
  ``Schedule.free_movers`` so are the GPUs of those it moves to another type, each placed
  again at its rank (or kept, or waiting, the same way);
* a pending job gets GPUs from the placement policy; if it does not fit, the preemption policy
  may name running jobs ranked *below* it to stop, and only when stopping them makes it fit;
* when a job cannot be placed, lower-ranked jobs are still tried if the preemption policy
  backfills, otherwise the walk stops starting jobs (strict order);
* every step writes what it decides to a :class:`~blox_slurm.core.ledger.Ledger` (starts, stops
  and for whom, spared victims, moves, who did not fit, the strict-order blocker): the
  ``Decisions`` and the ``explain`` reasons are two readings of it;
* placement only ever sees the GPUs a job can use (:func:`blox_slurm.core.fit.allowed`: its GPU
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
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import replace
from itertools import compress, filterfalse, islice
from operator import attrgetter, not_
from typing import overload

from .abstractions import ClusterView, FreeGpus, FreeView, Ranked, Schedule
from .composition import Composition
from .fit import (
    Booked,
    allowed,
    folded_gpu_types,
    gpu_count,
    nodes_of_types,
    on_type,
    required_types,
)
from .ledger import Ledger
from .model import ClusterSnapshot, Decisions, Job, NodeState, Start, make_decisions, make_start

# C-level field getters: the round touches every job a few times, so these matter.
_admitted, _id, _gpus = attrgetter("admitted"), attrgetter("id"), attrgetter("gpus")



def _place(comp: Composition, snapshot: ClusterSnapshot, types: Mapping[int, str], job: Job,
           count: int, pool: FreeView, booked: Booked) -> tuple[int, ...] | None:
    """Placement's choice for ``job`` among the GPUs of ``pool`` it can use (the filter
    stage, :func:`blox_slurm.core.fit.allowed`, with the type its scheduler chose and the
    CPUs and memory the round has ``booked`` so far)."""
    return comp.placement.choose(snapshot, job, count,
                                 allowed(snapshot, job, pool, types.get(job.id), booked))


def decide(snapshot: ClusterSnapshot, comp: Composition, explain: bool = False,
           rank_all: bool = True) -> Decisions:
    """The round's decisions. ``explain`` fills ``Decisions.reasons`` from the round's ledger
    (it changes nothing else). ``rank_all=False`` is for a world that never reads
    ``Decisions.order`` (the simulator): the engine may then rank only the pending jobs (see
    :func:`_pending_only`), and ``order`` lists just those, in rank order, whichever way the
    round went (a thousand running jobs' ids are not gathered for nobody)."""
    comp, state = comp.for_round(snapshot)
    view = comp.cluster.manage(snapshot)
    forced = _forced(snapshot, view)
    pending: Sequence[Job] = (snapshot.pending if snapshot.pending is not None
                              else [j for j in snapshot.jobs if not j.gpus])  # gpus <=> running
    waiting = list(filterfalse(_admitted, pending))
    admit = tuple(comp.admission.admit(snapshot, waiting)) if waiting else ()
    admitted = set(admit)
    if not (rank_all or explain or forced) and comp.scheduling.keyed:
        quick = _pending_only(snapshot, comp, view, pending, admit, admitted)
        if quick is not None:
            return replace(quick, state=state) if state else quick
    schedule = comp.scheduling.order(_managed(snapshot, view),
                                     _active(snapshot.jobs, len(waiting), admitted, forced))
    free = FreeGpus.of(snapshot, view.unschedulable)
    for job in forced.values():
        free.give(job.gpus)
    ledger = Ledger(forced=tuple(forced))
    walk = _Walk(snapshot, comp, schedule, free, ledger, explain)
    walk.run()
    ranked = (schedule.order if rank_all or explain
              else list(map(schedule.order.__getitem__, walk.pending_pos)))
    start, stop, move = ledger.decisions()
    reasons = ledger.reasons(schedule.order, schedule.gpus, schedule.types,
                             [j.id for j in waiting if j.id not in admitted],
                             comp.config.get("admission", {}).get("policy", "")
                             ) if explain else {}
    return make_decisions(admit=admit, start=start, stop=stop, move=move,
                          order=tuple(map(_id, ranked)), drain=view.drain, flag=view.flag,
                          marks=schedule.marks, state=state, reasons=reasons,
                          composition=comp.name)


def _managed(snapshot: ClusterSnapshot, view: ClusterView) -> ClusterSnapshot:
    """The snapshot the scheduler ranks on: nodes the cluster manager takes out of new work
    read as draining, so a scheduler that sizes its allocation by the GPUs of UP nodes
    (Gavel, Pollux) counts only those placement may use."""
    out = view.unschedulable
    if not out:
        return snapshot
    drain, up = NodeState.DRAIN, NodeState.UP
    nodes = tuple(replace(n, state=drain) if n.state is up and n.name in out else n
                  for n in snapshot.nodes)
    return replace(snapshot, nodes=nodes)


def _forced(snapshot: ClusterSnapshot, view: ClusterView) -> dict[int, Job]:
    """The running jobs the cluster manager stops before the walk."""
    if not view.preempt:
        return {}
    wanted_out = set(view.preempt)
    return {j.id: j for j in snapshot.jobs if j.running and j.id in wanted_out}


def _active(jobs: Sequence[Job], n_waiting: int, admitted: Collection[int],
            forced: Collection[int]) -> Sequence[Job]:
    """The jobs the scheduler ranks: admitted (before or now) or running, less those the
    cluster manager stops."""
    if not forced and len(admitted) == n_waiting:
        return jobs  # the common case: everyone is in the scheduler's view
    return [j for j in jobs if (j.admitted or j.gpus or j.id in admitted) and j.id not in forced]


def _resized(order: Sequence[Job], alloc: Mapping[int, int]) -> dict[int, int]:
    """The running jobs the scheduler gave another GPU count, within what each allows
    (:func:`~blox_slurm.core.fit.gpu_count`), with that count."""
    if not alloc:
        return {}
    counts = ((j, gpu_count(j, alloc[j.id])) for j in order if j.gpus and j.id in alloc)
    return {j.id: n for j, n in counts if n != len(j.gpus)}


class _Walk:
    """One walk over the scheduler's order, and the steps a rank can take: place, make room,
    relocate, spare victims. Each step writes what it decides to the ledger; the free-GPU
    pool is the walk's working copy (the snapshot's is never touched)."""

    def __init__(self, snapshot: ClusterSnapshot, comp: Composition, schedule: Schedule,
                 free: FreeGpus, ledger: Ledger, explain: bool = False) -> None:
        """``explain``: walk every pending job, so each that did not fit says with what."""
        self.snapshot, self.comp, self.free, self.ledger = snapshot, comp, free, ledger
        self.explain = explain
        self.order, self.types, self.alloc = schedule.order, schedule.types, schedule.gpus
        self.unscheduled, self.free_movers = schedule.stop, schedule.free_movers
        self.paused: dict[int, Job] = {}  # left their GPUs before the walk, not placed again
        self.preemption = comp.preemption
        self.spare = comp.preemption.spares_victims  # Blox (minimize = false) stops them all
        self.victims_due: list[tuple[int, Job]] = []  # (rank position, victim), rank order
        self._live: _Live | None = None  # running jobs that may still be stopped, on first need
        self.booked = Booked()  # CPUs and memory of the jobs started or moved so far
        self.resized = _resized(self.order, self.alloc)  # running job -> its other count
        self._held: dict[int, frozenset[str]] = {}  # running job -> the nodes of its GPUs
        self.pending_pos = _pending_positions(self.order)

    def place(self, job: Job, count: int) -> tuple[int, ...] | None:
        return _place(self.comp, self.snapshot, self.types, job, count, self.free, self.booked)

    def run(self) -> None:
        """Walk the pending jobs and the running ones the scheduler wants on another type,
        in rank order (running ones keep their GPUs otherwise: walking only these keeps a
        round cheap when hundreds run)."""
        order, free, ledger, pending_pos = self.order, self.free, self.ledger, self.pending_pos
        n_running = len(order) - len(pending_pos)
        move_pos = self._movers()
        if self.unscheduled or (self.free_movers and move_pos):
            self.pause(move_pos)
        walk = sorted(pending_pos + move_pos) if move_pos else pending_pos
        leaving = {order[i].id for i in move_pos}
        k = 0  # pending jobs walked so far
        for pos in walk:
            job = order[pos]
            due = self.victims_due  # victims rank low: most pending jobs are above them all
            if due and due[0][0] < pos and self.spare:
                self.spare_victims(pos)
            # Running jobs ranked below this one (stopped ones included: an upper bound).
            is_move = bool(job.gpus)
            running_below = n_running - (pos - k) - is_move
            k += not is_move
            if free.count == 0 and not self.resized and (
                    running_below <= 0 or self._all_stopped_below(pos)):
                break  # nothing is free and nothing below can be stopped: no later job starts
            if ledger.blocker is not None:
                continue
            if is_move:
                self.move(job, pos, leaving)
            elif not self.start(job, pos, running_below) and not self.preemption.backfill:
                ledger.blocker = pos
        if self.spare:
            self.spare_victims(len(order))
        if self.paused:
            self.resume()

    def _all_stopped_below(self, pos: int) -> bool:
        """The running jobs ranked below ``pos`` are all stopped or moved already (known once
        a search for victims ran). With nothing free, no later job can then start, move, or
        restart as a victim: each would fail for want of anyone below it to stop. In a full
        LAS cluster the requeued jobs wait at the bottom of the order, two thirds of the
        pending jobs a preempting round walked, each failing its search."""
        live = self._live
        return live is not None and not self.explain and not live.any_below(pos)

    def pause(self, move_pos: Sequence[int]) -> None:
        """Before the walk, stop the running jobs the scheduler does not run this round
        (``Schedule.stop``) and, with ``Schedule.free_movers``, free the GPUs of those it
        moves to another type (placed again at their rank, see :meth:`move`): their GPUs
        join the pool, so the jobs the scheduler picked take them without preemption
        searches (a Gavel round re-picks every job: searching for victims among the jobs it
        dropped, and for swaps between movers, was most of its cost). In rank order."""
        ids, order = self.unscheduled, self.order
        movers = ({order[i].id for i in move_pos if order[i].id not in self.resized}
                  if self.free_movers else set())
        freed: list[int] = []
        for job in order:
            if job.gpus and (job.id in ids or job.id in movers):
                if job.id in ids:
                    self.ledger.stop(job.id, None)
                self.paused[job.id] = job
                freed.extend(job.gpus)
        self.free.give(freed)  # one pass over the nodes for all of them

    def resume(self) -> None:
        """Jobs :meth:`pause` took off their GPUs and the walk did not place again: those
        whose GPUs nobody took keep running (the pool would leave them idle otherwise; only
        when the preemption policy spares victims: Blox's ``minimize = false`` stops what it
        is told to), the others wait. In rank order."""
        free, node_of, ledger = self.free, self.snapshot.gpus, self.ledger
        for job in self.paused.values():
            if self.spare and all(g in free.by_node.get(node_of[g].node, ())
                                  for g in job.gpus):
                if job.id in ledger.stopped:
                    ledger.spare(job.id)
                free.take(job.gpus)
            elif job.id not in ledger.stopped:
                ledger.stop(job.id, None)

    def _movers(self) -> list[int]:
        """Rank positions of the running jobs the scheduler chose another GPU type or count
        for (see :meth:`resize`). Types compare case-insensitively, as placement matches
        them (Slurm's gres names are lower case, node types may not be): "v100" on a "V100"
        GPU is not a move."""
        types, resized = self.types, self.resized
        if not types and not resized:
            return []
        have = folded_gpu_types(self.snapshot.gpus)
        want = dict(zip(types, map(str.casefold, types.values()), strict=True)).get
        return [i for i, j in enumerate(self.order) if j.gpus and (
            j.id in resized or ((w := want(j.id)) is not None and not on_type(j.gpus, have, w)))]

    def start(self, job: Job, pos: int, running_below: int) -> bool:
        """Start pending ``job`` on free GPUs or, failing that, on GPUs of lower-ranked jobs
        the preemption policy stops for it."""
        free = self.free
        want = gpu_count(job, self.alloc.get(job.id))
        gpus = self.place(job, want) if want <= free.count else None
        if gpus is None and running_below > 0 and self.make_room(job, want, pos):
            gpus = self.place(job, want)
        if gpus is None:
            self.ledger.unplaced[job.id] = (want, free.count)
            return False
        free.take(gpus)
        self.booked.add(self.snapshot, job, gpus)
        self.ledger.starts.append(make_start(job_id=job.id, gpus=gpus))
        return True

    def move(self, job: Job, pos: int, leaving: Collection[int]) -> None:
        """At its rank, running ``job`` moves to the type its scheduler chose if it finds
        room there. (One already stopped for a higher-ranked job is a victim: see
        :meth:`spare_victims`.) Without free GPUs of its new type it may stop lower-ranked
        jobs that are ``leaving`` that type themselves: two jobs that should swap types swap
        (the victim restarts on the mover's old GPUs at its rank). Jobs that stay are never
        stopped for a move: it would cost them a restart to end up where they were."""
        if self.ledger.out(job.id):
            return
        if job.id in self.resized:
            self.resize(job, pos)
            return
        if job.id in self.paused:  # its GPUs were freed before the walk
            gpus = self.restart(job)
            if gpus is not None:
                del self.paused[job.id]
                self.ledger.move(job.id, gpus)
            return
        gpus = self.relocate(job, pos, leaving) if self.spare else self.restart(job)
        if gpus is not None:
            self.free.give(job.gpus)
            self.ledger.move(job.id, gpus)
            if self._live is not None:
                self._live.leave(job, pos)

    def resize(self, job: Job, pos: int) -> None:
        """Running ``job`` restarts on the count its scheduler chose (an elastic job grown or
        shrunk: Pollux), placed among the free GPUs and its own, if placement finds room;
        otherwise it keeps what it has. Nobody is stopped for a resize: a job grows only
        into GPUs nobody ranked above it took. A job on a node that takes no new work (a
        drain) keeps its GPUs: they are not the pool's to place among, and moving it off is
        the cluster manager's call."""
        want, free = self.resized[job.id], self.free
        if any(self.snapshot.node_of(g) not in free.by_node for g in job.gpus):
            return
        free.give(job.gpus)
        gpus = self.place(job, want) if want <= free.count else None
        if gpus is None:
            free.take(job.gpus)
            return
        free.take(gpus)
        self.booked.add(self.snapshot, job, gpus)
        self.ledger.move(job.id, gpus)
        if self._live is not None:
            self._live.leave(job, pos)

    def restart(self, job: Job) -> tuple[int, ...] | None:
        """Free GPUs for running ``job`` at its size, taken from the pool, if placement
        finds them."""
        n = len(job.gpus)
        gpus = self.place(job, n) if n <= self.free.count else None
        if gpus is not None:
            self.free.take(gpus)
            self.booked.add(self.snapshot, job, gpus)
        return gpus

    def relocate(self, job: Job, pos: int, among: Collection[int] | None = None
                 ) -> tuple[int, ...] | None:
        """GPUs for running ``job``: free ones or, failing that, those of jobs ranked below
        ``pos`` (and in ``among``) that the preemption policy stops for it."""
        gpus = self.restart(job)
        if gpus is None and self.make_room(job, len(job.gpus), pos, among):
            gpus = self.restart(job)
        return gpus

    def make_room(self, job: Job, want: int, pos: int,
                  among: Collection[int] | None = None) -> bool:
        """Let the preemption policy stop running jobs ranked below ``pos`` (and in
        ``among``, if given) so that ``job`` fits; their GPUs join the free set. False if no
        choice of victims makes it fit."""
        live = self.live()
        candidates = live.below(pos)
        if among is not None:
            candidates = [v for v in candidates if v.id in among]
        if self.spare and candidates:
            candidates = self._on_its_types(job, candidates)
        if not candidates:
            return False
        comp, snapshot, types, booked = self.comp, self.snapshot, self.types, self.booked

        def fits(trial: FreeView) -> bool:
            return _place(comp, snapshot, types, job, want, trial, booked) is not None

        # a list of its own: the live list behind the candidates changes below
        victims = list(self.preemption.victims(job, candidates, self.free, want, fits))
        for v in victims:
            self.ledger.stop(v.id, job.id)
            self.free.give(v.gpus)
            heapq.heappush(self.victims_due, (live.leave(v), v))
        return bool(victims)

    def _on_its_types(self, job: Job, candidates: Sequence[Job]) -> Sequence[Job]:
        """The candidates holding a GPU of a type ``job`` may use. Stopping any other frees
        nothing it can take, so a policy that spares the victims it did not need would spare
        it again: leaving them out gives the same victims in fewer, smaller trials (a Gavel
        round makes room dozens of times, with the jobs of every type ranked below)."""
        want = required_types(job, self.types.get(job.id))
        if want is None:
            return candidates
        keep, held = nodes_of_types(self.snapshot.nodes, want), self._held
        node_of = self.snapshot.gpus
        out = []
        for v in candidates:
            nodes = held.get(v.id)
            if nodes is None:  # a job's nodes, once per round: it is asked about dozens of times
                nodes = held[v.id] = frozenset(node_of[g].node for g in v.gpus)
            if not keep.isdisjoint(nodes):
                out.append(v)
        return out

    def live(self) -> _Live:
        if self._live is None:
            self._live = _Live(self.order, self.ledger, self.paused)
        return self._live

    def spare_victims(self, upto: int) -> None:
        """Victims ranked above ``upto`` get another look, in rank order: the job a victim
        was stopped for may have found room elsewhere (placement chooses from the augmented
        free set), and a victim whose GPUs nobody used then keeps running. One whose GPUs
        were used restarts at once (a move) on GPUs left over or, failing that, on GPUs of
        jobs ranked below it, which it may stop in turn exactly as a pending job of its rank
        would: so the next round has nothing left to undo. Otherwise it waits, pending.
        (With nothing free and nobody left below it, the search is not made: it would find
        nothing, for each of a full LAS cluster's victims.)"""
        free, node_of, due = self.free, self.snapshot.gpus, self.victims_due
        while due and due[0][0] < upto:
            at, v = heapq.heappop(due)
            if free.count and all(g in free.by_node.get(node_of[g].node, ()) for g in v.gpus):
                self.ledger.spare(v.id)
                free.take(v.gpus)
                self.live().back(v, at)
            elif free.count or self.live().any_below(at):
                gpus = self.relocate(v, at)
                if gpus is not None:
                    self.ledger.restart(v.id, gpus)


def _pending_positions(order: Sequence[Job]) -> list[int]:
    """The rank positions of the pending jobs of ``order`` (a :class:`Ranked` one says)."""
    if isinstance(order, Ranked):
        return order.pending_at
    return list(compress(range(len(order)), map(not_, map(_gpus, order))))


def _others(n: int, skip: list[int]) -> list[int]:
    """``range(n)`` less the ascending positions ``skip``, built from runs of ranges. Those
    of ``skip`` that end the range (a full LAS cluster's requeued jobs, ranked below every
    running one: most of its waiting jobs) are cut off first by a bisection, as they leave
    no run: ``skip[i] - i`` never falls, and is ``n - len(skip)`` exactly on that tail."""
    tail = bisect.bisect_left(range(len(skip)), n - len(skip), key=lambda i: skip[i] - i)
    out: list[int] = []
    lo = 0
    for i in islice(skip, tail):
        out += range(lo, i)
        lo = i + 1
    out += range(lo, n - len(skip) + tail)
    return out


class _Live:
    """The running jobs of a walk's order that no decision has yet taken off their GPUs, in
    rank order: preemption's candidates are a slice of it. Kept up to date as jobs are
    stopped, spared or moved, so finding the candidates below a rank is a bisection and a
    C-level slice instead of a pass over every running job (a preemption-heavy round asks
    once per waiting job, with a thousand jobs running)."""

    __slots__ = ("jobs", "order", "pos")

    def __init__(self, order: Sequence[Job], ledger: Ledger, paused: Collection[int] = ()
                 ) -> None:
        """Made on the walk's first need (most rounds never stop a job for another): less
        the jobs moved or stopped by then and those ``paused`` off their GPUs."""
        if isinstance(order, Ranked):
            pos, jobs = _others(len(order), order.pending_at), order.running[:]
        else:
            pos = list(compress(range(len(order)), map(_gpus, order)))
            jobs = list(map(order.__getitem__, pos))
        if ledger.moves or ledger.stopped or paused:
            kept = [i for i, j in enumerate(jobs) if not (ledger.out(j.id) or j.id in paused)]
            pos, jobs = [pos[i] for i in kept], [jobs[i] for i in kept]
        self.order, self.pos, self.jobs = order, pos, jobs

    def below(self, rank: int) -> Sequence[Job]:
        """Those ranked below position ``rank``, highest first: a view, valid until the
        next change."""
        return _Tail(self.jobs, bisect.bisect_right(self.pos, rank))

    def any_below(self, rank: int) -> bool:
        """Whether any is ranked below position ``rank``."""
        return bool(self.pos) and self.pos[-1] > rank

    def leave(self, job: Job, at: int | None = None) -> int:
        """``job`` (at rank position ``at``, if known) is stopped or moves: no longer a
        candidate. Returns its position."""
        if at is None:
            at = self._find(job)
        i = bisect.bisect_left(self.pos, at)
        if i < len(self.pos) and self.pos[i] == at:
            del self.pos[i], self.jobs[i]
        return at

    def back(self, job: Job, at: int) -> None:
        """A victim spared after all: a candidate again, at its rank position ``at``."""
        i = bisect.bisect_left(self.pos, at)
        self.pos.insert(i, at)
        self.jobs.insert(i, job)

    def _find(self, job: Job) -> int:
        """The rank position of a victim: searched from the lowest rank, where preemption
        takes them (a dict of every running job's position cost more than the search)."""
        jobs = self.jobs
        for i in range(len(jobs) - 1, -1, -1):
            if jobs[i] is job:
                return self.pos[i]
        for i, other in enumerate(self.order):  # a victim named twice, or a copy of one
            if other.id == job.id and other.gpus:
                return i
        raise ValueError(f"preemption chose job {job.id}, which is not running")


class _Tail(Sequence[Job]):
    """``jobs[lo:]`` without the copy: preemption takes its victims from the lowest-ranked
    end, mostly one, and copying the thousand running jobs above them for each waiting job
    of a preempting round cost more than the search."""

    __slots__ = ("jobs", "lo")

    def __init__(self, jobs: list[Job], lo: int) -> None:
        self.jobs, self.lo = jobs, lo

    def __len__(self) -> int:
        return len(self.jobs) - self.lo

    @overload
    def __getitem__(self, i: int) -> Job: ...

    @overload
    def __getitem__(self, i: slice) -> list[Job]: ...

    def __getitem__(self, i: int | slice) -> Job | list[Job]:
        if isinstance(i, slice):
            return self.jobs[self.lo:][i]
        n = len(self)
        if not -n <= i < n:
            raise IndexError("candidate index out of range")
        return self.jobs[self.lo + i % n]

    def __iter__(self) -> Iterator[Job]:
        return islice(self.jobs, self.lo, None)

    def __reversed__(self) -> Iterator[Job]:
        return islice(reversed(self.jobs), len(self))


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
    schedule = comp.scheduling.order(_managed(snapshot, view), queue)
    if schedule.stop:
        return None  # the walk stops them
    alloc, types = schedule.gpus, schedule.types
    free = FreeGpus.of(snapshot, view.unschedulable)
    booked = Booked()
    starts: list[Start] = []
    for job in schedule.order:
        want = gpu_count(job, alloc.get(job.id))
        if want > free.count:
            return None
        gpus = _place(comp, snapshot, types, job, want, free, booked)
        if gpus is None:
            return None
        free.take(gpus)
        booked.add(snapshot, job, gpus)
        starts.append(make_start(job_id=job.id, gpus=gpus))
    return make_decisions(admit=admit, start=tuple(starts),
                          order=tuple(map(_id, schedule.order)), drain=view.drain,
                          flag=view.flag, marks=schedule.marks, composition=comp.name)
