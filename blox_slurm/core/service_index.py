"""The running jobs by attained service, kept by a world as they start and stop: the sort
LAS needs every round without keying every running job every round.

A running job's attained service at ``now`` is ``base + g * (now - run_since)`` (``g`` its
GPUs): ``c + g * now`` with ``c = base - g * run_since`` fixed for the whole run. So among the
running jobs with the same ``g`` the order by ``(c, submit time, id)`` holds at every
``now``, and the index keeps one sorted list per ``g``, changed only when a job starts or
stops (a thousand jobs run on a busy 1,024-GPU cluster, and a preempting round ranks them
all: that sort was a fifth of such a simulation). A round merges the waiting jobs, a few,
into those lists.

The index answers only when its arithmetic is the plain sort's to the last bit: whole
numbers below 2**50 (times, services and ``g * now``; the simulator's rounds give them: a
round every so many seconds, starts and stops on rounds), so that ``c + g * now`` and
``base + g * (now - run_since)`` are the same exact number. Otherwise, and for a snapshot
other than the one it was sealed for (the world changed since, or another caller replaced
the snapshot's jobs), :meth:`ServiceIndex.order` returns ``None`` and the caller sorts.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from itertools import chain
from operator import attrgetter, is_, itemgetter, ne

from .abstractions import Ranked
from .model import Job

_BOUND = 2.0**50  # every operand below this: sums and products here are exact
_job = itemgetter(3)
_base, _submit, _id = attrgetter("attained_base"), attrgetter("submit_time"), attrgetter("id")
Key = tuple[float, float, int]  # (c, submit time, id)
Entry = tuple[float, float, int, Job]  # a key and its job


class ServiceIndex:
    """A world's running jobs, by attained service at any ``now``, then submit time and id
    (LAS's order). The world :meth:`add`\\ s a job's record when it starts, :meth:`remove`\\ s
    it when it stops or finishes, and :meth:`seal`\\ s the index with each snapshot's jobs."""

    def __init__(self) -> None:
        # g -> its running jobs' keys, sorted, and the jobs in the same order: a round's
        # merge copies runs of jobs between two waiting ones as slices
        self.groups: dict[int, list[Key]] = {}
        self.members: dict[int, list[Job]] = {}
        self.later: dict[int, float] = {}  # job id -> when its run begins, if after its add
        self.inexact: set[int] = set()  # job ids whose service is off the exact grid
        self.sealed: Sequence[Job] | None = None
        # the waiting jobs last sorted, in the order given, and their sorted entries
        self._waiting: tuple[list[Job], list[Entry]] = ([], [])

    def add(self, job: Job, now: float) -> None:
        """``job``'s record runs, as the world keeps it from ``now`` on."""
        self.sealed = None
        key = _key(job)
        base, since = job.attained_base, job.run_since or 0.0
        if not (-_BOUND < base < _BOUND and -_BOUND < key[0] - base < _BOUND
                and base == int(base) and since == int(since)):
            self.inexact.add(job.id)
        keys = self.groups.setdefault(len(job.gpus), [])
        at = bisect.bisect_left(keys, key)
        keys.insert(at, key)
        self.members.setdefault(len(job.gpus), []).insert(at, job)
        if since > now:
            self.later[job.id] = since

    def remove(self, job: Job) -> None:
        """``job``: the record that was added."""
        self.sealed = None
        keys, jobs = self.groups.get(len(job.gpus), []), self.members.get(len(job.gpus), [])
        at = bisect.bisect_left(keys, _key(job))
        if at == len(jobs) or jobs[at] is not job:
            raise ValueError(f"job {job.id}'s record is not in the index")  # a world's bug
        del keys[at], jobs[at]
        if self.inexact:
            self.inexact.discard(job.id)
        if self.later:
            self.later.pop(job.id, None)

    def seal(self, jobs: Sequence[Job]) -> None:
        """The index agrees with ``jobs`` (a snapshot's: its running jobs are the index's)
        until it next changes."""
        self.sealed = jobs

    def waiting(self, jobs: Sequence[Job], bases: Sequence[float] | None = None
                ) -> list[Entry]:
        """:func:`waiting_entries` of ``jobs``, kept for the same job records in the same
        order: a full cluster's round ranks its waiting jobs alone first (the engine's
        pending-only path), then, the first of them not fitting, all jobs, and LAS ranks
        every round while jobs wait, mostly the same ones. Records are never changed in
        place, so the same objects give the same entries."""
        seen, entries = self._waiting
        if len(seen) != len(jobs) or not all(map(is_, seen, jobs)):
            entries = waiting_entries(jobs, bases)
            self._waiting = (list(jobs), entries)
        return entries

    def order(self, jobs: Sequence[Job], pending: Sequence[Job], now: float) -> list[Job] | None:
        """``jobs`` (the sealed ones: ``pending``, which hold no GPUs and so are ranked by
        their base, and the running) by attained service at ``now``, submit time and id,
        exactly as a sort of them would rank them; ``None`` when the index cannot say so
        (see the module docstring). With one GPU count running, a :class:`Ranked`."""
        if jobs is not self.sealed or self.inexact or not _exact(now):
            return None
        if self.later:
            if max(self.later.values()) > now:
                return None  # a run not begun yet: its service does not move yet
            self.later.clear()
        runs = {g: keys for g, keys in self.groups.items() if keys}
        if max(runs, default=0) * abs(now) >= _BOUND:
            return None
        keys = list(map(_base, pending))
        if any(map(ne, keys, keys)):
            return None  # NaN: a plain sort ranks it where it happens to be
        waiting = self.waiting(pending, keys)
        if len(runs) == 1 and _all_exact(keys):
            ((g, running),) = runs.items()
            return _gallop(waiting, running, self.members[g], g * now)
        merged = sorted(chain(waiting, *(_at(k, self.members[g], g * now)
                                         for g, k in runs.items())))
        return list(map(_job, merged))


def waiting_entries(jobs: Sequence[Job], bases: Sequence[float] | None = None
                    ) -> list[Entry]:
    """Jobs that run nowhere (their service is their base, ``bases`` if already read) as
    entries sorted by (base, submit time, id): the keys read in C loops, not a key function
    per job. The same tuples compared in the same order, ids unique: a plain sort's order."""
    if bases is None:
        bases = list(map(_base, jobs))
    return sorted(zip(bases, map(_submit, jobs), map(_id, jobs), jobs, strict=True))


def waiting_order(jobs: Sequence[Job], index: ServiceIndex | None = None) -> list[Job]:
    """``jobs``, none of them running, by (attained service, submit time, id); sorted once
    for the same jobs with a world's ``index`` (:meth:`ServiceIndex.waiting`)."""
    return list(map(_job, waiting_entries(jobs) if index is None else index.waiting(jobs)))


def _key(job: Job) -> Key:
    """A running job's key: ``(c, submit time, id)``."""
    if job.run_since is None:
        raise ValueError(f"job {job.id} does not run")
    return job.attained_base - len(job.gpus) * job.run_since, job.submit_time, job.id


def _at(keys: list[Key], jobs: list[Job], offset: float) -> list[Entry]:
    """The entries of ``jobs`` with ``offset`` (``g * now``) added to their keys."""
    return [(c + offset, submit, jid, job)
            for (c, submit, jid), job in zip(keys, jobs, strict=True)]


def _gallop(waiting: list[Entry], keys: list[Key], jobs: list[Job], offset: float) -> Ranked:
    """Sorted ``waiting`` (exact keys) merged into the running ``jobs``, whose ``keys`` are
    ``offset`` below their services: each waiting job is placed by a bisection, the running
    ones between two waiting jobs are copied as a slice (a round has a few waiting jobs and
    a thousand running), and where the waiting ones went is noted on the way. Those ranked
    below every running job (a full cluster's requeued ones: most of its waiting jobs) are
    appended together."""
    out = Ranked()
    at: list[int] = []
    lo, end = 0, len(keys)
    for k, (c, submit, jid, job) in enumerate(waiting):
        if lo == end:  # below every running job: the rest follow in their order, at once
            at += range(len(out), len(out) + len(waiting) - k)
            out += map(_job, waiting[k:])
            break
        hi = bisect.bisect_left(keys, (c - offset, submit, jid), lo)
        out += jobs[lo:hi]
        at.append(len(out))
        out.append(job)
        lo = hi
    out += jobs[lo:]
    out.pending_at, out.running = at, jobs[:]
    return out


def _all_exact(xs: list[float]) -> bool:
    """:func:`_exact` of every one, in C loops (a round's waiting jobs)."""
    return not xs or (-_BOUND < min(xs) and max(xs) < _BOUND
                      and all(map(float.is_integer, map(float, xs))))


def _exact(x: float) -> bool:
    """A whole number below the bound. (Not ``float.is_integer``: a test's job may hold
    ints.)"""
    return -_BOUND < x < _BOUND and x == int(x)
