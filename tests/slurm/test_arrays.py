"""Job arrays (red team item 5), without Slurm: reading array records on every version,
which tasks to split and when, the throttle, and how the CLI backend names array tasks.
The live test is ``tests/reliability/test_unrunnable_live.py::test_item5_*``."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from _recorded import Recorded
from hypothesis import given, settings
from hypothesis import strategies as st

from blox_slurm.slurm.arrays import Split, bracket, held_back, splits, task_ids
from blox_slurm.slurm.cli_backend import CliBackend
from blox_slurm.slurm.client import SlurmError, SlurmJob
from blox_slurm.slurm.parse import job_from_json, job_from_scontrol
from blox_slurm.slurm.runner import RetryPolicy, Runner, failed_ids

FIX = Path(__file__).parent / "fixtures"


def record(version: str, **fields: Any) -> dict[str, Any]:
    """The first job of a recorded ``squeue --json`` of ``version``, with array fields set
    the way that version writes them (numbers wrapped in ``{"set", "number"}`` after 22.05)."""
    data = json.loads((FIX / version / "squeue.json").read_text())
    job = copy.deepcopy(data["jobs"][0])
    for key, value in fields.items():
        if isinstance(job.get(key), dict):  # 24.11, 26.05
            job[key] = {"set": value is not None, "infinite": False, "number": value or 0}
        else:
            job[key] = value
    return job


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_array_records_read_alike_on_every_version(version: str) -> None:
    meta = job_from_json(record(version, array_job_id=9, array_task_id=None,
                                array_task_string="0-2,6-7%2", array_max_tasks=2))
    assert meta.unsplit_array and meta.array_tasks == "0-2,6-7" and meta.array_max_tasks == 2
    assert meta.ref == str(meta.job_id)  # the array's record names the whole array
    task = job_from_json(record(version, job_id=12, array_job_id=9, array_task_id=0,
                                array_task_string="", array_max_tasks=2))
    assert not task.unsplit_array and task.ref == "9_0" and task.array_task_id == 0
    one = job_from_json(record(version, job_id=9, array_job_id=9, array_task_id=None,
                               array_task_string="5", array_max_tasks=0))
    assert not one.unsplit_array and one.ref == "9_5"  # `--array=5`: one task, no task id
    plain = job_from_json(record(version))
    assert plain.array_job_id == 0 and plain.ref == str(plain.job_id)


def test_a_task_list_cut_short_leaves_its_array_unsplit_not_the_read_failed(
        caplog: pytest.LogCaptureFixture) -> None:
    """squeue cuts a long list ("3,17,42,...") unless SLURM_BITSTR_LEN=0 (the runner sets
    it); one such array, in any partition, used to fail every round's queue read."""
    cut = job_from_json(record("22.05", array_job_id=9, array_task_string="3,17,42,..."))
    assert cut.unsplit_array
    held = replace(cut, state="PENDING", priority=0, reason="JobHeldAdmin")
    assert splits([held], window=4) == [] and "cannot read its pending tasks" in caplog.text
    assert Runner().env["SLURM_BITSTR_LEN"] == "0"


def test_an_error_naming_a_task_is_not_read_as_the_arrays_own_job() -> None:
    assert failed_ids("Invalid job id specified for job 9_5\nfor job 12") == (12,)


def test_scontrol_lines_carry_the_same_array_fields() -> None:
    base = ("JobId={} JobName=wrap UserId=nobody(65534) Priority=0 JobState=PENDING "
            "Reason=JobHeldAdmin ArrayJobId=17 ArrayTaskId={} ArrayTaskThrottle=2 "
            "Partition=blox NumNodes=1 NumCPUs=1 NumTasks=1 TresPerNode=gres:gpu:1")
    meta = job_from_scontrol(base.format(17, "0-3%2"))
    assert meta.unsplit_array and meta.array_tasks == "0-3" and meta.array_max_tasks == 2
    task = job_from_scontrol(base.format(18, "1"))
    assert task.ref == "17_1" and not task.unsplit_array


def test_task_lists() -> None:
    assert task_ids("0-7") == list(range(8))
    assert task_ids("1,3,5-9:2%4") == [1, 3, 5, 7, 9]
    for bad in ("", "a", "5-1", "1-9:0", "0-99999999"):
        with pytest.raises(ValueError, match="bad array task list"):
            task_ids(bad)
    assert bracket([5, 0, 1, 2, 3, 9, 10]) == "[0-3,5,9-10]"


