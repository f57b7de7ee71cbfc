"""The NVML backend (nvidia-ml-py): what real GPU nodes run.

Only :class:`NvmlTelemetry` touches NVML; everything it decides is a pure function below
(:func:`job_id_from_cgroup`, :func:`job_id_from_environ`, :func:`assemble_sample`,
:class:`ErrorDeltas`), so the parts that can be wrong are tested on machines without a GPU.

Per GPU it reports utilization, memory used/total, the Slurm jobs whose processes hold a
context on it, and errors: uncorrected volatile ECC errors and XID critical-error events where
the GPU supports them, plus one error for every NVML query that fails on a GPU for a reason
other than "not supported" (a GPU that fell off the bus must look broken, not idle).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

import pynvml

from ..core.model import GpuSample
from .base import TelemetryError
from .schema import MAX_JOBS_PER_GPU

_JOB_DIR = re.compile(r"(?:^|/)job_(\d{1,18})(?=/|$)")
_ENV_KEY = b"SLURM_JOB_ID="
_MIB = float(1 << 20)
_MAX_EVENTS_PER_SAMPLE = 1024  # a GPU storming XIDs must not stall the agent


def job_id_from_cgroup(text: str) -> int | None:
    """The Slurm job id in a ``/proc/<pid>/cgroup`` text, or ``None``.

    slurmstepd places job processes under a ``job_<id>`` directory in both layouts:
    v1 ``4:devices:/slurm/uid_1000/job_42/step_0/task_0`` and
    v2 ``0::/system.slice/slurmstepd.scope/job_42/step_batch/user/task_0``.
    """
    for line in text.splitlines():
        match = _JOB_DIR.search(line.split(":", 2)[-1])
        if match:
            return int(match.group(1))
    return None


def job_id_from_environ(data: bytes) -> int | None:
    """``SLURM_JOB_ID`` from a NUL-separated ``/proc/<pid>/environ``, or ``None``."""
    for entry in data.split(b"\0"):
        if entry.startswith(_ENV_KEY):
            value = entry[len(_ENV_KEY) :]
            return int(value) if value.isdigit() and len(value) <= 18 else None
    return None


def job_id_of_pid(pid: int, proc: Path = Path("/proc")) -> int | None:
    """Which Slurm job a process belongs to.

    The cgroup comes first because slurmstepd sets it and the job cannot leave it, whereas the
    environment is the job's own: any user can export ``SLURM_JOB_ID=<someone else's job>``.
    The environment is the fallback for nodes without cgroup process tracking. A process that
    exited or that we may not read maps to ``None``.
    """
    base = proc / str(pid)
    try:
        job = job_id_from_cgroup((base / "cgroup").read_text(errors="replace"))
    except OSError:
        job = None
    if job is not None:
        return job
    try:
        return job_id_from_environ((base / "environ").read_bytes())
    except OSError:
        return None


def assemble_sample(
    index: int,
    now: float,
    utilization: float,
    memory_used_bytes: float,
    memory_total_bytes: float,
    pids: Iterable[int],
    job_of: Callable[[int], int | None],
    errors: int = 0,
) -> GpuSample:
    """One GPU's sample from raw NVML values: bytes to MiB, utilization clamped to 0..100,
    processes to their distinct Slurm jobs (sorted; processes outside any job dropped)."""
    jobs = sorted({job for pid in pids if (job := job_of(pid)) is not None})
    return GpuSample(
        gpu=index,
        time=now,
        utilization=float(min(100.0, max(0.0, utilization))),
        memory_used_mb=memory_used_bytes / _MIB,
        memory_total_mb=memory_total_bytes / _MIB,
        job_ids=tuple(jobs[:MAX_JOBS_PER_GPU]),
        errors=errors,
    )


class ErrorDeltas:
    """Turns NVML's cumulative error counters into "new since the previous sample".

    The first reading of a GPU reports its whole volatile count (errors since the driver
    loaded): the controller has not heard of them yet. A counter that went down (driver
    reload) restarts from its new value.
    """

    def __init__(self) -> None:
        self._last: dict[int, int] = {}

    def delta(self, index: int, total: int) -> int:
        previous = self._last.get(index, 0)
        self._last[index] = total
        return total - previous if total >= previous else total


def _init_error(nvml: Any, exc: Exception) -> TelemetryError:
    if isinstance(exc, nvml.NVMLError_LibraryNotFound):
        return TelemetryError("no NVIDIA driver on this node (NVML library not found)")
    if isinstance(exc, nvml.NVMLError_DriverNotLoaded):
        return TelemetryError("NVIDIA driver installed but not loaded on this node")
    if isinstance(exc, nvml.NVMLError_NoPermission):
        return TelemetryError("no permission to use NVML on this node")
    return TelemetryError(f"NVML failed to initialize: {exc}")


class NvmlTelemetry:
    """:class:`~blox_slurm.telemetry.base.GpuTelemetry` over NVML.

    ``nvml`` is the ``pynvml`` module (replaceable so the sampling logic can run against a
    stand-in where no GPU exists); ``proc`` is where ``/proc`` is.
    """

    def __init__(
        self,
        nvml: ModuleType = pynvml,
        proc: Path = Path("/proc"),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._nvml: Any = nvml
        self._proc = proc
        self._clock = clock
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            raise _init_error(nvml, exc) from exc
        self._open = True
        try:
            count = nvml.nvmlDeviceGetCount()
            self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except nvml.NVMLError as exc:
            self.close()
            raise TelemetryError(f"NVML cannot list this node's GPUs: {exc}") from exc
        self._ecc = ErrorDeltas()
        self._no_ecc: set[int] = set()
        self._events = self._register_xid_events()

    def _register_xid_events(self) -> object | None:
        nvml = self._nvml
        try:
            events = nvml.nvmlEventSetCreate()
        except nvml.NVMLError:
            return None
        registered = False
        for handle in self._handles:
            try:
                nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, events)
                registered = True
            except nvml.NVMLError:  # not supported on this GPU (e.g. consumer boards)
                continue
        if not registered:
            nvml.nvmlEventSetFree(events)
            return None
        return events

    def _xid_events(self) -> Counter[int]:
        """XID critical errors per GPU index since the last call (non-blocking)."""
        nvml = self._nvml
        counts: Counter[int] = Counter()
        if self._events is None:
            return counts
        for _ in range(_MAX_EVENTS_PER_SAMPLE):
            try:
                data = nvml.nvmlEventSetWait(self._events, 0)
                if data.eventType == nvml.nvmlEventTypeXidCriticalError:
                    counts[nvml.nvmlDeviceGetIndex(data.device)] += 1
            except nvml.NVMLError:  # NVMLError_Timeout: no more pending events
                break
        return counts

    def _ecc_errors(self, index: int, handle: object) -> int:
        if index in self._no_ecc:
            return 0
        nvml = self._nvml
        try:
            total = nvml.nvmlDeviceGetTotalEccErrors(
                handle, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
            )
        except nvml.NVMLError_NotSupported:
            self._no_ecc.add(index)  # no ECC on this GPU: stop asking
            return 0
        return self._ecc.delta(index, int(total))

    def _sample_gpu(self, index: int, handle: object, now: float, xid: int) -> GpuSample:
        nvml = self._nvml
        try:
            util = nvml.nvmlDeviceGetUtilizationRates(handle).gpu
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            pids = [p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)]
            errors = xid + self._ecc_errors(index, handle)
        except nvml.NVMLError:  # GPU lost, reset required, ...: report it as broken
            return GpuSample(gpu=index, time=now, utilization=0.0, errors=xid + 1)
        return assemble_sample(
            index,
            now,
            util,
            memory.used,
            memory.total,
            pids,
            lambda pid: job_id_of_pid(pid, self._proc),
            errors,
        )

    def sample(self) -> list[GpuSample]:
        if not self._open:
            raise TelemetryError("NVML telemetry used after close()")
        now = self._clock()
        xid = self._xid_events()
        return [self._sample_gpu(i, h, now, xid[i]) for i, h in enumerate(self._handles)]

    def close(self) -> None:
        if not getattr(self, "_open", False):
            return
        self._open = False
        nvml = self._nvml
        try:
            if getattr(self, "_events", None) is not None:
                nvml.nvmlEventSetFree(self._events)
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass  # shutting down: nothing useful to do about a failure
