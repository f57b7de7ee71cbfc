"""slurmctld faults against a real emulated cluster with the job-submit plugin (issue 5, item 3).

* slurmctld killed for several rounds of a running controller, then restarted on its saved
  state: the outage rounds end with an error in ``rounds.error``, the loop keeps going, no
  heartbeat is written (so the plugin fails open), and afterwards the workload finishes;
* a slow slurmctld (``SIGSTOP``) and a client timeout far below any answer time: rounds fail
  with a timeout error after the runner's retries with exponential backoff, nothing escapes
  ``Controller.run``;
* a verb failing for one job of a batch (the job cancelled between observe and apply, a job id
  Slurm does not know): the applier isolates it, applies the rest, records the failure, and the
  next round is clean.

The cluster uses ``MessageTimeout=3`` (a slurm.conf line): Slurm's own client keeps retrying a
dead controller for about MessageTimeout seconds per command, which bounds the outage rounds.
Every injected fault is counted and printed (``-s``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _wait import wait_for

from blox_slurm.core.composition import build
from blox_slurm.emulator.cluster import Emulator, check_packages
from blox_slurm.emulator.errors import MissingPackage
from blox_slurm.emulator.spec import EmulatorSpec, parse_gpus
from blox_slurm.slurm.cli_backend import CliBackend
from blox_slurm.slurm.controller import Controller, RoundReport
from blox_slurm.slurm.controller_config import ControllerConfig
from blox_slurm.slurm.job_submit import read_heartbeat, write_config, write_heartbeat
from blox_slurm.slurm.runner import RetryPolicy, Runner
from blox_slurm.slurm.store import Store

pytestmark = [pytest.mark.reliability, pytest.mark.slurm]

ROOT = Path(__file__).resolve().parents[2]
FAULTS: dict[str, int] = {}


def fault(kind: str, n: int = 1) -> None:
    FAULTS[kind] = FAULTS.get(kind, 0) + n


class World:
    def __init__(self, emu: Emulator, base: Path, heartbeat: Path) -> None:
        self.emu = emu
        self.base = base
        self.heartbeat = heartbeat
        self.client = emu.client()

    def ctld(self) -> Any:
        return next(d for d in self.emu.daemons if d.name == "slurmctld")

    def submit(self, *opts: str, cmd: str = "sleep 300", partition: str = "blox",
               user: str | None = None) -> int:
        return self.client.submit([f"--partition={partition}", "--chdir=/tmp",
                                   "--output=/dev/null", *opts, "--wrap", cmd], as_user=user)

    def live(self) -> dict[int, Any]:
        return {j.job_id: j for j in self.client.list_jobs()}

    def cancel(self, ids: list[int]) -> None:
        live = [i for i in ids if i in self.live()]
        if live:
            self.client.cancel(live)
        wait_for(lambda: not any(i in self.live() for i in ids), 30, "test jobs to leave")


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    try:
        check_packages()
    except MissingPackage as e:
        pytest.fail(f"the Slurm tests need Slurm's Debian packages: {e}", pytrace=False)
    base = Path(tempfile.mkdtemp(prefix="blox-faults-"))
    os.chmod(base, 0o755)
    heartbeat = base / "heartbeat"
    write_heartbeat(heartbeat)
    emu = Emulator(EmulatorSpec(run_dir=base / "emu", groups=parse_gpus("gpu:2x2"),
                                job_submit_lua=ROOT / "slurm_conf" / "job_submit.lua",
                                extra_conf=("MessageTimeout=3",)))
    emu.conf.parent.mkdir(parents=True)
    write_config(emu.conf.parent, ["blox"], heartbeat, 90)  # before up: read at plugin load
    emu.up()
    try:
        yield World(emu, base, heartbeat)
    finally:
        with contextlib.suppress(Exception):
            for d in emu.daemons:
                if d.ours():
                    os.kill(d.pid, signal.SIGCONT)  # never leave a stopped daemon behind
        emu.down()
        shutil.rmtree(base, ignore_errors=True)
        print(f"\n[reliability] slurmctld faults injected: {sum(FAULTS.values())} "
              f"({', '.join(f'{k}={v}' for k, v in sorted(FAULTS.items()))})")


def recording_runner(world: World, timeout: float, attempts: int,
                     sleeps: list[float]) -> Runner:
    return Runner(str(world.emu.conf), timeout=timeout,
                  retry=RetryPolicy(attempts=attempts, base_delay=0.05, factor=2.0),
                  sleep=lambda s: (sleeps.append(s), time.sleep(s)))


def make_controller(world: World, name: str, client: Any = None,
                    round_seconds: float = 0.5) -> Controller:
    cfg = ControllerConfig(partitions=["blox"], round_seconds=round_seconds,
                           store=str(world.base / f"{name}.db"),
                           heartbeat=str(world.heartbeat), grace_seconds=1.0,
                           slurm_conf=str(world.emu.conf))
    comp = build({"name": "fifo", "scheduling": "fifo", "placement": "first_fit"})
    return Controller(cfg, comp, client or world.client, Store(cfg.store))


class Daemon:
    """``Controller.run`` in a thread; anything escaping it is kept and fails the test."""

    def __init__(self, ctl: Controller) -> None:
        self.ctl = ctl
        self.stop = threading.Event()
        self.reports: list[RoundReport] = []
        self.escaped: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.ctl.run(self.stop, None, self.reports.append)
        except BaseException as exc:  # noqa: BLE001 - exactly what must never happen
            self.escaped.append(exc)

    def __enter__(self) -> Daemon:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), "Controller.run did not stop"


def rounds(db: str) -> list[dict[str, Any]]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute("SELECT * FROM rounds ORDER BY id")]
    finally:
        con.close()


def actions(db: str) -> list[dict[str, Any]]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute("SELECT * FROM actions ORDER BY rowid")]
    finally:
        con.close()


# --------------------------------------------------------------------------- (a) outage


def test_slurmctld_outage_rounds_fail_daemon_survives_and_workload_finishes(
        world: World) -> None:
    sleeps: list[float] = []
    runner = recording_runner(world, 10.0, 2, sleeps)
    ctl = make_controller(world, "outage", CliBackend(runner=runner))
    jobs = [world.submit("--gres=gpu:1", cmd="sleep 3", user="nobody") for _ in range(6)]
    assert all(world.live()[j].held for j in jobs)  # the plugin held them for the policy
    killed = False
    try:
        with Daemon(ctl) as d:
            wait_for(lambda: any(r.decisions and r.decisions.start for r in d.reports), 20,
                     "a round that starts jobs")
            ctld = world.ctld()
            pending = {j for j, job in world.live().items() if j in jobs and job.pending}
            # SIGTERM, the pid the emulator recorded. (SIGKILL within seconds of sbatch loses
            # those jobs in Slurm itself: slurmctld defers its state save.)
            os.kill(ctld.pid, signal.SIGTERM)
            killed = True
            fault("slurmctld stopped")
            wait_for(lambda: not ctld.ours(), 10, "slurmctld to die")
            # Let the round that may have been in flight end, then take the heartbeat.
            n0 = len(d.reports)
            wait_for(lambda: len(d.reports) > n0, 20, "the round in flight to end")
            beat = read_heartbeat(world.heartbeat)
            mtime = world.heartbeat.stat().st_mtime_ns
            n1 = len(d.reports)
            wait_for(lambda: sum(1 for r in d.reports[n1:] if r.error) >= 3, 40,
                     "three rounds failing during the outage")
            outage = d.reports[n1:]
            fault("rounds during outage", len(outage))
            assert all(r.error for r in outage), [r.error for r in outage]
            assert all(r.error.startswith("observe:") for r in outage)
            assert all(r.slurm_calls == 2 for r in outage)  # squeue retried once, then given up
            assert sleeps and set(sleeps) == {0.05}  # the backoff between the two attempts
            # no heartbeat during the outage: the plugin fails open
            assert read_heartbeat(world.heartbeat) == beat
            assert world.heartbeat.stat().st_mtime_ns == mtime
            assert d.thread.is_alive() and not d.escaped
            world.emu.restart_controller()  # same StateSaveLocation: the queue survives
            killed = False
            # Nothing lost: a job pending at the kill cannot have run meanwhile, so the
            # restarted slurmctld must still have it queued.
            assert pending <= set(world.live()), (pending, sorted(world.live()))
            n2 = len(d.reports)
            wait_for(lambda: any(not r.error for r in d.reports[n2:]), 30,
                     "a clean round after the restart")
            assert (read_heartbeat(world.heartbeat) or 0) > (beat or 0) or \
                world.heartbeat.stat().st_mtime_ns > mtime  # the controller took over again
            wait_for(lambda: not any(j in world.live() for j in jobs), 90,
                     "the workload to finish after the restart")
            assert d.thread.is_alive() and not d.escaped
    finally:
        if killed:
            world.emu.restart_controller()
        world.cancel(jobs)
    ctl.round()  # observe the last jobs leaving
    rows = {r["job_id"]: r for r in ctl.store.jobs(active_only=False)}
    assert set(jobs) <= set(rows)
    assert all(rows[j]["state"] == "done" for j in jobs), {j: rows[j]["state"] for j in jobs}
    starts = {r["job_id"] for r in ctl.store.db.query(
        "SELECT DISTINCT job_id FROM decisions WHERE kind = 'start'")}
    assert set(jobs) <= starts  # every job was started by the policy, none by Slurm alone
    errs = [r["error"] for r in rounds(ctl.cfg.store) if r["error"]]
    assert len(errs) >= 3 and all("observe:" in e for e in errs)
    print(f"\n[reliability] outage: {len(errs)} rounds failed with e.g. {errs[0][:120]!r}; "
          f"{len(jobs)} jobs finished, lost 0")


# --------------------------------------------------------------------------- (b) slow


def test_client_timeout_fails_rounds_cleanly_with_backoff(world: World) -> None:
    """A timeout below any answer time: every read times out on every attempt."""
    sleeps: list[float] = []
    runner = recording_runner(world, 0.001, 3, sleeps)
    ctl = make_controller(world, "tiny-timeout", CliBackend(runner=runner), round_seconds=0.05)
    stop = threading.Event()
    reports: list[RoundReport] = []
    n = ctl.run(stop, max_rounds=4, on_round=reports.append)  # in this thread: nothing escapes
    fault("client timeouts (0.001 s)", runner.calls)
    assert n == 4 and len(reports) == 4
    assert all("timed out after 0.001 s" in r.error for r in reports), [r.error for r in reports]
    assert all(r.slurm_calls == 3 for r in reports)  # the first read tried 3 times, no other
    assert runner.calls == 12
    assert sleeps == [0.05, 0.1] * 4  # exponential backoff between attempts, per round
    assert all(r["error"] and "timed out" in r["error"] for r in rounds(ctl.cfg.store))


def test_stopped_slurmctld_times_out_then_the_controller_recovers(world: World) -> None:
    """SIGSTOP slurmctld for a few seconds: reads time out (after retries with backoff), the
    daemon keeps running; after SIGCONT rounds are clean again and jobs get scheduled."""
    sleeps: list[float] = []
    runner = recording_runner(world, 0.5, 3, sleeps)
    ctl = make_controller(world, "sigstop", CliBackend(runner=runner), round_seconds=0.3)
    job = world.submit("--gres=gpu:1", cmd="sleep 1")
    pid = world.ctld().pid
    stopped = False
    try:
        with Daemon(ctl) as d:
            wait_for(lambda: any(not r.error for r in d.reports), 20, "a first clean round")
            os.kill(pid, signal.SIGSTOP)
            stopped = True
            fault("slurmctld SIGSTOP")
            n0 = len(d.reports)
            wait_for(lambda: sum(1 for r in d.reports[n0:] if "timed out" in r.error) >= 2, 30,
                     "two rounds timing out")
            os.kill(pid, signal.SIGCONT)
            stopped = False
            slow = [r for r in d.reports[n0:] if r.error]
            fault("rounds timed out (SIGSTOP)", len(slow))
            assert all("timed out after 0.5 s" in r.error for r in slow), [r.error for r in slow]
            assert all(r.slurm_calls == 3 for r in slow if "timed out" in r.error)
            assert [0.05, 0.1] in [sleeps[i:i + 2] for i in range(len(sleeps) - 1)]
            assert d.thread.is_alive() and not d.escaped
            n1 = len(d.reports)
            wait_for(lambda: any(not r.error for r in d.reports[n1:]), 30,
                     "a clean round after SIGCONT")
            wait_for(lambda: job not in world.live(), 30, "the job to run and finish")
        assert not d.escaped
    finally:
        if stopped:
            os.kill(pid, signal.SIGCONT)
        world.cancel([job])


# --------------------------------------------------------------------------- (c) one bad job


class CancelAfterObserve(CliBackend):
    """Cancels ``victim`` right after the round's reads: the job the plan names is gone by the
    time the applier acts (the race a real cluster has with users' ``scancel``)."""

    def __init__(self, conf: str, victim: int | None = None) -> None:
        super().__init__(conf, timeout=10.0)
        self.victim = victim

    def list_jobs(self, *args: Any, **kwargs: Any) -> list[Any]:
        jobs = super().list_jobs(*args, **kwargs)  # the round's last read
        if self.victim is not None:
            victim, self.victim = self.victim, None
            self.cancel([victim])
            fault("job cancelled between observe and apply")
        return jobs


def test_a_job_vanishing_mid_round_is_isolated_and_the_next_round_is_clean(
        world: World) -> None:
    # All 4 GPUs busy with an unmanaged job: the policy can start nothing, so it wants every
    # released managed job held -- one `scontrol hold a,b,c,d,e` batch.
    blocker = world.submit("-N2", "--gres=gpu:2", partition="plain")
    wait_for(lambda: world.live()[blocker].state == "RUNNING", 20, "the blocker to run")
    jobs = sorted(world.submit("--gres=gpu:1") for _ in range(5))
    world.client.release(jobs)  # root (an operator) may release: now they all need a hold
    victim = jobs[2]
    client = CancelAfterObserve(str(world.emu.conf), victim)
    ctl = make_controller(world, "isolate", client)
    try:
        report = ctl.round()
        assert not report.error and report.plan is not None
        assert report.plan.hold == tuple(jobs)
        assert report.failures == 1
        acts = actions(ctl.cfg.store)
        failed = [a for a in acts if not a["ok"]]
        assert [(a["verb"], a["ids"]) for a in failed] == [("hold", f"[{victim}]")]
        assert failed[0]["error"]  # Slurm's reason is recorded
        held_ok = sorted(j for a in acts if a["ok"] and a["verb"] == "hold"
                         for j in json.loads(a["ids"]))
        assert held_ok == [j for j in jobs if j != victim]
        live = world.live()
        assert victim not in live or live[victim].state not in ("PENDING", "RUNNING")
        assert all(live[j].held for j in jobs if j != victim)  # the rest was applied
        # The next round is clean: nothing to change, just the reads.
        again = ctl.round()
        assert not again.error and again.failures == 0 and again.plan is not None
        assert again.plan.empty and again.slurm_calls == world.client.dialect().steady_reads

        # A job id Slurm never had, in a batch of real ones: Slurm names it, the rest go on.
        world.client.release(jobs[:2])
        from blox_slurm.slurm.apply import Applier, Plan
        records: list[tuple[str, list[int], bool, str]] = []
        applier = Applier(world.client, lambda v, ids, ok, e: records.append(
            (v, list(ids), ok, e)))
        applier.apply(Plan(hold=(jobs[0], 999_999, jobs[1])))
        fault("unknown job id in a batch")
        assert applier.failures == 1
        assert [r[1] for r in records if not r[2]] == [[999_999]]
        assert sorted(j for r in records if r[2] for j in r[1]) == jobs[:2]
        assert all(world.live()[j].held for j in jobs[:2])
    finally:
        world.cancel([blocker, *jobs])
