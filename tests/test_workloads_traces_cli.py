"""The public-trace formats end to end: ``blox-slurm simulate -w FILE --format F``."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blox_slurm.cli import app
from blox_slurm.workloads import LOADERS
from blox_slurm.workloads.loader_options import OPTIONS

TRACES = Path(__file__).parent / "fixtures" / "traces"


@pytest.mark.parametrize(
    ("trace", "fmt", "jobs"),
    [
        ("helios_cluster_log.csv", "helios", 7),
        ("acme_trace_kalos.csv", "acme", 3),
        ("pai/pai_job_table.csv", "pai", 5),
    ],
)
def test_simulate_replays_every_kept_job(trace: str, fmt: str, jobs: int) -> None:
    args = ["simulate", "-w", str(TRACES / trace), "--format", fmt, "--cluster", "gpu:8x8"]
    r = CliRunner().invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)
    assert row["count"] == jobs and row["makespan"] > 0


def test_a_job_larger_than_the_cluster_is_named() -> None:
    trace = str(TRACES / "helios_cluster_log.csv")
    args = ["simulate", "-w", trace, "--format", "helios", "--cluster", "gpu:4x2"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 1 and "jobs [1006] ask for more GPUs than the cluster has (8)" in r.output


@pytest.mark.parametrize(
    ("trace", "fmt", "option", "jobs"),
    [
        ("helios_cluster_log.csv", "helios", "states=COMPLETED", 4),
        ("helios_cluster_log.csv", "helios", "states=COMPLETED,FAILED", 5),
        ("pai/pai_job_table.csv", "pai", "fractional=filter", 3),
        ("pai/pai_job_table.csv", "pai", "statuses=Terminated", 4),
    ],
)
def test_a_loaders_options_are_reachable_from_the_cli(
    trace: str, fmt: str, option: str, jobs: int
) -> None:
    args = ["simulate", "-w", str(TRACES / trace), "--format", fmt, "--cluster", "gpu:8x8"]
    r = CliRunner().invoke(app, [*args, "--trace-option", option, "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)[0]["count"] == jobs


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--format", "helios", "--trace-option", "fractional=filter"],
         "--trace-option: format helios takes states; got 'fractional'"),
        (["--format", "csv", "--trace-option", "states=A"],
         "--trace-option: format csv takes no options; got 'states'"),
        (["--format", "helios", "--trace-option", "states"],
         "--trace-option: expected KEY=VALUE, got 'states'"),
        (["--format", "helios", "--trace-option", "states=A", "--trace-option", "states=B"],
         "--trace-option: states given twice"),
        (["--format", "pai", "--trace-option", "fractional=half"],
         "fractional must be one of ceil, filter, got 'half'"),
    ],
)
def test_a_bad_trace_option_is_one_clear_line(args: list[str], problem: str) -> None:
    trace = "pai/pai_job_table.csv" if "pai" in args else "helios_cluster_log.csv"
    r = CliRunner().invoke(app, ["simulate", "-w", str(TRACES / trace), *args])
    assert r.exit_code == 2 and problem in r.output and "Traceback" not in r.output


def test_trace_options_need_a_trace() -> None:
    r = CliRunner().invoke(app, ["simulate", "--trace-option", "states=A"])
    assert r.exit_code == 2 and "--trace-option and --format apply to a trace" in r.output


def test_every_declared_option_is_a_parameter_of_its_loader() -> None:
    """The declared table (what a user may set) must stay in step with the loaders."""
    for fmt, options in OPTIONS.items():
        params = inspect.signature(LOADERS[fmt]).parameters
        assert set(options) <= set(params), fmt


def test_format_help_lists_every_format() -> None:
    r = CliRunner().invoke(app, ["simulate", "--help"], env={"COLUMNS": "80"})
    shown = " ".join(r.stdout.replace("│", " ").split())  # the help column wraps anywhere
    assert f"extension is not enough: {', '.join(LOADERS)}." in shown
    assert max(map(len, r.stdout.splitlines())) <= 80
