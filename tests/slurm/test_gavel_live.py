"""Gavel moving a running job to a faster GPU type, through real Slurm.

One V100 node and one K80 node, the controller with the bundled ``gavel`` composition and a
``[controller.throughput]`` that makes a K80 4x slower. With the V100 node drained the job can
only start on the K80; once the node is back, the daemon loop (``Controller.run``, rounds
60 s apart) takes over: Gavel gives the job V100 time, and one round carries out the move
(``requeuehold``, the fake trainer checkpoints on SIGTERM; once Slurm shows the job pending,
the pin to the V100 node with ``StartTime=now+2`` and the release). The trainer's progress
history proves nothing was lost or repeated.
"""

from __future__ import annotations

import json
import threading

import pytest
from _audit import unexpected_failures
from _live import wait_for

from blox_slurm.demo.world import FakeJob, ManagedWorld
from blox_slurm.loading import load
from blox_slurm.slurm.client import SlurmJob
from blox_slurm.slurm.controller import Controller
from blox_slurm.slurm.controller_config import ControllerConfig
from blox_slurm.slurm.store import Store
from blox_slurm.workloads.throughput_spec import ThroughputSpec

pytestmark = pytest.mark.slurm

ITERATIONS = 300  # at 10 iterations/s: 30 s of work
ROUND_S = 60.0  # the move must complete within the round that decides it


def test_gavel_moves_a_running_job_from_the_k80_to_the_v100_it_freed() -> None:
    with ManagedWorld(shape="v100:4x1,k80:4x1") as world:  # node1: v100, node2: k80
        client = world.client()
        cfg = ControllerConfig(partitions=["blox"], round_seconds=ROUND_S,
                               followup_seconds=0.0,
                               store=str(world.base / "gavel.db"),
                               heartbeat=str(world.heartbeat), grace_seconds=10.0,
                               slurm_conf=str(world.emu.conf),
                               throughput=ThroughputSpec(type_speed={"v100": 1.0, "k80": 0.25}))
        ctl = Controller(cfg, load("gavel"), client, Store(cfg.store))
        client.update_nodes(["node1"], "drain", "test: the v100s are away")
        job = world.submit_fake(FakeJob("daemon", 1, ITERATIONS, 0.0), iters_per_sec=10)

        def running_on(node: str) -> SlurmJob | None:
            ctl.round()
            j = next((j for j in client.list_jobs(["blox"]) if j.job_id == job), None)
            return j if j is not None and j.active and j.nodes == (node,) else None

        wait_for(lambda: running_on("node2"), 30, "the job to start on the k80 node")
        wait_for(lambda: (p := world.progress(job, "daemon")) and p["iteration"] >= 20, 30,
                 "progress on the k80")
        client.update_nodes(["node1"], "resume")
        wait_for(lambda: all(not n.draining and not n.down for n in client.list_nodes()), 10,
                 "the v100 node to be back")
        stop = threading.Event()
        daemon = threading.Thread(target=ctl.run, args=(stop,))
        daemon.start()
        try:
            wait_for(lambda: next((j for j in client.list_jobs(["blox"]) if j.job_id == job
                                   and j.active and j.nodes == ("node1",)), None),
                     ROUND_S / 2, "the job to move to the v100 node within half a round")
        finally:
            stop.set()
            daemon.join(30)
        assert not daemon.is_alive()

        def finished() -> bool:
            ctl.round()
            return all(j.job_id != job for j in client.list_jobs(["blox"]))

        wait_for(finished, 90, "the job to finish")

        progress = world.progress(job, "daemon")
        assert progress is not None and progress["iteration"] == ITERATIONS
        (a, b), (c, d) = progress["history"]  # two runs, tiling [0, ITERATIONS)
        assert a == 0 and b == c and d == ITERATIONS and 0 < b < ITERATIONS, progress["history"]
        db = ctl.store.db
        moves = [r["reason"] for r in db.query(
            "SELECT reason FROM decisions WHERE job_id = ? AND kind = 'move'", [job])
            if r["reason"].startswith("moved to")]
        assert moves and all(m.startswith("moved to v100") for m in moves), moves
        requeues = [r for r in db.query("SELECT round_id, ids, ok FROM actions WHERE verb = "
                                        "'requeuehold'") if job in json.loads(r["ids"])]
        assert len(requeues) == 1 and requeues[0]["ok"] == 1, requeues
        releases = [r for r in db.query("SELECT round_id, ids FROM actions WHERE verb = "
                                        "'release' AND ok = 1") if job in json.loads(r["ids"])]
        # once to start it on the k80, once in the very round that stopped it
        assert [r["round_id"] for r in releases][-1] == requeues[0]["round_id"], releases
        failed = unexpected_failures(db)
        assert failed == [], failed
