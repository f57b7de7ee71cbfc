"""The one interface every telemetry backend implements."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from ..core.model import GpuSample


class TelemetryError(RuntimeError):
    """A backend cannot sample this node. The message is meant for an admin as-is: it says what
    is wrong on the node, not which library call failed."""


@runtime_checkable
class GpuTelemetry(Protocol):
    """Samples the GPUs of the node it runs on.

    ``GpuSample.gpu`` is the *local* GPU index (the CUDA/NVML ordinal on this node): a backend
    knows nothing of the cluster-wide numbering. The agent tags each batch with the node name,
    and the controller maps ``(node, index)`` to its own GPU ids.
    """

    def sample(self) -> list[GpuSample]:
        """One reading per GPU on this node, taken now."""
        ...

    def close(self) -> None:
        """Release the backend's resources (NVML handle); idempotent."""
        ...
