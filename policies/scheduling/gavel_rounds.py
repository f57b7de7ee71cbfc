"""Gavel's own simulator, round for round: the mechanism that turns its allocations into
rounds (``scheduler.py`` at Gavel's HEAD), for the Gavel-compatible mode.

The ``gavel`` policy is Gavel's idea as a pure policy for a physical cluster (a fresh LP at
every change of the job set, priorities over each job's age). Gavel's published simulator
differs, and its numbers can only be reproduced by doing what it does:

* **Allocations are held between resets.** The allocation is recomputed only when the job
  set changed *and* ``reset_interval`` seconds (Gavel: 1,920) have passed since the last
  reset (a reset at time 0 does not count: Gavel reads a last reset time of 0 as none).
  A job that arrived since has no allocation: priority 0 until the next reset.
* **Time is counted since the last reset.** At a reset every job's time on every type
  restarts at ``initial_time`` (Gavel: half a 360 s round) and its *deficit* (time it should
  have had minus time it had, per type) accumulates. A job's priority on type ``t`` is
  ``X[j,t] / time on t since the reset`` (Gavel divides by the type's total too, the same for
  every job of a type, so it does not change the order), 0 without an allocation there or on a
  type where the job does not run. The time is Gavel's sum, each round's credit added to
  ``initial_time``, so jobs credited alike since the reset tie to the bit and their deficits
  decide, as in Gavel.
* **A round starts where the last round that ran jobs ended** (``simulate``'s
  ``current_round_start_time``). After idle rounds (nothing ran until the next arrival), the
  jobs of the first round that runs are credited with the idle time as run time
  (``count_idle``): they leave that interval with a deficit of minus the idle time, and at
  later resets rank after the jobs they tie with. Gavel's clock jumps to the arrival there.
* **Types are filled one after another.** For each type in turn (``type_order``: V100, P100,
  K80, shuffled every round for the heterogeneity-agnostic policies, as Gavel does), jobs in
  decreasing (priority, deficit, allocation), ties by arrival, take its GPUs while they fit;
  a job runs on at most one type, never on one where it makes no progress, and jobs with
  priority 0 fill what is left (except under FIFO). A job that arrived since the reset is
  counted there too, but Gavel gives workers only to the jobs of its allocation
  (``_schedule_jobs_on_workers``): it does not run until the next reset, and the GPUs it
  was counted on stay idle for the round.
* **Jobs Gavel did not pick stop** (``Schedule.stop``) unless nobody takes their GPUs.

Allocations (``allocation``):

* ``max_min_fairness``: Gavel's heterogeneity-aware max-min LP (``max_min_fairness_perf``).
* ``max_min_agnostic``: the same LP with every throughput 1 (Gavel's ``max_min_fairness``):
  time-shares each job across all types, including ones it cannot run on (it then does not
  run there).
* ``fifo``: Gavel's ``fifo``, as its HEAD computes it. Jobs keep their type until they
  finish; at a reset a finished job's type goes to the head of the queue if it fits; then jobs
  in arrival order take the type that sorts *last* among the types with free GPUs (``v100`` on
  Gavel's cluster). Gavel's code draws a type at random among those the job fits on but
  assigns that last type whatever the draw (the draw only decides which type leaves the list
  when the last one is exactly full), so a type can be allocated beyond its GPUs: its jobs then
  time-share it by priority. Reproduced as is, because Gavel's FIFO figures come from it.

A job that fits no single type (more GPUs than any type has) is ranked last with no type and
may span types, so it is not starved forever. Jobs that cannot run anywhere wait.

State. Gavel keeps its allocation, reset time and deficits in the scheduler; so does this
policy, in its instance (a controller restart begins with a reset). Its draws come from two
streams seeded as Gavel's simulator seeds its own: the type shuffle from ``seed + 5`` (drawn
once per round), FIFO's type draw from ``seed`` (``FIFOPolicy(seed=seed)``), so as long as
the two simulators' rounds and resets agree they draw alike. A round's draw is kept for its
time and a reset happens once, so deciding twice on one snapshot gives the same decisions. A
snapshot older than the last reset, or of a cluster with other GPU types, starts over.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import attrgetter
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from blox_slurm.core.abstractions import Schedule, SchedulingBase
from blox_slurm.core.fit import on_type
from blox_slurm.core.model import ClusterSnapshot, Gpu, Job, JobState, Node
from blox_slurm.core.registry import register
from blox_slurm.core.throughput import DEFAULT_THROUGHPUT, ThroughputModel, steps_model

from .gavel import _largest_nodes, _rates, allocate, usable_gpus

Allocation = Literal["max_min_fairness", "max_min_agnostic", "fifo"]

# The fields of a job a round's job set is derived from (see ``_JobSet``), read every round
# for every active job as one C-level getter: its place in arrival order (submit time, id)
# and what its rates and steps depend on (hints: its types, ``required_types``).
_fixed = attrgetter("id", "submit_time", "num_gpus", "model", "hints")
_RUNNING = JobState.RUNNING


@dataclass(frozen=True, eq=False)
class _JobSet:
    """What a round derives from its jobs' fixed fields (``_fixed``) alone, kept while they
    stay the same: 94 % of 0e4a51's max-min rounds see the job set of the round before, and
    sorting, rating and indexing its jobs again was a pass and a few arrays every round.
    Compared by identity, so what is cached on it is cheap to look up."""

    keys: list[tuple[Any, ...]]  # ``_fixed`` per job, in the order the round gave them
    order: list[int]  # the round's jobs in arrival order, as indices into ``keys``
    id_list: list[int]  # in arrival order
    ids: frozenset[int]
    gpus: list[int]  # per job, in arrival order (as the arrays below)
    rates: np.ndarray  # jobs x types, 0 where a job cannot run
    runs: np.ndarray  # rates > 0
    runs_by_type: list[list[bool]]  # runs.T, as lists
    steps: list[list[float]] | None  # steps/s per type (0: unknown); None: not counted

    @classmethod
    def of(cls, jobs: Sequence[Job], keys: list[tuple[Any, ...]],
           rates: Callable[[Job, tuple[Any, ...]], list[float]],
           steps: Callable[[Job], list[float]] | None, n_types: int) -> _JobSet:
        """The job set of ``jobs`` (``keys`` their fixed fields): ``rates`` gives a job's
        rates by the job and its key, ``steps`` its steps/s."""
        order = sorted(range(len(keys)), key=lambda i: (keys[i][1], keys[i][0]))
        table = np.array([rates(jobs[i], keys[i]) for i in order],
                         dtype=float).reshape(len(order), n_types)
        ids = [keys[i][0] for i in order]
        runs = table > 0
        return cls(keys, order, ids, frozenset(ids), [keys[i][2] for i in order], table,
                   runs, runs.T.tolist(),
                   None if steps is None else [steps(jobs[i]) for i in order])

    def ordered(self, jobs: Sequence[Job]) -> list[Job]:
        """``jobs`` (the round's, in the order of ``keys``) in arrival order."""
        return list(map(jobs.__getitem__, self.order))


@dataclass
class _Epoch:
    """What Gavel's scheduler keeps from one reset to the next."""

    at: float
    elapsed: float  # _TypeClock.elapsed at the reset: Gavel's clock
    types: tuple[str, ...]
    jobs: frozenset[int]
    share: dict[int, np.ndarray]  # X[j, :] per job present at the reset
    deficit: dict[int, np.ndarray] = field(default_factory=dict)
    fifo: dict[int, int] = field(default_factory=dict)  # FIFO: job -> type index
    _table: tuple[dict[int, int], np.ndarray] | None = None  # see rows()
    _standing: tuple[_JobSet, _Standing] | None = None  # see standing()

    def rows(self, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """``share`` and ``deficit`` of the jobs ``ids`` (jobs x types each; zeros for a job
        the reset did not see): one index into a table built on the epoch's first round,
        instead of arrays built from per-job rows every round."""
        n = len(self.types)
        if self._table is None:
            index = {jid: k for k, jid in enumerate(self.share.keys() | self.deficit.keys())}
            table = np.zeros((len(index) + 1, 2 * n))  # the last row: unseen
            for part, col in ((self.share, 0), (self.deficit, n)):
                if part:  # one copy per part, not one per job
                    table[[index[jid] for jid in part], col:col + n] = np.array(
                        list(part.values()))
            self._table = (index, table)
        index, table = self._table
        mine = table[[index.get(jid, -1) for jid in ids]].reshape(len(ids), 2 * n)
        return mine[:, :n], mine[:, n:]

    def standing(self, js: _JobSet) -> _Standing:
        """The epoch's ``_Standing`` over the job set ``js``, made once per job set: every
        round of an epoch with the same jobs reads the same rows."""
        kept = self._standing
        if kept is None or kept[0] is not js:
            share, deficit = self.rows(js.id_list)
            # per type, each job's place by (deficit, allocation) decreasing, ties by arrival
            # (a permutation's argsort is its inverse)
            tied = np.lexsort((-share.T, -deficit.T)).argsort(axis=1)
            kept = self._standing = (js, _Standing(
                share, deficit, js.runs & (share > 0), tied,
                [jid in self.share for jid in js.id_list]))
        return kept[1]


@dataclass(frozen=True)
class _Standing:
    """An epoch's allocation and deficits over one job set (arrival order), and what every
    round derives from them alone."""

    share: np.ndarray  # jobs x types
    deficit: np.ndarray  # jobs x types
    ranked: np.ndarray  # where a job has a priority: an allocation on a type it runs on
    # types x jobs: each job's place in the type's order by deficit, then allocation
    # (decreasing), then arrival: the per-type order's later keys as one
    tied: np.ndarray
    allocated: list[bool]  # per job: the reset allocated it (it may run this epoch)


@dataclass(frozen=True)
class _Round:
    """One round's inputs over the active jobs, in arrival order."""

    now: float
    types: list[str]
    capacity: np.ndarray  # usable GPUs per type
    largest: float  # the most usable GPUs of a type (0 without types)
    js: _JobSet
    jobs: list[Job]
    rates: np.ndarray  # jobs x types, 0 where a job cannot run
    spent: np.ndarray  # jobs x types: initial_time + seconds run there since the reset
    gpu_type: list[str]  # per GPU id, case-folded


@dataclass(frozen=True, eq=False)
class _NodeFacts:
    """What a round reads from the node and GPU lists (see ``GavelRounds._node_facts``);
    compared by identity, so a cache keyed on it is cheap."""

    nodes: tuple[Node, ...]
    gpus: tuple[Gpu, ...]
    largest: dict[str, int]  # per type of the UP nodes, the GPUs of its largest node
    types: list[str]  # the UP nodes' types, in ``type_order``
    gpu_type: list[str]  # per GPU id, case-folded (as placement compares types)
    type_of_gpu: list[int]  # per GPU id: index into ``types``, -1 where no node is up

    @classmethod
    def of(cls, snapshot: ClusterSnapshot, type_order: Sequence[str]) -> _NodeFacts:
        largest = _largest_nodes(snapshot)
        types = _ordered_types(list(largest), type_order)
        gpu_type = [g.type for g in snapshot.gpus]
        index = {t: i for i, t in enumerate(types)}
        return cls(snapshot.nodes, snapshot.gpus, largest, types,
                   [t.casefold() for t in gpu_type], [index.get(t, -1) for t in gpu_type])


class _TypeClock:
    """Seconds each job ran on each type since the last reset, counted from the running jobs
    each round sees (as Gavel's scheduler counts them when a round ends): kept by the policy,
    not as job marks, because writing marks for every running job every round cost more than
    the rest of the mechanism. Counting twice at one time adds nothing; an earlier time
    starts over.

    Each count starts at ``start`` (Gavel's ``_job_time_so_far`` starts at half a round), for a
    new job and for every job at a reset (``restart``), and adds each round's credit, as
    Gavel's sum does: two jobs credited alike since the reset then have the same time to the
    bit and tie, so their deficits decide. (A count since the job began minus its value at
    the reset differs from that sum in its last bits, and broke such ties by rounding.)

    ``elapsed`` is time as Gavel's clock counts it. With whole steps (below) a Gavel round
    lasts as long as its longest job's steps, a fraction of a second under the round, and
    the deficits a reset computes take the time since the last reset on that clock. When
    nothing ran, it jumps to the world's time (the next arrival), as Gavel's does. With
    ``count_idle``, the jobs of the first round after such idle rounds are credited with the
    time since the last round that ran jobs ended (``busy_end``), as Gavel credits them."""

    def __init__(self, start: float = 0.0, count_idle: bool = False) -> None:
        self.start = start
        self.now = -math.inf
        self.n_types = 0
        self.spent: dict[int, list[float]] = {}  # plain floats: numpy scalars are slow here
        self.seen: dict[int, float] = {}
        self.elapsed = 0.0
        self.count_idle = count_idle
        # When the last round that ran jobs ended, on ``elapsed``; None before the first such
        # round. (Gavel's simulator starts at 0, so it would credit the first round's jobs
        # with the time to the first arrival: a few seconds on its traces, but a controller's
        # clock is the epoch.)
        self.busy_end: float | None = None
        self.dispatched = False  # the policy ran jobs in the round that began at ``now``

    def count(self, jobs: Sequence[Job], now: float, type_of_gpu: Sequence[int],
              n_types: int, steps: Sequence[Sequence[float]] | None = None) -> np.ndarray:
        """The jobs' seconds per type up to ``now`` (jobs x types). ``steps``: per job, its
        steps/s on each type (0: unknown), when the throughput model knows them. Gavel
        credits a round's whole steps, ``int(steps/s * 360) / steps/s``, a fraction of a
        second under the round and different per job; its priorities break ties by that."""
        if now < self.now or n_types != self.n_types:
            self.spent.clear()
            self.seen.clear()
            self.elapsed = 0.0
            self.busy_end = None
        last, self.now, self.n_types = self.now, now, n_types
        # Gavel's round starts where the last round that ran jobs ended: after idle rounds,
        # the jobs of the first busy round are credited with the idle time too.
        start, busy_end = self.elapsed, self.busy_end  # Gavel's clock at ``last``
        idle = (start - busy_end if self.count_idle and busy_end is not None
                and start > busy_end else 0.0)
        per_job = repeat([0.0] * n_types) if steps is None else steps
        rows, longest = self._credit(jobs, per_job, last, now, idle, type_of_gpu)
        self._advance(last, now, longest)
        # flat: half the time of converting the nested rows
        return np.fromiter(chain.from_iterable(rows), float,
                           count=len(rows) * n_types).reshape(len(jobs), n_types)

    def _credit(self, jobs: Sequence[Job], steps: Iterable[Sequence[float]], last: float,
                now: float, idle: float, type_of_gpu: Sequence[int]
                ) -> tuple[list[list[float]], float]:
        """Add each running job's whole steps' time since it was last counted to its type
        (and ``idle`` to the jobs that ran since ``last``). Returns every job's row and the
        longest credit of a job that ran since ``last`` (-1: none)."""
        spent, seen, n_types = self.spent, self.seen, self.n_types
        rows = []
        longest = -1.0
        # every active job, every round, its fields read once (``steps`` may be endless)
        for j, per_type in zip(jobs, steps, strict=False):
            jid, gpus, began = j.id, j.gpus, j.run_since
            row = spent.get(jid)
            if row is None:
                row = spent[jid] = [self.start] * n_types
            if gpus and began is not None:  # running (GPUs <=> running)
                since = seen.get(jid, began)
                if began > since:  # max(since, began), without the call
                    since = began
                on = type_of_gpu[gpus[0]]  # -1: a type with no node up, not counted
                if now > since and on >= 0:
                    credit, per_s = now - since, per_type[on]
                    if per_s > 0:  # the time of its whole steps, without a call
                        credit = math.floor(per_s * credit) / per_s
                    if since == last:
                        if credit > longest:
                            longest = credit
                        credit += idle
                    row[on] += credit
                seen[jid] = now
            rows.append(row)
        return rows, longest

    def _advance(self, last: float, now: float, longest: float) -> None:
        """Gavel's clock from the round at ``last`` to the one at ``now``."""
        if last == -math.inf:
            self.elapsed = now
        elif now > last:
            if longest >= 0:
                self.elapsed += longest
            elif self.dispatched:  # its jobs all finished: the round lasted until now
                self.elapsed += now - last
            else:  # nothing ran: Gavel's clock jumps to the arrival, as the world's does
                self.elapsed = now
            if longest >= 0 or self.dispatched:
                self.busy_end = self.elapsed
        self.dispatched = False

    def keep_only(self, ids: frozenset[int]) -> None:
        """Forget finished jobs."""
        for table in (self.spent, self.seen):
            for jid in [k for k in table if k not in ids]:
                del table[jid]

    def restart(self) -> None:
        """A reset: every job's count starts again at ``start``."""
        for row in self.spent.values():
            row[:] = [self.start] * len(row)


def fifo_types(queue: Sequence[tuple[int, int, np.ndarray]], kept: dict[int, int],
               sizes: dict[int, int], capacity: np.ndarray, rng: random.Random
               ) -> dict[int, int]:
    """Gavel HEAD's FIFO allocation (see the module docstring). ``queue``: the jobs without a
    type as (id, GPUs, rates per type), in arrival order; ``kept``: the types of the jobs that
    hold one, with ``sizes`` their GPUs (a job of ``kept`` missing from ``sizes`` finished, and
    its type goes to the queue's head if the head fits and runs there). Types are indices
    into ``capacity``, in the order of their names sorted."""
    out, left, waiting = dict(kept), capacity.copy(), list(queue)
    for jid in sorted(kept):
        t = kept[jid]
        if jid in sizes:
            left[t] -= sizes[jid]
            continue
        del out[jid]
        if waiting and waiting[0][1] <= left[t] and waiting[0][2][t] > 0:
            head, gpus, _ = waiting.pop(0)
            out[head] = t
            left[t] -= gpus
    open_types = [t for t in range(len(left)) if left[t] > 0]
    while waiting and open_types:
        jid, gpus, rates = waiting.pop(0)
        fits = [t for t in open_types if left[t] >= gpus]
        if not fits:
            break
        drawn, t = rng.randrange(len(fits)), open_types[-1]  # Gavel HEAD: the last type
        if capacity[t] < gpus:
            # Gavel's choice would hold the job forever (a type with fewer GPUs than it asks
            # for; Gavel's equal-sized types never meet this): the last type that can.
            t = fits[-1]
        if rates[t] > 0:
            out[jid] = t
            left[t] -= gpus
            if left[t] == 0:
                open_types.remove(fits[drawn])
    return out


def _ordered_types(present: Sequence[str], preferred: Sequence[str]) -> list[str]:
    """The cluster's types, those of ``preferred`` first in its order, the others sorted."""
    rank = {t.casefold(): i for i, t in enumerate(preferred)}
    return sorted(present, key=lambda t: (rank.get(t.casefold(), len(rank)), t))


@register("scheduling", "gavel_rounds")
class GavelRounds(SchedulingBase):
    """Gavel's own simulator's rounds: allocations held between resets, per-type queues."""

    time_dependent = True
    # Gavel re-places every job every round: a running job's type can change with time
    # alone, so the simulator runs every round while jobs run (not only while some wait).
    moves_with_time = True

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        allocation: Allocation = "max_min_fairness"
        reset_interval: float = Field(default=1920.0, ge=0)  # seconds; Gavel's default
        initial_time: float = Field(default=180.0, ge=0)  # half of Gavel's 360 s round
        type_order: list[str] = Field(default_factory=lambda: ["v100", "p100", "k80"])
        shuffle_types: bool | None = None  # None: as Gavel (agnostic and FIFO shuffle)
        seed: int = 0
        # Gavel's simulator credits the jobs of the first round after idle rounds with the
        # idle time as run time (its round starts where the last busy round ended)
        count_idle: bool = True

    def __init__(self, params: Params | None = None) -> None:
        self.p = params or self.Params()
        shuffle = self.p.shuffle_types
        self.shuffle = self.p.allocation != "max_min_fairness" if shuffle is None else shuffle
        self.epoch: _Epoch | None = None
        self.clock = _TypeClock(self.p.initial_time, self.p.count_idle)
        # Rates per job (id, GPUs, model, asked type) while the cluster's types and
        # capacities stay the same: computing them was a third of a round.
        self._rates: dict[tuple[object, ...], list[float]] = {}
        self._rates_for: tuple[object, ...] = ()
        self._jobs: _JobSet | None = None  # the last round's job set (see _job_set)
        self._steps_of: dict[tuple[object, ...], list[float]] = {}  # see _steps
        self._nodes: _NodeFacts | None = None
        self.solve_times: list[float] = []  # seconds per allocation computed (benchmarks)
        # Gavel's random streams, seeded as its simulator seeds them: the worker-type
        # shuffler (seed + 5), drawn once per round, and FIFOPolicy's own (seed). A round's
        # draw is kept for its time, so deciding twice at one time gives one answer.
        self._shuffler = random.Random(self.p.seed + 5)
        self._fifo_rng = random.Random(self.p.seed)
        self._shuffled: tuple[float, list[int]] = (math.nan, [])

    def order(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> Schedule:
        r = self._inputs(snapshot, jobs)
        if not r.types:
            return Schedule(r.jobs)  # no node up: nothing to allocate
        epoch = self._current_epoch(r)
        chosen = self._assign(r, epoch)
        types = {r.jobs[i].id: r.types[t] for i, t in chosen.items()}
        picked, held, too_big = self._rank(r, chosen)
        # Gavel runs only the jobs it picked: the others stop, unless their GPUs stay idle.
        # (A job larger than any type is not Gavel's to pick: it keeps what it holds, with
        # no type, so that as a victim it may restart across types.)
        largest = r.largest
        stop = frozenset(j.id for j in held if j.num_gpus <= largest)
        self.clock.dispatched = bool(types) or len(stop) < len(held)
        return Schedule(picked + held + too_big, types=types, stop=stop, free_movers=True)

    def _inputs(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> _Round:
        """The round's types, capacities, jobs (arrival order), rates and time on types."""
        model = snapshot.throughput or DEFAULT_THROUGHPUT
        nodes = self._node_facts(snapshot)
        types = nodes.types
        usable = usable_gpus(snapshot)
        capacity = np.array([usable[t] for t in types], dtype=float)
        js = self._job_set(jobs, model, nodes, capacity)
        ordered = js.ordered(jobs)
        spent = self.clock.count(ordered, snapshot.now, nodes.type_of_gpu, len(types), js.steps)
        return _Round(snapshot.now, types, capacity, max(capacity.tolist(), default=0.0),
                      js, ordered, js.rates, spent, nodes.gpu_type)

    def _job_set(self, jobs: Sequence[Job], model: ThroughputModel, nodes: _NodeFacts,
                 capacity: np.ndarray) -> _JobSet:
        """The round's ``_JobSet``: the last round's while its jobs' fixed fields, the
        cluster's types and capacities and the throughput model are the same. Rates per job
        are kept with those too (computing them was a third of a round), so a new job set
        rates only its new jobs."""
        shape = (nodes, capacity.tobytes(), model)
        if shape != self._rates_for:
            self._rates, self._steps_of, self._rates_for = {}, {}, shape
            self._jobs = None
        keys = list(map(_fixed, jobs))
        js = self._jobs
        if js is None or js.keys != keys:
            cache = self._rates

            def rates(job: Job, key: tuple[Any, ...]) -> list[float]:
                row = cache.get(key)
                if row is None:
                    row = cache[key] = _rates(model, job, nodes.types, capacity, nodes.largest)
                return row

            js = self._jobs = _JobSet.of(jobs, keys, rates, self._steps(model, nodes.types),
                                         len(nodes.types))
        return js

    def _steps(self, model: ThroughputModel, types: Sequence[str]
               ) -> Callable[[Job], list[float]] | None:
        """A job's steps/s on each type (0: unknown), for a throughput model that counts
        steps (Gavel's measured steps/s); ``None`` for one that does not."""
        table = steps_model(model)
        if table is None:
            return None
        cache = self._steps_of

        def per_type(job: Job) -> list[float]:
            key = (job.model, job.num_gpus)
            row = cache.get(key)
            if row is None:
                row = cache[key] = ([table.steps_per_second(job.model, job.num_gpus, t)
                                     for t in types]
                                    if table.knows(job.model) else [0.0] * len(types))
            return row

        return per_type

    def _node_facts(self, snapshot: ClusterSnapshot) -> _NodeFacts:
        """The facts of the snapshot's nodes and GPUs, kept while they are the same objects:
        a simulated world hands the same tuples every round, and deriving them was a fifth
        of a Gavel round; a controller's snapshot brings new tuples, compared by value."""
        facts = self._nodes
        if facts is None or (snapshot.nodes, snapshot.gpus) != (facts.nodes, facts.gpus):
            facts = self._nodes = _NodeFacts.of(snapshot, self.p.type_order)
        return facts

    def _current_epoch(self, r: _Round) -> _Epoch:
        """The allocation in force: the last reset's, or a new one when the job set changed
        and ``reset_interval`` has passed (Gavel's ``_update_priorities``). A reset at time
        0 does not start the interval: Gavel reads a last reset time of 0 as no reset yet,
        so a trace whose first job arrives at 0 resets again at the next change."""
        e = self.epoch
        if e is not None and (r.now < e.at or e.types != tuple(r.types)):
            e = None  # a snapshot from before the last reset, or other types: another world
        ids = r.js.ids
        due = (e is None or e.at == 0.0
               or self.clock.elapsed - e.elapsed >= self.p.reset_interval)
        if e is None or (ids != e.jobs and due):
            e = self.epoch = self._reset(r, e, ids)
        return e

    def _reset(self, r: _Round, old: _Epoch | None, ids: frozenset[int]) -> _Epoch:
        """A reset: deficits take what each job was owed since the last one, time restarts,
        and the allocation is computed for the jobs present."""
        n_types = len(r.types)
        deficit = {}
        if old is not None:
            share, owed_before = old.rows(r.js.id_list)
            # time since the old reset, counted as the rounds count it (from initial_time);
            # summed in Gavel's order (_reset_time_run_so_far)
            had = r.spent - self.p.initial_time
            owed = owed_before + (share * (self.clock.elapsed - old.elapsed) - had)
            deficit = {j.id: owed[i] for i, j in enumerate(r.jobs)}
        e = _Epoch(r.now, self.clock.elapsed, tuple(r.types), ids, {}, deficit)
        self.clock.keep_only(ids)
        self.clock.restart()
        r.spent[:] = self.p.initial_time  # this round's priorities see the restarted counts
        started = time.perf_counter()
        if self.p.allocation == "fifo":
            e.fifo = self._fifo(r, old)
            for jid, t in e.fifo.items():
                e.share[jid] = np.eye(n_types)[t]
        else:
            e.share = self._max_min(r)
        self.solve_times.append(time.perf_counter() - started)
        return e

    @property
    def solves(self) -> int:
        return len(self.solve_times)

    def _max_min(self, r: _Round) -> dict[int, np.ndarray]:
        """Gavel's max-min LP over the jobs that run somewhere (unit throughputs for the
        heterogeneity-agnostic policy)."""
        rows = np.flatnonzero(r.rates.max(axis=1, initial=0.0) > 0)
        if not len(rows):
            return {}
        thr = r.rates[rows] if self.p.allocation == "max_min_fairness" else np.ones(
            (len(rows), len(r.types)))
        gpus = np.array(r.js.gpus, dtype=float)[rows]
        x = allocate(thr, gpus, r.capacity, "max_min_fairness", gavel_lp=True)
        ids = r.js.id_list
        return {ids[i]: x[k] for k, i in enumerate(rows.tolist())}

    def _fifo(self, r: _Round, old: _Epoch | None) -> dict[int, int]:
        """FIFO's types, over the types in name order as Gavel sorts them."""
        by_name = sorted(range(len(r.types)), key=lambda t: r.types[t])
        kept = {jid: by_name.index(t) for jid, t in (old.fifo if old else {}).items()}
        sizes = {j.id: j.num_gpus for j in r.jobs}
        queue = [(j.id, j.num_gpus, r.rates[i][by_name]) for i, j in enumerate(r.jobs)
                 if j.id not in kept]
        out = fifo_types(queue, kept, sizes, r.capacity[by_name], self._fifo_rng)
        return {jid: by_name[t] for jid, t in out.items()}

    def _assign(self, r: _Round, e: _Epoch) -> dict[int, int]:
        """Gavel's round: type after type, jobs by decreasing (priority, deficit,
        allocation), ties by arrival, take the type's GPUs while they fit. Returns job index
        -> type index, in order of assignment, for the jobs of the allocation."""
        n_types = r.rates.shape[1]
        s = e.standing(r.js)
        since = r.spent
        if self.p.initial_time <= 0:  # else every count starts there: none is 0
            since = np.where(since > 0, since, 1e-9)
        prio = np.where(s.ranked, s.share / since, 0.0)
        gpus = r.js.gpus
        type_order = self._type_order(r.now, n_types)
        # FIFO: a job with no allocation on a type does not fill it
        may = ((r.js.runs & (prio > 0)).T.tolist() if self.p.allocation == "fifo"
               else r.js.runs_by_type)
        chosen: dict[int, int] = {}
        # Every type's order in one sort, priority first and then the standing's order of
        # deficits, allocations and arrival: row t ranks the jobs for type t (two keys sort
        # a third faster than the three). Plain lists: numpy scalars and per-type masks are
        # slow here.
        ranked_by_type = np.lexsort((s.tied, -prio.T)).tolist()
        capacity = r.capacity.tolist()
        for t in type_order:
            left, fills = capacity[t], may[t]
            for i in ranked_by_type[t]:
                if left <= 0:
                    break
                if fills[i] and i not in chosen and gpus[i] <= left:
                    chosen[i] = t
                    left -= gpus[i]
        # A job that arrived since the reset is counted on its type, but Gavel gives workers
        # only to jobs of the allocation: it waits for the next reset, its GPUs left idle.
        allocated = s.allocated
        return {i: t for i, t in chosen.items() if allocated[i]}

    def _type_order(self, now: float, n_types: int) -> list[int]:
        """The order in which this round fills types: ``type_order``, shuffled by Gavel's
        stream for the policies Gavel shuffles (one draw per round time)."""
        if not self.shuffle:
            return list(range(n_types))
        at, order = self._shuffled
        if at != now or len(order) != n_types:
            order = list(range(n_types))
            self._shuffler.shuffle(order)
            self._shuffled = (now, order)
        return order

    def _rank(self, r: _Round, chosen: dict[int, int]
              ) -> tuple[list[Job], list[Job], list[Job]]:
        """The round engine's order, in three parts: the jobs Gavel picked (running jobs that
        keep their type, then the jobs starting or changing type in Gavel's order of
        assignment), the running jobs Gavel did not pick (the ones that make room), and the
        waiting jobs that fit no single type; the last two in arrival order. Each job's
        state is read from its field, not through ``Job.running``: a call per active job."""
        jobs, gpu_type = r.jobs, r.gpu_type
        folded = [t.casefold() for t in r.types]
        stay: list[Job] = []
        come: list[Job] = []
        for i, t in chosen.items():
            j, want = jobs[i], folded[t]
            (stay if j.gpus and on_type(j.gpus, gpu_type, want) else come).append(j)
        others = [j for i, j in enumerate(jobs) if i not in chosen]
        held = [j for j in others if j.state is _RUNNING]
        largest = r.largest
        too_big = [j for j in others if j.state is not _RUNNING and j.num_gpus > largest]
        return stay + come, held, too_big
