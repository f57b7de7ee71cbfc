"""Sweeps off Slurm: the plan, resuming, array bookkeeping, bad files and the report."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blox_slurm.cli import app
from blox_slurm.sim.styles import styles
from blox_slurm.sim.sweep import (
    CELLS,
    SweepError,
    cell_id,
    pending,
    plan,
    read_plan,
    read_spec,
    write_plan,
)
from blox_slurm.sim.sweep_report import Estimate
from blox_slurm.sim.sweep_slurm import ArrayLayout, array_spec, task_script, this_task

SWEEP = """
name = "t"
compositions = ["fifo", "las"]
loads = [30, 60]
seeds = [0, 1]
clusters = ["gpu:4x2"]
[workload]
jobs = 40
measure = "all"
"""
runner = CliRunner()


def sweep_file(tmp_path: Path, text: str = SWEEP) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


def test_the_plan_is_every_combination_with_stable_ids(tmp_path: Path) -> None:
    spec, base = read_spec(sweep_file(tmp_path))
    cells = plan(spec, base)
    assert len(cells) == 2 * 2 * 2
    assert [cell_id(c) for c in cells] == [cell_id(c) for c in plan(spec, base)]
    assert len({cell_id(c) for c in cells}) == 8
    labels = {(c.composition["name"], c.label["jobs_per_hour"], c.label["seed"]) for c in cells}
    assert ("las", 60.0, 1) in labels
    bigger, _ = read_spec(sweep_file(tmp_path, SWEEP.replace("jobs = 40", "jobs = 41")))
    assert {cell_id(c) for c in plan(bigger, base)}.isdisjoint(cell_id(c) for c in cells)


def test_a_composition_file_is_found_beside_the_sweep_and_made_absolute(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text('name = "mine"\n[scheduling]\npolicy = "las"\n')
    spec, base = read_spec(sweep_file(tmp_path, SWEEP.replace('"las"]', '"mine.toml"]')))
    names = [c.composition["name"] for c in plan(spec, base)]
    assert "mine" in names


@pytest.mark.parametrize(("text", "says"), [
    ('compositions = []\nloads = [1]', "compositions"),
    ('compositions = ["fifo"]', "give loads"),
    ('compositions = ["fifo"]\nloads = [1]\ntraces = ["a.trace"]', "loads or traces"),
    ('compositions = ["fifo"]\nloads = [-1]', "positive"),
    ('compositions = ["fifo"]\nloads = [1]\nseed = [1]', "seed"),
    ('compositions = ["fifo"\n', "not valid TOML"),
])
def test_a_bad_sweep_file_says_what_to_fix(tmp_path: Path, text: str, says: str) -> None:
    with pytest.raises(SweepError, match=says):
        read_spec(sweep_file(tmp_path, text))
    result = runner.invoke(app, ["sweep", "run", str(tmp_path / "s.toml"), "-o",
                                 str(tmp_path / "o")])
    assert result.exit_code == 2 and says in result.output
    assert not (tmp_path / "o").exists()


def test_a_directory_holding_another_sweep_is_refused(tmp_path: Path) -> None:
    spec, base = read_spec(sweep_file(tmp_path))
    write_plan(tmp_path / "o", plan(spec, base))
    write_plan(tmp_path / "o", plan(spec, base))  # the same plan: resumed
    other, _ = read_spec(sweep_file(tmp_path, SWEEP.replace("[30, 60]", "[30]")))
    with pytest.raises(SweepError, match="another sweep"):
        write_plan(tmp_path / "o", plan(other, base))


def test_a_sweep_resumes_without_running_finished_cells_again(tmp_path: Path) -> None:
    path, out = sweep_file(tmp_path), tmp_path / "o"
    first = runner.invoke(app, ["sweep", "run", str(path), "-o", str(out), "-j", "1"])
    assert first.exit_code == 0, first.output
    results = (out / "results.csv").read_text()
    stamps = {p: p.stat().st_mtime_ns for p in (out / CELLS).iterdir()}
    lost = sorted(stamps)[3]
    lost.unlink()
    again = runner.invoke(app, ["sweep", "run", str(path), "-o", str(out), "-j", "1"])
    assert again.exit_code == 0, again.output
    assert "1 cell(s) run" in again.output and "7 already done" in again.output
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items() if p != lost)
    strip = [line.rsplit(",", 1)[0] for line in results.splitlines()]  # wall_seconds last
    assert [line.rsplit(",", 1)[0] for line in (out / "results.csv").read_text().splitlines()] \
        == strip
    assert {p.name for p in out.glob("*.png")} == {"jct.png", "responsiveness.png",
                                                    "jct_cdf.png"}
    assert "| gpu:4x2 | 30 jobs/h | fifo |" in (out / "report.md").read_text()


def test_collect_names_unfinished_cells_and_fails(tmp_path: Path) -> None:
    spec, base = read_spec(sweep_file(tmp_path))
    write_plan(tmp_path / "o", plan(spec, base))
    result = runner.invoke(app, ["sweep", "collect", str(tmp_path / "o")])
    assert result.exit_code == 1 and "8 cell(s) unfinished" in result.output
    status = runner.invoke(app, ["sweep", "status", str(tmp_path / "o")])
    assert "0/8 cells finished" in status.output


def test_an_array_task_runs_exactly_its_cells(tmp_path: Path) -> None:
    spec, base = read_spec(sweep_file(tmp_path))
    out = tmp_path / "o"
    write_plan(out, plan(spec, base))
    (out / "slurm.json").write_text(json.dumps({"array_job": 1, "per_task": 3, "tasks": [0]}))
    result = runner.invoke(app, ["sweep", "task", str(out), "--index", "2"])
    assert result.exit_code == 0, result.output
    cells = read_plan(out)
    assert [cid for cid, _ in cells if (cid, _) not in pending(out, cells)] == \
        [cells[6][0], cells[7][0]]
    assert runner.invoke(app, ["sweep", "task", str(out), "--index", "3"]).exit_code == 2


def test_array_indices_and_layout() -> None:
    assert array_spec([0, 1, 2, 5, 7, 8], None) == "0-2,5,7-8"
    assert array_spec([4], 2) == "4%2"
    layout = ArrayLayout(cells=8, per_task=3)
    assert layout.tasks == 3 and list(layout.cell_range(2)) == [6, 7]
    assert [layout.task_of(i) for i in range(8)] == [0, 0, 0, 1, 1, 1, 2, 2]
    with pytest.raises(SweepError):
        layout.cell_range(3)


def test_the_task_script_runs_only_the_sweep_command(tmp_path: Path) -> None:
    out = tmp_path / "a dir; $(touch x) `y`"
    last = task_script(out).strip().splitlines()[-1]
    argv = shlex.split(last)
    assert argv[0] == "exec" and argv[2:] == ["-m", "blox_slurm", "sweep", "task", str(out)]


def test_this_task_needs_slurms_index(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_ARRAY_TASK_ID", raising=False)
    with pytest.raises(SweepError, match="--index"):
        this_task()
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "5")
    assert this_task() == 5


def test_an_estimate_is_the_mean_and_a_t_interval() -> None:
    e = Estimate.of([1.0, 2.0, 3.0])
    assert e.mean == 2.0 and math.isclose(e.half_width, 4.30 / math.sqrt(3))
    assert Estimate.of([5.0]).half_width == 0.0 and Estimate.of([5.0]).text("{:.1f}") == "5.0"
    assert e.text("{:.1f}") == "2.0 ± 2.5"


def test_every_composition_is_drawn_differently() -> None:
    drawn = styles([f"c{i}" for i in range(12)])
    assert len({(s.colour, s.line) for s in drawn.values()}) == 12
    assert len({s.colour for s in drawn.values()}) == 12  # no colour repeats after 10


@pytest.mark.parametrize(("heavy", "scale"), [(100.0, "log"), (10.0, "linear")])
def test_trace_bars_spanning_more_than_20x_are_on_a_log_axis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, heavy: float, scale: str
) -> None:
    """Gavel's 0e4a51 averages 30x its siblings: on a linear axis their bars were flat."""
    from blox_slurm.sim import sweep_figures
    from blox_slurm.sim.sweep_report import Group

    drawn = []
    monkeypatch.setattr(sweep_figures, "save", lambda fig, path: drawn.append(fig) or path)
    est = {Group("c", trace, None, "fifo"): {"avg_jct": Estimate(value, 0.0, 1)}
           for trace, value in (("light.trace", 1.0), ("heavy.trace", heavy))}
    sweep_figures.trace_figure(est, "avg_jct", "average JCT (hours)", "c",
                               styles(["fifo"]), "t", tmp_path / "jct.png")
    (ax,) = drawn[0].axes
    assert ax.get_yscale() == scale
    assert ax.get_ylabel() == ("average JCT (hours, log scale)" if scale == "log"
                               else "average JCT (hours)")
