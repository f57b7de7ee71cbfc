"""Telemetry end to end against a real slurmctld: agents -> receiver -> controller -> policy.

A 2 nodes x 2 GPUs emulator with the job-submit plugin; the controller's telemetry endpoint
is started exactly as ``blox-slurm run`` starts it (``controller_cli._telemetry``), on an
ephemeral loopback port with a real token; one emulated agent per node posts at 2 Hz what
Slurm allocated. The composition is Tiresias + ``telemetry_guard`` (flag mode, 3 s idle
window). One job's GPUs read 0%: the emulated backend's ``idle=1`` allocation hint, set by
the test's allocation source (the plugin's hint grammar rightly refuses an ``idle`` key from
users). Then a GPU error on node2 must make the controller drain node2 in Slurm.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _audit import unexpected_failures
from _live import wait_for

from blox_slurm.core.composition import build
from blox_slurm.demo.world import ManagedWorld
from blox_slurm.slurm.client import SlurmClient
from blox_slurm.slurm.controller import Controller
from blox_slurm.slurm.controller_cli import _telemetry
from blox_slurm.slurm.controller_config import ControllerConfig
from blox_slurm.slurm.store import Store
from blox_slurm.telemetry.agent import run_agent
from blox_slurm.telemetry.emulated import Allocation, EmulatedTelemetry

pytestmark = pytest.mark.slurm

NODES = ("node1", "node2")


@pytest.fixture(scope="module")
def world() -> Iterator[dict]:
    with ManagedWorld(shape="gpu:2x2") as w:  # plugin installed, heartbeat fresh
        yield {"emu": w.emu, "base": w.base, "heartbeat": w.heartbeat}


class SlurmAllocations:
    """What Slurm allocated, as the emulated backend's allocation source: one ``squeue`` per
    ``ttl`` shared by every agent; jobs in ``idle`` carry the ``idle=1`` hint (0% GPUs)."""

    def __init__(self, client: SlurmClient, ttl: float = 0.4) -> None:
        self.client, self.ttl = client, ttl
        self.idle: set[int] = set()
        self._lock = threading.Lock()
        self._at, self._cached = 0.0, []

    def __call__(self) -> list[Allocation]:
        with self._lock:
            if time.monotonic() - self._at > self.ttl:
                self._cached = [
                    Allocation(j.job_id, node, a.indices or tuple(range(a.count)),
                               (("idle", "1"),) if j.job_id in self.idle else ())
                    for j in self.client.list_jobs(["blox"]) if j.active
                    for node, a in j.gpu_alloc.items()]
                self._at = time.monotonic()
            return list(self._cached)


def submit(client: SlurmClient, base: Path) -> int:
    return client.submit(["--partition=blox", "--gres=gpu:1", f"--chdir={base}",
                          "--output=/dev/null", "--wrap", "sleep 300"])


def kinds(store: Store, job_id: int) -> list[str]:
    return [h["kind"] for h in store.history(job_id, limit=1000)]


def test_idle_job_is_flagged_and_a_node_with_gpu_errors_is_drained(world: dict) -> None:
    emu, base = world["emu"], world["base"]
    client = emu.client()
    token = base / "token"
    token.write_text("s3cret-telemetry-token\n")
    os.chmod(token, 0o600)
    cfg = ControllerConfig(partitions=["blox"], round_seconds=0.5, store=str(base / "tel.db"),
                           heartbeat=str(world["heartbeat"]), telemetry_listen="127.0.0.1:0",
                           slurm_conf=str(world["emu"].conf),
                           telemetry_token_file=str(token), telemetry_window=30.0)
    comp = build({"name": "tiresias+guard", "scheduling": "tiresias",
                  "cluster": {"policy": "telemetry_guard", "idle_action": "flag",
                              "idle_window": 3.0, "error_window": 30.0}})
    ctl = Controller(cfg, comp, client, Store(cfg.store))
    receiver = _telemetry(cfg, ctl)
    assert receiver is not None and receiver.port > 0

    source = SlurmAllocations(client)
    backends = {n: EmulatedTelemetry(n, 2, source) for n in NODES}
    stop_agents, stop_ctl = threading.Event(), threading.Event()
    agents = [threading.Thread(target=run_agent, daemon=True, args=(
        backends[n], receiver.url, token.read_text(), n, 0.5, stop_agents)) for n in NODES]
    reports: list = []
    loop = threading.Thread(target=ctl.run, args=(stop_ctl, None, reports.append), daemon=True)
    jobs: list[int] = []
    try:
        for t in (*agents, loop):
            t.start()
        wait_for(lambda: reports, 10, "the first round")  # heartbeat fresh: the plugin holds
        idle, busy = submit(client, base), submit(client, base)
        jobs += [idle, busy]
        source.idle.add(idle)

        wait_for(lambda: "flag" in kinds(ctl.store, idle), 20, f"a flag decision for {idle}")
        flag = next(h for h in ctl.store.history(idle) if h["kind"] == "flag")
        assert "3 s" in flag["detail"] and "dry-run" in flag["detail"]
        state = {j.job_id: j for j in client.list_jobs(["blox"])}
        assert state[idle].state == "RUNNING"  # flag mode is a dry-run: the job keeps its GPUs
        assert "preempt" not in kinds(ctl.store, idle)
        assert "flag" not in kinds(ctl.store, busy)  # its GPUs report the job's profile
        assert ctl.store.db.execute("SELECT COUNT(*) FROM telemetry").fetchone()[0] > 0

        backends["node2"].inject_error(1, 2)

        def drained() -> bool:
            n = next(n for n in client.list_nodes() if n.name == "node2")
            return n.draining and "GPU errors on node2: gpu 1: 2 error(s)" in n.reason

        wait_for(drained, 15, "node2 drained by the controller")
        late = submit(client, base)
        jobs.append(late)
        rounds = len(reports)
        wait_for(lambda: len(reports) >= rounds + 3, 10, "three more rounds")
        assert "start" not in kinds(ctl.store, late)  # node1 is full, node2 takes no new work
        client.cancel([idle, busy])
        wait_for(lambda: next((j for j in client.list_jobs(["blox"]) if j.job_id == late
                               and j.state == "RUNNING"), None), 20, f"job {late} to start")
        assert next(j for j in client.list_jobs(["blox"]) if j.job_id == late).nodes == ("node1",)
        drains = list(ctl.store.db.query("SELECT * FROM decisions WHERE kind = 'drain'"))
        assert len(drains) == 1, drains  # drained once: a DRAIN node is not drained again
        failed = unexpected_failures(ctl.store.db)
        assert failed == [], failed
    finally:
        stop_ctl.set()
        loop.join(15)
        stop_agents.set()
        for t in agents:
            t.join(15)
        receiver.stop()
        live = [j.job_id for j in client.list_jobs() if j.job_id in jobs]
        if live:
            client.cancel(live)
        client.update_nodes(["node2"], "resume")
    assert not loop.is_alive() and not any(t.is_alive() for t in agents)
    assert not next(n for n in client.list_nodes() if n.name == "node2").draining
