"""The controller's telemetry endpoint: agents POST samples, Prometheus scrapes metrics.

Routes:

* ``POST /telemetry`` with ``Authorization: Bearer <token>`` and a JSON
  :class:`~blox_slurm.telemetry.schema.TelemetryBatch` -> 200 ``{"accepted": n}``;
  401 missing/wrong token; 411 no ``Content-Length``; 413 body over the cap; 400 anything that
  is not a valid batch, with a short reason.
* ``GET /metrics`` the :class:`~blox_slurm.telemetry.prometheus.Metrics` registry, in the
  Prometheus text format or OpenMetrics as the scraper's ``Accept`` asks (unauthenticated, as
  scrapers expect: bind to loopback or firewall it).
* ``GET /healthz`` ``ok``.

Why the stdlib server: the load is one small POST per node every few seconds, and a
dependency-free endpoint keeps the controller installable anywhere Slurm runs. Every request
is handled inside a catch-all, so no input can take the controller's thread down.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import ValidationError

from .buffer import TelemetryBuffer
from .prometheus import Metrics
from .schema import MAX_BODY_BYTES, TelemetryBatch

log = logging.getLogger(__name__)

_LINGER_SECONDS = 1.0

Reply = tuple[int, dict[str, Any]]


def _reason(exc: ValidationError) -> str:
    """The first validation problem, without echoing the input back."""
    first = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(p) for p in first["loc"]) or "body"
    more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {first['msg']}"[:200] + more


class TelemetryReceiver:
    """The endpoint, its sample buffer and its metrics (the controller's, when it passes
    its own: one registry, one ``/metrics``).

    ``handle_post`` holds the request logic (authentication, validation, buffering) apart from
    HTTP, so it can be exercised directly; ``start()`` serves it on ``host:port`` in a daemon
    thread (``port=0`` picks a free port; see :attr:`url`).
    """

    def __init__(
        self,
        token: str,
        host: str = "127.0.0.1",
        port: int = 0,
        buffer: TelemetryBuffer | None = None,
        metrics: Metrics | None = None,
        max_body: int = MAX_BODY_BYTES,
        request_timeout: float = 10.0,
    ) -> None:
        if not token.strip():
            raise ValueError("the telemetry token must not be empty")
        self._expected = f"Bearer {token.strip()}".encode()
        self.host, self.port = host, port
        self.buffer = buffer if buffer is not None else TelemetryBuffer()
        self.metrics = metrics if metrics is not None else Metrics()
        self._counts = self.metrics.receiver
        self.max_body = max_body
        self.request_timeout = request_timeout
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def authorized(self, authorization: str | None) -> bool:
        supplied = (authorization or "").strip().encode("utf-8", "replace")
        return hmac.compare_digest(supplied, self._expected)

    def count(self, result: str) -> None:
        self._counts.posts.labels(result).inc()

    def precheck(self, authorization: str | None, length: int) -> Reply | None:
        """The refusal owed before reading a body of ``length`` bytes, if any: authentication
        first, so an unauthenticated client learns nothing else."""
        if not self.authorized(authorization):
            self.count("unauthorized")
            return 401, {"error": "missing or wrong bearer token"}
        if length > self.max_body:
            self.count("too_large")
            return 413, {"error": f"body over {self.max_body} bytes"}
        return None

    def handle_post(self, authorization: str | None, body: bytes) -> Reply:
        """Authenticate, validate and buffer one batch; the HTTP status and JSON reply."""
        refusal = self.precheck(authorization, len(body))
        if refusal is not None:
            return refusal
        try:
            batch = TelemetryBatch.model_validate_json(body)
        except ValidationError as exc:
            self.count("invalid")
            return 400, {"error": _reason(exc)}
        kept = self.buffer.add(batch.node, (s.to_sample() for s in batch.samples))
        self.count("accepted")
        self._counts.samples.inc(kept)
        self._counts.last_post.labels(batch.node).set_to_current_time()
        return 200, {"accepted": kept}

    def start(self) -> TelemetryReceiver:
        if self._server is not None:
            return self
        server = _Server((self.host, self.port), _Handler)
        server.receiver = self
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.1},  # how fast stop() returns
            name="telemetry-receiver",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> TelemetryReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: TelemetryReceiver


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "blox-slurm-telemetry"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        # Bounds how long a slow or stalled client can hold a thread.
        self.connection.settimeout(self.server.receiver.request_timeout)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _reply(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, payload: dict[str, Any], **headers: str) -> None:
        self._reply(status, json.dumps(payload).encode() + b"\n", "application/json", **headers)

    def _linger(self, declared: int) -> None:
        """Read and discard (a bounded part of) a body we refused before reading it.

        Closing a socket with unread input makes the kernel send RST, which can destroy the
        response before the client reads it; so drain up to twice the cap, for at most a
        second, after replying."""
        self.wfile.flush()
        self.connection.settimeout(_LINGER_SECONDS)
        left = min(declared, 2 * self.server.receiver.max_body)
        deadline = time.monotonic() + _LINGER_SECONDS
        try:
            while left > 0 and time.monotonic() < deadline:
                chunk = self.rfile.read1(min(left, 65536))
                if not chunk:
                    break
                left -= len(chunk)
        except OSError:
            pass

    def do_POST(self) -> None:  # noqa: N802 (the http.server naming)
        try:
            self._post()
        except Exception:  # noqa: BLE001 -- last line of defence: log, answer 500, stay up
            log.exception("telemetry receiver: POST failed")
            self._try_500()

    def _post(self) -> None:
        receiver = self.server.receiver
        if self.path.split("?", 1)[0] != "/telemetry":
            self._json(404, {"error": "not found"})
            return
        raw_length = self.headers.get("Content-Length")
        try:
            length = int(raw_length) if raw_length is not None else -1
        except ValueError:
            length = -2
        authorization = self.headers.get("Authorization")
        refusal = receiver.precheck(authorization, max(length, 0))
        if refusal is None and raw_length is None:
            refusal = 411, {"error": "Content-Length required"}
        elif refusal is None and length < 0:
            refusal = 400, {"error": "bad Content-Length"}
        if refusal is not None:
            status, payload = refusal
            extra = {"WWW_Authenticate": "Bearer"} if status == 401 else {}
            self._json(status, payload, **extra)
            self._linger(max(length, 0))
            return
        body = self.rfile.read(length)
        if len(body) < length:
            self._json(400, {"error": "body shorter than Content-Length"})
            return
        self._json(*receiver.handle_post(authorization, body))

    def do_GET(self) -> None:  # noqa: N802
        try:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                accept = self.headers.get("Accept", "")
                self._reply(200, *self.server.receiver.metrics.exposition(accept))
            elif path == "/healthz":
                self._reply(200, b"ok\n", "text/plain; charset=utf-8")
            else:
                self._json(404, {"error": "not found"})
        except Exception:  # noqa: BLE001
            log.exception("telemetry receiver: GET failed")
            self._try_500()

    def _try_500(self) -> None:
        try:
            self._json(500, {"error": "internal error"})
        except OSError:
            pass  # the client is gone
