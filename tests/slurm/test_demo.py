"""``blox-slurm demo`` end to end: a small workload through the emulator, the controller and
the simulator, and nothing of the emulator left running afterwards."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from blox_slurm.cli import app
from blox_slurm.demo.run import run_demo
from blox_slurm.demo.world import alive

pytestmark = pytest.mark.slurm


def test_demo_runs_every_job_and_compares_each_with_the_simulator() -> None:
    result = run_demo(8, seed=1, live=False)
    assert len(result.rows) == 8  # a row per job: every job finished (its own finish time)
    for row in result.rows:
        assert row.emulator_jct > row.iterations / 10  # at least its isolated run time
        assert row.simulator_jct is not None and row.simulator_jct > 0
    assert result.daemons and not alive(result.daemons)  # slurmctld + slurmds all stopped
    assert {d.name for d in result.daemons} >= {"slurmctld", "slurmd node1"}
    summary = result.as_dict()
    assert summary["median_rel_diff"] is not None and summary["worst_rel_diff"] is not None
    # the run's batch scheduler found on this Slurm: the simulator's first starts use it
    assert result.replay is not None and result.replay.passes is not None
    assert all(0.0 <= phase < 1.0 for phase in result.replay.passes)


def test_demo_command_prints_json_and_exits_zero() -> None:
    out = CliRunner().invoke(app, ["demo", "--jobs", "3", "--seed", "2", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert [j["job_id"] for j in data["jobs"]] and len(data["jobs"]) == 3
    assert all(j["simulator_jct"] for j in data["jobs"])
    assert len(data["pass_phases"]) == 2
