"""The controller's in-memory store of recent GPU samples, filled by the receiver.

Bounded twice: the latest ``per_gpu`` samples per ``(node, gpu index)`` (older ones fall off)
and at most ``max_gpus`` distinct GPUs, so a misbehaving agent inventing node names cannot grow
the controller's memory without limit. Durable history is the store's job, not this one's.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from ..core.model import GpuSample

GpuKey = tuple[str, int]
"""``(node name, local GPU index)``."""


class TelemetryBuffer:
    """Thread-safe: the receiver's request threads add, the controller loop reads."""

    def __init__(
        self,
        per_gpu: int = 120,
        max_gpus: int = 65_536,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if per_gpu < 1:
            raise ValueError(f"per_gpu must be >= 1, got {per_gpu}")
        self.per_gpu = per_gpu
        self.max_gpus = max_gpus
        self._clock = clock
        self._lock = threading.Lock()
        self._samples: dict[GpuKey, deque[GpuSample]] = {}

    def add(self, node: str, samples: Iterable[GpuSample]) -> int:
        """Keep ``samples`` of ``node``; returns how many were kept (samples of GPUs beyond
        ``max_gpus`` are refused)."""
        kept = 0
        with self._lock:
            for s in samples:
                key = (node, s.gpu)
                ring = self._samples.get(key)
                if ring is None:
                    if len(self._samples) >= self.max_gpus:
                        continue
                    ring = self._samples[key] = deque(maxlen=self.per_gpu)
                ring.append(s)
                kept += 1
        return kept

    def latest(self) -> dict[GpuKey, GpuSample]:
        """The most recent sample of every GPU heard from."""
        with self._lock:
            return {key: ring[-1] for key, ring in self._samples.items()}

    def window(self, seconds: float, now: float | None = None) -> dict[GpuKey, list[GpuSample]]:
        """Samples taken in the last ``seconds`` (by the samples' own timestamps, so agents'
        clocks should be NTP-synced), oldest first; GPUs with none are left out."""
        since = (self._clock() if now is None else now) - seconds
        with self._lock:
            recent = {
                key: [s for s in ring if s.time >= since] for key, ring in self._samples.items()
            }
        return {key: samples for key, samples in recent.items() if samples}
