"""A sweep on a Slurm cluster: one job array, each task running a batch of the plan's cells.

Slurm is the distributed engine: it queues, places, retries and accounts for the tasks; this
module only maps cells to array indices and back. Task ``i`` runs the cells ``i*k .. i*k+k-1``
of the plan (``k`` cells per task), each writing its own result file into the sweep's
directory, which must be on a file system the compute nodes share with the submit host.

What a task runs is ``<this interpreter> -m blox_slurm sweep task <dir>``: the script holds
only that line, with the directory quoted; no composition, trace or label reaches a shell.
Submitting again submits only the tasks with unfinished cells that are not still queued or
running, so a failed task is re-run by running the same command.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .sweep import SweepError, pending, read_plan

SUBMITTED = "slurm.json"


class SlurmUnavailable(RuntimeError):
    """sbatch or squeue could not be run or failed: the sweep cannot go to Slurm now."""


@dataclass(frozen=True)
class ArrayLayout:
    """How a plan's cells are split over array tasks."""

    cells: int
    per_task: int

    @property
    def tasks(self) -> int:
        return math.ceil(self.cells / self.per_task)

    def cell_range(self, task: int) -> range:
        if not 0 <= task < self.tasks:
            raise SweepError(f"array task {task} is outside 0..{self.tasks - 1}")
        return range(task * self.per_task, min(self.cells, (task + 1) * self.per_task))

    def task_of(self, cell: int) -> int:
        return cell // self.per_task


def _slurm(argv: Sequence[str]) -> str:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise SlurmUnavailable(f"{argv[0]} not found: is this a Slurm submit host?") from None
    except subprocess.TimeoutExpired:
        raise SlurmUnavailable(f"{argv[0]} did not answer in 60 s") from None
    if done.returncode != 0:
        raise SlurmUnavailable(f"{argv[0]} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def array_spec(tasks: Sequence[int], max_parallel: int | None) -> str:
    """``--array`` for exactly these indices, runs collapsed (``0-9,12``), throttled if asked."""
    parts, run = [], [tasks[0]]
    for t in tasks[1:]:
        if t == run[-1] + 1:
            run.append(t)
        else:
            parts.append(run)
            run = [t]
    parts.append(run)
    text = ",".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in parts)
    return f"{text}%{max_parallel}" if max_parallel else text


def task_script(out: Path) -> str:
    return (f"#!/bin/sh\n# blox-slurm sweep task: runs this array task's cells of {out.name}\n"
            f"exec {shlex.quote(sys.executable)} -m blox_slurm sweep task "
            f"{shlex.quote(str(out))}\n")


def unfinished_tasks(out: Path, layout: ArrayLayout) -> list[int]:
    cells = read_plan(out)
    index = {cid: i for i, (cid, _) in enumerate(cells)}
    return sorted({layout.task_of(index[cid]) for cid, _ in pending(out, cells)})


def queued_tasks(array_job: int) -> set[int]:
    """Tasks of ``array_job`` Slurm still has (pending or running). The caller's jobs are
    listed and filtered here: ``squeue -j`` fails on an array that has left the queue."""
    text = _slurm(["squeue", "-h", "-r", "--me", "-o", "%F %K"])
    pairs = (line.split() for line in text.splitlines())
    return {int(task) for pair in pairs if len(pair) == 2 and pair[0] == str(array_job)
            for task in [pair[1]] if task.isdigit()}


def submit(out: Path, per_task: int, partition: str | None, max_parallel: int | None,
           extra: Sequence[str]) -> tuple[int | None, list[int]]:
    """Submit the unfinished tasks not already queued; the array's id (None when nothing
    was left to submit) and the tasks submitted."""
    layout = ArrayLayout(len(read_plan(out)), per_task)
    previous = read_submission(out)
    if previous and previous["per_task"] != per_task:
        raise SweepError(f"{out} was submitted with {previous['per_task']} cells per task: "
                         "keep --cells-per-task the same")
    busy = queued_tasks(previous["array_job"]) if previous else set()
    tasks = [t for t in unfinished_tasks(out, layout) if t not in busy]
    if not tasks:
        return None, []
    (out / "logs").mkdir(exist_ok=True)
    argv = ["sbatch", "--parsable", f"--array={array_spec(tasks, max_parallel)}",
            f"--job-name=sweep-{out.name}"[:60], f"--output={out / 'logs' / '%A_%a.out'}",
            *([f"--partition={partition}"] if partition else []), *extra]
    script = out / "task.sh"
    script.write_text(task_script(out.resolve()))
    job = int(_slurm([*argv, str(script)]).strip().split(";")[0])
    (out / SUBMITTED).write_text(json.dumps({"array_job": job, "per_task": per_task,
                                             "tasks": tasks}))
    return job, tasks


def read_submission(out: Path) -> dict[str, Any] | None:
    path = out / SUBMITTED
    return json.loads(path.read_text()) if path.exists() else None


def this_task() -> int:
    """This process's array index (Slurm sets it in every task's environment)."""
    value = os.environ.get("SLURM_ARRAY_TASK_ID")
    if value is None or not value.isdigit():
        raise SweepError("not inside a Slurm array task (SLURM_ARRAY_TASK_ID unset): give --index")
    return int(value)


def wait(array_job: int, poll: float = 5.0) -> None:
    """Until Slurm has no task of ``array_job`` left."""
    while queued_tasks(array_job):
        time.sleep(poll)
