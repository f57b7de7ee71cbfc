"""Trace jobs that make no progress on some GPU type: ``--unrunnable error|drop|restrict``
(simulate, compare, a sweep file's ``[trace] unrunnable``), on a hand-written Gavel world."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from _core_helpers import free_of, pending, snapshot
from typer.testing import CliRunner

from blox_slurm.cli import app
from blox_slurm.core.fit import TYPES, allowed, required_types
from blox_slurm.core.model import build_cluster
from blox_slurm.core.throughput import ParametricThroughput
from blox_slurm.policies.scheduling.gavel import Gavel
from blox_slurm.sim.sweep import SweepError, plan, read_spec
from blox_slurm.workloads.gavel import load_gavel
from blox_slurm.workloads.gavel_throughput import GavelThroughput
from blox_slurm.workloads.runnable import handle_unrunnable
from blox_slurm.workloads.schema import WorkloadError

# "Big" and "Dead" make no progress on k80 (Gavel measured 0.0 there).
TABLE = {
    "v100": {"('Small', 1)": {"null": 10.0}, "('Big', 2)": {"null": 8.0},
             "('Dead', 1)": {"null": 4.0}},
    "k80": {"('Small', 1)": {"null": 5.0}, "('Big', 2)": {"null": 0.0},
            "('Dead', 1)": {"null": 0.0}},
}
CLUSTER = "k80:2x1,v100:2x1"  # k80 first: first_fit would put Big there
runner = CliRunner()


def trace_line(model: str, arrival: int, gpus: int, steps: int = 36000) -> str:
    return "\t".join([model, "cmd", "--steps", "0", str(steps), str(arrival), str(gpus)])


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    """(trace, throughputs): jobs 0 and 2 run anywhere, job 1 (Big, 2 GPUs) only on v100."""
    thr = tmp_path / "simulation_throughputs.json"
    thr.write_text(json.dumps(TABLE))
    trace = tmp_path / "t.trace"
    trace.write_text("\n".join([trace_line("Small", 0, 1), trace_line("Big", 10, 2),
                                trace_line("Small", 20, 1)]) + "\n")
    return trace, thr


def simulate(world: tuple[Path, Path], *extra: str, command: str = "simulate"):
    trace, thr = world
    return runner.invoke(app, [command, "-w", str(trace), "--throughputs", str(thr),
                               "--cluster", CLUSTER, *extra])


def loaded(world: tuple[Path, Path]):
    trace, thr = world
    model = GavelThroughput(thr)
    return load_gavel(trace, throughputs=model), model


def test_error_names_the_first_job_the_count_and_the_option(world) -> None:
    wl, model = loaded(world)
    with pytest.raises(WorkloadError, match=r"^job 1 \(Big, 2 GPU\(s\)\) makes no progress "
                       r"on GPU type\(s\) k80; 1 job\(s\) are like it: choose --unrunnable"):
        handle_unrunnable(wl, model, ["k80", "v100"])


def test_drop_removes_them_and_counts_them(world) -> None:
    wl, model = loaded(world)
    kept, n = handle_unrunnable(wl, model, ["k80", "v100"], "drop")
    assert n == 1 and [j.id for j in kept.jobs] == [0, 2]


def test_restrict_keeps_them_on_the_types_they_progress_on(world) -> None:
    wl, model = loaded(world)
    kept, n = handle_unrunnable(wl, model, ["k80", "v100"], "restrict")
    assert n == 1 and [j.gpu_types for j in kept.jobs] == [(), ("v100",), ()]


def test_a_cluster_without_the_bad_type_has_nothing_to_handle(world) -> None:
    wl, model = loaded(world)
    assert handle_unrunnable(wl, model, ["v100"]) == (wl, 0)


def test_restrict_cannot_keep_a_job_that_progresses_nowhere(world) -> None:
    trace, thr = world
    trace.write_text(trace_line("Small", 0, 1) + "\n" + trace_line("Dead", 5, 1) + "\n")
    wl, model = loaded(world)
    with pytest.raises(WorkloadError, match=r"^job 1 \(Dead, 1 GPU\(s\)\) makes no progress on "
                       r"any GPU type of the cluster \(k80\): restrict cannot keep it; use "
                       "--unrunnable drop"):
        handle_unrunnable(wl, model, ["k80"], "restrict")
    assert [j.id for j in handle_unrunnable(wl, model, ["k80"], "drop")[0].jobs] == [0]


def test_an_unknown_choice_is_named() -> None:
    with pytest.raises(WorkloadError, match="unrunnable must be one of error, drop, restrict"):
        handle_unrunnable(None, None, [], "skip")  # type: ignore[arg-type]


# ------------------------------------------------------------------ the job's set of types

SHAPE = build_cluster([("k80", 1, 2), ("p100", 1, 2), ("v100", 1, 2)])  # node1..node3


def test_placement_sees_only_the_types_of_the_set() -> None:
    s = snapshot(SHAPE, [])
    job = pending(1, 1, hints=((TYPES, "p100,V100"),))
    assert required_types(job) == {"p100", "v100"}
    assert set(allowed(s, job, free_of(s)).by_node) == {"node2", "node3"}
    # the scheduler's choice this round narrows it to one type
    assert set(allowed(s, job, free_of(s), gpu_type="v100").by_node) == {"node3"}


def test_a_users_single_type_hint_keeps_its_meaning() -> None:
    job = pending(1, 1, hints=(("gpu_type", "K80"),))
    assert required_types(job) == {"k80"} and required_types(pending(2)) is None


def test_gavel_allocates_nothing_outside_the_set() -> None:
    speed = ParametricThroughput(type_speed={"k80": 0.25, "p100": 0.5, "v100": 1.0})
    s = snapshot(SHAPE, [pending(1, 1, hints=((TYPES, "k80,p100"),))], now=10.0,
                 throughput=speed)
    _, _, x, _ = Gavel().allocation(s, s.jobs)
    assert x[0][2] == 0.0 and x[0][:2].sum() == pytest.approx(1.0)  # types: k80, p100, v100
    assert Gavel().order(s, s.jobs).types == {1: "p100"}


# ----------------------------------------------------------------------------- the CLI

def test_simulate_fails_before_the_run_by_default(world) -> None:
    r = simulate(world, "-c", "las")
    assert r.exit_code == 2
    assert "job 1 (Big, 2 GPU(s)) makes no progress on GPU type(s) k80" in r.output
    assert "--unrunnable" in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("composition", ["las", "gavel"])
def test_restrict_runs_every_job_where_it_progresses(world, composition: str) -> None:
    """LAS with first_fit would put Big on the k80s listed first and the simulator would
    refuse it mid-run; restricted, every job finishes."""
    r = simulate(world, "-c", composition, "--unrunnable", "restrict", "--json")
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)
    assert row["count"] == 3 and row["unrunnable"] == "restrict"
    assert row["unrunnable_jobs"] == 1


def test_drop_reports_the_count_on_screen_and_in_results(world, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = simulate(world, "-c", "fifo", "-c", "las", "--unrunnable", "drop", "-o", str(out),
                 "-j", "1", command="compare")
    assert r.exit_code == 0, r.output
    assert "1 job(s) make no progress on some GPU type: dropped (--unrunnable drop)" in r.output
    rows = json.loads((out / "results.json").read_text())
    assert [(row["count"], row["unrunnable_jobs"]) for row in rows] == [(2, 1), (2, 1)]


def test_compare_fails_once_before_any_run(world) -> None:
    r = simulate(world, "-c", "fifo", "-c", "las", command="compare")
    assert r.exit_code == 2 and r.output.count("makes no progress") == 1


# ----------------------------------------------------------------------------- sweeps

def sweep(tmp_path: Path, unrunnable: str | None) -> Path:
    path = tmp_path / "s.toml"
    choice = f'unrunnable = "{unrunnable}"' if unrunnable else ""
    path.write_text(f"""
