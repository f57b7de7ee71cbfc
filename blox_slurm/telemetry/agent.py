"""``blox-slurm agent``: sample this node's GPUs every N seconds and ship them to the controller.

The agent must never be the reason a GPU node misbehaves, so it never crashes on the network
or on a backend hiccup: a failed POST is retried with exponential backoff, and while the
controller is unreachable samples wait in a bounded buffer that drops the *oldest* first
(fresh telemetry is what policies act on). A batch the controller rejects as invalid (4xx) is
dropped rather than retried forever; a rejected token (401) keeps the samples, since fixing
the token file on either side is the likely next step.
"""

from __future__ import annotations

import enum
import http.client
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pydantic import ValidationError

from ..core.model import GpuSample
from .base import GpuTelemetry
from .schema import MAX_BODY_BYTES, MAX_SAMPLES_PER_BATCH, SampleIn, TelemetryBatch

log = logging.getLogger(__name__)


@dataclass
class AgentStats:
    """Counters of one agent run (what the tests and the agent's exit log report)."""

    sampled: int = 0  # samples taken
    sent: int = 0  # samples the controller accepted
    dropped: int = 0  # samples lost: buffer overflow, invalid, or rejected by the controller
    failed_posts: int = 0  # POST attempts that did not get a 2xx
    sample_errors: int = 0  # backend.sample() calls that raised


class SampleQueue:
    """Validated samples waiting to be sent, oldest first; drops the oldest when full."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"buffer capacity must be >= 1, got {capacity}")
        self._items: deque[SampleIn] = deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self._items)

    def extend(self, samples: Iterable[GpuSample]) -> int:
        """Queue ``samples``; returns how many samples were lost (invalid or pushed out)."""
        lost = 0
        for sample in samples:
            try:
                item = SampleIn.of(sample)
            except ValidationError as exc:
                log.warning("dropping invalid sample of GPU %s: %s", sample.gpu, exc)
                lost += 1
                continue
            if len(self._items) == self._items.maxlen:
                lost += 1
            self._items.append(item)
        return lost

    def head(self, n: int) -> list[SampleIn]:
        return [self._items[i] for i in range(min(n, len(self._items)))]

    def pop(self, n: int) -> None:
        for _ in range(min(n, len(self._items))):
            self._items.popleft()


class Outcome(enum.Enum):
    SENT = "sent"
    REJECTED = "rejected"  # the controller refused this batch for good: drop it
    LATER = "later"  # unreachable, overloaded or token refused: keep it for the next tick


def encode(node: str, samples: list[SampleIn], limit: int = MAX_BODY_BYTES) -> tuple[bytes, int]:
    """The JSON body for the longest prefix of ``samples`` (halving) that fits in ``limit``
    bytes, and how many samples it holds."""
    n = min(len(samples), MAX_SAMPLES_PER_BATCH)
    while True:
        body = TelemetryBatch(node=node, samples=samples[:n]).model_dump_json().encode()
        if len(body) <= limit or n <= 1:
            return body, n
        n //= 2


class Shipper:
    """POSTs batches to ``<controller>/telemetry`` with a bearer token, retrying with backoff."""

    def __init__(
        self,
        controller: str,
        token: str,
        node: str,
        timeout: float = 5.0,
        retries: int = 3,
        backoff: float = 0.5,
        stop: threading.Event | None = None,
    ) -> None:
        scheme = urllib.parse.urlsplit(controller).scheme
        if scheme not in ("http", "https"):
            raise ValueError(f"controller URL must be http(s)://..., got {controller!r}")
        TelemetryBatch(node=node, samples=[])  # fail now, clearly, on an invalid node name
        self.url = controller.rstrip("/") + "/telemetry"
        self.node = node
        self._headers = {
            "Authorization": f"Bearer {token.strip()}",
            "Content-Type": "application/json",
        }
        self.timeout, self.retries, self.backoff = timeout, retries, backoff
        self._stop = stop or threading.Event()

    def _post_once(self, body: bytes) -> int:
        """The HTTP status, or 0 when no response came (refused, reset, timed out)."""
        request = urllib.request.Request(self.url, data=body, headers=self._headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return exc.code
        except (OSError, http.client.HTTPException) as exc:
            log.debug("POST %s failed: %s", self.url, exc)
            return 0

    def post(self, body: bytes, stats: AgentStats) -> Outcome:
        for attempt in range(self.retries + 1):
            status = self._post_once(body)
            if 200 <= status < 300:
                return Outcome.SENT
            stats.failed_posts += 1
            if status == 401:
                log.error("controller %s refused the telemetry token", self.url)
                return Outcome.LATER
            if 400 <= status < 500 and status not in (408, 429):
                log.error("controller %s rejected a batch (HTTP %d): dropped", self.url, status)
                return Outcome.REJECTED
            if attempt < self.retries and self._stop.wait(self.backoff * 2**attempt):
                break  # stopping: do not sit out the backoff
        log.warning("controller %s unreachable; keeping samples buffered", self.url)
        return Outcome.LATER

    def flush(self, queue: SampleQueue, stats: AgentStats) -> None:
        """Send everything queued, batch by batch, until the queue is empty or a POST fails."""
        while len(queue):
            body, n = encode(self.node, queue.head(MAX_SAMPLES_PER_BATCH))
            outcome = self.post(body, stats)
            if outcome is Outcome.LATER:
                return
            queue.pop(n)
            if outcome is Outcome.SENT:
                stats.sent += n
            else:
                stats.dropped += n


def run_agent(
    backend: GpuTelemetry,
    url: str,
    token: str,
    node: str,
    interval: float,
    stop_event: threading.Event,
    iterations: int | None = None,
    buffer_size: int = 10_000,
    timeout: float = 5.0,
    retries: int = 3,
    backoff: float = 0.5,
    on_tick: Callable[[AgentStats], None] | None = None,
) -> AgentStats:
    """Sample, queue and ship every ``interval`` seconds until ``stop_event`` is set (or
    ``iterations`` ticks have run, for tests); ``on_tick`` after each (the CLI feeds
    systemd's watchdog there). Returns what happened."""
    shipper = Shipper(url, token, node, timeout, retries, backoff, stop_event)
    queue = SampleQueue(buffer_size)
    stats = AgentStats()
    ticks = 0
    while not stop_event.is_set():
        started = time.monotonic()
        try:
            samples = backend.sample()
        except Exception:  # noqa: BLE001 -- a backend hiccup must not kill the agent
            log.exception("sampling GPUs failed")
            stats.sample_errors += 1
            samples = []
        stats.sampled += len(samples)
        stats.dropped += queue.extend(samples)
        shipper.flush(queue, stats)
        ticks += 1
        if on_tick is not None:
            on_tick(stats)
        if iterations is not None and ticks >= iterations:
            break
        stop_event.wait(max(0.0, interval - (time.monotonic() - started)))
    return stats
