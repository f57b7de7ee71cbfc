"""The receiver over real HTTP on 127.0.0.1: auth, limits, validation, buffering, /metrics."""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator

import _prometheus as prometheus
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blox_slurm.core.model import GpuSample
from blox_slurm.telemetry.buffer import TelemetryBuffer
from blox_slurm.telemetry.prometheus import Metrics
from blox_slurm.telemetry.receiver import TelemetryReceiver
from blox_slurm.telemetry.schema import TelemetryBatch

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def receiver() -> Iterator[TelemetryReceiver]:
    with TelemetryReceiver(TOKEN, port=0, max_body=64 * 1024, request_timeout=2.0) as r:
        yield r


def request(
    r: TelemetryReceiver,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(r.host, r.port, timeout=5)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def batch(node: str = "gpu1", n: int = 2, t: float = 100.0) -> bytes:
    samples = [GpuSample(i, t, 50.0 + i, 100.0, 200.0, (7,)) for i in range(n)]
    return TelemetryBatch.of(node, samples).model_dump_json().encode()


def assert_alive(r: TelemetryReceiver) -> None:
    assert request(r, "GET", "/healthz") == (200, b"ok\n")


def test_valid_post_is_buffered(receiver: TelemetryReceiver) -> None:
    status, body = request(receiver, "POST", "/telemetry", batch("nodeA", 3), AUTH)
    assert (status, json.loads(body)) == (200, {"accepted": 3})
    latest = receiver.buffer.latest()
    assert latest[("nodeA", 2)] == GpuSample(2, 100.0, 52.0, 100.0, 200.0, (7,))
    window = receiver.buffer.window(10, now=105.0)
    assert sorted(k for k in window if k[0] == "nodeA") == [
        ("nodeA", 0),
        ("nodeA", 1),
        ("nodeA", 2),
    ]
    assert receiver.buffer.window(1, now=105.0) == {}


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": TOKEN},  # no scheme
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": "Bearer \u00e9\u00e9"},  # non-ASCII must not raise in compare_digest
    ],
)
def test_missing_or_wrong_token_is_401(
    receiver: TelemetryReceiver, headers: dict[str, str]
) -> None:
    before = receiver.buffer.latest()
    status, body = request(receiver, "POST", "/telemetry", batch("intruder"), headers)
    assert status == 401 and b"token" in body
    assert receiver.buffer.latest() == before
    assert_alive(receiver)


def test_oversized_body_is_413(receiver: TelemetryReceiver) -> None:
    big = b"x" * (receiver.max_body + 1)
    assert request(receiver, "POST", "/telemetry", big, AUTH)[0] == 413
    # A lying Content-Length is refused from the header alone, before any body is read.
    conn = http.client.HTTPConnection(receiver.host, receiver.port, timeout=5)
    conn.putrequest("POST", "/telemetry")
    conn.putheader("Authorization", AUTH["Authorization"])
    conn.putheader("Content-Length", str(10**12))
    conn.endheaders(b"{}")
    assert conn.getresponse().status == 413
    conn.close()
    assert_alive(receiver)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"not json", b"body: Invalid JSON"),
        (b"\xff\xfe", b"Invalid JSON"),
        (b"[]", b"body"),
        (b'{"node": "n", "samples": [], "extra": 1}', b"extra"),
        (b'{"node": "n; rm -rf /", "samples": []}', b"node"),
        (b'{"node": "n", "samples": [{"gpu": 0, "time": 1, "utilization": 101}]}', b"utilization"),
        (b'{"node": "n", "samples": [{"gpu": 0, "time": 1, "utilization": -1}]}', b"utilization"),
        (b'{"node": "n", "samples": [{"gpu": "0", "time": 1, "utilization": 5}]}', b"gpu"),
        (b'{"node": "n", "samples": [{"gpu": 0, "time": 1, "utilization": NaN}]}', b"utilization"),
        (b'{"node": "n", "samples": [{"gpu": 0, "time": 1}]}', b"utilization"),
    ],
)
def test_garbage_or_invalid_schema_is_400(
    receiver: TelemetryReceiver, body: bytes, needle: bytes
) -> None:
    status, reply = request(receiver, "POST", "/telemetry", body, AUTH)
    assert status == 400
    assert needle in reply and len(reply) < 300  # short, and no echo of the input
    assert_alive(receiver)


def test_too_many_samples_is_400(receiver: TelemetryReceiver) -> None:
    sample = {"gpu": 0, "time": 1, "utilization": 5}
    body = json.dumps({"node": "n", "samples": [sample] * 4097}).encode()
    r = TelemetryReceiver(TOKEN)  # default 1 MiB cap: the list bound, not the size, refuses it
    assert len(body) < r.max_body
    status, reply = r.handle_post(AUTH["Authorization"], body)
    assert status == 400 and "samples" in reply["error"]


def test_missing_content_length_and_unknown_paths(receiver: TelemetryReceiver) -> None:
    conn = http.client.HTTPConnection(receiver.host, receiver.port, timeout=5)
    conn.putrequest("POST", "/telemetry")
    conn.putheader("Authorization", AUTH["Authorization"])
    conn.endheaders()
    assert conn.getresponse().status == 411
    conn.close()
    assert request(receiver, "POST", "/other", batch(), AUTH)[0] == 404
    assert request(receiver, "GET", "/nothing")[0] == 404
    assert_alive(receiver)


def test_buffer_keeps_latest_n_per_gpu_and_bounds_gpus() -> None:
    buf = TelemetryBuffer(per_gpu=3, max_gpus=2)
    assert buf.add("a", [GpuSample(0, float(t), 1.0) for t in range(10)]) == 10
    assert [s.time for s in buf.window(100, now=10)[("a", 0)]] == [7.0, 8.0, 9.0]
    assert buf.add("a", [GpuSample(1, 1.0, 1.0), GpuSample(2, 1.0, 1.0)]) == 1  # third GPU refused
    assert sorted(buf.latest()) == [("a", 0), ("a", 1)]


