from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from blox_slurm.abstractions import Schedule, SchedulingBase
from blox_slurm.model import ClusterSnapshot, Job, NodeState
from blox_slurm.registry import register
from blox_slurm.throughput import DEFAULT_THROUGHPUT, ThroughputModel


@register("scheduling", "optimus")
class Optimus(SchedulingBase):
    """Optimus-style elastic allocation: shortest remaining time first, then spare GPUs go
    one at a time to the job whose remaining time drops most (Peng et al., EuroSys'18).

    Each round, pending jobs are ranked by estimated remaining time (oracle duration; jobs
    without one last) and take their requested GPUs while free GPUs last. The GPUs still
    free are then handed out greedily by marginal gain: for a job at ``n`` GPUs the gain of
    one more is ``T(n) - T(n+1)`` with ``T(n) = remaining / rate(n)`` from the snapshot's
    throughput model (the simulator's own model, so policy and world agree). A job grows to at
    most ``max_scale`` x its request and ``max_gpus``. Running jobs keep their size (a resize
    would be a checkpoint-restart) and rank above pending ones, so Optimus never preempts.
    The returned ``Schedule.gpus`` is honoured by placement; pair it with a placement that can
    span nodes (first_fit, scattered) so grown jobs are not stranded by consolidation.
    """

    time_dependent = True

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        max_scale: float = Field(default=4.0, ge=1.0)
        max_gpus: int = Field(default=8, ge=1)

    def __init__(self, params: Params | None = None) -> None:
        p = params or self.Params()
        self.max_scale = p.max_scale
        self.max_gpus = p.max_gpus

    def order(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> Schedule:
        now = snapshot.now
        model: ThroughputModel = snapshot.throughput or DEFAULT_THROUGHPUT
        up = [n for n in snapshot.nodes if n.state is NodeState.UP]
        per_node = max((len(n.gpu_ids) for n in up), default=1) or 1
        gpu_type = up[0].gpu_type if up else "gpu"
        running = sorted((j for j in jobs if j.running), key=lambda j: (j.submit_time, j.id))
        # Spare = free GPUs of UP nodes: a job still running on a draining node holds none.
        up_names = {n.name for n in up}
        gpus = snapshot.gpus
        busy = sum(1 for j in running for g in j.gpus if gpus[g].node in up_names)
        spare = sum(len(n.gpu_ids) for n in up) - busy

        def remaining(j: Job) -> float:
            r = j.remaining(now)
            return math.inf if r is None else r

        pending = sorted((j for j in jobs if not j.running),
                         key=lambda j: (remaining(j), j.submit_time, j.id))
        alloc: dict[int, int] = {}
        for j in pending:
            if j.num_gpus <= spare:
                alloc[j.id] = j.num_gpus
                spare -= j.num_gpus

        def time_at(j: Job, n: int) -> float:
            nodes = math.ceil(n / per_node)
            return remaining(j) / max(model.rate(j, n, nodes, gpu_type), 1e-9)

        def cap(j: Job) -> int:
            return min(self.max_gpus, int(j.num_gpus * self.max_scale))

        heap: list[tuple[float, float, int, Job]] = []
        for j in pending:
            n = alloc.get(j.id)
            if n is not None and n < cap(j) and remaining(j) < math.inf:
                heap.append((time_at(j, n + 1) - time_at(j, n), j.submit_time, j.id, j))
        heapq.heapify(heap)
        while spare > 0 and heap:
            neg_gain, _, _, j = heapq.heappop(heap)
            if neg_gain >= 0:
                break  # nobody speeds up from another GPU
            n = alloc[j.id] = alloc[j.id] + 1
            spare -= 1
            if n < cap(j):
                heapq.heappush(heap, (time_at(j, n + 1) - time_at(j, n), j.submit_time, j.id, j))
        grown = {j.id: alloc[j.id] for j in pending if alloc.get(j.id, j.num_gpus) != j.num_gpus}
        return Schedule([*running, *pending], grown)