compositions = ["las"]
traces = ["$UNRUN_DATA/t.trace"]
clusters = ["{CLUSTER}"]
mode = "gavel"
[trace]
throughputs = "$UNRUN_DATA/simulation_throughputs.json"
{choice}
""")
    return path


def test_a_sweep_reads_data_paths_from_a_variable_and_drops(world, tmp_path, monkeypatch):
    monkeypatch.setenv("UNRUN_DATA", str(world[0].parent))
    (cell,) = plan(*read_spec(sweep(tmp_path, "drop")))
    assert cell.workload.path == str(world[0]) and cell.workload.unrunnable == "drop"
    assert cell.sim.rates == "consolidated" and cell.sim.round_duration == 360.0  # mode
    out = tmp_path / "out"
    r = runner.invoke(app, ["sweep", "run", str(tmp_path / "s.toml"), "-o", str(out),
                            "-j", "1"])
    assert r.exit_code == 0, r.output
    with (out / "results.csv").open(newline="") as f:
        (row,) = csv.DictReader(f)
    assert (row["count"], row["unrunnable"], row["unrunnable_jobs"]) == ("2", "drop", "1")


def test_a_sweep_fails_at_plan_time_on_an_unrunnable_job(world, tmp_path, monkeypatch):
    monkeypatch.setenv("UNRUN_DATA", str(world[0].parent))
    with pytest.raises(SweepError, match=r"trace t.trace: job 1 .* makes no progress"):
        plan(*read_spec(sweep(tmp_path, None)))


def test_an_unset_variable_is_named(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("UNRUN_DATA", raising=False)
    with pytest.raises(SweepError, match=r"\$UNRUN_DATA is not set: export it"):
        plan(*read_spec(sweep(tmp_path, "drop")))


def test_an_unknown_mode_or_choice_is_named(tmp_path) -> None:
    path = sweep(tmp_path, "skip")
    with pytest.raises(SweepError, match=r"trace.unrunnable: Input should be 'error', 'drop'"):
        read_spec(path)
    path.write_text(path.read_text().replace('unrunnable = "skip"', "").replace(
        'mode = "gavel"', 'mode = "fast"'))
    with pytest.raises(SweepError, match="mode: Value error, must be one of physical"):
        read_spec(path)


def test_restrict_cannot_keep_a_job_its_types_are_too_small_for(world) -> None:
    """Big asks for 2 GPUs and progresses only on v100, of which the cluster has 1: kept, it
    would wait forever (the simulation would never end)."""
    wl, model = loaded(world)
    with pytest.raises(WorkloadError, match=r"^job 1 \(Big, 2 GPU\(s\)\) progresses only on "
                       "v100, which has fewer GPUs than it asks for: restrict cannot keep it"):
        handle_unrunnable(wl, model, ["k80", "v100"], "restrict", {"k80": 4, "v100": 1})
    kept, n = handle_unrunnable(wl, model, ["k80", "v100"], "restrict", {"k80": 4, "v100": 2})
    assert n == 1 and kept.jobs[1].gpu_types == ("v100",)


def test_the_cli_counts_gpus_per_type_for_restrict(world) -> None:
    r = simulate(world, "-c", "las", "--unrunnable", "restrict", "--cluster",
                 "k80:2x1,v100:1x1")  # the last --cluster wins: one v100
    assert r.exit_code == 2 and "which has fewer GPUs than it asks for" in r.output
