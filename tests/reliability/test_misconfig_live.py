"""A controller that cannot do its job says so at once, in one line, and never heartbeats
(red team items 3 and 15), on the real emulator with the plugin installed.

Item 3: a controller whose partitions (or heartbeat file) differ from the plugin's would run
"happily" and keep the heartbeat fresh while every job the plugin holds waits for ever. Now
``run`` refuses to start (exit 2), and a mismatch that appears while it runs fails each round
before the heartbeat, so the plugin fails open.

Item 15: a store that cannot be opened, a telemetry port in use, a slurm.conf that is not
there: one line naming what to fix, exit 2 (not a traceback, not minutes of retries); a store
deleted under a running controller stops it (exit 1) instead of going unnoticed.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _wait import wait_for
from conftest import write_controller_toml

from blox_slurm.demo.world import ManagedWorld
from blox_slurm.slurm.controller import Controller
from blox_slurm.slurm.controller_config import load_config
from blox_slurm.slurm.job_submit import read_heartbeat, write_config, write_heartbeat
from blox_slurm.slurm.store import Store

pytestmark = [pytest.mark.reliability, pytest.mark.slurm]


def run(config: Path, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``blox-slurm run`` as an admin starts it (bounded only so a hang fails, not blocks)."""
    return subprocess.run([sys.executable, "-m", "blox_slurm", "run", "--config", str(config),
                           "--rounds", "1", *extra], capture_output=True, text=True,
                          timeout=timeout)


def one_line_error(out: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == code and len(lines) == 1, (out.returncode, out.stderr)
    assert all(w in lines[0] for w in words), (words, lines[0])


@pytest.fixture
def config(clean_queue: ManagedWorld, tmp_path: Path) -> Path:
    return write_controller_toml(tmp_path / "controller.toml", clean_queue,
                                 tmp_path / "state.db", "fifo", 0.5)


def rewrite(config: Path, old: str, new: str) -> Path:
    text = config.read_text()
    assert old in text, old
    config.write_text(text.replace(old, new))
    return config


def test_item3_partitions_unlike_the_plugins_refuse_to_start(clean_queue: ManagedWorld,
                                                             config: Path) -> None:
    world = clean_queue
    write_heartbeat(world.heartbeat, time.time() - 3600)
    out = run(rewrite(config, 'partitions = ["blox"]', 'partitions = ["plain"]'))
    one_line_error(out, 2, "holds jobs in blox", "partitions is plain")
    assert read_heartbeat(world.heartbeat) == pytest.approx(time.time() - 3600, abs=5)


def test_item3_heartbeat_unlike_the_plugins_refuses_to_start(config: Path,
                                                             tmp_path: Path) -> None:
    text = config.read_text()
    out = run(rewrite(config, text.split("heartbeat = ")[1].split("\n")[0],
                      f'"{tmp_path / "elsewhere"}"'))
    one_line_error(out, 2, "reads the heartbeat", str(tmp_path / "elsewhere"))
    assert not (tmp_path / "elsewhere").exists()


def test_item3_a_partition_slurm_does_not_have_refuses_to_start(clean_queue: ManagedWorld,
                                                                config: Path,
                                                                tmp_path: Path) -> None:
    plugin = write_config(tmp_path, ["nosuch"], clean_queue.heartbeat, 60)
    rewrite(config, 'partitions = ["blox"]', 'partitions = ["nosuch"]')
    config.write_text(config.read_text() + f'plugin_config = "{plugin}"\n')
    one_line_error(run(config), 2, "partition nosuch has no nodes", "blox")


def test_item3_a_mismatch_while_running_fails_rounds_before_the_heartbeat(
        clean_queue: ManagedWorld, config: Path, tmp_path: Path) -> None:
    world = clean_queue
    plugin = write_config(tmp_path, ["blox"], world.heartbeat, 60)
    config.write_text(config.read_text() + f'plugin_config = "{plugin}"\n')
    cfg, comp = load_config(config)
    ctl = Controller(cfg, comp, world.client(), Store(cfg.store))
    assert ctl.round().error == ""
    write_config(tmp_path, ["blox", "plain"], world.heartbeat, 60)  # an admin widens it
    stale = time.time() - 3600
    write_heartbeat(world.heartbeat, stale)
    report = ctl.round()
    assert report.error.startswith("config: the job-submit plugin") and "blox,plain" in \
        report.error
    assert read_heartbeat(world.heartbeat) == pytest.approx(stale, abs=1)


def test_item15_a_store_that_cannot_be_opened_is_one_line(config: Path) -> None:
    out = run(rewrite(config, str(config.parent / "state.db"), "/proc/blox/state.db"))
    one_line_error(out, 2, "cannot open the store /proc/blox/state.db", "writable")


def test_item15_a_telemetry_port_in_use_is_one_line(config: Path) -> None:
    token = config.parent / "token"
    token.write_text("secret\n")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config.write_text(config.read_text() + f'telemetry_listen = "127.0.0.1:{port}"\n'
                          f'telemetry_token_file = "{token}"\n')
        one_line_error(run(config), 2, f"telemetry_listen 127.0.0.1:{port}", "free port")


def test_item15_a_missing_slurm_conf_is_one_line_not_minutes_of_retries(config: Path) -> None:
    text = config.read_text()
    conf = text.split("slurm_conf = ")[1].split("\n")[0]
    out = run(rewrite(config, conf, '"/nonexistent/slurm.conf"'))
    one_line_error(out, 2, "/nonexistent/slurm.conf is not a readable file")


def test_item15_a_store_deleted_under_the_controller_stops_it(clean_queue: ManagedWorld,
                                                             config: Path) -> None:
    store = config.parent / "state.db"
    proc = subprocess.Popen([sys.executable, "-m", "blox_slurm", "run", "--config",
                             str(config)], stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: proc.poll() is not None or (
            read_heartbeat(clean_queue.heartbeat) is not None and store.exists()), 60,
            "the controller's first round")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        for f in config.parent.glob("state.db*"):
            f.unlink()
        assert proc.wait(60) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
    lines = (proc.stderr.read() if proc.stderr else "").strip().splitlines()
    assert lines and "deleted or replaced" in lines[-1], lines
    assert read_heartbeat(clean_queue.heartbeat) is None  # failed open on the way out
