"""Two controllers for one cluster: one acts, the other stands by and takes over when the
first dies (red team item 12: both used to act, every verb was issued twice and they re-pinned
the same jobs to different nodes). Real ``blox-slurm run`` processes on the emulator.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _store import store_rows
from _wait import wait_for
from conftest import write_controller_toml

from blox_slurm.demo.world import FakeJob, ManagedWorld

pytestmark = [pytest.mark.reliability, pytest.mark.slurm]


def count(store: Path, sql: str) -> int:
    rows = store_rows(store, sql)
    return int(rows[0][0]) if rows else 0


def test_item12_one_controller_acts_the_other_stands_by_then_takes_over(
        clean_queue: ManagedWorld, tmp_path: Path) -> None:
    world = clean_queue
    stores = [tmp_path / "a.db", tmp_path / "b.db"]
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for name, store, log in zip("ab", stores, logs, strict=True):
            config = write_controller_toml(tmp_path / f"{name}.toml", world, store, "fifo", 0.5)
            with open(log, "wb") as err:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "blox_slurm", "run", "--config", str(config)],
                    stderr=err, start_new_session=True))
            if name == "a":  # a is up and active before b starts
                wait_for(lambda: count(stores[0], "SELECT COUNT(*) FROM rounds") > 0, 60,
                      "the first controller's first round")
        wait_for(lambda: "standing by" in logs[1].read_text(), 60, "the second one to stand by")
        first = world.submit_fake(FakeJob("daemon", 1, 600, 0.0), iters_per_sec=10)

        def running(*ids: int) -> bool:
            return set(ids) <= {j.job_id for j in world.client().list_jobs() if j.active}

        def seen() -> str:  # on a timeout: what the active controller's rounds said
            errors = store_rows(stores[0], "SELECT error FROM rounds WHERE error != '' "
                                           "ORDER BY id DESC LIMIT 3")
            return (f"the active controller to start job {first}: jobs "
                    f"{[(j.job_id, j.state, j.reason) for j in world.client().list_jobs()]}, "
                    f"last round errors {errors}, log {logs[0].read_text()[-500:]!r}")
        wait_for(lambda: running(first), 60, seen)
        assert count(stores[0], "SELECT COUNT(*) FROM actions WHERE ok = 1") > 0
        assert count(stores[1], "SELECT COUNT(*) FROM rounds") == 0
        assert count(stores[1], "SELECT COUNT(*) FROM actions") == 0

        os.killpg(procs[0].pid, signal.SIGKILL)  # the active one dies without a word
        procs[0].wait(30)
        second = world.submit_fake(FakeJob("bin", 1, 600, 0.0), iters_per_sec=10)
        wait_for(lambda: running(first, second), 60,
              "the standby to take over and start the second job")
        assert count(stores[1], "SELECT COUNT(*) FROM rounds WHERE error = ''") > 0
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(30)
    log = logs[1].read_text()
    assert "another controller is active (pid" in log and "taking over" in log, log
