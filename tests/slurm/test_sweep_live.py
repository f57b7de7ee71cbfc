"""``blox-slurm sweep run --slurm`` for real: the sweep as a job array on the emulator, the
same results as the same sweep run locally, and an unfinished task re-run by running again."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from _wait import wait_for
from typer.testing import CliRunner

from blox_slurm.cli import app
from blox_slurm.emulator.cluster import Emulator
from blox_slurm.sim.sweep import CELLS, read_plan
from blox_slurm.sim.sweep_slurm import SUBMITTED, queued_tasks, read_submission

SWEEP = """
name = "live"
compositions = ["fifo", "las"]
loads = [40, 80]
seeds = [0, 1]
[workload]
jobs = 120
measure = "all"
"""


def rows(out: Path) -> list[dict[str, str]]:
    """results.csv without the run's wall time (the one column that may differ)."""
    with (out / "results.csv").open() as f:
        return [{k: v for k, v in r.items() if k != "wall_seconds"} for r in csv.DictReader(f)]


def drain(out: Path) -> None:
    job = int((read_submission(out) or {})["array_job"])
    wait_for(lambda: not queued_tasks(job), timeout=240, every=2.0,
             what=f"array job {job} to leave the queue ({list(out.glob('logs/*'))})")


def invoke(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.slurm
def test_a_sweep_as_a_job_array_gives_the_local_results_and_reruns_what_is_missing(
        emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_CONF", str(emulator.conf))
    spec = tmp_path / "sweep.toml"
    spec.write_text(SWEEP)
    local, array = tmp_path / "local", tmp_path / "array"
    invoke("sweep", "run", str(spec), "-o", str(local), "-j", "1")

    out = invoke("sweep", "run", str(spec), "-o", str(array), "--slurm", "--partition",
                 emulator.spec.plain_partition, "--cells-per-task", "3")
    assert "3 task(s)" in out  # 8 cells, 3 per task
    drain(array)
    invoke("sweep", "collect", str(array))
    assert rows(array) == rows(local) and len(rows(local)) == 8

    # A task that did not finish (its result lost): running the same command re-submits
    # exactly that task, and the sweep is whole again.
    cells = read_plan(array)
    (array / CELLS / f"{cells[7][0]}.json").unlink()
    assert "unfinished" in invoke("sweep", "status", str(array))
    out = invoke("sweep", "run", str(spec), "-o", str(array), "--slurm", "--partition",
                 emulator.spec.plain_partition, "--cells-per-task", "3")
    assert "1 task(s)" in out
    assert (read_submission(array) or {})["tasks"] == [2]
    drain(array)
    invoke("sweep", "collect", str(array))
    assert rows(array) == rows(local)
    assert (array / SUBMITTED).exists() and (array / "report.md").exists()
