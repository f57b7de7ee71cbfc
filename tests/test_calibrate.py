"""``blox-slurm calibrate``: timing parameters for the simulator from a controller's store.

The pure matching of runs to the releases that led to them, the store's view of a whole
controller run against the in-memory Slurm (which starts a released job when its clock next
moves, so every latency is known), and ``simulate --calibration``."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from test_controller_fake import ROUND, controller, run_to_the_end
from typer.testing import CliRunner

from blox_slurm.cli import app
from blox_slurm.core.model import Decisions, Move, Stop
from blox_slurm.slurm.calibrate import Timings, calibrate
from blox_slurm.slurm.controller import Controller
from blox_slurm.slurm.store import Store
from blox_slurm.testing.fake_slurm import FakeSlurm


def test_each_run_is_measured_from_the_release_that_led_to_it() -> None:
    t = Timings(rounds=[(0.0, 0.2), (10.0, 0.3), (20.0, 0.2), (30.0, 0.4)],
                releases=[(1, 0.0), (1, 20.0), (2, 10.0), (2, 20.0)],
                runs={1: [3.0, 24.0], 2: [25.0], 3: [5.0]})
    cal = calibrate(t)
    # job 1: first run 3 s after its release, restarted 4 s after the second one; job 2 was
    # released twice before it ran: the later release counts; job 3 was never released by us
    assert sorted(cal.first_starts) == [3.0, 5.0] and cal.restarts == (4.0,)
    assert cal.round_period == 10.0 and cal.rounds == 4
    assert cal.simulation() == {"round_duration": 10.0, "start_latency": 4.0,
                                "restart_latency": 0.0}


def test_starts_that_waited_for_a_stop_give_the_stop_latency() -> None:
    """Job 2 was released onto the GPUs the same round stopped job 1 from: Slurm started it
    once job 1 had completed, 5 s after a free-GPU start would have."""
    t = Timings(rounds=[(0.0, 0.1), (10.0, 0.1)], releases=[(1, 0.0), (2, 10.0), (3, 10.0)],
                runs={1: [1.0], 2: [16.0], 3: [11.0]}, after_stop=frozenset({(2, 10.0)}),
                handovers=frozenset({(2, 10.0)}))
    cal = calibrate(t)
    assert cal.first_starts == (1.0, 1.0) and cal.after_stops == (6.0,)
    assert cal.simulation()["stop_latency"] == 5.0
    assert cal.simulation()["handover_latency"] == 6.0  # the whole wait of such a start
    moved = calibrate(replace(t, handovers=frozenset()))  # a move's restart: no handover
    assert moved.after_stops == (6.0,) and "handover_latency" not in moved.simulation()


def test_a_restart_after_a_stop_is_measured_against_a_restart() -> None:
    """A moved job (2) is a restart waiting for its own stop: Slurm lifted its requeue
    delay and started it 9 s after the move's round, as long as job 3's plain restart took.
    The stop added nothing, and the simulator charges the restart's own 8 s beyond a first
    start as ``restart_latency``: counted in the stop latency too, a move would cost it twice
    (Gavel at 15 s rounds: two rounds per move in the simulator, one on Slurm). Job 4, a
    restart others were stopped for, likewise hands over in 1 s beyond its restart."""
    t = Timings(rounds=[(0.0, 0.1), (10.0, 0.1), (20.0, 0.1)],
                releases=[(1, 0.0), (2, 0.0), (3, 0.0), (4, 0.0), (2, 10.0), (3, 10.0),
                          (4, 20.0)],
                runs={1: [1.0], 2: [1.0, 19.0], 3: [1.0, 19.0], 4: [1.0, 30.0]},
                after_stop=frozenset({(2, 10.0), (4, 20.0)}),
                handovers=frozenset({(4, 20.0)}))
    cal = calibrate(t)
    assert cal.restarts == (9.0,) and cal.restarts_after_stops == (9.0, 10.0)
    assert cal.after_stops == () and cal.restart_handovers == (10.0,)
    out = cal.simulation()
    assert (out["start_latency"], out["restart_latency"]) == (1.0, 8.0)
    assert out["stop_latency"] == 0.5  # median of the moved job's 0 and job 4's 1 s
    assert out["handover_latency"] == 2.0  # a first start's 1 s and the stop's 1 s


def test_a_handover_quicker_than_a_first_start_is_kept() -> None:
    """On Slurm the stopped job's completion sets off a scheduling pass, so a start onto its
    GPUs is often quicker than a plain release: no stop latency, and a handover of 0."""
    t = Timings(rounds=[(0.0, 0.1), (10.0, 0.1)], releases=[(1, 0.0), (2, 10.0)],
                runs={1: [2.0], 2: [10.0]}, after_stop=frozenset({(2, 10.0)}),
                handovers=frozenset({(2, 10.0)}))
    out = calibrate(t).simulation()
    assert (out["start_latency"], out["stop_latency"], out["handover_latency"]) == (2.0, 0.0, 0.0)


def test_a_run_in_the_second_of_its_release_counts_as_no_latency() -> None:
    """Slurm's StartTime has whole seconds: a start 0.3 s after a release at 7.6 shows 7."""
    cal = calibrate(Timings([(7.6, 0.1)], [(1, 7.6)], {1: [7.0]}))
    assert cal.first_starts == (0.0,)


