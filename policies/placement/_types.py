"""GPU-type constraints shared by the placement policies.

A job may require a GPU type: the user's ``gpu_type`` hint (Slurm ``--gres=gpu:v100:2``), or
the type a heterogeneity-aware scheduler (Gavel) chose for it this round, which the round
engine hands over as the same hint (see :func:`blox_slurm.round.decide`). Placements stay
type-agnostic by drawing from :func:`allowed`, the free set narrowed to nodes of that type.
"""

from __future__ import annotations

from blox_slurm.abstractions import FreeGpus
from blox_slurm.model import ClusterSnapshot, Job

HINT = "gpu_type"


def allowed(snapshot: ClusterSnapshot, job: Job, free: FreeGpus) -> FreeGpus:
    """``free`` restricted to nodes whose GPU type is the job's required one (compared
    case-insensitively: Slurm gres names are lower case, node types may not be); ``free``
    itself when the job accepts any type. The result is a read-only view for placement."""
    want = job.hint(HINT)
    if not want:
        return free
    want = want.casefold()
    keep = {n.name for n in snapshot.nodes if n.gpu_type.casefold() == want}
    by_node = {name: gpus for name, gpus in free.by_node.items() if name in keep}
    return FreeGpus(by_node, snapshot.gpus)
