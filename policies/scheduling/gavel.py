"""Gavel: heterogeneity-aware allocation LPs plus the round-based mechanism (Narayanan et al.,
OSDI'20), as a pure scheduling policy.

**Allocation.** Over jobs ``j`` and GPU types ``t``, ``X[j,t]`` is the fraction of time job
``j`` should run on type ``t`` (at its requested GPU count ``g_j``)::

    sum_t X[j,t] <= 1            sum_j g_j X[j,t] <= c_t (GPUs of type t)     X >= 0
    eff_j = sum_t thr[j,t] X[j,t]    (thr: the throughput model's rate, 1 = reference speed)

``c_t`` counts the GPUs of type ``t`` on UP nodes that are free or held by the snapshot's
jobs: those held by anything else (a job of another partition, an unmanaged one: the
controller's free index leaves them out) are not the policy's to hand out, and counting them
would send jobs to a type whose GPUs are busy, to wait there.

``thr[j,t] = 0`` (a job that does not run on ``t``, needs more GPUs than ``t`` has, or asked
for another type: ``--gres=gpu:k80:1`` in Slurm, the ``gpu_type`` hint; or, simulated, is
restricted to the types it makes progress on, ``--unrunnable restrict``) pins ``X[j,t] = 0``.
The objectives:

* ``max_min_fairness``: maximize ``min_j eff_j / eq_j``. ``eq_j`` is the job's throughput under
  an equal share: ``1/N`` of each type it can run on (``N`` jobs), i.e. time fractions
  ``c_t / (N g_j)``, scaled down together when they sum above 1 (a job cannot run more than
  all the time). So 1.0 means "as fast as an equal split of the cluster", whatever the types.
* ``min_makespan``: minimize ``max_j remaining_j / eff_j``; with ``y = 1 / makespan`` this is
  the LP ``max y s.t. eff_j >= remaining_j y``. Jobs without a duration count as the longest
  known remaining time (1 s if none is known), so they are not starved.
* ``max_sum_throughput``: maximize ``sum_j eff_j`` (may starve slow jobs, as in Gavel).

A max-min LP has many optima, and a simplex vertex may leave GPUs idle that no bottleneck job
can use; the two min-objectives therefore take a second pass (Gavel's later water filling does
the same job more elaborately) maximizing the total (normalized) throughput while keeping the
min within 1e-6 relative of its optimum. HiGHS solves both passes (warm-started) via highspy.

**Mechanism.** Time fractions become per-round placements by Gavel's priorities
``priority[j,t] = X[j,t] / received[j,t]``, where ``received`` is the fraction of the job's age
(time since submission) it ran on ``t``: a job short of its allocation gets priority > 1, one
that never ran there infinity. Pairs are taken in priority order; a job gets the type of its
first pair whose type still has ``g_j`` GPUs unclaimed this round, and the order is the order
of assignment. Jobs left without a type follow, running ones first, and may use whatever GPUs
are left (any type). A running job competes for every type, as in Gavel, which re-places every
job each round: given another type than the one it runs on, the round engine moves it there
(a checkpoint and a restart, charged like a preemption) when that type has free GPUs for it
or lower-ranked jobs leaving that type (they swap: each restarts where the other was, as far
as placement allows); otherwise it keeps running where it is, or is preempted by higher
priorities and takes its new type when it restarts. ``migrate = false`` confines a running
job to its current type (it changes type only by being preempted): no move costs a restart,
but at light load jobs stay stranded on slow types while faster ones idle
(docs/compositions.md, "Gavel vs LAS").

Time on each type is the policy's memory, kept by the world as marks: ``gavel.on.<type>``
(seconds run there) and ``gavel.seen`` (when it was last counted). Each round adds, for every
running job, the time since ``max(seen, run_since)``; preemptions happen only at rounds, so
nothing is lost between counts. A job spanning types is counted on its first GPU's type.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import sys
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from blox_slurm.core.abstractions import FreeGpus, Schedule, SchedulingBase
from blox_slurm.core.fit import required_types
from blox_slurm.core.model import ClusterSnapshot, Job, Node, NodeState
from blox_slurm.core.registry import register
from blox_slurm.core.throughput import DEFAULT_THROUGHPUT, ThroughputModel

if TYPE_CHECKING:
    import highspy

Objective = Literal["max_min_fairness", "min_makespan", "max_sum_throughput"]
SEEN = "gavel.seen"
ON = "gavel.on."
_gpus = attrgetter("gpus")
_TIE = 1e-6  # relative slack on the min when maximizing the total in the second pass


def equal_share(thr: np.ndarray, gpus: np.ndarray, capacity: np.ndarray,
                cap: bool = True) -> np.ndarray:
    """Each job's throughput under 1/N of every type it can run on (see module docstring).
    ``cap = False`` leaves out the cap at all of a job's time: the shares are then
    proportional to Gavel's own normalization (``thr . c / sum(c)`` over the GPUs' scale
    factor), which its simulator uses at every load."""
    n = len(gpus)
    if n == 0:
        return np.zeros(0)
    usable = thr > 0
    share = np.where(usable, capacity[None, :] / (n * gpus[:, None]), 0.0)
    if cap:
        total = share.sum(axis=1)
        share *= np.where(total > 1.0, 1.0 / np.maximum(total, 1e-300), 1.0)[:, None]
    return (share * thr).sum(axis=1)


def allocate(thr: np.ndarray, gpus: np.ndarray, capacity: np.ndarray, objective: Objective,
             remaining: np.ndarray | None = None, gavel_lp: bool = False) -> np.ndarray:
    """``X[j,t]`` for ``thr`` (jobs x types rates), ``gpus`` (per job) and ``capacity`` (per
    type) under ``objective``; ``remaining`` (per job, seconds) for ``min_makespan``.
    Every job must have some type with ``thr > 0``. ``gavel_lp``: the LP exactly as Gavel's
    simulator poses it (uncapped equal shares, no second pass)."""
    import highspy  # the solver only when a policy solves (start-up stays light)

    n_jobs, n_types = thr.shape
    if n_jobs == 0:
        return np.zeros((0, n_types))
    jj, tt = np.nonzero(thr > 0)  # one column per usable (job, type) pair
    k = len(jj)
    with_min = objective != "max_sum_throughput"
    if objective == "max_min_fairness":
        weight = thr[jj, tt] / equal_share(thr, gpus, capacity, cap=not gavel_lp)[jj]
        floor = np.ones(n_jobs)  # coefficient of the min variable in job j's row
    elif objective == "min_makespan":
        assert remaining is not None, "min_makespan needs remaining times"
        weight = thr[jj, tt]
        floor = np.maximum(remaining, 1e-9)
    else:
        weight = thr[jj, tt]
        floor = np.zeros(0)

    # Rows: [0, n) time per job <= 1; [n, n + T) GPUs per type <= c_t; then (with a min)
    # weight . X_j - floor_j * z >= 0 per job. Columns: the k pairs, then z.
    n_rows = n_jobs + n_types + (n_jobs if with_min else 0)
    per_col = 3 if with_min else 2
    rows = np.empty((k, per_col), dtype=np.int32)
    vals = np.empty((k, per_col))
    rows[:, 0], vals[:, 0] = jj, 1.0
    rows[:, 1], vals[:, 1] = n_jobs + tt, gpus[jj]
    if with_min:
        rows[:, 2], vals[:, 2] = n_jobs + n_types + jj, weight
    index = rows.ravel()
    value = vals.ravel()
    start = np.arange(0, k * per_col + 1, per_col, dtype=np.int32)
    if with_min:
        index = np.concatenate([index, n_jobs + n_types + np.arange(n_jobs, dtype=np.int32)])
        value = np.concatenate([value, -floor])
        start = np.append(start, len(index)).astype(np.int32)
    n_cols = k + (1 if with_min else 0)

    inf = highspy.kHighsInf
    cost = np.zeros(n_cols)
    if with_min:
        cost[k] = 1.0
    else:
        cost[:] = weight
    n_bounded = n_jobs + n_types
    row_lower = np.concatenate([np.full(n_bounded, -inf), np.zeros(n_rows - n_bounded)])
    row_upper = np.concatenate([np.ones(n_jobs), capacity.astype(float),
                                np.full(n_rows - n_bounded, inf)])
    h = _solver(gavel_lp)
    # The arrays passed as they are (every column continuous): a ``HighsLp``'s fields copy
    # them element by element, 1.2 million instructions a Gavel LP against 0.2
    h.passModel(n_cols, n_rows, len(index), int(highspy.MatrixFormat.kColwise),
                int(highspy.ObjSense.kMaximize), 0.0, cost, np.zeros(n_cols),
                np.full(n_cols, inf), row_lower, row_upper, start, index, value,
                np.zeros(n_cols, dtype=np.int32))
    _solve(h)
    if with_min and not gavel_lp:
        z = h.getSolution().col_value[k]
        h.changeColBounds(k, z * (1.0 - _TIE), inf)
        h.changeColsCost(n_cols, np.arange(n_cols, dtype=np.int32),
                         np.append(weight, 0.0))
        _solve(h)
    x = np.asarray(h.getSolution().col_value[:k])
    out = np.zeros((n_jobs, n_types))
    out[jj, tt] = np.clip(x, 0.0, 1.0)
    return out


@functools.cache
def _swallow_banner() -> None:
    """HiGHS prints a banner on the process's C-level stdout when its first solver is made,
    which broke ``--json`` output (``blox-slurm simulate -c gavel --json``). The first solver
    is therefore made with file descriptor 1 pointed at stderr, flushed before it returns."""
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        highspy.Highs()
        ctypes.CDLL(None).fflush(None)
    finally:
        os.dup2(saved, 1)
        os.close(saved)


#: One HiGHS instance per thread and kind of LP (see ``_solver``).
_SOLVERS = threading.local()


def _solver(gavel_lp: bool) -> highspy.Highs:
    """A HiGHS instance for ``allocate``, made once per thread (a controller decides in
    threads) and kind of LP, its model cleared for each LP: making one was about a tenth of
    a Gavel-mode solve (0e4a51's 922 LPs: 2.6 s CPU against 2.9 s, the same answers to the
    bit; ``clearModel`` keeps the options and drops the last solution and basis)."""
    made: dict[bool, highspy.Highs] = _SOLVERS.__dict__.setdefault("by_kind", {})
    h = made.get(gavel_lp)
    if h is not None:
        h.clearModel()
        return h
    import highspy

    _swallow_banner()
    h = made[gavel_lp] = highspy.Highs()
    h.setOptionValue("output_flag", False)
    if gavel_lp:
        # Gavel's ECOS is an interior-point solver: of the LP's many optima it returns one
        # inside the face, spreading each job's time over types, where simplex returns a
        # vertex. Interior point without crossover lands where ECOS does (2869ce: 32-GPU
        # jobs within 0.4 % of Gavel's, +9 % at a vertex).
        h.setOptionValue("solver", "ipm")
        h.setOptionValue("run_crossover", "off")
    return h


def _solve(h: highspy.Highs) -> None:
    import highspy

    h.run()
    status = h.getModelStatus()
    if status != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(f"Gavel allocation LP: HiGHS returned {h.modelStatusToString(status)}")


#: The last node list seen, per GPU id the type of its node if that node is UP (else None),
#: and ``usable_gpus``' answer when every GPU is on an UP node and is usable (else None): a
#: simulated world keeps one node tuple while its nodes do not change, and a Gavel run asks
#: every round. One tuple, replaced whole (see ``core.fit.nodes_of_types``).
_UP_TYPE: tuple[tuple[Node, ...], list[str | None], dict[str, int] | None] = ((), [], None)


def _up_type_of_gpus(snapshot: ClusterSnapshot
                     ) -> tuple[list[str | None], dict[str, int] | None]:
    global _UP_TYPE
    seen, types, totals = _UP_TYPE
    if seen is not snapshot.nodes:
        up = {n.name: n.gpu_type for n in snapshot.nodes if n.state is NodeState.UP}
        types = [up.get(g.node) for g in snapshot.gpus]
        totals = None
        if None not in types:
            totals = dict.fromkeys(up.values(), 0)
            totals.update(Counter(t for t in types if t is not None))
        _UP_TYPE = (snapshot.nodes, types, totals)
    return types, totals


def usable_gpus(snapshot: ClusterSnapshot) -> dict[str, int]:
    """``c_t``: per type, the GPUs of UP nodes that are free or held by the snapshot's jobs
    (counted in C: this runs every round). When every GPU is on an UP node and the world's
    free index and the jobs hold as many as there are, they hold them all (a simulated
    world, always): the per-type totals, without a pass over the GPUs."""
    type_of, totals = _up_type_of_gpus(snapshot)
    free = snapshot.free
    if (totals is not None and free is not None
            and free.count + sum(map(len, map(_gpus, snapshot.jobs))) == len(type_of)):
        return dict(totals)
    out = dict.fromkeys((n.gpu_type for n in snapshot.nodes if n.state is NodeState.UP), 0)
    usable = [*FreeGpus.of(snapshot).by_node.values(), *(j.gpus for j in snapshot.jobs)]
    type_of_gpu: Callable[[int], str | None] = type_of.__getitem__
    counts = Counter(map(type_of_gpu, chain.from_iterable(usable)))
    out.update((t, k) for t, k in counts.items() if t is not None)
    return out


def priority(share: float, on_type: float, age: float) -> float:
    """Gavel's ``allocation / fraction received``: ``inf`` for a job that never ran there."""
    received = on_type / age if age > 0 else 0.0
    return share / received if received > 0 else math.inf