def test_a_restart_without_a_new_release_is_not_measured() -> None:
    """Its owner requeued it and Slurm restarted it on its own (the controller failed open):
    no release of ours came after the first run began."""
    cal = calibrate(Timings([(0.0, 0.1)], [(1, 0.0)], {1: [2.0, 50.0]}))
    assert cal.first_starts == (2.0,) and cal.restarts == ()
    assert "restart_latency" not in cal.simulation()


# Two runs' stores (the same job ids, as two clusters number them): first starts 1, 2 and
# 6, 8 s, restarts 9 and 3 s, rounds every 10 and every 4 s.
RUN_A = Timings(rounds=[(0.0, 0.1), (10.0, 0.3), (20.0, 0.1)],
                releases=[(1, 0.0), (2, 10.0), (1, 20.0)], runs={1: [1.0, 29.0], 2: [12.0]})
RUN_B = Timings(rounds=[(100.0, 0.2), (104.0, 0.2), (108.0, 0.2)],
                releases=[(1, 100.0), (2, 100.0), (1, 108.0)], runs={1: [106.0, 111.0],
                                                                     2: [108.0]})


def test_several_stores_are_calibrated_from_all_their_samples_pooled() -> None:
    """The medians are those of the union of both runs' samples (neither run's own, nor
    their mean), and each store's runs are matched to its own releases."""
    a, b, pooled = calibrate(RUN_A), calibrate(RUN_B), calibrate(RUN_A, RUN_B)
    assert (a.simulation()["start_latency"], b.simulation()["start_latency"]) == (1.5, 7.0)
    assert sorted(pooled.first_starts) == [1.0, 2.0, 6.0, 8.0]
    assert sorted(pooled.restarts) == [3.0, 9.0] and pooled.rounds == 6
    assert pooled.round_period == 7.0 and pooled.round_seconds == 0.2
    assert pooled.simulation() == {"round_duration": 7.0, "start_latency": 4.0,
                                   "restart_latency": 2.0}  # median 6 of restarts, less 4


def test_calibrating_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one"):
        calibrate()


def fifo_run(tmp_path: Path) -> tuple[FakeSlurm, Controller]:
    """Twelve jobs of 1-4 GPUs from three users through a FIFO controller on the in-memory
    Slurm (4 nodes x 4 GPUs), to the end: one of them is stopped for another."""
    fake = FakeSlurm([(4, 4)])
    for i, g in enumerate([4, 1, 2, 3, 1, 4, 2, 2, 1, 3, 4, 1]):
        fake.submit_job(g, runtime=60.0 * (1 + i % 5), user=f"u{i % 3}")
    ctl = controller(fake, tmp_path, "fifo")
    run_to_the_end(fake, ctl)
    return fake, ctl


def test_the_store_of_a_controller_run_gives_its_latencies(tmp_path: Path) -> None:
    """The fake Slurm starts released jobs when its clock moves on, one round later: every
    run, first or restarted, began exactly one round after the round that released it."""
    fake, ctl = fifo_run(tmp_path)
    cal = calibrate(ctl.store.timings())
    runs = Counter(j for j, _ in fake.starts)
    measured = (len(cal.first_starts) + len(cal.restarts) + len(cal.after_stops)
                + len(cal.restarts_after_stops))
    assert measured == sum(runs.values()) > len(runs) == 12  # every run, one preempted
    assert len(cal.after_stops) >= 1  # the job the backfilled one was stopped for
    # the fake frees a stopped job's GPUs at once: every start took exactly one round
    assert set(cal.first_starts) == set(cal.restarts) == set(cal.after_stops) == {ROUND}
    # and its clock stands still within a round: the stopped run ended at its round's start
    assert cal.stop_delays == (0.0,)
    assert cal.simulation() == {"round_duration": ROUND, "start_latency": ROUND,
                                "restart_latency": 0.0, "stop_latency": 0.0,
                                "handover_latency": ROUND, "stop_delay": 0.0}


