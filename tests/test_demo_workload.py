"""The demo's pure parts: its workload, the emulator -> simulator conversion, root check."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from blox_slurm.cli import app
from blox_slurm.demo import world as demo_world
from blox_slurm.demo.run import Measured, demo_composition, first_look, mid_round, timing
from blox_slurm.demo.world import FakeJob, mixed_workload, to_workload
from blox_slurm.slurm.calibrate import Timings
from blox_slurm.slurm.controller import RoundReport


def test_mixed_workload_is_seeded_and_mixed() -> None:
    jobs = mixed_workload(16, seed=0)
    assert jobs == mixed_workload(16, seed=0) != mixed_workload(16, seed=1)
    assert {j.gpus for j in jobs} == {1, 2, 4} and len({j.user for j in jobs}) == 3
    assert [j.arrival for j in jobs] == sorted(j.arrival for j in jobs)


def test_to_workload_uses_slurm_ids_relative_submit_times_and_iteration_durations() -> None:
    jobs = {7: FakeJob("bin", 2, 300, 0.0), 5: FakeJob("daemon", 1, 50, 0.0)}
    w = to_workload(jobs, {7: 1000.5, 5: 1002.0}, iters_per_sec=10)
    assert [(s.id, s.submit_time, s.num_gpus, s.duration, s.user, s.nodes) for s in w.jobs] == [
        (7, 0.0, 2, 30.0, "bin", 1), (5, 1.5, 1, 5.0, "daemon", 1)]  # --gres=gpu:N: one node
    # from the controller's first round instead: the simulator's rounds fall on its rounds
    w = to_workload(jobs, {7: 1000.5, 5: 1002.0}, iters_per_sec=10, origin=999.75)
    assert [s.submit_time for s in w.jobs] == [0.75, 2.25]


def test_default_composition_compresses_tiresias_thresholds() -> None:
    data, name = demo_composition(None)
    assert data["scheduling"]["thresholds"] == [30.0, 300.0] and "120" in name
    data, name = demo_composition("fifo")
    assert name == "fifo"


def test_demo_without_root_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo_world.os, "geteuid", lambda: 1000)
    out = CliRunner().invoke(app, ["demo", "--no-live"])
    assert out.exit_code == 1 and "needs root" in out.output


def test_arrivals_fall_mid_round_so_both_worlds_see_them_in_the_same_round() -> None:
    assert [mid_round(a, 1.0) for a in (0.0, 0.97, 1.0, 1.02, 3.5)] == [0.5, 0.5, 1.5, 1.5, 3.5]
    assert mid_round(29.9, 15.0) == 22.5 and mid_round(30.0, 15.0) == 37.5


def test_the_simulators_rounds_fall_when_the_controllers_read_the_queue() -> None:
    """Counted from the first round's start plus the median time a round took to read."""
    def rep(started: float, observed: float | None) -> RoundReport:
        return RoundReport(1, started, 0.1, 0, 0, 0, None, None, 0, 0, observed=observed)

    reports = [rep(100.0, 100.05), rep(101.0, 101.02), rep(102.0, None), rep(103.0, 103.30)]
    assert first_look(reports) == pytest.approx(100.05)
    assert first_look([rep(100.0, None)]) == 100.0


# Two runs (the same job ids): Slurm's first starts 1, 2 and 6, 8 s after their release,
# restarts 9 and 3 s; the fake job's start-up 0.2, 0.4 and 0.6, 0.8 s, on restarts 1 and 2 s.
RUN_A = Measured(Timings(rounds=[(0.0, 0.1), (10.0, 0.1), (20.0, 0.1)],
                         releases=[(1, 0.0), (2, 10.0), (1, 20.0)],
                         runs={1: [1.0, 29.0], 2: [12.0]}), (0.2, 0.4), (1.0,))
RUN_B = Measured(Timings(rounds=[(100.0, 0.1), (104.0, 0.1), (108.0, 0.1)],
                         releases=[(1, 100.0), (2, 100.0), (1, 108.0)],
                         runs={1: [106.0, 111.0], 2: [108.0]}), (0.6, 0.8), (2.0,))


def test_the_simulators_timing_from_one_run_or_several_pooled() -> None:
    """One run: its own medians. Several: the medians of all their samples together, both
    Slurm's part (from the stores) and the fake job's (from its progress). A restart's
    Slurm part is a latency before its run, the restore a cost within it."""
    own = timing([RUN_A], 10.0)
    assert (own.start_latency, own.launch_cost) == (1.5, pytest.approx(0.3))
    assert own.restart_latency == 7.5  # Slurm's 9 - 1.5
    assert own.restart_cost == pytest.approx(0.7)  # restore 1 - 0.3
    pooled = timing([RUN_A, RUN_B], 10.0)
    assert (pooled.round_duration, pooled.start_latency) == (10.0, 4.0)
    assert pooled.launch_cost == pytest.approx(0.5)
    assert pooled.restart_latency == 2.0  # median 6 - 4
    assert pooled.restart_cost == pytest.approx(1.0)  # median 1.5 - 0.5
