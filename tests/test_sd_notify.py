"""systemd's notify protocol as the controller speaks it (blox_slurm.systemd): real
datagrams on a real Unix socket, as systemd receives them, and the watchdog's rule (ping only
while rounds finish) on a clock the test moves."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from blox_slurm.systemd import Notifier, Watchdog


@pytest.fixture
def systemd(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    """The socket systemd would listen on (``NOTIFY_SOCKET``)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / "notify")
    sock.bind(path)
    sock.settimeout(5)
    yield sock, path
    sock.close()


def received(sock: socket.socket) -> list[str]:
    return sock.recv(4096).decode().splitlines()


def test_ready_status_and_stopping_reach_systemd(systemd: tuple[socket.socket, str]) -> None:
    sock, path = systemd
    n = Notifier({"NOTIFY_SOCKET": path})
    assert n.ready("started; cli\nbackend")
    assert received(sock) == ["READY=1", "STATUS=started; cli backend"]  # one line per field
    assert n.status("round 3") and received(sock) == ["STATUS=round 3"]
    assert n.stopping() and received(sock) == ["STOPPING=1"]


def test_an_abstract_socket_name_is_understood() -> None:
    name = f"blox-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5)
        assert Notifier({"NOTIFY_SOCKET": "@" + name}).status("x")
        assert received(sock) == ["STATUS=x"]


def test_outside_systemd_nothing_is_sent_and_nothing_fails(tmp_path: Path) -> None:
    assert not Notifier({}).ready("x")
    gone = Notifier({"NOTIFY_SOCKET": str(tmp_path / "nobody-listens")})
    assert gone.enabled and not gone.status("x")  # logged, never raised


@pytest.mark.parametrize("env, interval", [
    ({"WATCHDOG_USEC": "60000000"}, 60.0),
    ({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": str(os.getpid())}, 60.0),
    ({"WATCHDOG_USEC": "60000000", "WATCHDOG_PID": "1"}, None),  # another process's
    ({"WATCHDOG_USEC": "0"}, None),
    ({"WATCHDOG_USEC": "soon"}, None),
    ({}, None),
])
def test_the_watchdog_interval_is_ours_only_when_systemd_says_so(
        env: dict[str, str], interval: float | None) -> None:
    assert Notifier(env).watchdog_interval == interval


def test_the_watchdog_is_fed_only_while_rounds_finish() -> None:
    now = [0.0]
    dog = Watchdog(Notifier({}), allowance=630.0, clock=lambda: now[0])
    now[0] = 10_000.0
    assert dog.alive()  # a standby runs no rounds and is alive however long it waits
    dog.activate()
    now[0] += 630.0
    assert dog.alive()
    now[0] += 1.0
    assert not dog.alive()  # a round hung: let systemd restart the controller
    dog.progress()
    assert dog.alive()


def test_the_feeding_thread_pings_at_a_third_of_the_interval_and_stops(
        systemd: tuple[socket.socket, str]) -> None:
    sock, path = systemd
    dog = Watchdog(Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "30000"}), allowance=1e9)
    stop = threading.Event()
    thread = dog.start(stop)
    assert thread is not None
    assert received(sock) == ["WATCHDOG=1"] and received(sock) == ["WATCHDOG=1"]
    stop.set()
    thread.join(5)
    assert not thread.is_alive()


def test_no_feeding_thread_without_a_watchdog() -> None:
    assert Watchdog(Notifier({"NOTIFY_SOCKET": "/x"}), allowance=1.0).start(
        threading.Event()) is None


def test_the_agent_says_ready_and_reports_each_tick(
        systemd: tuple[socket.socket, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from blox_slurm.telemetry.agent import AgentStats
    from blox_slurm.telemetry.cli import _supervise

    sock, path = systemd
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    tick = _supervise(threading.Event(), "node7", "http://ctl:9300", 10.0)
    assert received(sock) == ["READY=1", "STATUS=sampling node7 every 10 s for http://ctl:9300"]
    tick(AgentStats(sampled=8, sent=6, dropped=2))
    assert received(sock) == ["STATUS=8 samples, 6 sent, 2 dropped"]