@settings(deadline=None)
@given(st.sets(st.integers(0, 5000), min_size=1, max_size=200))
def test_bracket_names_exactly_the_tasks_given(tasks: set[int]) -> None:
    assert task_ids(bracket(sorted(tasks))[1:-1]) == sorted(tasks)


def job(job_id: int, state: str = "PENDING", *, array: int = 0, task: int | None = None,
        pending: str = "", throttle: int = 0, held: bool = True) -> SlurmJob:
    return SlurmJob(job_id, "j", "u", "", "blox", state,
                    "JobHeldAdmin" if held and state == "PENDING" else "None",
                    0 if held else 1, 1, array_job_id=array, array_task_id=task,
                    array_tasks=pending, array_max_tasks=throttle)


def test_splits_fill_the_window_never_the_last_task_and_leave_failopen_arrays_alone() -> None:
    meta = job(9, array=9, pending="0-9")
    assert splits([meta], window=4) == [Split(9, (0, 1, 2, 3))]
    waiting = [job(20 + t, array=9, task=t) for t in range(3)]
    assert splits([meta, *waiting], window=4) == [Split(9, (0,))]
    assert splits([meta, *waiting], window=3) == []
    running = [job(30 + t, "RUNNING", array=9, task=t) for t in range(3)]  # not waiting
    assert splits([meta, *running], window=4) == [Split(9, (0, 1, 2, 3))]
    assert splits([job(9, array=9, pending="4-5")], window=64) == [Split(9, (4,))]
    assert splits([job(9, array=9, pending="0-9", held=False)], window=4) == []  # Slurm's


def test_tasks_past_the_throttle_are_not_runnable_released_ones_keep_their_place() -> None:
    tasks = {t: job(t, array=9, task=t, throttle=2) for t in range(5)}
    tasks[0] = replace(tasks[0], state="RUNNING", reason="None", priority=1)
    tasks[4] = replace(tasks[4], reason="Resources", priority=1)  # released by us
    aside = held_back(tasks)
    # one runs: one more may start, and task 4 (released, maybe starting) is that one
    assert set(aside) == {1, 2, 3} and "may run 2 at once" in aside[1]
    assert held_back({t: replace(j, array_max_tasks=0) for t, j in tasks.items()}) == {}


def test_the_arrays_own_record_waits_for_the_tasks_split_before_it() -> None:
    """It is the array's last task but has the array's (smallest) id: FIFO ranked it first and
    swapped a task it had just released for it."""
    own = job(9, array=9, task=7)
    split = {t: job(20 + t, array=9, task=t) for t in range(2)}
    assert set(held_back({9: own, **{j.job_id: j for j in split.values()}})) == {9}
    assert held_back({9: own}) == {}
    running = {j.job_id: replace(j, state="RUNNING") for j in split.values()}
    assert held_back({9: own, **running}) == {}


class Slurm(Recorded):
    """22.05's recorded scene for reads (array 8: its own record holding tasks 2-3, and
    tasks 0 and 1 split off as jobs 9 and 10); verbs succeed, or fail with ``fail``."""

    def __init__(self) -> None:
        super().__init__(FIX / "22.05")
        self.fail: str = ""

    def __call__(self, argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        if argv[0] == "squeue" or argv[:2] in (["sinfo", "--json"], ["scontrol", "-d"]) or (
                argv[:3] == ["scontrol", "show", "job"]):
            return super().__call__(argv, **kw)
        self.argvs.append(tuple(argv))
        if self.fail:
            return subprocess.CompletedProcess(argv, 1, "", self.fail)
        return subprocess.CompletedProcess(argv, 0, "", "")


def test_the_cli_backend_names_array_tasks_a_t_and_maps_their_errors_back() -> None:
    slurm = Slurm()
    cli = CliBackend(runner=Runner(retry=RetryPolicy(attempts=1), execute=slurm,
                                   sleep=lambda _: None))
    cli.list_jobs()
    cli.release([9, 10, 5])
    assert slurm.argvs[-1] == ("scontrol", "release", "8_0,8_1,5")  # never "8": all tasks
    cli.cancel([9])
    assert slurm.argvs[-1] == ("scancel", "8_0")
    cli.split_array(8, [2, 3])
    assert slurm.argvs[-1] == ("scontrol", "hold", "8_[2-3]")
    slurm.fail = "8_0: Job is pending execution\nJob is pending execution for job 5\n"
    with pytest.raises(SlurmError) as err:
        cli.requeue_hold([9, 5])
    assert set(err.value.failed_ids) == {9, 5}
