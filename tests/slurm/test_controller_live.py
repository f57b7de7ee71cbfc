"""The controller against a real slurmctld with the job-submit plugin: end to end.

A 4 nodes x 4 GPUs emulator with ``JobSubmitPlugins=lua`` and ``slurm_conf/job_submit.lua``;
24 fake training jobs from 3 Unix users submitted with plain ``sbatch`` into the managed
partition, one job into the unmanaged one; the controller runs Tiresias + consolidated +
accept-all with small queue thresholds so that preemption happens within seconds.

The fake jobs run as ``daemon``/``bin``/``nobody`` with the system Python (``/usr/bin/python3``
runs ``fake_train.py``, which needs only the standard library), each user in a directory of
their own: that is what makes them real multi-user jobs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _audit import unexpected_failures
from _live import wait_for

from blox_slurm.demo.world import FakeJob, ManagedWorld
from blox_slurm.loading import build
from blox_slurm.slurm.controller import Controller, handback
from blox_slurm.slurm.controller_config import ControllerConfig
from blox_slurm.slurm.job_submit import write_heartbeat
from blox_slurm.slurm.store import Store

pytestmark = pytest.mark.slurm

USERS = ("daemon", "bin", "nobody")


@pytest.fixture(scope="module")
def world() -> Iterator[dict]:
    with ManagedWorld() as w:  # 4x4 GPUs, plugin, fresh heartbeat, per-user job directories
        yield {"emu": w.emu, "work": w.work, "heartbeat": w.heartbeat, "base": w.base, "w": w}


def controller(world: dict, name: str, **overrides: object) -> Controller:
    emu = world["emu"]
    cfg = ControllerConfig(partitions=["blox"], round_seconds=1.0,
                           store=str(world["base"] / f"{name}.db"),
                           heartbeat=str(world["heartbeat"]), grace_seconds=3.0,
                           slurm_conf=str(emu.conf), **overrides)
    comp = build({"name": "tiresias+consolidated", "scheduling": {
        "policy": "tiresias", "thresholds": [30.0], "promote_knob": 0},
        "placement": "consolidated"})
    return Controller(cfg, comp, emu.client(), Store(cfg.store))


def submit_fake(world: dict, user: str, gpus: int, iterations: int) -> int:
    return world["w"].submit_fake(FakeJob(user, gpus, iterations, 0.0), iters_per_sec=10)


def test_controller_runs_a_mixed_multi_user_workload_to_completion(world: dict) -> None:
    emu, work = world["emu"], world["work"]
    client = emu.client()
    ctl = controller(world, "e2e")
    stop = threading.Event()
    reports = []
    thread = threading.Thread(target=ctl.run, args=(stop, None, reports.append), daemon=True)
    thread.start()
    wait_for(lambda: reports, 10, "the first round")  # heartbeat is fresh from here on

    shapes = [(4, 60), (1, 30), (2, 40), (1, 80), (2, 20), (4, 30), (1, 50), (2, 70)] * 3
    jobs = {}
    for i, (gpus, iters) in enumerate(shapes):
        user = USERS[i % 3]
        jobs[submit_fake(world, user, gpus, iters)] = (user, gpus, iters)
    plain = client.submit(["--partition=plain", "--gres=gpu:1", f"--chdir={work}",
                           f"--output={work}/plain.out", "--wrap", "sleep 2"])
    seen = client.list_jobs()
    plain_job = next(j for j in seen if j.job_id == plain)
    assert not plain_job.held and plain_job.admin_comment == ""  # untouched by the plugin
    marks = {j.admin_comment for j in seen if j.job_id in jobs}
    assert marks == {"blox:managed"}  # marked and held for the policy (not fail-open)

    def all_done() -> bool:
        return not any(j.job_id in jobs or j.job_id == plain for j in client.list_jobs())

    def stuck() -> str:  # on timeout: what Slurm and the controller say of each job left
        left = [j for j in client.list_jobs() if j.job_id in jobs]
        return "all jobs to finish; left: " + "; ".join(
            f"{j.job_id} {j.state}/{j.reason} held={j.held} req={j.req_nodes} "
            f"why={(ctl.store.job(j.job_id) or {}).get('reason')!r} "
            f"actions={[(a['verb'], a['ok'], a['error'][:80]) for a in last(j.job_id)]}"
            for j in left)

    def last(job_id: int) -> list[dict]:
        return ctl.store.actions(job_id, 4)

    try:
        wait_for(all_done, 240, stuck)
    finally:
        stop.set()
        thread.join(30)

    # Every job finished exactly once with exactly its iterations, none lost or repeated.
    for job_id, (user, _, iters) in jobs.items():
        path = work / user / ".blox-fake" / f"{job_id}.progress.json"
        out = work / user / f"{job_id}.out"
        assert path.exists(), (job_id, out.read_text() if out.exists() else "no output",
                               ctl.store.job(job_id))
        progress = json.loads(path.read_text())
        assert progress["iteration"] == iters, (job_id, progress, out.read_text(),
                                                ctl.store.actions(job_id),
                                                ctl.store.history(job_id))
        ranges = progress["history"]
        assert ranges[0][0] == 0 and ranges[-1][1] == iters
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False)), ranges

    store = ctl.store
    ctl.round()  # the loop may have stopped before observing the last jobs leave
    rows = {r["job_id"]: r for r in store.jobs(active_only=False)}
    assert set(jobs) <= set(rows) and plain not in rows
    assert all(rows[j]["state"] == "done" for j in jobs)
    preempted = [j for j in jobs if rows[j]["preemptions"] > 0]
    assert preempted, "Tiresias with a 30 GPU-s threshold must preempt at least one job"
    resumed = [j for j in preempted if len(json.loads(
        (work / jobs[j][0] / ".blox-fake" / f"{j}.progress.json").read_text())["history"]) > 1]
    assert resumed, "a preempted job resumed from its checkpoint"
    started = {r["job_id"] for r in store.db.query(
        "SELECT DISTINCT job_id FROM decisions WHERE kind = 'start'")}
    assert set(jobs) <= started  # the store holds the decision that started every job
    failed = unexpected_failures(store.db)
    assert failed == [], failed
    calls = [r.slurm_calls for r in reports if not r.error]
    # a round with nothing to change costs the node list and the queue read only
    assert min(calls) == emu.client().dialect().steady_reads


def test_dry_run_applies_nothing_and_writes_no_heartbeat(world: dict, tmp_path: Path) -> None:
    emu = world["emu"]
    client = emu.client()
    write_heartbeat(world["heartbeat"])
    job = submit_fake(world, "bin", 1, 10)
    try:
        before = world["heartbeat"].stat().st_mtime
        ctl = controller(world, "shadow", dry_run=True)
        report = ctl.round()
        assert [s.job_id for s in report.decisions.start] == [job]
        assert next(j for j in client.list_jobs() if j.job_id == job).held  # not released
        assert world["heartbeat"].stat().st_mtime == before
        actions = list(ctl.store.db.query("SELECT verb, dry_run FROM actions"))
        assert actions and all(a["dry_run"] == 1 for a in actions)
    finally:
        client.cancel([job])


def test_handback_releases_only_the_jobs_we_hold(world: dict) -> None:
    emu, work = world["emu"], world["work"]
    client = emu.client()
    write_heartbeat(world["heartbeat"])
    ours = sorted(submit_fake(world, u, 4, 600) for u in ("daemon", "nobody"))
    plain = client.submit(["--partition=plain", "--gres=gpu:1", "--hold", f"--chdir={work}",
                           "--output=/dev/null", "--wrap", "sleep 1"])
    try:
        assert all(j.held for j in client.list_jobs() if j.job_id in ours)  # the plugin's hold
        released = handback(client, ["blox"])
        assert released == ours
        state = {j.job_id: j for j in client.list_jobs()}
        assert not any(state[j].held for j in ours)
        assert state[plain].held  # another partition's hold is not ours
        assert handback(client, ["blox"]) == []  # nothing left of ours: a no-op
    finally:
        client.cancel([*ours, plain])


def test_run_command_exits_zero_on_sigterm(world: dict, tmp_path: Path) -> None:
    emu = world["emu"]
    config = tmp_path / "controller.toml"
    config.write_text(
        "[controller]\n"
        "partitions = [\"blox\"]\nround_seconds = 0.5\n"
        f"store = \"{tmp_path / 'state.db'}\"\nheartbeat = \"{world['heartbeat']}\"\n"
        f"slurm_conf = \"{emu.conf}\"\nbackend = \"cli\"\ncomposition = \"fifo\"\n")
    proc = subprocess.Popen([sys.executable, "-m", "blox_slurm", "run", "--config", str(config)],
                            stderr=subprocess.PIPE, text=True)
    store = Store(tmp_path / "state.db")
    wait_for(lambda: (store.last_round() or {}).get("finished"), 30, "a finished round")
    proc.terminate()
    assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else ""
    assert time.time() - (store.last_round() or {})["finished"] < 30


def test_a_failing_job_in_a_batch_is_isolated_and_the_rest_applied(world: dict) -> None:
    from blox_slurm.slurm.apply import Applier, Plan

    emu = world["emu"]
    client = emu.client()
    write_heartbeat(world["heartbeat"])
    good = sorted(submit_fake(world, "bin", 4, 600) for _ in range(3))
    records: list[tuple[str, list[int], bool, str]] = []
    applier = Applier(client, lambda verb, ids, ok, e: records.append((verb, list(ids), ok, e)))
    try:
        client.release(good)
        vanished = 999_999
        applier.apply(Plan(hold=(good[0], vanished, *good[1:])))
        assert applier.failures == 1
        assert [r[1] for r in records if not r[2]] == [[vanished]]  # isolated, recorded
        assert sorted(j for r in records if r[2] for j in r[1]) == good
        state = {j.job_id: j for j in client.list_jobs()}
        assert all(state[j].held for j in good)  # the rest of the batch was applied
    finally:
        client.cancel(good)


def test_the_synthesizer_drives_real_slurm_and_the_audit_names_the_deciding_candidate(
        world: dict) -> None:
    """The same meta-policy the simulator runs: forks the Slurm snapshot (durations from the
    users' hints, estimated where absent), picks a candidate, and that candidate's decisions
    are applied; every round's row says which candidate decided."""
    emu = world["emu"]
    client = emu.client()
    write_heartbeat(world["heartbeat"])
    cfg = ControllerConfig(partitions=["blox"], round_seconds=1.0,
                           store=str(world["base"] / "synth.db"), slurm_conf=str(emu.conf),
                           heartbeat=str(world["heartbeat"]), grace_seconds=3.0)
    comp = build({"name": "synth", "synthesizer": {
        "candidates": ["fifo", "srtf"], "every": 2, "horizon": 120.0, "round_duration": 1.0}})
    ctl = Controller(cfg, comp, client, Store(cfg.store))
    w = world["w"]
    shapes = [(4, 30), (4, 20), (4, 10), (4, 40), (2, 10), (4, 10)]  # 22 GPUs asked of 16
    jobs = [w.submit_fake(FakeJob(USERS[i % 3], gpus, iters, 0.0), iters_per_sec=10)
            for i, (gpus, iters) in enumerate(shapes)]
    try:
        def done() -> bool:
            ctl.round()
            return not any(j.job_id in jobs for j in client.list_jobs())

        wait_for(done, 180, "the synthesizer's jobs to finish")
    finally:
        client.cancel(jobs)
    ctl.round()  # observe the last jobs gone
    rows = {r["job_id"]: r for r in ctl.store.jobs(active_only=False)}
    assert all(rows[j]["state"] == "done" for j in jobs)
    deciders = {r["composition"] for r in ctl.store.db.query(
        "SELECT composition FROM rounds WHERE error = ''")}
    assert deciders and deciders <= {"synth:fifo", "synth:srtf"}, deciders
    failed = unexpected_failures(ctl.store.db)
    assert failed == [], failed


def test_scattered_placement_keeps_a_per_node_gpu_job_on_one_node(world: dict) -> None:
    """Scattered spreads a 2-GPU job 1+1 over the two emptiest nodes; pinned that way, Slurm
    gave a ``--gres=gpu:2`` job 2 GPUs on EACH node (4 in all). With the snapshot's ``nodes``
    hint it runs on one node with exactly 2; a ``--gpus=2`` (per job) job may still be spread:
    Slurm keeps its total at 2, on the pinned nodes (22.05 puts 1 on each, 24.11 may put both on
    one of them and only CPUs on the other; the next round reads where they went)."""
    emu, work = world["emu"], world["w"].work
    client = emu.client()
    write_heartbeat(world["heartbeat"])
    cfg = ControllerConfig(partitions=["blox"], round_seconds=1.0,
                           store=str(world["base"] / "spread.db"), slurm_conf=str(emu.conf),
                           heartbeat=str(world["heartbeat"]), grace_seconds=3.0)
    ctl = Controller(cfg, build({"name": "fifo+scattered", "scheduling": "fifo",
                                 "placement": "scattered"}), client, Store(cfg.store))
    per_node = submit_fake(world, "daemon", 2, 600)
    per_job = client.submit(["--partition=blox", "--gpus=2", f"--chdir={work}/bin",
                             "--output=/dev/null", "--wrap", "sleep 600"], as_user="bin")
    try:
        def running() -> dict | None:
            ctl.round()
            jobs = {j.job_id: j for j in client.list_jobs()}
            return jobs if all(jobs[i].active for i in (per_node, per_job)) else None
        jobs = wait_for(running, 30, "both jobs to run")
        alloc = jobs[per_node].gpu_alloc
        assert len(alloc) == 1 and sum(a.count for a in alloc.values()) == 2, dict(alloc)
        assert sum(a.count for a in jobs[per_job].gpu_alloc.values()) == 2, dict(
            jobs[per_job].gpu_alloc)
        assert set(jobs[per_job].gpu_alloc) <= set(jobs[per_job].req_nodes), (
            dict(jobs[per_job].gpu_alloc), jobs[per_job].req_nodes)
        assert len(jobs[per_job].req_nodes) == 2  # scattered spread it over two nodes
    finally:
        client.cancel([per_node, per_job])
