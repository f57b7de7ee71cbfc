"""The wire format between agent and receiver, validated strictly on the controller.

One definition serves both sides, so the agent can never send what the receiver rejects. The
receiver is an authenticated endpoint, but a bug or a compromised node must still not be able
to push unbounded or nonsensical data into the controller's memory: every list is bounded,
every number is finite and in range, unknown fields are rejected and no type is coerced
(``"gpu": "1"`` is an error, not 1).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from ..core.model import GpuSample

MAX_BODY_BYTES = 1 << 20
"""The receiver's cap on one POST body (413 above it); the agent splits batches to stay below."""
MAX_SAMPLES_PER_BATCH = 4096
"""Bounds one POST: at ~150 bytes a sample, 4096 samples are ~600 KB and cover e.g. 8 GPUs x
512 buffered intervals of a node that could not reach the controller."""
MAX_GPU_INDEX = 1023
MAX_JOBS_PER_GPU = 64

NodeName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$")]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class SampleIn(_Strict):
    gpu: Annotated[int, Field(ge=0, le=MAX_GPU_INDEX)]
    time: NonNegative
    utilization: Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)]
    memory_used_mb: NonNegative = 0.0
    memory_total_mb: NonNegative = 0.0
    job_ids: Annotated[
        list[Annotated[int, Field(ge=0, le=2**63 - 1)]], Field(max_length=MAX_JOBS_PER_GPU)
    ] = []
    errors: Annotated[int, Field(ge=0, le=2**31)] = 0

    @classmethod
    def of(cls, s: GpuSample) -> SampleIn:
        return cls(
            gpu=s.gpu,
            time=s.time,
            utilization=s.utilization,
            memory_used_mb=s.memory_used_mb,
            memory_total_mb=s.memory_total_mb,
            job_ids=list(s.job_ids),
            errors=s.errors,
        )

    def to_sample(self) -> GpuSample:
        return GpuSample(
            gpu=self.gpu,
            time=self.time,
            utilization=self.utilization,
            memory_used_mb=self.memory_used_mb,
            memory_total_mb=self.memory_total_mb,
            job_ids=tuple(self.job_ids),
            errors=self.errors,
        )


class TelemetryBatch(_Strict):
    """What one agent POSTs: samples of the GPUs of one node."""

    node: NodeName
    samples: Annotated[list[SampleIn], Field(max_length=MAX_SAMPLES_PER_BATCH)]

    @classmethod
    def of(cls, node: str, samples: list[GpuSample]) -> TelemetryBatch:
        return cls(node=node, samples=[SampleIn.of(s) for s in samples])
