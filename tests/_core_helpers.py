"""Small builders shared by the core/policy/simulator tests (not a test module)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from blox_slurm.core import composition, transitions
from blox_slurm.core.abstractions import FreeGpus
from blox_slurm.core.fit import allowed
from blox_slurm.core.model import (
    ClusterSnapshot,
    Decisions,
    Gpu,
    Job,
    JobState,
    Node,
    NodeState,
    build_cluster,
)
from blox_slurm.workloads.schema import JobSpec, Workload


def cluster(*per_node: int, gpu_type: str = "gpu") -> tuple[tuple[Node, ...], tuple[Gpu, ...]]:
    """Nodes node1.. with the given GPU counts, GPU ids numbered in node order."""
    return build_cluster([(gpu_type, 1, n) for n in per_node])


def pending(jid: int, gpus: int = 1, submit: float = 0.0, **kw: Any) -> Job:
    kw.setdefault("admitted", True)
    kw.setdefault("last_event", submit)
    return Job(jid, submit, gpus, **kw)


def running(jid: int, gpus: Iterable[int], submit: float = 0.0, since: float = 0.0,
            **kw: Any) -> Job:
    """A running job holding ``gpus`` since ``since`` (its work starts then, at rate 1)."""
    g = tuple(gpus)
    kw.setdefault("num_gpus", len(g))
    kw.setdefault("work_since", since)
    kw.setdefault("first_start", since)
    kw.setdefault("last_event", since)
    kw.setdefault("admitted", True)
    return Job(jid, submit, state=JobState.RUNNING, gpus=g, run_since=since, **kw)


def snapshot(shape: tuple[tuple[Node, ...], tuple[Gpu, ...]], jobs: Iterable[Job],
             now: float = 0.0, states: dict[str, NodeState] | None = None,
             **kw: Any) -> ClusterSnapshot:
    nodes, gpus = shape
    if states:
        nodes = tuple(replace(n, state=states.get(n.name, n.state)) for n in nodes)
    return ClusterSnapshot(now, nodes, gpus, tuple(jobs), **kw)


def free_of(snap: ClusterSnapshot) -> FreeGpus:
    return FreeGpus.of(snap)


def place(policy: Any, snap: ClusterSnapshot, job: Job, count: int,
          free: FreeGpus | None = None) -> tuple[int, ...] | None:
    """What the round engine does: the placement's choice among the GPUs the job can use
    (the filter stage, :func:`blox_slurm.core.fit.allowed`)."""
    pool = free if free is not None else free_of(snap)
    return policy.choose(snap, job, count, allowed(snap, job, pool))


def comp(scheduling: Any = "fifo", **sections: Any) -> composition.Composition:
    return composition.build({"scheduling": scheduling, **sections})


def apply(snap: ClusterSnapshot, d: Decisions) -> ClusterSnapshot:
    """The snapshot a world would produce after carrying out ``d`` at the same instant
    (the shared job transitions, policy marks included; no free-GPU index)."""
    return transitions.apply(snap, d)


def started(d: Decisions) -> dict[int, tuple[int, ...]]:
    """Where each job the round puts on GPUs runs next: started and moved ones."""
    return {s.job_id: s.gpus for s in d.placed}


def workload(*jobs: tuple[float, int, float], measure: tuple[int, int] | None = None
             ) -> Workload:
    """Jobs ``(submit_time, num_gpus, duration)`` with ids 0.. in the given order."""
    specs = tuple(JobSpec(i, t, n, d) for i, (t, n, d) in enumerate(jobs))
    return Workload(tuple(sorted(specs, key=lambda s: (s.submit_time, s.id))), measure=measure)
