"""What a queue read costs: Slurm calls that do not grow with the queue, the bounded reads for
what the plain format lacks made once and kept while they cannot change, records not parsed
again while their text stays the same. On each version's recorded scene (``fixtures/``), no
Slurm needed."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from _recorded import backend, position, tokens

from blox_slurm.slurm import queue_read
from blox_slurm.slurm.client import SlurmError
from blox_slurm.slurm.parse import ParsedJob, job_records
from blox_slurm.slurm.queue_read import LISTING, RUNNING_JSON, code_of, described
from blox_slurm.slurm.squeue_plain import job_from_plain

FIX = Path(__file__).parent / "fixtures"
VERSIONS = sorted(p.name for p in FIX.iterdir() if (p / "squeue_plain.txt").exists())
RUNNING_WITH_GPUS = 4  # jobs 1, 2, 3 and 6 of the recorded scene


def _reads(argvs: list[tuple[str, ...]], since: int) -> list[tuple[str, ...]]:
    return argvs[since:]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_steady_read_is_one_call_two_on_22_05(version: str) -> None:
    cli, fake = backend(FIX / version)
    cli.list_nodes()
    n = len(fake.argvs)
    cli.list_jobs()
    first = _reads(fake.argvs, n)
    details = [a for a in first if a[:2] == ("scontrol", "-d") or a[:2] == ("squeue", "--json")]
    # each running GPU job's indices, once, read beside the first queue read: the listing of
    # every job on 22.05 (test_the_first_read_lists_every_job_beside_the_queue), the running
    # jobs' JSON records later
    assert details == ([LISTING] if version == "22.05" else [RUNNING_JSON])
    n = len(fake.argvs)
    cli.list_jobs()
    assert [a[0] for a in _reads(fake.argvs, n)] == (
        ["squeue", "squeue"] if version == "22.05" else ["squeue"])


@pytest.mark.parametrize("version", VERSIONS)
def test_the_calls_do_not_grow_with_the_queue(version: str) -> None:
    """10,000 more waiting jobs (copies of job 5 under new ids): the same calls."""
    def grow(text: str) -> str:
        field_end, record_end = tokens(cli.runner.env)
        five = next(r for r in text.split(record_end + "\n") if r.startswith(f"5{field_end}"))
        rest = five.partition(field_end)[2]
        return text + "".join(f"{i}{field_end}{rest}{record_end}\n"
                              for i in range(1000, 11000))

    small, small_fake = backend(FIX / version)
    cli, fake = backend(FIX / version, plain=grow)
    for c in (small, cli):
        c.list_jobs()
    assert len(cli.list_jobs()) == len(small.list_jobs()) + 10000
    assert len(fake.argvs) == len(small_fake.argvs)


@pytest.mark.parametrize("version", VERSIONS)
def test_unchanged_records_are_not_parsed_again(version: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[int] = []

    def counting(values: dict[str, str], exc: str | None = None) -> ParsedJob:
        parsed.append(int(values["job_id"]))
        return job_from_plain(values, exc)

    monkeypatch.setattr(queue_read, "job_from_plain", counting)
    cli, _ = backend(FIX / version)
    first = cli.list_jobs(finished=True)
    assert sorted(set(parsed)) == sorted(j.job_id for j in first)
    parsed.clear()
    assert cli.list_jobs(finished=True) == first and parsed == []


@pytest.mark.parametrize("version", VERSIONS)
def test_a_new_run_has_its_gpus_read_once(version: str) -> None:
    """Job 1 starts a new run (its StartTime moves): one detail read, then none."""
    moved = False

    def restart(text: str) -> str:
        if not moved:
            return text
        field_end, record_end = tokens(cli.runner.env)
        at = position(cli.runner.env, "start_time")
        records = text.split(record_end + "\n")
        for i, r in enumerate(records):
            values = r.split(field_end)
            if values[0] == "1":
                values[at] = str(int(values[at]) + 60)
                records[i] = field_end.join(values)
        return (record_end + "\n").join(records)

    cli, fake = backend(FIX / version, plain=restart)
    cli.list_jobs()
    moved = True
    n = len(fake.argvs)
    job = next(j for j in cli.list_jobs() if j.job_id == 1)
    again = _reads(fake.argvs, n)
    assert [a for a in again if a[0] == "scontrol"] == [("scontrol", "-d", "show", "job",
                                                        "-o", "1")]
    assert sum(a.count for a in job.gpu_alloc.values()) == 2
    n = len(fake.argvs)
    cli.list_jobs()
    assert not [a for a in _reads(fake.argvs, n) if a[0] == "scontrol"]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_description_with_no_known_code_is_read_once_from_json(version: str) -> None:
    def describe(text: str) -> str:
        return text.replace("Resources", "Nodes busy, resources reserved for job 3")

    cli, fake = backend(FIX / version, plain=describe)
    job = next(j for j in cli.list_jobs() if j.job_id == 5)
    assert job.reason == "Resources"  # the code the JSON gives
    asked = [a for a in fake.argvs if "--json" in a and a[0] == "squeue" and a != RUNNING_JSON]
    only_five = ("squeue", "--json", "--states=all", "--jobs=5")
    assert asked == [only_five if version != "22.05" else only_five[:-1]]
    n = len(fake.argvs)
    cli.list_jobs()
    assert not [a for a in _reads(fake.argvs, n) if "--json" in a]


@pytest.mark.parametrize("version", VERSIONS)
def test_an_arrays_throttle_is_read_once_when_no_record_shows_it(version: str) -> None:
    cli, fake = backend(FIX / version)
    cli.list_jobs()
    lookups = [a for a in fake.argvs if a[:3] == ("scontrol", "show", "job")]
    # 22.05 lists the array's waiting tasks as "2-3%2"; -r (24.11 on) prints no throttle
    assert len(lookups) == (0 if version == "22.05" else 1)
    n = len(fake.argvs)
    assert {j.array_max_tasks for j in cli.list_jobs() if j.array_job_id} == {2}
    assert not [a for a in _reads(fake.argvs, n) if a[:3] == ("scontrol", "show", "job")]


@pytest.mark.parametrize("version", ["24.11", "26.05"])
def test_an_id_listed_twice_that_is_no_arrays_own_record_is_a_slurm_error(
        version: str) -> None:
    def twice(text: str) -> str:
        record_end = tokens(cli.runner.env)[1]
        first = text.split(record_end + "\n")[0]
        return text + first + record_end + "\n"

    cli, _ = backend(FIX / version, plain=twice)
    with pytest.raises(SlurmError, match="listed 2 times"):
        cli.list_jobs()


def test_descriptions_and_codes() -> None:
    assert not described("JobHeldUser") and not described("launch_failed_requeued_held")
    assert described("job requeued in held state") and described("ReqNodeNotAvail, x")
    assert code_of("job requeued in held state") == "JobHeldUser"
    assert code_of("ReqNodeNotAvail, UnavailableNodes:node4") == "ReqNodeNotAvail"
    assert code_of("Some other description") is None


@pytest.mark.parametrize("version", VERSIONS)
def test_many_new_runs_are_read_in_one_call(version: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """More new runs than ONE_BY_ONE after the first read (which reads every run's GPUs
    ahead): one read for all of them (their JSON records where --jobs is honoured, every
    job's scontrol record on 22.05). The first read here does not show them yet."""
    def hidden(text: str) -> str:
        if shown:
            return text
        field_end, record_end = tokens(cli.runner.env)
        return "".join(r + record_end + "\n" for r in text.split(record_end + "\n")[:-1]
                       if r.split(field_end)[0] not in {"1", "2", "3", "6"})

    monkeypatch.setattr(queue_read, "ONE_BY_ONE", 2)
    shown = False
    cli, fake = backend(FIX / version, plain=hidden)
    assert not {1, 2, 3, 6} & {j.job_id for j in cli.list_jobs(finished=True)}
    shown = True
    n = len(fake.argvs)
    jobs = {j.job_id: j for j in cli.list_jobs(finished=True)}
    asked = [a for a in _reads(fake.argvs, n)
             if a[0] == "scontrol" or "--json" in a and a[0] == "squeue"]
    assert asked == ([("scontrol", "-d", "show", "job", "-o")] if version == "22.05" else
                     [("squeue", "--json", "--states=all", "--jobs=1,2,3,6")])
    json = {j.job_id: j for j in cli.json_jobs()}
    assert all(jobs[i].gpu_alloc == json[i].gpu_alloc and jobs[i].gpu_alloc
               for i in (1, 2, 3, 6))


def test_a_name_posing_as_a_record_gets_its_job_a_read_of_its_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """22.05's listing of every job: job 4's name holds a newline and what looks like job
    1's record with other GPUs. Job 1 is then read on its own, and holds what it holds."""
    monkeypatch.setattr(queue_read, "ONE_BY_ONE", 2)
    fake_one = ("JobId=1 JobName=wrap UserId=root(0) JOB_GRES=gpu:v100:2 Nodes=node3 "
                "CPU_IDs=0 Mem=4096 GRES=gpu:v100:2(IDX:2-3) MinCPUsNode=1")

    def forged(text: str) -> str:
        return fake_one + "\n" + text  # first: a parser taking the first would take it

    cli, fake = backend(FIX / "22.05", listing=forged)
    one = next(j for j in cli.list_jobs() if j.job_id == 1)
    assert ("scontrol", "-d", "show", "job", "-o", "1") in fake.argvs
    assert one.gpu_alloc == next(j for j in cli.json_jobs() if j.job_id == 1).gpu_alloc


@pytest.mark.parametrize("version", VERSIONS)
def test_the_first_read_reads_every_runs_gpus_beside_the_queue(version: str) -> None:
    """A controller's first read: the read of every run's GPUs (the listing of every job on
    22.05, the running jobs' JSON records later) is asked for while the queue read is still
    under way, not after it. The queue read here waits for that call; read one after the
    other, it never comes."""
    ahead = threading.Event()

    def listing(text: str) -> str:
        ahead.set()
        return text

    def running(name: str, data: dict[str, Any]) -> None:
        if name == "squeue.json":
            ahead.set()

    def queue(text: str) -> str:
        if not reads:
            ahead.wait(timeout=5)
        reads.append(text)
        return text

    reads: list[str] = []
    cli, fake = backend(FIX / version, plain=queue, listing=listing, edit=running)
    first = cli.list_jobs(finished=True)
    assert ahead.is_set()
    assert [a for a in fake.argvs if a[:2] in (("scontrol", "-d"), ("squeue", "--json"))] == [
        LISTING if version == "22.05" else RUNNING_JSON]
    json = {j.job_id: j for j in cli.json_jobs()}
    assert all(j.gpu_alloc == json[j.job_id].gpu_alloc for j in first)
    assert sum(bool(j.gpu_alloc) for j in first) == RUNNING_WITH_GPUS
    n = len(fake.argvs)
    assert cli.list_jobs(finished=True) == first  # later reads: nothing read ahead
    assert not [a for a in _reads(fake.argvs, n) if a[0] == "scontrol" or "--json" in a]


@pytest.mark.parametrize("version", ["24.11", "26.05"])
def test_a_failed_read_ahead_is_read_again_after_the_queue(
        version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The running jobs' JSON read ahead fails (here: refused): the first read does not
    fail with it, and reads the new runs' records as it would without reading ahead."""
    cli, fake = backend(FIX / version)
    monkeypatch.setattr(fake, "_running", lambda argv: None)  # exit 1, "unrecognized option"
    first = {j.job_id: j for j in cli.list_jobs(finished=True)}
    assert ("squeue", "--json", "--states=all", "--jobs=1,2,3,6") in fake.argvs
    json = {j.job_id: j for j in cli.json_jobs()}
    assert all(first[i].gpu_alloc == json[i].gpu_alloc and first[i].gpu_alloc
               for i in (1, 2, 3, 6))


def test_a_listed_record_of_another_run_is_not_taken() -> None:
    """The listing read beside the queue may be older than it: job 1 still pending there
    (or in an earlier run) holds no GPUs of the run the queue shows. It is read on its own."""
    def earlier(text: str) -> str:
        start = next(r for r in text.splitlines() if r.startswith("JobId=1 ")).split(
            " StartTime=")[1].split(" ")[0]
        return "\n".join(r.replace(f" StartTime={start} ", f" StartTime={int(start) - 60} ")
                         if r.startswith("JobId=1 ") else r for r in text.splitlines())

    cli, fake = backend(FIX / "22.05", listing=earlier)
    one = next(j for j in cli.list_jobs() if j.job_id == 1)
    assert [a for a in fake.argvs if a[0] == "scontrol"] == [
        LISTING, ("scontrol", "-d", "show", "job", "-o", "1")]
    assert one.gpu_alloc == next(j for j in cli.json_jobs() if j.job_id == 1).gpu_alloc
    assert one.gpu_alloc


def test_job_records_cuts_out_the_records_asked_for() -> None:
    """A record starts where a line starts with ``JobId=<digits> ``, the first line too;
    a name holding a newline and such a line poses as a second record of its id."""
    out = ("JobId=1 JobName=a\nJobId=x not a record\nJobId=2 JobName=b\nJobId=3 JobName=c"
           "\nJobId=1 JobName=posing\n")
    assert job_records(out) == {1: ["JobId=1 JobName=a\nJobId=x not a record",
                                    "JobId=1 JobName=posing\n"],
                                2: ["JobId=2 JobName=b"], 3: ["JobId=3 JobName=c"]}
    assert job_records(out, {2, 9}) == {2: ["JobId=2 JobName=b"]}
    assert job_records("no records\n") == {} and job_records("") == {}
