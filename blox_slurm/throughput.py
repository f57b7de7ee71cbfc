"""Throughput models: how fast a job progresses for a given allocation.

The unit is the job's *reference rate*: 1.0 means "as fast as at its requested GPU count,
consolidated on one node, on the reference GPU type", which is how ``Job.duration`` is defined.
The simulator turns a placement into a rate with :meth:`ThroughputModel.rate`; Optimus uses
the same numbers to decide who gains most from an extra GPU, so the policy and the world agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from .model import Job


@runtime_checkable
class ThroughputModel(Protocol):
    def rate(self, job: Job, gpus: int, nodes: int, gpu_type: str) -> float:
        """Work-seconds per second for ``job`` on ``gpus`` GPUs of ``gpu_type`` over ``nodes``."""
        ...


@dataclass(frozen=True)
class ParametricThroughput:
    """A model for jobs with no measured throughput (synthetic workloads, Slurm jobs without
    hints): sub-linear scaling ``(n / requested) ** scaling``, a flat penalty when a job spans
    nodes, and a per-type speed factor (unknown types run at 1.0)."""

    scaling: float = 0.8
    spread_penalty: float = 0.85
    type_speed: Mapping[str, float] = field(default_factory=dict)

    def rate(self, job: Job, gpus: int, nodes: int, gpu_type: str) -> float:
        if gpus <= 0:
            return 0.0
        r = (gpus / job.num_gpus) ** self.scaling if gpus != job.num_gpus else 1.0
        if nodes > 1:
            r *= self.spread_penalty
        return r * self.type_speed.get(gpu_type, 1.0)


DEFAULT_THROUGHPUT = ParametricThroughput()


class ThroughputSpec(BaseModel):
    """A world's throughput model as plain config (an experiment's or ``controller.toml``'s
    ``[throughput]``): ``parametric`` (the scaling model, with ``type_speed`` per GPU type) or
    ``gavel`` (Gavel's measured table at ``path``; ``type_speed`` then applies to the models
    the table lacks). The controller needs it for heterogeneity-aware policies: without
    ``type_speed`` every GPU type is equally fast to Gavel."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["parametric", "gavel"] = "parametric"
    path: str | None = None
    reference_type: str = "v100"
    type_speed: dict[str, Annotated[float, Field(gt=0, allow_inf_nan=False)]] = Field(
        default_factory=dict)

    def build(self) -> ThroughputModel:
        base = (ParametricThroughput(type_speed=dict(self.type_speed)) if self.type_speed
                else DEFAULT_THROUGHPUT)
        if self.kind == "parametric":
            return base
        from .workloads.gavel_throughput import GavelThroughput

        if not self.path:
            raise ValueError("throughput kind 'gavel' needs the path of "
                             "simulation_throughputs.json")
        return GavelThroughput(self.path, reference_type=self.reference_type, fallback=base)