_Mark = tuple[int, str, float]  # (job id, key, value), as in ``Schedule.marks``
# (-priority, -share, submit time, job id, type index, job): sorted on the first four, the
# order in which Gavel's round hands out (job, type) pairs.
_Pair = tuple[float, float, float, int, int, Job]


def _largest_nodes(snapshot: ClusterSnapshot) -> dict[str, int]:
    """Per GPU type of the UP nodes, the GPUs of its largest node: a job asking for more is
    rated as spanning two nodes."""
    largest: dict[str, int] = {}
    for n in snapshot.nodes:
        if n.state is NodeState.UP:
            largest[n.gpu_type] = max(largest.get(n.gpu_type, 0), len(n.gpu_ids))
    return largest


def _rates(model: ThroughputModel, job: Job, types: Sequence[str], capacity: np.ndarray,
           largest: dict[str, int]) -> list[float]:
    """``thr[j, :]``: the job's rate at its requested GPU count on each type; 0 (which pins
    ``X[j,t] = 0``) on a type with fewer usable GPUs than it needs or outside the types it
    may use (:func:`~blox_slurm.core.fit.required_types`: the one a user asked for, or those
    a simulated trace restricts it to)."""
    asked = required_types(job)
    return [model.rate(job, job.num_gpus, 1 if job.num_gpus <= largest[t] else 2, t)
            if job.num_gpus <= cap and (asked is None or t.casefold() in asked) else 0.0
            for t, cap in zip(types, capacity, strict=True)]


