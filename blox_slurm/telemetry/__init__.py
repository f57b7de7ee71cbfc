"""GPU telemetry: backends that sample a node's GPUs, the agent that ships the samples, and the
controller-side receiver that keeps the latest ones for policies.

Data flow: ``GpuTelemetry.sample()`` (NVML on real GPU nodes, emulated in the emulator) ->
``run_agent`` batches and POSTs them -> ``TelemetryReceiver`` validates, buffers per
``(node, gpu index)`` -> the controller reads ``latest()`` / ``window()`` into the snapshot.
"""

from .base import GpuTelemetry, TelemetryError

__all__ = ["GpuTelemetry", "TelemetryError"]
