"""Load (issue 5, item 6): the controller against a real slurmctld with 1,000 queued jobs and a
telemetry agent per node posting every second.

The shared 4 nodes x 4 GPUs world of this folder (job-submit plugin installed, heartbeat kept
fresh while we submit, so every job is held for the controller): 1,000 managed 1-GPU ``sleep``
jobs as plain ``sbatch`` calls (4 in parallel, time-bounded). Not a job array: Slurm shows the
pending tasks of an array as ONE ``squeue`` record with a task range, and the controller models
one record as one job, so an array would be 1 job to it, not 1,000.

The controller's telemetry endpoint is started exactly as ``blox-slurm run`` starts it
(``controller_cli._telemetry``) with a real token; one emulated agent per node posts at 1 Hz
what the controller last saw allocated (the agents cost slurmctld nothing, like real NVML
agents). The controller runs FIFO at ``round_seconds = 1`` for :data:`ROUNDS` rounds.

Asserted, every round: Slurm calls <= the reads (``Dialect.steady_reads``) + the reads of
the GPUs of the jobs seen beginning a run (one ``scontrol`` for them all, and one for any job
read on its own) + one pin per started job + 4 batched verbs; a round with nothing to apply
makes exactly the reads and those GPU reads, and there are no more GPU reads than runs
(round times are printed, not asserted); no action failed. Telemetry: the receiver accepted
>= 80 % of the posts the agents should have made and refused none; the store's telemetry
table stays within the retention window.
Run with ``-s`` to see the report line.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from blox_slurm.core.composition import build
from blox_slurm.core.model import ClusterSnapshot
from blox_slurm.demo.world import PARTITION, ManagedWorld
from blox_slurm.slurm.cli_backend import CliBackend
from blox_slurm.slurm.controller import Controller, RoundReport
from blox_slurm.slurm.controller_cli import _telemetry
from blox_slurm.slurm.controller_config import ControllerConfig
from blox_slurm.slurm.job_submit import write_heartbeat
from blox_slurm.slurm.queue_read import SHOW
from blox_slurm.slurm.runner import Runner
from blox_slurm.slurm.store import Store
from blox_slurm.telemetry.agent import AgentStats, run_agent
from blox_slurm.telemetry.emulated import EmulatedTelemetry

pytestmark = [pytest.mark.reliability, pytest.mark.slurm]

JOBS = 1000
ROUNDS = 15
ROUND_S = 1.0
ROUND_BUDGET_S = 30.0  # per round, only to bound a hung loop (round times are printed)
SUBMIT_BUDGET_S = 100.0
RETENTION_S = 5.0
BATCHED_VERBS = 4  # hold, release per node set, requeuehold, drain: batched, bounded
FIFO = {"name": "fifo", "scheduling": "fifo", "placement": "consolidated"}


class Recording(Controller):
    """The controller, keeping its latest snapshot for the emulated agents."""

    last: ClusterSnapshot | None = None

    def snapshot(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        snap = super().snapshot(*args, **kwargs)
        self.last = snap
        return snap


def fresh_heartbeat(path: Path, stop: threading.Event) -> None:
    while not stop.is_set():  # what a live controller does; the lease is a few seconds
        write_heartbeat(path)
        stop.wait(0.5)


def submit_all(world: ManagedWorld, n: int, budget: float) -> list[int]:
    deadline = time.monotonic() + budget

    def some(k: int) -> list[int]:
        ids = []
        for _ in range(k):
            if time.monotonic() > deadline:
                break
            ids += world.submit_sleep(1)
        return ids

    with ThreadPoolExecutor(4) as pool:
        return [j for part in pool.map(some, [n // 4 + (i < n % 4) for i in range(4)])
                for j in part]


def spread(xs: list[float], fmt: str) -> str:
    return "/".join(format(x, fmt) for x in (min(xs), statistics.median(xs), max(xs)))


def test_thousand_queued_jobs_and_an_agent_per_node(clean_queue: ManagedWorld) -> None:
    world = clean_queue
    made: list[tuple[str, ...]] = []  # every Slurm call, in order

    def recording(argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        made.append(tuple(argv))
        return subprocess.run(argv, **kw)  # noqa: S603 -- the runner's argv, no shell

    client = CliBackend(runner=Runner(str(world.emu.conf), execute=recording))
    reads = client.dialect().steady_reads
    token = world.base / "load-token"
    token.write_text("load-test-telemetry-token\n")
    os.chmod(token, 0o600)
    cfg = ControllerConfig(partitions=[PARTITION], round_seconds=ROUND_S,
                           store=str(world.base / "load.db"), heartbeat=str(world.heartbeat),
                           slurm_conf=str(world.emu.conf),
                           lease_seconds=4.0, telemetry_listen="127.0.0.1:0",
                           telemetry_token_file=str(token), telemetry_window=30.0,
                           telemetry_retention=RETENTION_S, grace_seconds=3.0)
    ctl = Recording(cfg, build(FIFO), client, Store(cfg.store))
    nodes = {n.name: n.gpus_total for n in client.list_nodes()}
    assert sum(nodes.values()) == 16, nodes

    stop_hb, stop_agents, stop_ctl = threading.Event(), threading.Event(), threading.Event()
    hb = threading.Thread(target=fresh_heartbeat, args=(world.heartbeat, stop_hb), daemon=True)
    receiver = None
    agents: list[threading.Thread] = []
    stats: dict[str, AgentStats] = {}
    reports: list[RoundReport] = []
    ends: list[int] = []  # len(made) at the end of each round

    def on_round(r: RoundReport) -> None:
        reports.append(r)
        ends.append(len(made))

    loop = threading.Thread(target=ctl.run, args=(stop_ctl, ROUNDS, on_round), daemon=True)
    ids: list[int] = []
    try:
        hb.start()
        t0 = time.monotonic()
        ids = submit_all(world, JOBS, SUBMIT_BUDGET_S)
        submit_s = time.monotonic() - t0
        assert len(ids) == JOBS, f"only {len(ids)} jobs submitted in {SUBMIT_BUDGET_S:g} s"
        queued = [j for j in client.list_jobs([PARTITION]) if j.job_id in set(ids)]
        assert len(queued) == JOBS and all(j.pending and j.held for j in queued), \
            "the plugin should hold every job while the heartbeat is fresh"

        receiver = _telemetry(cfg, ctl)
        assert receiver is not None and receiver.port > 0

        def agent(node: str) -> None:
            backend = EmulatedTelemetry(node, nodes[node], lambda: ctl.last or [])
            stats[node] = run_agent(backend, receiver.url, token.read_text(), node, 1.0,
                                    stop_agents)

        agents = [threading.Thread(target=agent, args=(n,), daemon=True) for n in nodes]
        a0 = time.monotonic()
        for t in agents:
            t.start()
        stop_hb.set()  # from here on the controller keeps the heartbeat fresh
        hb.join(5)
        loop.start()
        loop.join(ROUNDS * ROUND_BUDGET_S)
        assert not loop.is_alive(), "the controller did not finish its rounds"
        stop_agents.set()
        for t in agents:
            t.join(15)
        agent_s = time.monotonic() - a0
        assert not any(t.is_alive() for t in agents)

        # ---- Slurm cost per round
        assert len(reports) == ROUNDS
        begins = [ends[0] - reports[0].slurm_calls, *ends[:-1]]
        gpu_reads = [sum(1 for a in made[start:end] if a == SHOW or a[:2] == ("scontrol", "-d"))
                     for start, end in zip(begins, ends, strict=True)]
        for r, new_runs in zip(reports, gpu_reads, strict=True):
            assert not r.error, f"round {r.round_id}: {r.error}"
            assert r.plan is not None and r.decisions is not None
            assert r.failures == 0, f"round {r.round_id}: {r.failures} failed action(s)"
            starts = max(len(r.decisions.start),
                         len(r.plan.released) + sum(len(v) for v in r.plan.repin.values()))
            assert r.slurm_calls <= reads + new_runs + starts + BATCHED_VERBS, (
                r.round_id, r.slurm_calls, new_runs, starts, r.plan)
            if r.plan.empty:
                assert r.slurm_calls == reads + new_runs, (r.round_id, r.slurm_calls)
        started: set[int] = set()
        for r in reports:  # a job released for its GPUs is never held back on the way up
            assert r.plan is not None and not started & set(r.plan.hold), (r.round_id, r.plan)
            started |= set(r.plan.released)
        assert sum(gpu_reads) <= len(started), (gpu_reads, len(started))  # once per run
        steady = [r for r in reports if r.plan is not None and r.plan.empty]
        assert len(steady) >= ROUNDS - 3, "FIFO should settle after its first rounds"
        assert reports[-1].running == 16 and reports[-1].pending == JOBS - 16
        failed = list(ctl.store.db.query("SELECT * FROM actions WHERE ok = 0"))
        assert failed == [], failed[:5]

        # ---- telemetry
        posts = {k: ctl.metrics.registry.get_sample_value("blox_telemetry_posts_total",
                                                         {"result": k}) or 0
                 for k in ("accepted", "unauthorized", "too_large", "invalid")}
        expected = len(nodes) * agent_s  # one POST per agent per second
        assert posts["accepted"] >= 0.8 * expected, (posts, expected)
        assert posts["unauthorized"] == posts["too_large"] == posts["invalid"] == 0, posts
        assert all(s.failed_posts == 0 and s.dropped == 0 for s in stats.values()), stats
        sent = sum(s.sent for s in stats.values())
        rows, oldest = ctl.store.db.execute(
            "SELECT COUNT(*), MIN(time) FROM telemetry").fetchone()
        last = reports[-1].started
        # retention: nothing older than the last round's cut; at most a window's worth of rows
        assert oldest is not None and oldest >= last - RETENTION_S - 1, (oldest, last)
        bound = 16 * (RETENTION_S + 2 * max(r.seconds for r in reports) + 2)
        assert rows <= bound and rows < sent, (rows, bound, sent)
        busy = ctl.store.db.execute(
            "SELECT COUNT(*) FROM telemetry WHERE job_ids != '[]'").fetchone()[0]
        assert busy > 0  # the agents saw the running jobs

        calls = [float(r.slurm_calls) for r in reports]
        secs = [r.seconds for r in reports]
        print(f"\nload: {JOBS} jobs queued ({submit_s:.0f} s to submit, "
              f"{JOBS / submit_s:.0f} sbatch/s), {len(nodes)} agents at 1 Hz, "
              f"{posts['accepted']:.0f} posts accepted of ~{expected:.0f} expected "
              f"(0 refused), {sent} samples, telemetry rows {rows} (<= {bound:.0f}); "
              f"{len(reports)} rounds ({len(steady)} steady), calls/round min/median/max "
              f"{spread(calls, 'g')}, first round {reports[0].slurm_calls} calls for "
              f"{len(reports[0].decisions.start) if reports[0].decisions else 0} starts; "
              f"round s min/median/max {spread(secs, '.2f')}")
        print("calls per round: " + " ".join(
            f"{r.slurm_calls}" + (f"(+{len(r.plan.released)} started,"
                                  f" {len(r.plan.release)} node sets)"
                                  if r.plan and not r.plan.empty else "") for r in reports))
    finally:
        stop_hb.set()
        stop_ctl.set()
        stop_agents.set()
        if loop.is_alive():
            loop.join(30)
        for t in agents:
            t.join(15)
        if receiver is not None:
            receiver.stop()
        try:
            live = [j.job_id for j in client.list_jobs([PARTITION])]
            if live:
                client.cancel(live)  # one scancel for all of them
        except Exception as exc:  # noqa: BLE001 -- clean_queue tries again
            print(f"load cleanup: {exc}")
