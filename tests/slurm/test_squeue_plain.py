"""The plain queue read gives the records ``squeue --json`` gives, on every supported version,
whatever a user typed into a job; bad output is a SlurmError naming field, command and version.
Recorded output (``fixtures/<version>/``, see ``record_fixtures.py``), no Slurm needed; the
live comparison on a varied queue is ``test_queue_read_live.py``."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
from _recorded import backend, position, tokens
from hypothesis import given, settings
from hypothesis import strategies as st

from blox_slurm.slurm.client import SlurmError, SlurmJob
from blox_slurm.slurm.parse import MalformedField, job_from_scontrol
from blox_slurm.slurm.squeue_plain import PlainFormat, job_from_plain

FIX = Path(__file__).parent / "fixtures"
VERSIONS = sorted(p.name for p in FIX.iterdir() if (p / "squeue_plain.txt").exists())


def as_dict(job: SlurmJob) -> dict[str, object]:
    return {f.name: getattr(job, f.name) for f in fields(job)}


def test_every_supported_version_has_a_recorded_plain_read() -> None:
    assert {"22.05", "24.11", "26.05"} <= set(VERSIONS)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_plain_read_gives_the_records_the_json_gives(version: str) -> None:
    cli, _ = backend(FIX / version)
    plain = {j.job_id: as_dict(j) for j in cli.list_jobs(finished=True)}
    json = {j.job_id: as_dict(j) for j in cli.json_jobs()}
    assert sorted(plain) == sorted(json) == list(range(1, 11))
    for job_id, record in json.items():
        assert plain[job_id] == record, {k: (v, plain[job_id][k]) for k, v in record.items()
                                         if plain[job_id][k] != v}


@pytest.mark.parametrize("version", VERSIONS)
def test_only_the_partitions_asked_for_are_read(version: str) -> None:
    cli, fake = backend(FIX / version)
    assert [j.job_id for j in cli.list_jobs(["plain"], finished=True)] == [6]
    assert [a for a in fake.argvs if a[0] == "squeue"][0][-1] == "--partition=plain"
    calls = cli.calls
    assert cli.list_jobs([]) == [] and cli.calls == calls  # no partition: nothing to ask


@pytest.mark.parametrize("version", VERSIONS)
def test_the_tokens_are_secret_and_never_in_an_argv(version: str) -> None:
    one, fake = backend(FIX / version)
    two, _ = backend(FIX / version)
    one.list_jobs()
    two.list_jobs()
    mine, theirs = tokens(one.runner.env), tokens(two.runner.env)
    assert len(set(mine + theirs)) == 4 and all(len(t) == 12 and t.isalpha() for t in mine)
    assert not [a for argv in fake.argvs for a in argv if any(t in a for t in mine)]
    assert one.runner.env["SLURM_TIME_FORMAT"] == "%s"


def _record(fmt: PlainFormat, **values: str) -> str:
    """One record as squeue prints it: every field, its token after it."""
    base = {name: "N/A" for name in fmt.fields} | {
        "job_id": "42", "state": "PENDING", "priority": "7", "num_nodes": "1", "tasks": "1",
        "cpus": "1", "min_memory": "0", "tres": "cpu=1", "restarts": "0", "requeue": "1",
        "exit_code": "0", "user": "alice", "partition": "blox", "reason": "JobHeldAdmin"}
    base.update(values)
    return fmt.field_end.join(base[name] for name in fmt.fields)


FREE_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                    max_size=40)


@settings(deadline=None)
@given(name=FREE_TEXT, comment=FREE_TEXT, work_dir=FREE_TEXT)
def test_anything_a_user_can_type_stays_in_its_field(name: str, comment: str,
                                                     work_dir: str) -> None:
    fmt = PlainFormat.new()
    forged = _record(PlainFormat.new(), job_id="7", partition="other")  # other tokens
    out = _record(fmt, name=name + forged, comment=comment, work_dir=work_dir) + (
        fmt.record_end + "\n")
    (record,) = fmt.records(out)
    job = job_from_plain(fmt.values(record))
    assert job.job_id == 42 and job.partition == "blox"
    assert job.name == name + forged and job.work_dir == (
        "" if work_dir in ("", "(null)") else work_dir)
    assert job.comment == ("" if comment in ("", "(null)") else comment)


def test_a_record_short_of_a_field_or_cut_off_is_malformed() -> None:
    fmt = PlainFormat.new()
    record = _record(fmt)
    with pytest.raises(MalformedField, match=r"`\(record\)`.*32 fields instead of 33"):
        fmt.values(record.replace(fmt.field_end, "", 1))
    with pytest.raises(MalformedField, match="record end"):
        list(fmt.records(record + fmt.record_end + "\n" + record))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("field", "value"), [
    ("priority", "high"), ("num_nodes", "2-x"), ("start_time", "2026-07-01T10:00:00"),
    ("nodes", "node[1-x]"), ("min_memory", "lots"), ("exit_code", "x:0"),
])
def test_a_bad_field_is_a_slurm_error_naming_field_command_and_version(
        version: str, field: str, value: str) -> None:
    def spoil(text: str) -> str:
        field_end, record_end = tokens(cli.runner.env)
        first, _, rest = text.partition(record_end)
        values = first.split(field_end)
        values[position(cli.runner.env, field)] = value
        return field_end.join(values) + record_end + rest

    cli, _ = backend(FIX / version, plain=spoil)
    with pytest.raises(SlurmError) as e:
        cli.list_jobs()
    message = str(e.value)
    assert f"`{field}" in message or "`nodes/gres/memory`" in message, message
    assert "`squeue -h --noconvert" in message and f"Slurm {version}" in message


def _plain_job(**values: str) -> SlurmJob:
    fmt = PlainFormat.new()
    return job_from_plain(fmt.values(_record(fmt, **values)))


def test_exit_codes_as_22_05_and_later_releases_print_them() -> None:
    assert _plain_job(exit_code="768").exit_code == 3  # 22.05: the raw wait status
    assert _plain_job(exit_code="3:0").exit_code == 3  # 24.11 on: code:signal


def test_memory_per_gpu_per_node_or_per_cpu_as_the_json_path_reads_it() -> None:
    per_cpu = _plain_job(min_memory="700M", cpus="3", tres="cpu=3,mem=2100M,node=1")
    per_node = _plain_job(min_memory="1500M", cpus="3", num_nodes="2",
                          tres="cpu=3,mem=3000M,node=2")
    per_gpu = _plain_job(min_memory="4096M", mem_per_tres="gres:gpu:1500",
                         tres_per_node="gres:gpu:2", tres="cpu=1,mem=3000M,node=1")
    assert (per_cpu.memory_mb, per_node.memory_mb, per_gpu.memory_mb) == (2100, 3000, 3000)


@pytest.mark.parametrize(("task", "array"), [
    ("N/A", (0, None, "", 0)),  # not an array task (squeue prints its own id as the array's)
    ("3-9%3", (42, None, "3-9", 3)),  # the array's record, its waiting tasks and throttle
    ("5", (42, 5, "", 0)),  # a task, or an array's record holding one waiting task
    ("9%3", (42, 9, "", 3)),
])
def test_array_fields(task: str, array: tuple[int, int | None, str, int]) -> None:
    job = _plain_job(array_job_id="42", array_task=task)
    assert (job.array_job_id, job.array_task_id, job.array_tasks,
            job.array_max_tasks) == array


def test_unset_values_read_as_the_json_path_reads_them() -> None:
    job = _plain_job(end_time="NONE", start_time="N/A", submit_time="1700000000",
                     account="(null)", dependency="(null)", req_nodes="")
    assert (job.end_time, job.start_time, job.submit_time) == (None, None, 1700000000.0)
    assert (job.account, job.dependency, job.req_nodes, job.reason) == (
        "", "", (), "JobHeldAdmin")


def test_scontrol_times_read_as_epoch_seconds_too() -> None:
    """Once a backend has read the queue, its runner's environment has
    SLURM_TIME_FORMAT=%s, and ``scontrol show job`` (get_job) prints epoch seconds."""
    line = ("JobId=3 JobName=x UserId=bob(1) Priority=1 JobState=RUNNING Reason=None "
            "SubmitTime=1700000000 StartTime=1700000060 EndTime=Unknown EligibleTime=0")
    job = job_from_scontrol(line)
    assert (job.submit_time, job.start_time, job.end_time, job.eligible_time) == (
        1700000000.0, 1700000060.0, None, None)
