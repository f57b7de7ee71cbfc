"""Gavel's own simulator, round for round: the mechanism that turns its allocations into
rounds (``scheduler.py`` at Gavel's HEAD), for the Gavel-compatible mode.

The ``gavel`` policy is Gavel's idea as a pure policy for a physical cluster (a fresh LP at
every change of the job set, priorities over each job's age). Gavel's published simulator
differs, and its numbers can only be reproduced by doing what it does:

* **Allocations are held between resets.** The allocation is recomputed only when the job
  set changed *and* ``reset_interval`` seconds (Gavel: 1,920) have passed since the last
  reset. A job that arrived since has no allocation: priority 0 until the next reset.
* **Time is counted since the last reset.** At a reset every job's time on every type
  restarts at ``initial_time`` (Gavel: half a 360 s round) and its *deficit* (time it should
  have had minus time it had, per type) accumulates. A job's priority on type ``t`` is
  ``X[j,t] / time on t since the reset`` (Gavel divides by the type's total too, the same for
  every job of a type, so it does not change the order), 0 without an allocation there or on a
  type where the job does not run.
* **Types are filled one after another.** For each type in turn (``type_order``: V100, P100,
  K80, shuffled every round for the heterogeneity-agnostic policies, as Gavel does), jobs in
  decreasing (priority, deficit, allocation), ties by arrival, take its GPUs while they fit;
  a job runs on at most one type, never on one where it makes no progress, and jobs with
  priority 0 fill what is left (except under FIFO).

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
policy, in its instance (a controller restart begins with a reset). A round's choices are a
function of that state and the snapshot (the type shuffle and FIFO's draw are seeded by the
round's time), so deciding twice on one snapshot gives the same decisions. A snapshot older
than the last reset starts over.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from blox_slurm.core.abstractions import Schedule, SchedulingBase
from blox_slurm.core.model import ClusterSnapshot, Job
from blox_slurm.core.registry import register
from blox_slurm.core.throughput import DEFAULT_THROUGHPUT

from .gavel import _largest_nodes, _rates, _time_on_types, allocate, usable_gpus

Allocation = Literal["max_min_fairness", "max_min_agnostic", "fifo"]


@dataclass
class _Epoch:
    """What Gavel's scheduler keeps from one reset to the next."""

    at: float
    jobs: frozenset[int]
    share: dict[int, np.ndarray]  # X[j, :] per job present at the reset
    base: dict[int, dict[str, float]]  # seconds on each type at the reset
    deficit: dict[int, np.ndarray] = field(default_factory=dict)
    fifo: dict[int, int] = field(default_factory=dict)  # FIFO: job -> type index


