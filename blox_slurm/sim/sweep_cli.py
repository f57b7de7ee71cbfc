"""``blox-slurm sweep run | task | status | collect``: a sweep, locally or as a Slurm job array."""

from __future__ import annotations

import os
import time
from concurrent.futures import Future, as_completed
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from ..cli_errors import exit_codes
from ..core.composition import CompositionError
from ..core.registry import PolicyError
from ..logs import console
from ..workloads.schema import WorkloadError
from .experiment import Experiment, worker_pool
from .progress import describe, progress
from .simulator import SimulationError
from .sweep import (
    SweepError,
    Unfinished,
    pending,
    plan,
    read_plan,
    read_spec,
    result_path,
    results,
    run_cell,
    write_plan,
)
from .sweep_slurm import ArrayLayout, SlurmUnavailable, read_submission, submit, this_task, wait

sweep_app = typer.Typer(
    help="Sweeps: compositions x loads x seeds x traces x clusters, locally or as a Slurm "
    "job array; resumable.", no_args_is_help=True)

DirArg = Annotated[Path, typer.Argument(help="The sweep's output directory.")]


def _errors() -> AbstractContextManager[None]:
    """Bad sweep files, compositions and traces exit 2; Slurm, simulation and unfinished
    cells exit 1 (the CLI's convention)."""
    return exit_codes((SweepError, CompositionError, WorkloadError, PolicyError, ValueError,
                       ValidationError), (SimulationError, SlurmUnavailable, Unfinished))


def _run_local(out: Path, todo: list[tuple[str, Experiment]], total: int,
               processes: int) -> list[str]:
    """Run the cells in a pool, each result written as it finishes; the failed cells' lines."""
    failed = []
    with progress(total, total - len(todo), "cells") as tick, \
            worker_pool(processes) as pool:
        futures: dict[Future[Path], Experiment] = {
            pool.submit(run_cell, out, cid, exp): exp for cid, exp in todo}
        for fut in as_completed(futures):
            exp = futures[fut]
            if fut.exception() is not None:
                failed.append(f"{describe(exp)}: {fut.exception()}")
                tick(f"FAILED {describe(exp)}")
            else:
                tick(describe(exp))
    return failed


def run(
    sweep_file: Annotated[Path, typer.Argument(help="The sweep's TOML file.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory (resumed if it "
                                      "holds this sweep).")],
    processes: Annotated[int | None, typer.Option(
        "--processes", "-j", help="Local worker processes (default: one per core).")] = None,
    slurm: Annotated[bool, typer.Option("--slurm", help="Submit a Slurm job array instead of "
                                        "running here.")] = False,
    partition: Annotated[str | None, typer.Option(help="--slurm: the array's partition.")] = None,
    cells_per_task: Annotated[int, typer.Option(
        min=1, help="--slurm: cells each array task runs.")] = 1,
    max_parallel: Annotated[int | None, typer.Option(
        min=1, help="--slurm: at most this many tasks at once (%N).")] = None,
    sbatch_arg: Annotated[list[str] | None, typer.Option(
        help="--slurm: an extra sbatch option, e.g. --sbatch-arg=--time=1:00:00 (repeatable).")
    ] = None,
    wait_: Annotated[bool, typer.Option("--wait", help="--slurm: wait for the array, then "
                                        "collect.")] = False,
) -> None:
    """Run a sweep's unfinished cells: here in a process pool, or as a Slurm job array."""
    with _errors():
        spec, base = read_spec(sweep_file)
        write_plan(out, plan(spec, base))
        cells = read_plan(out)
        todo = pending(out, cells)
        if slurm:
            _submit(out, cells_per_task, partition, max_parallel, sbatch_arg or [], wait_)
            return
        t0 = time.perf_counter()
        failed = _run_local(out, todo, len(cells), processes or os.cpu_count() or 1)
        console(stderr=True).print(f"{len(todo) - len(failed)} cell(s) run in "
                                   f"{time.perf_counter() - t0:.1f} s, "
                                   f"{len(cells) - len(todo)} already done", markup=False)
        if failed:
            raise Unfinished(f"{len(failed)} cell(s) failed (run again to retry): {failed[0]}")
        _collect(out)


def _submit(out: Path, per_task: int, partition: str | None, max_parallel: int | None,
            extra: list[str], wait_: bool) -> None:
    err = console(stderr=True)
    job, tasks = submit(out, per_task, partition, max_parallel, extra)
    if job is None:
        err.print("nothing to submit: every cell is finished or queued", markup=False)
    else:
        err.print(f"submitted array job {job}: {len(tasks)} task(s), {per_task} cell(s) each; "
                  f"logs in {out / 'logs'}", markup=False)
    previous = read_submission(out)
    if wait_ and previous:
        wait(int(previous["array_job"]))
        _collect(out)


def task(
    out: DirArg,
    index: Annotated[int | None, typer.Option(help="The array index (default: "
                                              "$SLURM_ARRAY_TASK_ID).")] = None,
) -> None:
    """Run one array task's cells (what each task of `sweep run --slurm` runs)."""
    with _errors():
        submission = read_submission(out)
        per_task = int(submission["per_task"]) if submission else 1
        cells = read_plan(out)
        layout = ArrayLayout(len(cells), per_task)
        for i in layout.cell_range(this_task() if index is None else index):
            cid, exp = cells[i]
            if not result_path(out, cid).exists():  # a re-run task skips finished cells
                run_cell(out, cid, exp)


def status(out: DirArg) -> None:
    """Finished and unfinished cells, and the array's tasks Slurm still has."""
    with _errors():
        cells = read_plan(out)
        todo = pending(out, cells)
        lines = [f"{len(cells) - len(todo)}/{len(cells)} cells finished"]
        lines += [f"  unfinished: {describe(exp)}" for _, exp in todo[:20]]
        submission = read_submission(out)
        if submission:
            from .sweep_slurm import queued_tasks

            queued = queued_tasks(int(submission["array_job"]))
            lines.append(f"array job {submission['array_job']}: {len(queued)} task(s) queued "
                         "or running" + ("" if queued or not todo else
                                         "; none left: run `sweep run --slurm` again to retry"))
        typer.echo("\n".join(lines))


def _collect(out: Path) -> None:
    from .sweep_figures import write_report

    runs, missing = results(out)
    if missing:
        raise Unfinished(f"{len(missing)} cell(s) unfinished: see `blox-slurm sweep status {out}`")
    compositions = list(dict.fromkeys(r.name for r in runs))
    name = str(runs[0].params.get("sweep", out.name)) if runs else out.name
    report = write_report(name, compositions, runs, out)
    console(stderr=True).print(f"report: {report}", markup=False)


def collect(out: DirArg) -> None:
    """Gather every cell's results: results.csv, summary.csv, figures and report.md."""
    with _errors():
        _collect(out)


for _command in (run, task, status, collect):
    sweep_app.command()(_command)
