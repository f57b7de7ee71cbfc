"""The public-trace formats end to end: ``blox-slurm simulate -w FILE --format F``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blox_slurm.cli import app

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
