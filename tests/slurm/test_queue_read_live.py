"""The plain queue read against ``squeue --json`` on a real slurmctld: a varied queue read both
ways gives the same records, field by field; the filters and options each version honours are
what :class:`~blox_slurm.slurm.dialect.Dialect` says; a steady read costs what the docs say."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import pytest
from _live import Jobs, wait_for

from blox_slurm.emulator.cluster import Emulator
from blox_slurm.slurm.cli_backend import CliBackend
from blox_slurm.slurm.client import SlurmError, SlurmJob
from blox_slurm.slurm.parse import held_run, job_records
from blox_slurm.slurm.queue_read import GONE, SHOW

pytestmark = pytest.mark.slurm
HOSTILE = "odd|name, with\ta tab, a %j and\na newline"


@pytest.fixture
def cli(emulator: Emulator) -> CliBackend:
    return CliBackend(str(emulator.conf), timeout=10.0)


@pytest.fixture
def queue(cli: CliBackend, tmp_path: Path) -> Iterator[Jobs]:
    os.chmod(tmp_path, 0o755)
    jobs = Jobs(cli, tmp_path)
    yield jobs
    jobs.cleanup()


def as_dict(job: SlurmJob) -> dict[str, object]:
    return {f.name: getattr(job, f.name) for f in fields(job)}


def _varied(cli: CliBackend, queue: Jobs) -> dict[str, int]:
    """Submit the queue; returns its job ids by role once Slurm shows them settled."""
    q = queue.submit
    ids = {"hostile": q("--gres=gpu:v100:2", f"--job-name={HOSTILE}", f"--comment={HOSTILE}"),
           "requeued": q("--gres=gpu:1"),
           "per_gpu_mem": q("--hold", "--mem-per-gpu=1500", "--gpus=3"),
           "begin": q("--begin=now+3600", "--gres=gpu:1"),
           "two_nodes": q("-N2", "--gpus-per-node=1"),
           "array": q("--array=0-7%2", "--hold", "--gres=gpu:1"),
           "pinned": q("--hold", "--nodelist=node3", "--exclude=node4", "--mem=1500", "-c3"),
           "per_cpu_mem": q("--hold", "--mem-per-cpu=700", "-c2"),
           "failed": q(cmd="exit 3"),
           "unmanaged": q("--gres=gpu:1", partition="plain")}
    ids["waits"] = q(f"--dependency=afterok:{ids['per_gpu_mem']}", "--gres=gpu:1")
    for role in ("hostile", "requeued", "two_nodes", "unmanaged"):
        queue.wait_state(ids[role], "RUNNING")
    queue.wait_state(ids["failed"], "FAILED")
    cli.requeue_hold([ids["requeued"]])
    cli.split_array(ids["array"], [0, 1, 2])
    subprocess.run(["scontrol", "update", f"JobId={ids['per_gpu_mem']}",
                    f"AdminComment=blox:{HOSTILE}"], env=cli.runner.env, check=True)
    queue.wait_state(ids["requeued"], "PENDING")
    task0 = next(j.job_id for j in cli.list_jobs() if j.array_job_id == ids["array"]
                 and j.array_task_id == 0)
    cli.release([task0])
    ids["task0"] = task0
    queue.wait_state(task0, "RUNNING")
    ids["node_down"] = q("--nodelist=node4", "--gres=gpu:1")
    return ids


Records = dict[int, dict[str, object]]


def _snapshot(cli: CliBackend, ours: set[int]) -> tuple[Records, Records] | None:
    """The plain read and the JSON one of our jobs, if Slurm changed nothing meanwhile (the
    backfill scheduler may move a waiting job's expected start between two reads)."""
    def read(jobs: list[SlurmJob]) -> Records:
        return {j.job_id: as_dict(j) for j in jobs if j.job_id in ours or j.array_job_id in ours}

    before = read(cli.json_jobs())
    plain = read(cli.list_jobs(finished=True))
    return (plain, before) if read(cli.json_jobs()) == before else None


def test_the_plain_read_gives_the_json_records_field_by_field(
        cli: CliBackend, queue: Jobs) -> None:
    cli.update_nodes(["node4"], "drain", "test_queue_read_live")
    try:
        ids = _varied(cli, queue)
        wait_for(lambda: next((j for j in cli.list_jobs() if j.job_id == ids["node_down"]
                               and j.reason == "ReqNodeNotAvail"), None), 15,
                 "the job on the drained node to wait for it")
        plain, json = wait_for(lambda: _snapshot(cli, set(ids.values())), 30,
                               "two JSON reads around a plain one to agree")
    finally:
        cli.update_nodes(["node4"], "resume")
    ours = set(ids.values())
    assert sorted(plain) == sorted(json) and len(plain) == len(ours) + 2  # tasks 1 and 2
    assert {k: v for k, v in plain.items() if v != json[k]} == {}
    by_role = {role: plain[i] for role, i in ids.items()}
    assert by_role["hostile"]["name"] == by_role["hostile"]["comment"] == HOSTILE
    assert by_role["per_gpu_mem"]["admin_comment"] == f"blox:{HOSTILE}"
    assert by_role["requeued"]["reason"] == "JobHeldUser"  # squeue: "job requeued in ..."
    assert by_role["pinned"]["exc_nodes"] == ("node4",)
    assert len(by_role["two_nodes"]["gpu_alloc"]) == 2  # type: ignore[arg-type]
    assert by_role["task0"]["array_max_tasks"] == 2 and by_role["failed"]["exit_code"] == 3


def _squeue(cli: CliBackend, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["squeue", "-h", *args], env=cli.runner.env, capture_output=True,
                          text=True, check=False)


def test_what_each_version_honours_is_what_the_dialect_says(
        cli: CliBackend, queue: Jobs) -> None:
    mine, other = queue.submit("--hold"), queue.submit("--hold", partition="plain")
    dialect = cli.dialect()
    assert [j.job_id for j in cli.list_jobs(["plain"]) if j.job_id in (mine, other)] == [
        other]
    listed = {j.job_id for j in cli.json_jobs([mine])}
    assert (listed == {mine}) == dialect.json_filters, listed
    exc = _squeue(cli, "-O", "jobid:|,excnodes:|")
    assert ("Invalid job format" not in exc.stderr) == dialect.plain_exc_nodes, exc.stderr
    unique = _squeue(cli, "--array-unique")
    assert (unique.returncode == 0) == ("--array-unique" in dialect.plain_squeue)


def test_a_steady_read_makes_the_calls_the_docs_say(cli: CliBackend, queue: Jobs) -> None:
    cli.list_jobs(["blox"])
    steady = 2 if not cli.dialect().plain_exc_nodes else 1
    calls = cli.calls
    cli.list_jobs(["blox"])
    assert cli.calls - calls == steady
    job = queue.submit("--gres=gpu:1")
    queue.wait_state(job, "RUNNING")  # reads too: its GPUs were read there, once
    calls = cli.calls
    ran = next(j for j in cli.list_jobs(["blox"]) if j.job_id == job)
    assert cli.calls - calls == steady and sum(a.count for a in ran.gpu_alloc.values()) == 1


def test_one_scontrol_shows_each_run_asked_for_and_passes_over_gone_jobs(
        cli: CliBackend, queue: Jobs) -> None:
    """What a queue read sends ``scontrol`` on its stdin for the new runs, on this version's
    ``scontrol``: a running job's record as ``scontrol -d show job -o`` prints it alone, and
    jobs that are not there (an id, a task of a job that is no array) only make the exit
    code 1, with words :data:`GONE` knows."""
    job = queue.submit("--gres=gpu:v100:2", "--job-name=two gpus")
    queue.wait_state(job, "RUNNING")
    script = f"details\noneliner\nshow job 999999\nshow job {job}\nshow job {job}_7\n"
    with pytest.raises(SlurmError) as failed:
        cli.runner.run(SHOW, idempotent=True, stdin=script)
    assert failed.value.returncode == 1
    out = cli.runner.run(SHOW, idempotent=True, stdin=script, gone=GONE)
    alone = cli.runner.run(["scontrol", "-d", "show", "job", "-o", str(job)], idempotent=True)
    [record] = job_records(out)[job]
    start, alloc = held_run(record, job, "two gpus")
    assert (start, alloc) == held_run(alone, job, "two gpus")
    assert start == queue.get(job).start_time and sum(a.count for a in alloc.values()) == 2