def _remaining_times(jobs: Sequence[Job], now: float) -> np.ndarray:
    """``remaining_j`` for ``min_makespan``: a job without a duration counts as the longest
    known remaining time (1 s if none is known), so it is not starved."""
    rem = [j.remaining(now) for j in jobs]
    longest = max((r for r in rem if r is not None), default=1.0)
    return np.array([longest if r is None else r for r in rem], dtype=float)


def _current_run(job: Job, gpu_type: Sequence[str]) -> tuple[str, float] | None:
    """(type, start) of a running job's current run, ``None`` when it is not running. A job
    spanning types is counted on its first GPU's type."""
    if job.running and job.run_since is not None:
        return gpu_type[job.gpus[0]], job.run_since
    return None


def _time_on_types(job: Job, now: float, gpu_type: Sequence[str]
                   ) -> tuple[dict[str, float], list[_Mark]]:
    """Seconds ``job`` ran on each type up to ``now``, and the marks that make the world keep
    them: a running job adds the time since it was last counted (or started, if later) to its
    current type. Preemptions happen only at rounds, so nothing is lost between counts."""
    spent = {k[len(ON):]: v for k, v in job.marks if k.startswith(ON)}
    run = _current_run(job, gpu_type)
    if run is None:
        return spent, []
    t, since = run
    extra = now - max(job.mark(SEEN, since), since)
    if extra > 0:
        spent[t] = spent.get(t, 0.0) + extra
        return spent, [(job.id, ON + t, spent[t]), (job.id, SEEN, now)]
    return spent, []


