"""The SlurmClient contract against the real emulated slurmctld/slurmd (no mocks).

Every test here takes ``client`` (parametrized over the importable backends, see conftest) and
checks what Slurm actually did, by reading it back.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from _live import Jobs, installed_release, wait_for

from blox_slurm.slurm.apply import Applier, waits_for_a_pass
from blox_slurm.slurm.client import REVOKE_MARGIN, JobUpdate, SlurmClient, SlurmError

pytestmark = pytest.mark.slurm


def test_submit_and_read_back(client: SlurmClient, jobs: Jobs) -> None:
    job = jobs.submit("--gres=gpu:v100:2", "--comment=model=resnet50",
                      cmd="echo gpus=$CUDA_VISIBLE_DEVICES; exec sleep 300")
    j = jobs.wait_state(job, "RUNNING")
    assert (j.partition, j.comment, j.num_gpus, j.gpu_type) == ("blox", "model=resnet50", 2, "v100")
    assert len(j.nodes) == 1 and j.nodes[0] in ("node1", "node2", "node3")
    alloc = j.gpu_alloc[j.nodes[0]]
    assert (alloc.type, alloc.count, len(alloc.indices)) == ("v100", 2, 2)
    assert j.user and j.submit_time and j.start_time and j.work_dir == str(jobs.workdir)
    # The scontrol path reads the same job into the same record fields.
    s = client.get_job(job)
    assert s is not None
    for f in ("job_id", "state", "partition", "user", "num_gpus", "gpu_type", "nodes",
              "gpu_alloc", "comment", "priority", "restart_cnt", "submit_time", "start_time"):
        assert getattr(s, f) == getattr(j, f), f
    # The job really sees the GPUs Slurm says it has.
    out = jobs.workdir / f"{job}.out"
    wait_for(lambda: out.exists() and "gpus=" in out.read_text(), 10, "job output")
    want = ",".join(map(str, alloc.indices))
    assert f"gpus={want}" in out.read_text()


def test_get_job_unknown_is_none(client: SlurmClient) -> None:
    assert client.get_job(987654) is None


def test_hold_and_release(client: SlurmClient, jobs: Jobs) -> None:
    job = jobs.submit("--gres=gpu:1", "--begin=now+3600")  # stays pending on its own
    before = jobs.get(job)
    assert before.pending and before.priority > 0 and not before.held
    client.hold([job])
    held = jobs.get(job)
    assert held.priority == 0 and held.reason == "JobHeldAdmin" and held.held
    client.release([job])
    released = jobs.get(job)
    assert released.priority > 0 and not released.held and released.pending


def test_batched_verb_names_the_failed_ids(client: SlurmClient, jobs: Jobs) -> None:
    a = jobs.submit("--gres=gpu:1", "--begin=now+3600")
    b = jobs.submit("--gres=gpu:1", "--begin=now+3600")
    calls = client.calls
    with pytest.raises(SlurmError) as err:
        client.hold([a, 999999, b])
    assert err.value.failed_ids == (999999,)
    assert client.calls == calls + 1  # one slurmctld round trip for three ids
    # The valid ids in the batch were still held.
    assert jobs.get(a).held and jobs.get(b).held


def test_requeue_restarts_at_once_and_appends_output(client: SlurmClient, jobs: Jobs) -> None:
    job = jobs.submit("--gres=gpu:1", cmd="echo start ${SLURM_RESTART_COUNT:-0}; exec sleep 300")
    jobs.wait_state(job, "RUNNING")
    out = jobs.workdir / f"{job}.out"
    wait_for(lambda: out.exists() and "start 0" in out.read_text(), 10, "first output")
    client.requeue([job])
    pending = jobs.wait_state(job, "PENDING")
    # Left alone, Slurm would delay the restart by ~120 s (22.05 says `Reason=BeginTime`,
    # 26.05 gives no reason: the eligible time is what every version shows).
    assert pending.restart_cnt == 1 and pending.eligible_time is not None
    assert pending.eligible_time > time.time() + 30
    asked = time.time()
    client.update_jobs([job], JobUpdate(lift_delay=True))
    now_eligible = jobs.get(job).eligible_time
    # a second or two after "now" (never the second slurmd revoked the last run's credential)
    assert now_eligible is None or now_eligible <= asked + REVOKE_MARGIN + 1
    # Slurm's scheduler then starts it on its next pass (batch_sched_delay = 3 s); the wait is
    # only a bound for a failure, well under the 120 s Slurm would otherwise wait.
    again = jobs.wait_state(job, "RUNNING", timeout=90)
    assert again.restart_cnt == 1
    wait_for(lambda: "start 1" in out.read_text(), 10, "second output")
    lines = out.read_text().splitlines()  # appended, not truncated:
    assert [x for x in lines if x.startswith("start")] == ["start 0", "start 1"]


def test_a_restart_lifted_to_now_runs_again_on_the_node_it_left(client: SlurmClient,
                                                                jobs: Jobs) -> None:
    """StartTime=now, REVOKE_MARGIN s after the stop: slurmd takes the new credential (a
    later second than the one it revoked) on the very node the job ran on."""
    job = jobs.submit("--gres=gpu:1", "--nodelist=node1")
    jobs.wait_state(job, "RUNNING")
    client.requeue_hold([job])
    held = jobs.wait_state(job, "PENDING")
    assert held.held and held.restart_cnt == 1
    time.sleep(REVOKE_MARGIN)
    asked = time.time()
    client.update_jobs([job], JobUpdate(req_nodes=("node1",), start_now=True))
    eligible = jobs.get(job).eligible_time
    assert eligible is None or eligible <= asked + 1
    client.release([job])
    again = jobs.wait_state(job, "RUNNING", timeout=90)
    assert again.restart_cnt == 1 and again.nodes == ("node1",)


def test_a_nudge_starts_a_job_whose_lifted_begin_time_passed(client: SlurmClient,
                                                             jobs: Jobs) -> None:
    """Released with now+2, a requeued job whose begin time has passed and that Slurm has not
    started reads as waiting for a pass on every version (22.05 and 24.11 say BeginTime,
    26.05 no reason), and the nudge is taken; a nudge that comes after Slurm started it
    anyway is no failure ("no longer pending")."""
    job = jobs.submit("--gres=gpu:1")
    jobs.wait_state(job, "RUNNING")
    client.requeue_hold([job])
    jobs.wait_state(job, "PENDING")
    client.update_jobs([job], JobUpdate(lift_delay=True))
    client.release([job])
    time.sleep(REVOKE_MARGIN + 1)
    record: list[tuple[str, bool]] = []
    applier = Applier(client, lambda verb, ids, ok, err: record.append((verb, ok)))
    waiting = jobs.get(job)
    if waiting.pending:  # else Slurm had a pass since: nothing to nudge
        assert waits_for_a_pass(waiting, time.time()), waiting
        assert applier.nudge([job]) == [job]
    assert jobs.wait_state(job, "RUNNING", timeout=90).restart_cnt == 1
    assert applier.nudge([job]) == [job]  # running: refused, and that is what it was for
    assert applier.failures == 0 and all(ok for _, ok in record)


def test_requeue_of_pending_job_is_an_error(client: SlurmClient, jobs: Jobs) -> None:
    job = jobs.submit("--gres=gpu:1", "--begin=now+3600")
    with pytest.raises(SlurmError) as err:
        client.requeue([job])
    assert err.value.failed_ids == (job,)


def test_requeue_hold_then_release(client: SlurmClient, jobs: Jobs) -> None:
    job = jobs.submit("--gres=gpu:1")
    jobs.wait_state(job, "RUNNING")
    client.requeue_hold([job])
    held = jobs.wait_state(job, "PENDING")
    assert held.held and held.priority == 0 and "held" in held.reason.lower()
    assert held.restart_cnt == 1
    client.release([job])
    client.update_jobs([job], JobUpdate(lift_delay=True))
    # (the node may still be completing the first run: allow Slurm a few scheduling cycles)
    assert jobs.wait_state(job, "RUNNING", timeout=30).restart_cnt == 1


def test_pin_with_req_node_list_then_release(client: SlurmClient, jobs: Jobs) -> None:
    job = jobs.submit("--gres=gpu:1", "--hold")  # unpinned, it would go to node1
    client.update_jobs([job], JobUpdate(req_nodes=("node3",)))
    assert jobs.get(job).req_nodes == ("node3",)
    client.release([job])
    assert jobs.wait_state(job, "RUNNING").nodes == ("node3",)
    with pytest.raises(SlurmError) as err:  # a running job cannot be re-pinned
        client.update_jobs([job], JobUpdate(req_nodes=("node2",)))
    assert err.value.failed_ids == (job,)


def test_priority_decides_which_released_job_runs_first(client: SlurmClient, jobs: Jobs) -> None:
    blocker = jobs.submit("--nodelist=node4", "--gres=gpu:4")
    jobs.wait_state(blocker, "RUNNING")
    low = jobs.submit("--nodelist=node4", "--gres=gpu:4", "--hold")
    high = jobs.submit("--nodelist=node4", "--gres=gpu:4", "--hold")  # later: lower by default
    client.release([low, high])
    client.update_jobs([low], JobUpdate(priority=100))
    client.update_jobs([high], JobUpdate(priority=200))
    assert (jobs.get(low).priority, jobs.get(high).priority) == (100, 200)
    client.cancel([blocker])
    jobs.wait_state(high, "RUNNING")
    assert jobs.get(low).state == "PENDING"


def test_cancel(client: SlurmClient, jobs: Jobs) -> None:
    running = jobs.submit("--gres=gpu:1")
    pending = jobs.submit("--gres=gpu:1", "--begin=now+3600")
    jobs.wait_state(running, "RUNNING")
    client.cancel([running, pending])
    jobs.wait_state(running, "CANCELLED")
    jobs.wait_state(pending, "CANCELLED")
    assert all(j.job_id not in (running, pending) for j in client.list_jobs())


def test_signal_reaches_the_batch_script(client: SlurmClient, jobs: Jobs) -> None:
    job = jobs.submit(
        "--gres=gpu:1", cmd="trap 'echo got-usr1; exit 0' USR1; echo ready; "
                            "while true; do sleep 0.1; done"
    )
    jobs.wait_state(job, "RUNNING")
    out = jobs.workdir / f"{job}.out"
    wait_for(lambda: out.exists() and "ready" in out.read_text(), 10, "trap installed")
    client.signal([job], "USR1")
    wait_for(lambda: "got-usr1" in out.read_text(), 10, "the signal")
    jobs.wait_state(job, "COMPLETED")


def test_drain_and_resume(client: SlurmClient, emulator: object) -> None:
    client.update_nodes(["node2"], "drain", "disk replaced")
    try:
        n = {n.name: n for n in client.list_nodes()}["node2"]
        assert n.draining and n.reason == "disk replaced" and not n.down
    finally:
        client.update_nodes(["node2"], "resume")
    n = {n.name: n for n in client.list_nodes()}["node2"]
    assert not n.draining and n.state == "idle"


def test_job_larger_than_any_node_is_a_clear_error(client: SlurmClient) -> None:
    with pytest.raises(SlurmError) as err:
        client.submit(["--partition=blox", "--gres=gpu:5", "--output=/dev/null", "--wrap", "true"])
    assert "Requested node configuration is not available" in str(err.value)
    assert err.value.argv[0] == "sbatch" and err.value.returncode == 1


def test_bad_partition_is_a_clear_error(client: SlurmClient) -> None:
    with pytest.raises(SlurmError, match="[Ii]nvalid partition"):
        client.submit(["--partition=nope", "--output=/dev/null", "--wrap", "true"])


def test_nodes_read_back(client: SlurmClient) -> None:
    nodes = {n.name: n for n in client.list_nodes()}
    assert sorted(nodes) == ["node1", "node2", "node3", "node4"]
    assert [nodes[f"node{i}"].gpu_type for i in range(1, 5)] == ["v100"] * 3 + ["k80"]
    assert all(n.gpus_total == 4 and n.cpus == 8 and n.memory_mb == 32768 for n in nodes.values())
    assert nodes["node4"].features == frozenset({"k80"})
    assert set(nodes["node1"].partitions) == {"blox", "plain"}


def test_ping_and_version(client: SlurmClient, emulator) -> None:  # type: ignore[no-untyped-def]
    assert client.ping()
    assert client.version() == installed_release(emulator.conf)


def test_controller_restart_keeps_jobs(client: SlurmClient, jobs: Jobs, emulator) -> None:  # type: ignore[no-untyped-def]
    running = jobs.submit("--gres=gpu:2")
    held = jobs.submit("--gres=gpu:1", "--hold")
    before = jobs.wait_state(running, "RUNNING")
    emulator.restart_controller()
    wait_for(client.ping, 10, "slurmctld back")
    after = jobs.get(running)
    assert after.state == "RUNNING"
    assert (after.nodes, after.gpu_alloc) == (before.nodes, before.gpu_alloc)
    h = jobs.get(held)
    assert h.held and h.priority == 0


def test_work_dir_of_jobs(jobs: Jobs) -> None:
    job = jobs.submit("--gres=gpu:1", cmd="pwd; exec sleep 300")
    jobs.wait_state(job, "RUNNING")
    out = Path(jobs.workdir) / f"{job}.out"
    wait_for(lambda: out.exists() and out.read_text().strip(), 10, "pwd")
    assert out.read_text().split()[0] == str(jobs.workdir)
