"""The agent against a real receiver: delivery, a controller that is down, rejections, limits."""

from __future__ import annotations

import itertools
import socket
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blox_slurm.cli import app
from blox_slurm.core.model import GpuSample
from blox_slurm.telemetry.agent import AgentStats, SampleQueue, Shipper, encode, run_agent
from blox_slurm.telemetry.emulated import EmulatedTelemetry
from blox_slurm.telemetry.receiver import TelemetryReceiver

TOKEN = "agent-token"


def backend(node: str = "gpu7", gpus: int = 2) -> EmulatedTelemetry:
    clock = itertools.count(1000.0)
    return EmulatedTelemetry(node, gpus, lambda: [(42, node, (0,))], clock=lambda: next(clock))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fast(**kw: object) -> dict[str, object]:
    return {"timeout": 1.0, "retries": 1, "backoff": 0.01, **kw}


def test_agent_posts_to_real_receiver() -> None:
    with TelemetryReceiver(TOKEN) as receiver:
        stats = run_agent(
            backend(), receiver.url, TOKEN, "gpu7", 0.01, threading.Event(), iterations=3, **fast()
        )
        assert stats == AgentStats(sampled=6, sent=6)
        window = receiver.buffer.window(10, now=1003.0)
    assert [s.time for s in window[("gpu7", 0)]] == [1000.0, 1001.0, 1002.0]
    assert window[("gpu7", 0)][0].job_ids == (42,) and window[("gpu7", 1)][0].job_ids == ()


def test_agent_survives_controller_down_and_delivers_backlog_later() -> None:
    port = free_port()
    stop = threading.Event()
    result: list[AgentStats] = []
    url = f"http://127.0.0.1:{port}"
    thread = threading.Thread(
        target=lambda: result.append(run_agent(backend(), url, TOKEN, "gpu7", 0.02, stop, **fast()))
    )
    thread.start()
    time.sleep(0.3)  # several ticks with nothing listening
    assert thread.is_alive()
    with TelemetryReceiver(TOKEN, port=port) as receiver:
        deadline = time.monotonic() + 5
        while ("gpu7", 0) not in receiver.buffer.latest() and time.monotonic() < deadline:
            time.sleep(0.02)
        stop.set()
        thread.join(5)
        times = [s.time for s in receiver.buffer.window(1e9, now=1e9)[("gpu7", 0)]]
    assert not thread.is_alive()
    stats = result[0]
    assert stats.failed_posts >= 2 and stats.sent > 0 and stats.dropped == 0
    assert times[0] == 1000.0  # the very first sample, taken while the controller was down


def test_stop_interrupts_backoff() -> None:
    stop = threading.Event()
    url = f"http://127.0.0.1:{free_port()}"
    shipper = Shipper(url, TOKEN, "n", timeout=1.0, retries=5, backoff=30.0, stop=stop)
    queue = SampleQueue(10)
    queue.extend([GpuSample(0, 1.0, 5.0)])
    threading.Timer(0.1, stop.set).start()
    flush = threading.Thread(target=shipper.flush, args=(queue, AgentStats()), daemon=True)
    flush.start()
    flush.join(60)  # a bound for the failure only: uninterrupted, the backoff is 5 x 30 s
    assert not flush.is_alive() and len(queue) == 1


def test_wrong_token_keeps_samples_and_rejection_drops_them() -> None:
    stats = AgentStats()
    queue = SampleQueue(10)
    queue.extend([GpuSample(0, 1.0, 5.0), GpuSample(1, 1.0, 5.0)])
    with TelemetryReceiver(TOKEN) as receiver:
        Shipper(receiver.url, "not-the-token", "n", **fast()).flush(queue, stats)  # type: ignore[arg-type]
        assert len(queue) == 2 and stats.failed_posts == 1 and stats.sent == 0
    with TelemetryReceiver(TOKEN, max_body=50) as tiny:
        Shipper(tiny.url, TOKEN, "n", **fast()).flush(queue, stats)  # type: ignore[arg-type]
        assert len(queue) == 0 and stats.dropped == 2  # 413: dropped, not retried forever
        assert tiny.buffer.latest() == {}


def test_queue_drops_oldest_and_invalid() -> None:
    queue = SampleQueue(3)
    lost = queue.extend([GpuSample(0, float(t), 1.0) for t in range(5)])
    assert lost == 2 and [s.time for s in queue.head(10)] == [2.0, 3.0, 4.0]
    assert queue.extend([GpuSample(0, 9.0, 150.0)]) == 1  # utilization over 100: refused
    assert [s.time for s in queue.head(10)] == [2.0, 3.0, 4.0]
    queue.pop(2)
    assert [s.time for s in queue.head(10)] == [4.0]
    with pytest.raises(ValueError):
        SampleQueue(0)


def test_encode_halves_to_fit_the_size_cap() -> None:
    queue = SampleQueue(100)
    queue.extend([GpuSample(0, float(t), 1.0, job_ids=tuple(range(60))) for t in range(100)])
    items = queue.head(100)
    body, n = encode("n", items, limit=10_000)
    assert len(body) <= 10_000 and 0 < n < 100
    assert encode("n", items)[1] == 100


def test_backend_failure_does_not_stop_agent() -> None:
    class Flaky:
        calls = 0

        def sample(self) -> list[GpuSample]:
            self.calls += 1
            if self.calls == 1:
                raise RuntimeError("boom")
            return [GpuSample(0, 1.0, 5.0)]

        def close(self) -> None:
            pass

    with TelemetryReceiver(TOKEN) as receiver:
        stats = run_agent(
            Flaky(), receiver.url, TOKEN, "n", 0.0, threading.Event(), iterations=2, **fast()
        )
    assert stats.sample_errors == 1 and stats.sent == 1


def test_bad_url_or_node_is_refused_up_front() -> None:
    with pytest.raises(ValueError, match="http"):
        Shipper("file:///etc/passwd", TOKEN, "n")
    with pytest.raises(ValueError):
        Shipper("http://x", TOKEN, "bad node;name")


def test_cli_agent_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    result = runner.invoke(
        app, ["agent", "--controller", "http://127.0.0.1:1", "--token-file", str(token)]
    )
    assert result.exit_code == 1
    assert "no NVIDIA driver on this node" in result.output
    empty = tmp_path / "empty"
    empty.write_text("\n")
    result = runner.invoke(app, ["agent", "--controller", "http://x", "--token-file", str(empty)])
    assert result.exit_code == 2 and "empty" in result.output
    result = runner.invoke(
        app,
        ["agent", "--controller", "http://x", "--token-file", str(token), "--backend", "emulated"],
    )
    assert result.exit_code == 2 and "--allocations" in result.output