def _assign(pairs: Sequence[_Pair], types: Sequence[str], capacity: np.ndarray
            ) -> tuple[dict[int, str], list[Job]]:
    """Gavel's round: in priority order, a job takes the type of its first pair whose type
    still has its GPUs unclaimed. Returns the types given and the jobs in order of assignment,
    which is their rank."""
    left = capacity.copy()
    chosen: dict[int, str] = {}
    ranked: list[Job] = []
    for _, _, _, jid, ti, j in pairs:
        if jid not in chosen and j.num_gpus <= left[ti]:
            left[ti] -= j.num_gpus
            chosen[jid] = types[ti]
            ranked.append(j)
    return chosen, ranked


def _confined(snapshot: ClusterSnapshot, jobs: Sequence[Job], types: Sequence[str]
              ) -> dict[int, str]:
    """Types for jobs left without one that make no progress on some type (Gavel measured
    0.0: a large model on K80s): a waiting one gets the type where it runs fastest, a running
    one its own (should it be stopped, it restarts there), so placement never puts them where
    they cannot run. Jobs that run on every type keep any GPUs left."""
    model = snapshot.throughput or DEFAULT_THROUGHPUT
    gpu_type = snapshot.gpus
    out = {}
    for j in jobs:
        rates = [model.rate(j, j.num_gpus, 1, t) for t in types]
        if min(rates, default=1.0) > 0 or max(rates) <= 0:
            continue
        out[j.id] = gpu_type[j.gpus[0]].type if j.gpus else types[rates.index(max(rates))]
    return out


