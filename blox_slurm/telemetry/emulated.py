"""The emulated backend: telemetry derived from what Slurm allocated, for nodes without GPUs.

The emulator's GPUs are ``/dev/null`` entries in ``gres.conf``, so nothing can be measured.
Instead, a GPU that Slurm gave to a job reports that job's utilization, drawn from a
deterministic per-job profile (the same job always looks the same, so tests and emulator runs
are reproducible), and a free GPU reports 0%. A job hint ``idle=1`` makes its GPUs read 0% so
idle-GPU detection can be exercised, and errors can be injected on a GPU to exercise draining.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ..core.model import ClusterSnapshot, GpuSample
from .base import TelemetryError


class Allocation(NamedTuple):
    """Slurm placed ``job_id`` on ``gpus`` (local indices) of ``node``; ``hints`` as in
    :attr:`blox_slurm.core.model.Job.hints` (sorted ``(key, value)`` pairs)."""

    job_id: int
    node: str
    gpus: tuple[int, ...]
    hints: tuple[tuple[str, str], ...] = ()


AllocationSource = Callable[[], "ClusterSnapshot | Iterable[tuple[object, ...]]"]
"""Returns the current allocations: a snapshot (its running jobs), or tuples
``(job_id, node, gpu indices[, hints])``."""


def _as_allocation(item: Sequence[Any]) -> Allocation:
    """``(job_id, node, gpus[, hints])`` with ``hints`` a mapping or ``(key, value)`` pairs."""
    job_id, node, gpus, *rest = item
    hints = dict(rest[0]) if rest else {}
    return Allocation(
        int(job_id), str(node), tuple(int(g) for g in gpus), tuple(sorted(hints.items()))
    )


def allocations_from_snapshot(snapshot: ClusterSnapshot) -> list[Allocation]:
    """The running jobs of a snapshot as per-node allocations (cluster GPU ids -> local)."""
    out: list[Allocation] = []
    for job in snapshot.jobs:
        by_node: dict[str, list[int]] = {}
        for g in job.gpus:
            gpu = snapshot.gpus[g]
            by_node.setdefault(gpu.node, []).append(gpu.index)
        out.extend(Allocation(job.id, n, tuple(ix), job.hints) for n, ix in by_node.items())
    return out


def allocations_from_file(path: str | Path) -> AllocationSource:
    """A source re-reading a JSON file ``[{"job_id", "node", "gpus", "hints"?}, ...]`` on each
    sample: how an emulator launcher that knows Slurm's allocations can feed the agent."""
    source = Path(path)

    def read() -> list[Allocation]:
        try:
            items = json.loads(source.read_text())
            return [
                _as_allocation((i["job_id"], i["node"], i["gpus"], i.get("hints", {})))
                for i in items
            ]
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise TelemetryError(f"cannot read allocations from {source}: {exc}") from exc

    return read


def profile_utilization(job_id: int, low: float = 60.0, high: float = 95.0) -> float:
    """A job's deterministic utilization in ``[low, high]``: CRC32 of its id, not ``hash()``,
    which is the identity on ints and would give consecutive jobs consecutive values."""
    fraction = zlib.crc32(str(job_id).encode()) / 0xFFFFFFFF
    return round(low + (high - low) * fraction, 1)


class EmulatedTelemetry:
    """:class:`~blox_slurm.telemetry.base.GpuTelemetry` for ``node``'s ``gpu_count`` GPUs.

    ``utilization`` fixes every busy GPU's reading instead of the per-job profile;
    ``errors`` maps a GPU index to errors reported on *every* sample (a persistently failing
    GPU); :meth:`inject_error` adds one-shot errors reported on the next sample only.
    """

    def __init__(
        self,
        node: str,
        gpu_count: int,
        allocations: AllocationSource,
        utilization: float | None = None,
        memory_total_mb: float = 81_920.0,
        errors: Mapping[int, int] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if gpu_count < 0:
            raise ValueError(f"gpu_count must be >= 0, got {gpu_count}")
        self.node = node
        self.gpu_count = gpu_count
        self._source = allocations
        self._fixed = utilization
        self._memory_total = memory_total_mb
        self._persistent = dict(errors or {})
        self._pending: dict[int, int] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def inject_error(self, gpu: int, count: int = 1) -> None:
        """Report ``count`` errors on local GPU ``gpu`` in the next sample."""
        with self._lock:
            self._pending[gpu] = self._pending.get(gpu, 0) + count

    def _current(self) -> list[Allocation]:
        current = self._source()
        if isinstance(current, ClusterSnapshot):
            return allocations_from_snapshot(current)
        return [_as_allocation(item) for item in current]

    def _job_utilization(self, alloc: Allocation) -> float:
        if ("idle", "1") in alloc.hints:
            return 0.0
        return self._fixed if self._fixed is not None else profile_utilization(alloc.job_id)

    def sample(self) -> list[GpuSample]:
        now = self._clock()
        owners: dict[int, list[Allocation]] = {}
        for alloc in self._current():
            if alloc.node == self.node:
                for index in alloc.gpus:
                    owners.setdefault(index, []).append(alloc)
        with self._lock:
            pending, self._pending = self._pending, {}
        samples = []
        for index in range(self.gpu_count):
            jobs = owners.get(index, [])
            util = max((self._job_utilization(a) for a in jobs), default=0.0)
            samples.append(
                GpuSample(
                    gpu=index,
                    time=now,
                    utilization=util,
                    memory_used_mb=round(self._memory_total * util / 100, 1),
                    memory_total_mb=self._memory_total,
                    job_ids=tuple(sorted({a.job_id for a in jobs})),
                    errors=self._persistent.get(index, 0) + pending.get(index, 0),
                )
            )
        return samples

    def close(self) -> None:
        """Nothing to release: present for the protocol."""