def test_buffer_is_thread_safe() -> None:
    buf = TelemetryBuffer(per_gpu=50)

    def writer(node: str) -> None:
        for t in range(500):
            buf.add(node, [GpuSample(g, float(t), 1.0) for g in range(4)])

    threads = [threading.Thread(target=writer, args=(f"n{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        buf.window(1000, now=1000)  # reading while writing must not raise
    assert len(buf.latest()) == 32
    assert all(s.time == 499.0 for s in buf.latest().values())


def scrape(r: TelemetryReceiver, accept: str | None = None) -> tuple[str, str]:
    """GET /metrics: (content type, body)."""
    conn = http.client.HTTPConnection(r.host, r.port, timeout=5)
    try:
        conn.request("GET", "/metrics", headers={"Accept": accept} if accept else {})
        response = conn.getresponse()
        assert response.status == 200
        return response.getheader("Content-Type", ""), response.read().decode()
    finally:
        conn.close()


def test_metrics_endpoint_serves_every_family_with_help_and_type(
    receiver: TelemetryReceiver,
) -> None:
    before = prometheus.values(prometheus.parse(scrape(receiver)[1]))
    request(receiver, "POST", "/telemetry", batch("nodeM", 3), AUTH)
    request(receiver, "POST", "/telemetry", b"junk", AUTH)
    request(receiver, "POST", "/telemetry", batch("nodeM"), {"Authorization": "Bearer no"})
    content_type, text = scrape(receiver)
    assert content_type.startswith("text/plain; version=0.0.4")
    families = prometheus.parse(text)
    assert {n: f.type for n, f in families.items()} == {
        "blox_telemetry_posts_total": "counter",
        "blox_telemetry_samples_total": "counter",
        "blox_telemetry_last_post_timestamp_seconds": "gauge",
    }  # a receiver alone serves its own families only
    now = prometheus.values(families)

    def grew(key: prometheus.Key) -> float:
        return now[key] - before.get(key, 0.0)

    posts = "blox_telemetry_posts_total"
    assert grew((posts, (("result", "accepted"),))) == 1
    assert grew((posts, (("result", "invalid"),))) == 1
    assert grew((posts, (("result", "unauthorized"),))) == 1
    assert grew(("blox_telemetry_samples_total", ())) == 3
    stamp = now[("blox_telemetry_last_post_timestamp_seconds", (("node", "nodeM"),))]
    assert abs(stamp - time.time()) < 60


def test_every_post_result_is_counted_from_the_start() -> None:
    """A counter that appears only after its first event breaks rate() and alerts on it."""
    with TelemetryReceiver(TOKEN, port=0) as r:
        samples = prometheus.values(prometheus.parse(scrape(r)[1]))
    for result in ("accepted", "unauthorized", "too_large", "invalid"):
        assert samples[("blox_telemetry_posts_total", (("result", result),))] == 0


def test_metrics_endpoint_speaks_openmetrics_when_asked(receiver: TelemetryReceiver) -> None:
    content_type, text = scrape(receiver, "application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert text.endswith("# EOF\n") and "# TYPE blox_telemetry_posts counter" in text


def test_receivers_do_not_share_counts() -> None:
    """Each instance has its own registry (not prometheus_client's global one): two in one
    process neither collide on a name nor count each other's posts."""
    with TelemetryReceiver(TOKEN, port=0) as a, TelemetryReceiver(TOKEN, port=0) as b:
        request(a, "POST", "/telemetry", batch("nodeA"), AUTH)
        key = ("blox_telemetry_posts_total", (("result", "accepted"),))
        assert prometheus.values(prometheus.parse(scrape(a)[1]))[key] == 1
        assert prometheus.values(prometheus.parse(scrape(b)[1]))[key] == 0


def test_a_shared_metrics_object_declares_the_receiver_families_once() -> None:
    shared = Metrics()
    first, second = TelemetryReceiver(TOKEN, metrics=shared), TelemetryReceiver(TOKEN,
                                                                                metrics=shared)
    first.handle_post(AUTH["Authorization"], batch("n1"))
    second.handle_post(AUTH["Authorization"], batch("n2"))
    value = shared.registry.get_sample_value
    assert value("blox_telemetry_posts_total", {"result": "accepted"}) == 2


def test_empty_token_is_refused() -> None:
    with pytest.raises(ValueError, match="token"):
        TelemetryReceiver("  ")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=20,
)
sample_like = st.fixed_dictionaries(
    {"gpu": json_values | st.integers(-5, 2000), "time": json_values, "utilization": json_values},
    optional={"job_ids": json_values, "errors": json_values, "memory_used_mb": json_values},
)
bodies = (
    json_values.map(lambda v: json.dumps(v).encode())
    | st.fixed_dictionaries(
        {"node": json_values | st.text(max_size=30), "samples": st.lists(sample_like, max_size=4)}
    ).map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=200)
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=bodies)
def test_random_bodies_never_crash_the_receiver(receiver: TelemetryReceiver, body: bytes) -> None:
    status, reply = request(receiver, "POST", "/telemetry", body, AUTH)
    assert status in (200, 400), (status, reply)
    assert "error" in json.loads(reply) or status == 200


def test_server_still_up_after_everything(receiver: TelemetryReceiver) -> None:
    assert_alive(receiver)
    status, _ = request(receiver, "POST", "/telemetry", batch("final"), AUTH)
    assert status == 200 and ("final", 0) in receiver.buffer.latest()
