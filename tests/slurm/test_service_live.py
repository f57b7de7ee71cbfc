"""The controller as systemd runs it, on a real slurmctld with the job-submit plugin: `blox-
slurm run` as a process, speaking sd_notify to a socket the test holds as systemd would
(READY=1 after its checks, STATUS per round, WATCHDOG=1 while rounds finish, STOPPING=1 on
SIGTERM), publishing the users' queue file; and `doctor --config` checking that deployment
while it runs, then naming what is wrong in broken ones."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _wait import wait_for
from typer.testing import CliRunner

from blox_slurm.cli import app
from blox_slurm.demo.world import ManagedWorld

pytestmark = pytest.mark.slurm
runner = CliRunner()


@pytest.fixture(scope="module")
def world() -> Iterator[ManagedWorld]:
    with ManagedWorld(shape="gpu:2x1") as w:  # plugin installed, heartbeat fresh
        yield w


def write_config(world: ManagedWorld, tmp: Path, **extra: str) -> Path:
    settings = {"partitions": '["blox"]', "round_seconds": "1",
                "store": f'"{tmp / "state.db"}"', "heartbeat": f'"{world.heartbeat}"',
                "queue_file": f'"{tmp / "queue.json"}"', "slurm_conf": f'"{world.emu.conf}"',
                "lease_seconds": str(world.max_age), "composition": '"fifo"', **extra}
    path = tmp / "controller.toml"
    path.write_text("[controller]\n" + "".join(f"{k} = {v}\n" for k, v in settings.items()))
    return path


def doctor(config: Path) -> dict[str, dict]:
    r = runner.invoke(app, ["doctor", "--config", str(config), "--json"])
    return {c["name"]: c for c in json.loads(r.output)["checks"]}


class Systemd:
    """The notify socket, and every message the service sent to it, in order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.setblocking(False)
        self.messages: list[list[str]] = []

    def drain(self) -> None:
        while True:
            try:
                self.messages.append(self.sock.recv(4096).decode().splitlines())
            except BlockingIOError:
                return

    def saw(self, line: str) -> bool:
        self.drain()
        return any(line in m for m in self.messages)


def test_the_daemon_speaks_to_systemd_and_doctor_checks_it_while_it_runs(
        world: ManagedWorld, tmp_path: Path) -> None:
    config = write_config(world, tmp_path)
    systemd = Systemd(tmp_path / "notify")
    env = {"NOTIFY_SOCKET": str(systemd.path), "WATCHDOG_USEC": "3000000",
           "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    proc = subprocess.Popen([sys.executable, "-m", "blox_slurm", "run", "-c", str(config)],  # noqa: S603
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: systemd.saw("READY=1"), 60, "READY=1")
        wait_for(lambda: any(ln.startswith("STATUS=round 3:") for m in systemd.messages
                             for ln in m) or systemd.drain(), 60, "three rounds' STATUS")
        wait_for(lambda: systemd.saw("WATCHDOG=1"), 30, "a watchdog ping (every 1 s)")
        checks = doctor(config)
        failed = {name: c["detail"] for name, c in checks.items()
                  if not c["ok"] and name != "nvml"}
        assert failed == {}, failed
        assert {"config", "plugin", "partitions", "plugin_conf", "heartbeat",
                "store"} <= set(checks)
        queue = json.loads((tmp_path / "queue.json").read_text())
        assert queue["composition"] == "fifo" and queue["round"] >= 3
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert systemd.saw("STOPPING=1")
    first = systemd.messages[0]
    assert first[0] == "READY=1" and first[1].startswith("STATUS=started; ")
    assert "composition fifo; partitions blox" in first[1]


def test_a_config_error_exits_2_before_ready(world: ManagedWorld, tmp_path: Path) -> None:
    """What RestartPreventExitStatus=2 relies on: a bad config is exit 2, and systemd never
    hears READY=1 from it."""
    config = write_config(world, tmp_path, round_seconds="-1")
    systemd = Systemd(tmp_path / "notify")
    p = subprocess.run([sys.executable, "-m", "blox_slurm", "run", "-c", str(config)],  # noqa: S603
                       env={"NOTIFY_SOCKET": str(systemd.path)}, capture_output=True,
                       text=True, timeout=120, check=False)
    assert p.returncode == 2 and "round_seconds" in p.stderr
    assert not systemd.saw("READY=1")


@pytest.mark.parametrize("extra, check, says", [
    ({"lease_seconds": "30"}, "plugin_conf", "lease_seconds 30 < the plugin's max_age"),
    ({"partitions": '["plain"]'}, "plugin_conf", "holds jobs in blox"),
    ({"heartbeat": '"/tmp/elsewhere/hb"'}, "plugin_conf", "reads the heartbeat"),
    ({"round_seconds": "60"}, "plugin_conf", "more than half of max_age"),
    ({}, "store", "has `blox-slurm run` started?"),
])
def test_doctor_names_what_to_fix_in_a_broken_deployment(
        world: ManagedWorld, tmp_path: Path, extra: dict[str, str], check: str,
        says: str) -> None:
    checks = doctor(write_config(world, tmp_path, **extra))
    assert not checks[check]["ok"] and says in checks[check]["detail"], checks[check]
    assert checks["plugin"]["ok"], checks["plugin"]


def test_doctor_reports_an_unusable_config_as_a_check(tmp_path: Path) -> None:
    bad = tmp_path / "controller.toml"
    bad.write_text("[controller]\nround_seconds = 'soon'\n")
    r = runner.invoke(app, ["doctor", "--config", str(bad), "--json"])
    assert r.exit_code == 1
    checks = {c["name"]: c for c in json.loads(r.output)["checks"]}
    assert not checks["config"]["ok"] and "round_seconds" in checks["config"]["detail"]
