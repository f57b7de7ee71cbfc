"""Crash safety: ``kill -9`` the controller at random points of its rounds, many times, while
fake training jobs run; restart it each time. Nothing may be lost, repeated or left held.

The controller is the real daemon (``python -m blox_slurm run --config ...``) against the
emulator with the job-submit plugin. Lives are killed five ways in turn:

* ``delay``: ``kill -9`` after a random delay (seeded RNG, printed), landing in start-up,
  before the first observe, between rounds, or anywhere in a round;
* at a crashpoint (:mod:`blox_slurm.slurm.crashpoints`), where the controller kills itself:
  ``observed`` (observed, not decided), ``decided`` (decided and recorded, nothing applied),
  ``acted`` (a Slurm verb done, not recorded), ``pinned`` (a job pinned, not released). So
  kills land inside rounds by construction, not by a timer racing a 30 ms round.

Afterwards: every job's progress history tiles ``[0, iterations)`` (finished exactly once, no
iteration lost or repeated), no managed job is held at the end, no job the controller decided
to start stayed held longer than the lease while that controller lived, the store reconciles
(one more round in-process raises nothing and plans nothing), and no action was recorded twice
for the same job in the same round.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import LEASE, write_controller_toml

from blox_slurm.demo.world import USERS, FakeJob, ManagedWorld
from blox_slurm.slurm.controller import Controller
from blox_slurm.slurm.controller_config import load_config
from blox_slurm.slurm.crashpoints import POINTS
from blox_slurm.slurm.store import Store

pytestmark = [pytest.mark.reliability, pytest.mark.slurm]

N_JOBS = 12
MIN_KILLS, MAX_KILLS = 15, 22
# Each life is killed one of these ways, in turn: so at least MIN_KILLS // 5 lives die at each
# crashpoint the workload passes (every round passes "observed" and "decided").
MODES = ("delay", *POINTS)
CRASHPOINT_WAIT = 15.0  # seconds for a life to reach its point (bounds a failure only)
ROUND_SECONDS = 0.7
ITERS_PER_SEC = 10.0
COMPOSITION = {  # Tiresias with a tiny threshold: preemptions (requeuehold) within seconds
    "scheduling": {"policy": "tiresias", "thresholds": [10.0], "promote_knob": 0},
    "placement": {"policy": "consolidated"},
}


@dataclass
class Life:
    """One controller process: when it started and when it was killed (or stopped)."""

    proc: subprocess.Popen[bytes]
    started: float
    ended: float = float("inf")
    mode: str = ""


@dataclass
class Sampler:
    """squeue every ~0.2 s from the test's side: (time, {job: (pending, held)})."""

    world: ManagedWorld
    samples: list[tuple[float, dict[int, tuple[bool, bool]]]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    errors: int = 0

    def run(self) -> None:
        client = self.world.client()
        while not self.stop.is_set():
            try:
                jobs = client.list_jobs(["blox"])
                self.samples.append((time.time(), {j.job_id: (j.pending, j.pending and j.held)
                                                   for j in jobs}))
            except Exception:
                self.errors += 1
            self.stop.wait(0.2)


def _query(db: Path, sql: str, args: tuple = ()) -> list[tuple]:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return con.execute(sql, args).fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return []  # not created yet, or busy: the killer just tries again


def _wait(probe, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return True
        time.sleep(0.005)
    return False


def test_controller_survives_random_kill_9(clean_queue: ManagedWorld, tmp_path: Path) -> None:
    world = clean_queue
    seed = int(os.environ.get("BLOX_CRASH_SEED", time.time_ns() % 1_000_000))
    print(f"\ncrash test seed {seed} (rerun with BLOX_CRASH_SEED={seed})")
    rng = random.Random(seed)
    store_path = world.base / f"crash-{seed}.db"
    config = write_controller_toml(tmp_path / "controller.toml", world, store_path,
                                   COMPOSITION, ROUND_SECONDS)
    log = open(tmp_path / "controller.log", "wb")  # noqa: SIM115 - closed in finally
    workload = [FakeJob(USERS[i % 3], rng.choice((1, 2, 4)), rng.randrange(20, 61),
                        round(rng.uniform(0, 20), 2)) for i in range(N_JOBS)]
    workload.sort(key=lambda j: j.arrival)
    client = world.client()
    lives: list[Life] = []
    jobs: dict[int, FakeJob] = {}
    sampler = Sampler(world)
    sampler_thread = threading.Thread(target=sampler.run, daemon=True)

    def start(mode: str) -> Life:
        env = {**os.environ, "BLOX_CRASHPOINT": mode if mode in POINTS else ""}
        proc = subprocess.Popen([sys.executable, "-m", "blox_slurm", "run", "--config",
                                 str(config)], stdout=log, stderr=log, start_new_session=True,
                                env=env)
        life = Life(proc, time.time(), mode=mode)
        lives.append(life)
        return life

    def stop_all() -> None:
        for life in lives:
            if life.proc.poll() is None:
                os.killpg(life.proc.pid, signal.SIGKILL)
                life.proc.wait(10)

    def submit_due(t0: float) -> None:
        while len(jobs) < len(workload) and time.time() - t0 >= workload[len(jobs)].arrival:
            job = workload[len(jobs)]
            jobs[world.submit_fake(job, ITERS_PER_SEC)] = job

    def remaining() -> set[int]:
        return set(jobs) & {j.job_id for j in client.list_jobs(["blox"])}

    t0 = time.time()
    deadline = time.monotonic() + 150
    sampler_thread.start()
    try:
        # ------------------------------------------------------------ the kill loop
        while len(lives) < MAX_KILLS and time.monotonic() < deadline:
            submit_due(t0)
            if len(jobs) == len(workload) and not remaining():
                break
            life = start(MODES[len(lives) % len(MODES)])
            if life.mode == "delay":  # start-up, before observe, between or inside rounds
                time.sleep(rng.uniform(0.1, 2.0))
                os.kill(life.proc.pid, signal.SIGKILL)
            else:  # it kills itself at its crashpoint; a point never passed: killed here
                try:
                    life.proc.wait(CRASHPOINT_WAIT)
                except subprocess.TimeoutExpired:
                    os.kill(life.proc.pid, signal.SIGKILL)
                    life.mode += " (not reached)"
            life.proc.wait(10)
            life.ended = time.time()
            submit_due(t0)
        kills = len(lives)
        submit_due(t0)
        # ------------------------------------------------------------ let it finish
        while len(jobs) < len(workload):
            time.sleep(0.2)
            submit_due(t0)
        final = start("final")
        finish_deadline = time.monotonic() + 120
        # a finished round of its own first (SIGTERM before its handler is set would kill it)
        assert _wait(lambda: _query(store_path, "SELECT 1 FROM rounds WHERE started >= ? AND "
                                    "finished IS NOT NULL", (final.started,)), 30), "no round"
        while remaining():
            assert time.monotonic() < finish_deadline, ("jobs never left the queue", seed,
                                                        sorted(remaining()))
            assert final.proc.poll() is None, f"the controller exited: {final.proc.returncode}"
            time.sleep(0.5)
        final.proc.send_signal(signal.SIGTERM)
        assert final.proc.wait(30) == 0
        final.ended = time.time()
    finally:
        sampler.stop.set()
        sampler_thread.join(10)
        stop_all()
        log.close()

    controller_log = (tmp_path / "controller.log").read_text(errors="replace")
    assert "Traceback" not in controller_log, controller_log[-4000:]

    # ---------------------------------------------------------------- nothing lost or repeated
    lost = []
    for job_id, job in jobs.items():
        progress = world.progress(job_id, job.user)
        history = (progress or {}).get("history") or []
        pairs = zip(history, history[1:], strict=False)
        tiles = bool(history) and history[0][0] == 0 and history[-1][1] == job.iterations \
            and all(a[1] == b[0] and a[0] <= a[1] for a, b in pairs)
        if not (progress and progress["iteration"] == job.iterations and tiles):
            lost.append((job_id, job, progress))
    assert lost == [], f"seed {seed}: jobs lost, short or repeated: {lost}"
    assert not any(held for _, s in sampler.samples[-3:] for _, held in s.values())

    # ---------------------------------------------------------------- the store reconciles
    cfg, comp = load_config(config)
    store = Store(store_path)
    report = Controller(cfg, comp, client, store).round()
    assert report.error == "", report.error
    assert report.plan is not None and report.plan.empty, report.plan
    rows = {r["job_id"]: r for r in store.jobs(active_only=False)}
    assert {j: rows[j]["state"] for j in jobs} == {j: "done" for j in jobs}
    assert all(rows[j]["first_start"] is not None for j in jobs)

    # ---------------------------------------------------------------- no action applied twice
    per_round: Counter[tuple[int, str, int]] = Counter()
    failed_actions = 0
    for r in store.db.query("SELECT round_id, verb, ids, ok FROM actions"):
        failed_actions += not r["ok"]
        for j in json.loads(r["ids"]):
            per_round[(r["round_id"], r["verb"], j)] += 1
    twice = {k: n for k, n in per_round.items() if n > 1}
    assert twice == {}, f"seed {seed}: actions recorded twice in one round: {twice}"

    # ---------------------------------------------------------------- nothing stuck held
    starts = list(store.db.query(
        "SELECT d.job_id, r.started FROM decisions d JOIN rounds r ON r.id = d.round_id "
        "WHERE d.kind = 'start' AND r.dry_run = 0"))
    stuck = set()
    for s in starts:
        life = next((x for x in lives if x.started <= s["started"] < x.ended), None)
        limit = s["started"] + LEASE + 1.0  # the lease, plus a round and squeue's lag
        if life is None or life.ended <= limit:
            continue  # killed before the lease ran out: the next controller takes over
        pts = [(t, held.get(s["job_id"], (False, False))[1])
               for t, held in sampler.samples if s["started"] <= t < life.ended]
        first_after = next((i for i, (t, _) in enumerate(pts) if t >= limit), None)
        if first_after is not None and all(h for _, h in pts[:first_after + 1]):
            stuck.add(s["job_id"])
    assert stuck == set(), f"seed {seed}: started by the policy but held > lease: {stuck}"

    # ---------------------------------------------------------------- where the kills landed
    landed: Counter[str] = Counter()
    for life in lives[:kills]:
        begun = _query(store_path, "SELECT id, finished FROM rounds WHERE started >= ? AND "
                       "started < ? ORDER BY id DESC LIMIT 1", (life.started, life.ended))
        if not begun:
            where = "before first observe"
        elif begun[0][1] is not None:
            where = "between rounds"
        elif verbs := _query(store_path, "SELECT verb FROM actions WHERE round_id = ? "
                             "ORDER BY rowid", (begun[0][0],)):
            # a pin recorded last: killed in or right after the release, before its record
            where = "mid-apply, after pin" if verbs[-1][0].startswith("pin") else "mid-apply"
        else:
            where = "mid-round, before apply"
        landed[where] += 1
        print(f"  kill {life.mode:9} after {life.ended - life.started:5.2f} s: {where}")
    preempted = sum(len((world.progress(j, job.user) or {}).get("history", [])) > 1
                    for j, job in jobs.items())
    rounds = store.db.execute("SELECT COUNT(*) FROM rounds").fetchone()[0]
    secs = sorted(r[0] for r in store.db.execute("SELECT seconds FROM rounds WHERE seconds "
                                                 "IS NOT NULL"))
    print(f"  round seconds: median {secs[len(secs) // 2]:.3f}, max {secs[-1]:.3f}")
    print(f"crash: seed {seed}, kills {kills} ({dict(landed)}), jobs {len(jobs)}, "
          f"resumed after preemption {preempted}, rounds {rounds}, "
          f"failed actions {failed_actions}, lost={len(lost)}, stuck={len(stuck)}")
    assert kills >= MIN_KILLS, f"only {kills} kills before the workload finished"
    mid = landed["mid-apply"] + landed["mid-apply, after pin"] + landed["mid-round, before apply"]
    assert mid >= 3, f"too few kills landed inside a round: {landed}"
