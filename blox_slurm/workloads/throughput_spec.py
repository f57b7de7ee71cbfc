"""A world's throughput model from plain config: the scaling model, or Gavel's measured table.

Kept out of the core (:mod:`blox_slurm.core.throughput` holds the models themselves) because
building the Gavel model reads a file through this package.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..core.throughput import DEFAULT_THROUGHPUT, ParametricThroughput, ThroughputModel
from .gavel_throughput import GavelThroughput


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
        if not self.path:
            raise ValueError("throughput kind 'gavel' needs the path of "
                             "simulation_throughputs.json")
        return GavelThroughput(self.path, reference_type=self.reference_type, fallback=base)