def test_the_command_reports_every_kind_and_writes_the_table(tmp_path: Path) -> None:
    """``blox-slurm calibrate`` on a controller run's store: the handovers (starts of jobs
    others were stopped for) among the kinds it counts, and the table it writes."""
    _, ctl = fifo_run(tmp_path)
    toml = tmp_path / "controller.toml"
    toml.write_text(f'[controller]\nstore = "{ctl.cfg.store}"\n'
                    f'heartbeat = "{ctl.cfg.heartbeat}"\nplugin_config = ""\n'
                    'composition = "fifo"\n')
    out = tmp_path / "cal.toml"
    result = CliRunner().invoke(app, ["calibrate", "-c", str(toml), "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    expected = calibrate(ctl.store.timings())
    assert data["handovers"] == list(expected.handovers) != []  # the backfilled one's
    assert data["simulation"] == expected.simulation() and out.read_text() == expected.to_toml()


def test_the_command_pools_the_stores_it_is_given(tmp_path: Path) -> None:
    """``--store`` twice: one calibration from both runs' samples; a missing store is an
    error, not a new empty store."""
    stores = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        stores.append(fifo_run(tmp_path / name)[1].store)
    args = [a for s in stores for a in ("--store", str(s.path))]
    result = CliRunner().invoke(app, ["calibrate", *args, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    one = calibrate(stores[0].timings())
    assert len(data["first_starts"]) == 2 * len(one.first_starts) > 0
    assert data["rounds"] == sum(len(s.timings().rounds) for s in stores)
    assert data["simulation"] == calibrate(*(s.timings() for s in stores)).simulation()
    missing = CliRunner().invoke(app, ["calibrate", "--store", str(tmp_path / "none.db")])
    assert missing.exit_code == 2 and "none.db" in missing.output
    assert not (tmp_path / "none.db").exists()


def test_simulate_takes_a_calibration_file(tmp_path: Path) -> None:
    cal = tmp_path / "cal.toml"
    cal.write_text(calibrate(Timings([(0.0, 0.1), (5.0, 0.1)], [(1, 0.0)], {1: [3.0]}))
                   .to_toml())
    runner = CliRunner()
    base = ["simulate", "-c", "fifo", "-n", "40", "--measure", "all", "--cluster", "gpu:4x2",
            "--json"]
    plain = runner.invoke(app, base)
    calibrated = runner.invoke(app, [*base, "--calibration", str(cal)])
    assert plain.exit_code == calibrated.exit_code == 0, calibrated.output
    assert '"round_duration": 5.0' in calibrated.output and '"start_latency": 3.0' in \
        calibrated.output
    missing = runner.invoke(app, [*base, "--calibration", str(tmp_path / "none.toml")])
    assert missing.exit_code == 2 and "none.toml" in missing.output


def test_a_stop_or_move_of_a_start_in_flight_is_no_stop_to_calibrate(tmp_path: Path) -> None:
    """A job released and not yet run by Slurm, stopped for job 2 and moved: the audit keeps
    both decisions, marked never_ran, and the starts after a stop leave them out (nothing
    was stopped); a stop of a job that ran counts."""
    store = Store(tmp_path / "state.db")
    rid = store.begin_round(10.0, False, "fifo")
    d = Decisions(stop=(Stop(1, for_job=2), Stop(3, for_job=4)), move=(Move(5, (0,)),))
    store.record_decisions(rid, d, (), {5: ["node1"]}, in_flight={1: ("node1",), 5: ("node1",)})
    details = {r["job_id"]: json.loads(r["detail"]) for r in store.db.query(
        "SELECT job_id, detail FROM decisions WHERE kind IN ('preempt', 'move')")}
    assert details[1] == {"for": 2, "never_ran": True} and details[3] == {"for": 4}
    assert details[5]["never_ran"] is True
    assert store.timings().after_stop == frozenset({(4, 10.0)})