@dataclass(frozen=True)
class _Round:
    """One round's inputs over the active jobs, in arrival order."""

    now: float
    types: list[str]
    capacity: np.ndarray  # usable GPUs per type
    jobs: list[Job]
    rates: np.ndarray  # jobs x types, 0 where a job cannot run
    spent: list[dict[str, float]]  # seconds on each type so far, per job
    gpu_type: list[str]  # per GPU id


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

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        allocation: Allocation = "max_min_fairness"
        reset_interval: float = Field(default=1920.0, ge=0)  # seconds; Gavel's default
        initial_time: float = Field(default=180.0, ge=0)  # half of Gavel's 360 s round
        type_order: list[str] = Field(default_factory=lambda: ["v100", "p100", "k80"])
        shuffle_types: bool | None = None  # None: as Gavel (agnostic and FIFO shuffle)
        seed: int = 0

    def __init__(self, params: Params | None = None) -> None:
        self.p = params or self.Params()
        shuffle = self.p.shuffle_types
        self.shuffle = self.p.allocation != "max_min_fairness" if shuffle is None else shuffle
        self.epoch: _Epoch | None = None
        self.solve_times: list[float] = []  # seconds per allocation computed (benchmarks)

    def order(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> Schedule:
        r, marks = self._inputs(snapshot, jobs)
        epoch = self._current_epoch(r)
        rng = random.Random(f"{self.p.seed}:{r.now!r}")
        chosen = self._assign(r, epoch, rng)
        return Schedule(self._rank(r, chosen), marks=marks,
                        types={r.jobs[i].id: r.types[t] for i, t in chosen.items()})

    def _inputs(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]
                ) -> tuple[_Round, tuple[tuple[int, str, float], ...]]:
        """The round's types, capacities, jobs (arrival order), rates and time on types."""
        model = snapshot.throughput or DEFAULT_THROUGHPUT
        largest = _largest_nodes(snapshot)
        types = _ordered_types(list(largest), self.p.type_order)
        usable = usable_gpus(snapshot)
        capacity = np.array([usable[t] for t in types], dtype=float)
        ordered = sorted(jobs, key=lambda j: (j.submit_time, j.id))
        rates = np.array([_rates(model, j, types, capacity, largest) for j in ordered],
                         dtype=float).reshape(len(ordered), len(types))
        gpu_type = [g.type for g in snapshot.gpus]
        counted = [_time_on_types(j, snapshot.now, gpu_type) for j in ordered]
        marks = tuple(m for _, job_marks in counted for m in job_marks)
        return _Round(snapshot.now, types, capacity, ordered, rates,
                      [spent for spent, _ in counted], gpu_type), marks

    def _current_epoch(self, r: _Round) -> _Epoch:
        """The allocation in force: the last reset's, or a new one when the job set changed
        and ``reset_interval`` has passed (Gavel's ``_update_priorities``)."""
        e = self.epoch
        if e is not None and r.now < e.at:
            e = None  # a snapshot from before the last reset: another world
        ids = frozenset(j.id for j in r.jobs)
        if e is None or (ids != e.jobs and r.now - e.at >= self.p.reset_interval):
            e = self.epoch = self._reset(r, e, ids)
        return e

    def _since(self, r: _Round, e: _Epoch | None, i: int) -> np.ndarray:
        """Seconds job ``i`` ran on each type since the reset, counted from ``initial_time``."""
        j = r.jobs[i]
        base = e.base.get(j.id, {}) if e is not None else {}
        return np.array([self.p.initial_time + r.spent[i].get(t, 0.0) - base.get(t, 0.0)
                         for t in r.types])

    def _reset(self, r: _Round, old: _Epoch | None, ids: frozenset[int]) -> _Epoch:
        """A reset: deficits take what each job was owed since the last one, time restarts,
        and the allocation is computed for the jobs present."""
        n_types = len(r.types)
        zero = np.zeros(n_types)
        deficit = {}
        if old is not None:
            for i, j in enumerate(r.jobs):
                owed = old.share.get(j.id, zero) * (r.now - old.at)
                had = self._since(r, old, i) - self.p.initial_time
                deficit[j.id] = old.deficit.get(j.id, zero) + owed - had
        e = _Epoch(r.now, ids, {}, {j.id: dict(r.spent[i]) for i, j in enumerate(r.jobs)},
                   deficit)
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
        rows = [i for i in range(len(r.jobs)) if r.rates[i].max() > 0]
        if not rows:
            return {}
        thr = r.rates[rows] if self.p.allocation == "max_min_fairness" else np.ones(
            (len(rows), len(r.types)))
        gpus = np.array([r.jobs[i].num_gpus for i in rows], dtype=float)
        x = allocate(thr, gpus, r.capacity, "max_min_fairness", gavel_lp=True)
        return {r.jobs[i].id: x[k] for k, i in enumerate(rows)}

    def _fifo(self, r: _Round, old: _Epoch | None) -> dict[int, int]:
        """FIFO's types, over the types in name order as Gavel sorts them."""
        by_name = sorted(range(len(r.types)), key=lambda t: r.types[t])
        kept = {jid: by_name.index(t) for jid, t in (old.fifo if old else {}).items()}
        sizes = {j.id: j.num_gpus for j in r.jobs}
        queue = [(j.id, j.num_gpus, r.rates[i][by_name]) for i, j in enumerate(r.jobs)
                 if j.id not in kept]
        rng = random.Random(f"fifo:{self.p.seed}:{r.now!r}")
        out = fifo_types(queue, kept, sizes, r.capacity[by_name], rng)
        return {jid: by_name[t] for jid, t in out.items()}

    def _assign(self, r: _Round, e: _Epoch, rng: random.Random) -> dict[int, int]:
        """Gavel's round: type after type, jobs by decreasing (priority, deficit,
        allocation), ties by arrival, take the type's GPUs while they fit. Returns job index
        -> type index, in order of assignment."""
        n, n_types = r.rates.shape
        zero = np.zeros(n_types)
        share = np.array([e.share.get(j.id, zero) for j in r.jobs]).reshape(n, n_types)
        deficit = np.array([e.deficit.get(j.id, zero) for j in r.jobs]).reshape(n, n_types)
        since = np.array([self._since(r, e, i) for i in range(n)]).reshape(n, n_types)
        runs = r.rates > 0
        prio = np.where(runs & (share > 0),
                        share / np.where(since > 0, since, 1e-9), 0.0)
        gpus = [j.num_gpus for j in r.jobs]
        left = r.capacity.copy()
        type_order = list(range(n_types))
        if self.shuffle:
            rng.shuffle(type_order)
        fifo = self.p.allocation == "fifo"
        chosen: dict[int, int] = {}
        arrival = np.arange(n)
        for t in type_order:
            for i in np.lexsort((arrival, -share[:, t], -deficit[:, t], -prio[:, t])):
                i = int(i)
                if left[t] <= 0:
                    break
                if i in chosen or not runs[i, t] or (fifo and prio[i, t] <= 0) \
                        or gpus[i] > left[t]:
                    continue
                chosen[i] = t
                left[t] -= gpus[i]
        return chosen

    def _rank(self, r: _Round, chosen: dict[int, int]) -> list[Job]:
        """The round engine's order: running jobs that keep their type, then the jobs
        starting or changing type in Gavel's order of assignment, then running jobs Gavel
        did not pick (the ones that make room) and jobs that fit no single type."""
        jobs, gpu_type = r.jobs, r.gpu_type
        stay: list[Job] = []
        come: list[Job] = []
        rest: list[Job] = []
        for i, t in chosen.items():
            j, want = jobs[i], r.types[t].casefold()
            kept = j.gpus and all(gpu_type[g].casefold() == want for g in j.gpus)
            (stay if kept else come).append(j)
        too_big = r.capacity.max(initial=0.0)
        for i, j in enumerate(jobs):
            if i not in chosen and (j.running or j.num_gpus > too_big):
                rest.append(j)
        rest.sort(key=lambda j: not j.running)
        return stay + come + rest