@register("scheduling", "gavel")
class Gavel(SchedulingBase):
    """Gavel's heterogeneity-aware policies (allocation LP + round-based priorities)."""

    time_dependent = True  # priorities move as jobs receive time

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        objective: Objective = "max_min_fairness"
        migrate: bool = True  # a running job may be given (and moved to) another type

    def __init__(self, params: Params | None = None) -> None:
        p = params or self.Params()
        self.objective, self.migrate = p.objective, p.migrate
        # Memo of the last LP, keyed by its inputs' content (a pure function of them): the
        # job set changes only at arrivals and completions, so most rounds reuse it.
        self._memo: tuple[tuple[object, ...], np.ndarray] | None = None

    def allocation(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]
                   ) -> tuple[list[str], list[Job], np.ndarray, np.ndarray]:
        """(types, jobs in the LP, X over them, capacity per type)."""
        model: ThroughputModel = snapshot.throughput or DEFAULT_THROUGHPUT
        largest = _largest_nodes(snapshot)
        types = sorted(largest)
        usable = usable_gpus(snapshot)
        capacity = np.array([usable[t] for t in types], dtype=float)
        rated = [(j, _rates(model, j, types, capacity, largest)) for j in jobs]
        lp = [(j, row) for j, row in rated if any(r > 0 for r in row)]  # jobs that can run
        lp_jobs = [j for j, _ in lp]
        thr = np.array([row for _, row in lp], dtype=float).reshape(len(lp_jobs), len(types))
        gpus = np.array([j.num_gpus for j in lp_jobs], dtype=float)
        if self.objective == "min_makespan":  # remaining work changes every round: no memo
            remaining = _remaining_times(lp_jobs, snapshot.now)
            x = allocate(thr, gpus, capacity, self.objective, remaining)
        else:
            x = self._memoized(thr, gpus, capacity)
        return types, lp_jobs, x, capacity

    def _memoized(self, thr: np.ndarray, gpus: np.ndarray, capacity: np.ndarray
                  ) -> np.ndarray:
        """``allocate`` for a remaining-free objective, reusing the last LP's answer when its
        inputs are the same numbers (comparing them costs microseconds; a solve, tens of
        milliseconds): the job set changes only at arrivals and completions, so most rounds
        skip the solve."""
        key = (thr.shape, thr.tobytes(), gpus.tobytes(), capacity.tobytes())
        if self._memo is None or self._memo[0] != key:
            self._memo = (key, allocate(thr, gpus, capacity, self.objective))
        return self._memo[1]

    def order(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> Schedule:
        now = snapshot.now
        types, lp_jobs, x, capacity = self.allocation(snapshot, jobs)
        gpu_type = [g.type for g in snapshot.gpus]
        counted = [_time_on_types(j, now, gpu_type) for j in jobs]
        on = {j.id: spent for j, (spent, _) in zip(jobs, counted, strict=True)}
        current = {j.id: run[0] for j in jobs if (run := _current_run(j, gpu_type)) is not None}
        pairs, best = self._pairs(x, lp_jobs, types, on, current, now)
        chosen, ranked = _assign(pairs, types, capacity)
        rest = sorted((j for j in jobs if j.id not in chosen),
                      key=lambda j: (not j.running, -best.get(j.id, 0.0), j.submit_time, j.id))
        chosen.update(_confined(snapshot, rest, types))
        marks = tuple(m for _, job_marks in counted for m in job_marks)
        return Schedule(ranked + rest, types=chosen, marks=marks)

    def _pairs(self, x: np.ndarray, lp_jobs: Sequence[Job], types: Sequence[str],
               on: dict[int, dict[str, float]], current: dict[int, str], now: float
               ) -> tuple[list[_Pair], dict[int, float]]:
        """The (job, type) pairs jobs may be given, in Gavel's priority order, and each
        job's best priority (how far behind its allocation it is: the rank of the jobs left
        without a type). A pair needs a share of the allocation and, with ``migrate = false``,
        a running job's own type."""
        pairs: list[_Pair] = []
        best: dict[int, float] = {}
        for row, j in zip(x, lp_jobs, strict=True):
            age = now - j.submit_time
            for ti, share in enumerate(row):
                t = types[ti]
                if share <= 1e-9 or (not self.migrate and current.get(j.id, t) != t):
                    continue
                p = priority(share, on[j.id].get(t, 0.0), age)
                best[j.id] = max(best.get(j.id, 0.0), p)
                pairs.append((-p, -share, j.submit_time, j.id, ti, j))
        pairs.sort(key=lambda e: e[:4])
        return pairs, best
