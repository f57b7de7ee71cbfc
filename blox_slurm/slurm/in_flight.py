"""Starts in flight: jobs a round released that Slurm has not run yet, shown to the policy as
running where it placed them.

Slurm starts a released job a second or more later (its batch scheduler's pass), so under
short rounds the next round still finds it pending. Shown as pending, the policy placed it
again, sometimes on other GPUs, and the controller re-pinned it, which put its start off
again (at 1 s rounds jobs were re-pinned to other nodes a round after their release). The
simulator holds a started job's GPUs from the decision on; so does the controller now: a
job released and pinned by this controller, still pending and released on the same nodes,
is shown to the policy as running on the GPUs it was given (no service gained: its run
begins when Slurm's does). The policy keeps it, stops it (the plan holds it again: it never
ran) or moves it (the plan re-pins it). The plan itself still sees Slurm's record.

Slurm pins nodes, not GPUs: it gives a released job the lowest free indices on its nodes
when it runs it. So a start in flight is shown, each round, on the lowest indices of its
nodes that Slurm and the other starts in flight leave free, never on GPUs another job
holds; its CPUs and memory are booked by the controller's snapshot. A start whose nodes
no longer have the room, or went down or to drain, a start Slurm found wanting (a reason
other than none or ``BeginTime``), or one that does not take within ``limit`` seconds,
is shown pending again (the start watch, :mod:`~blox_slurm.slurm.start_watch`, deals with
the latter), as is a job its owner or an admin held, re-pinned or requeued meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from ..core.model import ClusterSnapshot, Decisions
from .client import GresAlloc, SlurmJob, SlurmNode

# What Slurm says of a released job its scheduler has not found wanting: none yet, or a
# begin time still ahead. Any other reason (Resources, say) and the start is no longer in
# flight: the policy may place the job anew.
_UNTRIED = frozenset({"None", "BeginTime"})


@dataclass(frozen=True, slots=True)
class _Start:
    """A release as the controller made it: what tells it apart from anything done to the
    job since (its pins, its restart count) and what Slurm will give it (GPUs per node)."""

    nodes: tuple[str, ...]  # pinned, sorted
    gpus: Mapping[str, tuple[str, int]]  # per node: (GPU type, how many)
    restarts: int  # Slurm's restart count when it was released
    since: float


class InFlight:
    """The starts this controller released that Slurm has not run yet."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self._starts: dict[int, _Start] = {}

    def released(self, d: Decisions, ids: Iterable[int], managed: Mapping[int, SlurmJob],
                 snapshot: ClusterSnapshot, now: float) -> None:
        """``ids`` were pinned where ``d`` placed them and released (or restarted) at
        ``now``: remembered so that the next rounds, which may come before Slurm runs them,
        do not place them again."""
        placed = {s.job_id: s.gpus for s in d.placed}
        for job_id in ids:
            gpus, job = placed.get(job_id), managed.get(job_id)
            if gpus is None or job is None:
                continue
            per_node: dict[str, tuple[str, int]] = {}
            for g in gpus:
                gpu = snapshot.gpus[g]
                per_node[gpu.node] = (gpu.type, per_node.get(gpu.node, ("", 0))[1] + 1)
            restarts = job.restart_cnt + job.active  # a moved job was requeued first
            self._starts[job_id] = _Start(tuple(sorted(per_node)), MappingProxyType(per_node),
                                          restarts, now)

    def view(self, managed: Mapping[int, SlurmJob], nodes: Iterable[SlurmNode],
             now: float) -> dict[int, SlurmJob]:
        """``managed`` with every start still in flight shown running on its nodes' free
        GPUs; forgets the others."""
        room = _room(managed, nodes)
        kept: dict[int, _Start] = {}
        out = dict(managed)
        for job_id, st in self._starts.items():
            j = managed.get(job_id)
            if j is None or not self._untouched(j, st, now):
                continue
            alloc = _take(room, st)
            if alloc is None:
                continue
            kept[job_id] = st
            out[job_id] = replace(j, state="RUNNING", nodes=st.nodes, gpu_alloc=alloc,
                                  start_time=now, reason="None")
        self._starts = kept
        return out

    def _untouched(self, j: SlurmJob, st: _Start, now: float) -> bool:
        """Still waiting, as released, within the limit: nobody held, re-pinned or
        requeued it, and Slurm has found nothing wanting."""
        return (j.pending and j.reason in _UNTRIED and j.restart_cnt == st.restarts
                and tuple(sorted(j.req_nodes)) == st.nodes and now - st.since <= self.limit)

    def nodes(self) -> dict[int, tuple[str, ...]]:
        """Where each start in flight is pinned."""
        return {job_id: st.nodes for job_id, st in self._starts.items()}


def _room(managed: Mapping[int, SlurmJob], nodes: Iterable[SlurmNode]) -> dict[str, list[int]]:
    """The free GPU indices, lowest first, of every node that takes work: neither used as
    Slurm reports (any partition's jobs) nor held by a running managed job (the queue may
    be a moment newer than the node read)."""
    used: dict[str, set[int]] = {}
    for j in managed.values():
        if j.active:
            for node, a in j.gpu_alloc.items():
                used.setdefault(node, set()).update(a.indices)
    return {n.name: [i for i in range(n.gpus_total)
                     if i not in used.get(n.name, ()) and i not in n.gpus_used_indices]
            for n in nodes if not (n.down or n.draining)}


def _take(room: dict[str, list[int]], st: _Start) -> Mapping[str, GresAlloc] | None:
    """The GPUs Slurm will give ``st`` (the lowest free on each of its nodes), taken out of
    ``room``; ``None`` if a node lacks them."""
    if any(len(room.get(node, ())) < k for node, (_, k) in st.gpus.items()):
        return None
    alloc = {}
    for node, (gpu_type, k) in st.gpus.items():
        alloc[node] = GresAlloc(gpu_type, k, tuple(room[node][:k]))
        del room[node][:k]
    return MappingProxyType(alloc)
