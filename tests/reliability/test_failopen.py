"""Fail-open: with the controller down longer than the lease, Slurm schedules alone; when the
controller comes back it takes over without double actions.

On a 4x4 emulator with the plugin (lease = ``max_age`` = :data:`conftest.LEASE` seconds) and a
FIFO controller (in-process rounds, so that each round's plan can be inspected; the watchdog is
the real ``blox-slurm handback --if-stale`` CLI):

1. controller up: A1-A3 (4 GPUs, long) and B (4 GPUs, short) are started by the controller;
   H (2 GPUs) arrives with no room and the policy leaves it held; ``handback --if-stale`` with
   a fresh heartbeat does nothing;
2. controller dies; once the heartbeat is older than the lease, B has finished and H is *still*
   held on a free node (what the watchdog is for); a new job F1 is not held
   (``blox:managed,failopen``) and Slurm starts it alone; ``handback --if-stale`` releases H,
   which Slurm then runs alone; F2 arrives (fail-open) and waits, released, for room;
3. controller back: running jobs (fail-open F1, handed-back H, A1-A3) are not
   touched; F2, which the policy does not want yet, is held once; a second round with nothing
   changed applies nothing; then everything finishes exactly once.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from _store import store_rows
from _wait import wait_for
from conftest import LEASE, write_controller_toml

from blox_slurm.demo.world import FakeJob, ManagedWorld
from blox_slurm.slurm.client import SlurmJob
from blox_slurm.slurm.controller import Controller, RoundReport
from blox_slurm.slurm.controller_config import load_config
from blox_slurm.slurm.job_submit import heartbeat_age
from blox_slurm.slurm.store import Store

pytestmark = [pytest.mark.reliability, pytest.mark.slurm]

IPS = 10.0


def test_failopen_then_takeover(clean_queue: ManagedWorld, tmp_path: Path) -> None:
    world = clean_queue
    client = world.client()
    store_path = world.base / "failopen.db"
    config = write_controller_toml(tmp_path / "controller.toml", world, store_path, "fifo", 0.5)
    cfg, comp = load_config(config)
    ctl = Controller(cfg, comp, client, Store(store_path))
    reports: list[RoundReport] = []

    def round_() -> RoundReport:
        r = ctl.round()
        assert r.error == "", r.error
        reports.append(r)
        return r

    def jobs() -> dict[int, SlurmJob]:
        return {j.job_id: j for j in client.list_jobs(["blox"])}

    def watchdog() -> dict:
        out = subprocess.run([sys.executable, "-m", "blox_slurm", "handback", "--if-stale",
                              "--config", str(config), "--json"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    fake: dict[int, FakeJob] = {}

    def submit(name: str, gpus: int, iters: int, user: str) -> int:
        job_id = world.submit_fake(FakeJob(user, gpus, iters, 0.0), IPS)
        fake[job_id] = FakeJob(user, gpus, iters, 0.0)
        names[job_id] = name
        return job_id

    names: dict[int, str] = {}

    # ------------------------------------------------------------------ 1. controller up
    round_()  # fresh heartbeat: the plugin holds new jobs for the policy
    a = [submit(f"A{i}", 4, 300, u) for i, u in enumerate(("daemon", "bin", "nobody"), 1)]
    b = submit("B", 4, 40, "bin")
    assert all(jobs()[j].held and jobs()[j].admin_comment == "blox:managed" for j in [*a, b])
    wait_for(lambda: all(jobs()[j].state == "RUNNING" for j in [*a, b]), 30,
           "the controller to start A1-A3 and B", step=round_, every=0.5)
    h = submit("H", 2, 150, "nobody")  # 15 s: still running when the controller is back
    r = round_()
    assert jobs()[h].held and r.plan is not None and r.plan.empty  # no room: stays held
    assert watchdog()["released"] == []  # heartbeat fresh: the watchdog does nothing
    assert jobs()[h].held

    # ------------------------------------------------------------------ 2. controller down
    died = time.time()
    # the plugin compares whole seconds (os.time()): stale for it once age >= LEASE + 1
    wait_for(lambda: (heartbeat_age(world.heartbeat, time.time()) or 0) > LEASE + 1.2,
           LEASE + 6, "the heartbeat to go stale")
    wait_for(lambda: b not in jobs(), 20, "B to finish")
    assert jobs()[h].held  # a free node, and H is still held: nobody releases it but us
    age = heartbeat_age(world.heartbeat, time.time())
    f1 = submit("F1", 1, 200, "daemon")
    j = jobs()[f1]
    assert not j.held and j.admin_comment == "blox:managed,failopen", (
        j.admin_comment, j.reason, j.priority, age, world.heartbeat.read_text())
    wait_for(lambda: jobs()[f1].state == "RUNNING", 20, "Slurm to start F1 alone")
    released = watchdog()["released"]
    assert released == [h]  # only what we hold: the running and fail-open jobs are not ours
    assert not jobs()[h].held
    wait_for(lambda: jobs().get(h) is None or jobs()[h].state == "RUNNING", 30,
           "Slurm to run the released H alone")
    f2 = submit("F2", 4, 30, "bin")
    j = jobs()[f2]
    assert not j.held and j.admin_comment == "blox:managed,failopen" and j.pending, j
    actions_before = ctl.store.db.execute("SELECT COUNT(*) FROM actions").fetchone()[0]
    assert time.time() - died > LEASE

    # ------------------------------------------------------------------ 3. controller back
    running = {i for i, x in jobs().items() if x.state == "RUNNING"}
    assert set(a) | {h, f1} <= running, (names, jobs())  # F1 fail-open, H released by us
    r = round_()
    assert r.plan is not None
    assert r.plan.preempt == () and not r.plan.release and not r.plan.repin, r.plan
    assert r.plan.hold == (f2,), r.plan  # released by fail-open, not wanted yet: held once
    assert jobs()[f2].held
    again = round_()  # nothing changed: nothing to do
    assert again.plan is not None and again.plan.empty, again.plan
    assert again.slurm_calls == client.dialect().steady_reads, again  # the reads only
    wait_for(lambda: not (set(fake) & set(jobs())), 90, "every job to finish",
           step=round_, every=0.5)
    round_()

    # ------------------------------------------------------------------ no double actions
    per_job: Counter[tuple[str, str]] = Counter()
    pins: list[str] = []
    for row in ctl.store.db.query("SELECT verb, ids, ok FROM actions WHERE rowid > ?",
                                  [actions_before]):
        assert row["ok"], row
        for i in json.loads(row["ids"]):
            per_job[(names.get(i, str(i)), row["verb"].split()[0])] += 1
            pins += [row["verb"]] if row["verb"].startswith("pin ") else []
    # F2 is held once and released once. Released to a node still completing its last job,
    # it may wait a round (26.05 shows ReqNodeNotAvail for seconds) and be re-pinned where
    # the next round puts it: a move, never the same pin twice.
    pinned = per_job.pop(("F2", "pin"), 0)
    assert per_job == {("F2", "hold"): 1, ("F2", "release"): 1}, per_job
    assert pinned >= 1 and all(a != b for a, b in zip(pins, pins[1:], strict=False)), pins
    for job_id, job in fake.items():  # every job finished exactly once, nothing repeated
        progress = world.progress(job_id, job.user)
        assert progress is not None and progress["iteration"] == job.iterations, names[job_id]
        assert progress["history"] == [[0, job.iterations]], (names[job_id], progress)
    rows = {x["job_id"]: x for x in ctl.store.jobs(active_only=False)}
    assert all(rows[j]["state"] == "done" and rows[j]["preemptions"] == 0 for j in fake), {
        names[j]: (rows[j]["state"], rows[j]["preemptions"]) for j in fake}
    print(f"\nfail-open: {len(fake)} jobs, watchdog released {released}, takeover actions "
          f"{dict(per_job)}, lost=0, stuck=0")


def test_item14_a_clean_stop_fails_open_at_once(clean_queue: ManagedWorld,
                                                tmp_path: Path) -> None:
    """Red team item 14: after SIGTERM the heartbeat stayed fresh, so new jobs were held and
    the watchdog refused for up to a lease. Now the stop removes it: a job submitted right
    after is left to Slurm, and ``handback --if-stale`` acts although the lease (an hour
    here, so the test cannot pass by waiting) has not run out."""
    world = clean_queue
    store_path = world.base / "cleanstop.db"
    config = write_controller_toml(tmp_path / "controller.toml", world, store_path, "fifo",
                                   0.5, lease_seconds=3600.0)
    proc = subprocess.Popen([sys.executable, "-m", "blox_slurm", "run", "--config",
                             str(config)], stderr=subprocess.PIPE)
    try:
        wait_for(lambda: _round_finished(store_path), 30, "the controller's first round")
        assert heartbeat_age(world.heartbeat, time.time()) is not None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not world.heartbeat.exists()
    after = world.submit_sleep(1)[0]
    job = {j.job_id: j for j in world.client().list_jobs(["blox"])}[after]
    assert job.admin_comment.startswith("blox:managed,failopen") and not job.held
    out = subprocess.run([sys.executable, "-m", "blox_slurm", "handback", "--if-stale",
                          "--config", str(config), "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "heartbeat_age" not in json.loads(out.stdout)  # not "controller alive"


def _round_finished(store: Path) -> bool:
    return bool(store_rows(store, "SELECT 1 FROM rounds WHERE finished IS NOT NULL "
                                  "AND error = ''"))
