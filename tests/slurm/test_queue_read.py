"""What a queue read costs: Slurm calls that do not grow with the queue, the bounded reads for
what the plain format lacks made once and kept while they cannot change, records not parsed
again while their text stays the same. On each version's recorded scene (``fixtures/``), no
Slurm needed."""

from __future__ import annotations

from pathlib import Path

import pytest
from _recorded import backend, position, tokens

from blox_slurm.slurm import queue_read
from blox_slurm.slurm.client import SlurmError
from blox_slurm.slurm.parse import ParsedJob, job_records
from blox_slurm.slurm.queue_read import LISTING, SHOW, code_of, described, show_limit
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
    details = [a for a in first if a == SHOW or a[:2] in (("scontrol", "-d"), ("squeue", "--json"))]
    # each running GPU job's indices, once, in one scontrol reading a `show job` for each
    # (test_the_new_runs_are_read_in_one_scontrol)
    assert details == [SHOW]
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

    def restarted(text: str) -> str:  # scontrol's record of job 1 shows the new run too
        return _moved_start(text, 60) if moved else text

    cli, fake = backend(FIX / version, plain=restart, listing=restarted)
    cli.list_jobs()
    moved = True
    n = len(fake.argvs)
    job = next(j for j in cli.list_jobs() if j.job_id == 1)
    again = _reads(fake.argvs, n)
    assert [a for a in again if a[0] == "scontrol"] == [SHOW]
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
    asked = [a for a in fake.argvs if "--json" in a and a[0] == "squeue"]
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
    """More new runs than show_limit allows: one read of them all (their JSON records where
    --jobs is honoured, every job's scontrol record on 22.05). The first read here does not
    show them yet."""
    def hidden(text: str) -> str:
        if shown:
            return text
        field_end, record_end = tokens(cli.runner.env)
        return "".join(r + record_end + "\n" for r in text.split(record_end + "\n")[:-1]
                       if r.split(field_end)[0] not in {"1", "2", "3", "6"})

    monkeypatch.setattr(queue_read, "SHOW_ALWAYS", 2)
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


@pytest.mark.parametrize("always", [2, queue_read.SHOW_ALWAYS])
def test_a_name_posing_as_a_record_gets_its_job_a_read_of_its_own(
        always: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Job 4's name holds a newline and what looks like job 1's record with other GPUs, in
    22.05's listing of every job (4 new runs, more than 2 read by `show job`) and in the
    records one scontrol shows. Job 1 is then read on its own, and holds what it holds."""
    monkeypatch.setattr(queue_read, "SHOW_ALWAYS", always)
    fake_one = ("JobId=1 JobName=wrap UserId=root(0) JOB_GRES=gpu:v100:2 Nodes=node3 "
                "CPU_IDs=0 Mem=4096 GRES=gpu:v100:2(IDX:2-3) MinCPUsNode=1")

    def forged(text: str) -> str:
        return fake_one + "\n" + text  # first: a parser taking the first would take it

    cli, fake = backend(FIX / "22.05", listing=forged)
    one = next(j for j in cli.list_jobs() if j.job_id == 1)
    assert [a for a in fake.argvs if a[0] == "scontrol"][0] == (LISTING if always == 2 else SHOW)
    assert ("scontrol", "-d", "show", "job", "-o", "1") in fake.argvs
    assert one.gpu_alloc == next(j for j in cli.json_jobs() if j.job_id == 1).gpu_alloc


@pytest.mark.parametrize("version", VERSIONS)
def test_the_new_runs_are_read_in_one_scontrol(version: str) -> None:
    """The first read: the GPUs of the four running jobs from one scontrol reading a `show
    job` for each (no read of every job, no read of one job); later reads: none."""
    def detail(argv: tuple[str, ...]) -> bool:  # not the arrays' throttle reads
        return argv == SHOW or argv[:2] in (("scontrol", "-d"), ("squeue", "--json"))

    cli, fake = backend(FIX / version)
    first = cli.list_jobs(finished=True)
    assert [a for a in fake.argvs if detail(a)] == [SHOW]
    json = {j.job_id: j for j in cli.json_jobs()}
    assert all(j.gpu_alloc == json[j.job_id].gpu_alloc for j in first)
    assert sum(bool(j.gpu_alloc) for j in first) == RUNNING_WITH_GPUS
    n = len(fake.argvs)
    assert cli.list_jobs(finished=True) == first
    assert not [a for a in _reads(fake.argvs, n) if detail(a)]


@pytest.mark.parametrize("version", VERSIONS)
def test_a_run_gone_before_its_show_job_costs_the_others_nothing(version: str) -> None:
    """Job 77 runs in the queue read (a copy of job 6) and has left before its `show job`:
    scontrol exits 1, the other runs' GPUs are taken from its output, and 77 is read on its
    own (and found gone: no GPUs)."""
    def with_77(text: str) -> str:
        field_end, record_end = tokens(cli.runner.env)
        six = next(r for r in text.split(record_end + "\n") if r.startswith(f"6{field_end}"))
        return text + f"77{field_end}{six.partition(field_end)[2]}{record_end}\n"

    cli, fake = backend(FIX / version, plain=with_77)
    jobs = {j.job_id: j for j in cli.list_jobs(finished=True)}
    json = {j.job_id: j for j in cli.json_jobs()}
    assert [a for a in fake.argvs if a == SHOW or a[:2] == ("scontrol", "-d")] == [
        SHOW, ("scontrol", "-d", "show", "job", "-o", "77")]
    assert all(jobs[i].gpu_alloc == json[i].gpu_alloc and jobs[i].gpu_alloc
               for i in (1, 2, 3, 6))
    assert not jobs[77].gpu_alloc


def test_the_show_limit_grows_with_the_queue() -> None:
    assert show_limit(10) == show_limit(0) == queue_read.SHOW_ALWAYS
    assert show_limit(20_000) == 20_000 // queue_read.SHOW_COST > queue_read.SHOW_ALWAYS


def test_a_listed_record_of_another_run_is_not_taken() -> None:
    """The records read after the queue may be of another run than the queue shows (job 1
    requeued and started again meanwhile): that run's GPUs are not taken. It is read on its
    own."""
    cli, fake = backend(FIX / "22.05", listing=lambda text: _moved_start(text, -60))
    one = next(j for j in cli.list_jobs() if j.job_id == 1)
    assert [a for a in fake.argvs if a[0] == "scontrol"] == [
        SHOW, ("scontrol", "-d", "show", "job", "-o", "1")]
    assert one.gpu_alloc == next(j for j in cli.json_jobs() if j.job_id == 1).gpu_alloc
    assert one.gpu_alloc


def _moved_start(text: str, by: int) -> str:
    """scontrol's records with job 1's StartTime moved ``by`` seconds."""
    start = next(r for r in text.splitlines() if r.startswith("JobId=1 ")).split(
        " StartTime=")[1].split(" ")[0]
    return "\n".join(r.replace(f" StartTime={start} ", f" StartTime={int(start) + by} ")
                     if r.startswith("JobId=1 ") else r for r in text.splitlines())


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
