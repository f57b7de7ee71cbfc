"""What ``compare`` shows while and after it runs: progress per run, a table that fits the
terminal, and results.json rows that say what each is for."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from blox_slurm.cli import app
from blox_slurm.loading import load
from blox_slurm.sim.cli import _table
from blox_slurm.sim.experiment import Experiment, WorkloadSpec, run_all

runner = CliRunner()


def exps() -> list[Experiment]:
    return [Experiment(composition=load(name).config, cluster="gpu:4x2",
                       workload=WorkloadSpec(generator={"n_jobs": 30, "jobs_per_hour": rate,
                                                        "seed": 0, "measure": None}),
                       label={"jobs_per_hour": rate})
            for name in ("fifo", "tiresias-consolidated-load-based") for rate in (30.0, 90.0)]


def test_run_all_reports_each_run_and_keeps_the_order() -> None:
    heard: list[str] = []
    results = run_all(exps(), processes=2, on_done=lambda e: heard.append(
        f"{e.composition['name']}@{e.label['jobs_per_hour']}"))
    assert sorted(heard) == sorted(f"{r.name}@{r.params['jobs_per_hour']}" for r in results)
    assert [(r.name, r.params["jobs_per_hour"]) for r in results] == [
        (e.composition["name"], e.label["jobs_per_hour"]) for e in exps()]


def test_the_table_fits_an_80_column_terminal_without_cutting_a_value() -> None:
    results = run_all(exps(), processes=1)
    screen = Console(width=80, record=True, force_terminal=True)
    screen.print(_table(results, "comparison", width=80))
    text = screen.export_text()
    assert max(map(len, text.splitlines())) <= 80
    assert "…" not in text
    assert "avg JCT h" in text and "p99 h" in text and "wall s" not in text
    wide = Console(width=200, record=True)
    wide.print(_table(results, "comparison", width=200))
    assert "wall s" in wide.export_text()  # dropped only when it does not fit


def test_results_json_says_which_composition_and_load_each_row_is(tmp_path: Path) -> None:
    result = runner.invoke(app, ["compare", "-c", "fifo", "-c", "las", "-r", "30", "-r", "60",
                                 "-n", "30", "--cluster", "gpu:4x2", "-o", str(tmp_path)])
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "results.json").read_text())
    assert {(r["composition"], r["jobs_per_hour"]) for r in rows} == {
        ("fifo", 30.0), ("fifo", 60.0), ("las", 30.0), ("las", 60.0)}
    assert all("avg_jct" in r for r in rows)
    assert "[4/4] " in result.output  # one progress line per run off a terminal
