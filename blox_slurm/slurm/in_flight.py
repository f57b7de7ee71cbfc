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

A start Slurm found wanting (a reason other than none or ``BeginTime``, e.g. its pinned
GPUs still busy), or that does not take within ``limit`` seconds, is shown pending again
(the start watch, :mod:`~blox_slurm.slurm.start_watch`, deals with the latter), as is a job
its owner or an admin held, re-pinned or requeued meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from ..core.model import ClusterSnapshot, Decisions
from .client import GresAlloc, SlurmJob

# What Slurm says of a released job its scheduler has not found wanting: none yet, or a
# begin time still ahead. Any other reason (Resources, say) and the start is no longer in
# flight: the policy may place the job anew.
_UNTRIED = frozenset({"None", "BeginTime"})


@dataclass(frozen=True, slots=True)
class _Start:
    nodes: tuple[str, ...]  # pinned, sorted
    alloc: Mapping[str, GresAlloc]  # the GPUs the policy gave it, per node
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
        ``now``."""
        placed = {s.job_id: s.gpus for s in d.placed}
        for job_id in ids:
            gpus, job = placed.get(job_id), managed.get(job_id)
            if gpus is None or job is None:
                continue
            per_node: dict[str, list[int]] = {}
            for g in gpus:
                per_node.setdefault(snapshot.gpus[g].node, []).append(snapshot.gpus[g].index)
            alloc = {n: GresAlloc(snapshot.gpus[gpus[0]].type, len(ix), tuple(ix))
                     for n, ix in per_node.items()}
            restarts = job.restart_cnt + job.active  # a moved job was requeued first
            self._starts[job_id] = _Start(tuple(sorted(per_node)), MappingProxyType(alloc),
                                          restarts, now)

    def view(self, managed: Mapping[int, SlurmJob], now: float) -> dict[int, SlurmJob]:
        """``managed`` with every start still in flight shown running where it was placed;
        forgets the others."""
        kept: dict[int, _Start] = {}
        out = dict(managed)
        for job_id, st in self._starts.items():
            j = managed.get(job_id)
            if (j is None or not j.pending or j.held or j.reason not in _UNTRIED
                    or j.restart_cnt != st.restarts or tuple(sorted(j.req_nodes)) != st.nodes
                    or now - st.since > self.limit):
                continue
            kept[job_id] = st
            out[job_id] = replace(j, state="RUNNING", nodes=st.nodes, gpu_alloc=st.alloc,
                                  start_time=now, reason="None")
        self._starts = kept
        return out

    def nodes(self) -> dict[int, tuple[str, ...]]:
        """Where each start in flight is pinned."""
        return {job_id: st.nodes for job_id, st in self._starts.items()}
