"""Slurm's batch scheduler as a clock (``blox_slurm.sim.passes``): the StartTimes it gives,
worked out by hand on the pattern a recorded emulator run showed, its invariants on any
events, its fit to a run's starts, and the simulator's first starts on it."""

from __future__ import annotations

import random

import pytest
from _core_helpers import cluster, comp, workload
from hypothesis import given, settings
from hypothesis import strategies as st

from blox_slurm.demo.phases import BATCH_SCHED_DELAY, pass_phases
from blox_slurm.sim.config import SimConfig
from blox_slurm.sim.latency import SlurmLatency
from blox_slurm.sim.passes import PassClock, fit_tick_phase
from blox_slurm.sim.simulator import Simulator
from blox_slurm.slurm.calibrate import Timings

# A FIFO run on the emulator (22.05): Slurm's seconds began at x.27 on the controller's
# clock, slurmctld's loop looked at x.55, and the controller released at whole seconds.
SECOND, TICK = 0.27, 0.55


def test_a_recorded_runs_starts() -> None:
    """The last tick at or before 0 (-0.45, Slurm's second -0.73) ran a pass, so the next
    may run in second 2.27: a job released at 1.03 starts then, not at 1.27. A pass at
    2.27 holds the next until 5.27 (releases at 3.03, 4.03 and 5.03 all start then: 5.03 is
    before the tick at 5.55). A submission at 15.49 sets one off at the tick 15.55, in
    second 15.27, so a release at 16.03 waits for 18.27."""
    clock = PassClock(3.0, TICK, SECOND)
    clock.ask(0.52)  # the first submission, after the pass at -0.45
    assert clock.start_time(1.03) == pytest.approx(2.27)
    for released in (3.03, 4.03, 5.03):
        assert clock.start_time(released) == pytest.approx(5.27)
    clock.ask(15.49)
    assert clock.start_time(16.03) == pytest.approx(18.27)
    # nothing asked for three seconds: the next tick after the release runs it
    assert clock.start_time(24.03) == pytest.approx(24.27)


def test_asks_count_in_time_order_whatever_order_they_came() -> None:
    times = [0.4, 2.2, 3.9, 7.5, 7.6, 11.0]
    releases = [1.0, 4.0, 8.0, 12.0]
    expected = _start_times(times, releases)
    for seed in range(5):
        shuffled = times[:]
        random.Random(seed).shuffle(shuffled)
        assert _start_times(shuffled, releases) == expected


def _start_times(asks: list[float], releases: list[float], tick: float = TICK,
                 second: float = SECOND, delay: float = 3.0) -> list[float]:
    clock = PassClock(delay, tick, second)
    for t in asks:
        clock.ask(t)
    return [clock.start_time(r) for r in releases]


events = st.lists(st.floats(0.0, 60.0, allow_nan=False), max_size=20)


@settings(deadline=None, max_examples=200)
@given(asks=events, releases=st.lists(st.floats(0.0, 60.0), min_size=1, max_size=20),
       tick=st.floats(0.0, 0.99), second=st.floats(0.0, 0.99),
       delay=st.sampled_from([1.0, 2.0, 3.0, 5.0]))
def test_passes_are_spaced_and_never_late_by_more_than_the_delay(
        asks: list[float], releases: list[float], tick: float, second: float,
        delay: float) -> None:
    """A job starts in its release's second or later (a tick after it), at most the delay
    and a tick later; two passes are never closer than the delay in Slurm's seconds."""
    releases = sorted(releases)
    clock = PassClock(delay, tick, second)
    starts = _start_times(asks, releases, tick, second, delay)
    for released, start in zip(releases, starts, strict=True):
        assert clock.whole_second(released) - 1e-9 <= start
        assert start <= clock.whole_second(released) + delay + 1 + 1e-9
    distinct = sorted(set(starts))
    assert all(b - a >= delay - 1e-9 for a, b in zip(distinct, distinct[1:], strict=False))


@settings(deadline=None, max_examples=50)
@given(asks=events, releases=st.lists(st.floats(0.5, 60.0), min_size=3, max_size=16),
       tick=st.integers(0, 49).map(lambda i: i * 0.02), second=st.floats(0.0, 0.99))
def test_the_fit_finds_a_phase_that_gives_every_start(
        asks: list[float], releases: list[float], tick: float, second: float) -> None:
    """StartTimes made with a tick phase on the fit's 0.02 s grid: the fitted phase gives
    all of them. (Off the grid, a release or Slurm's second can fall between the true phase
    and both grid phases beside it, which then give another pass: hypothesis found tick 0.33,
    Slurm's second at 0.336 and a release at 2.328.)"""
    releases = sorted(releases)
    starts = list(zip(releases, _start_times(asks, releases, tick, second), strict=True))
    fitted, hits = fit_tick_phase(asks, starts, 3.0, second)
    assert hits == len(starts)
    assert _start_times(asks, releases, fitted, second) == [s for _, s in starts]


def test_a_round_that_stops_jobs_starts_its_releases_on_their_completion() -> None:
    """The stopped jobs' epilog runs a pass at once (``schedule()``): a first start released
    in that round starts in the second the stops complete, not on the batch pass 2 s later;
    in a round without stops it waits for that pass."""
    cfg = SimConfig(batch_sched_delay=3.0, sched_tick_phase=TICK, slurm_second_phase=SECOND,
                    stop_latency=0.2)
    plain, stopping = SlurmLatency(cfg), SlurmLatency(cfg)
    assert plain.of(False, 1.03)[0] == pytest.approx(2.27 - 1.03)
    assert stopping.of(False, 1.03, stopped=True)[0] == pytest.approx(0.0)  # 1.23 -> 0.27
    # restarts are not the clock's: their drawn or median latency stands
    assert stopping.of(True, 9.0, stopped=True) == (cfg.start_latency, cfg.restart_latency)


def test_the_simulators_first_start_is_the_pass() -> None:
    """One job on one GPU, submitted at 0.5, 1 s rounds: the round at 1.0 releases it, and
    it starts on the pass its submission asked for. The last tick at or before 0 (-0.5,
    Slurm's second -1) ran a pass, so the next may run in second 2: the tick 2.5, StartTime
    2.25. Without the clock it starts at the round (no latency given)."""
    wl = workload((0.5, 1, 10.0))
    base = dict(round_duration=1.0, restart_cost=0.0)
    (job,) = Simulator(wl, comp("fifo"), cluster(1), SimConfig(**base)).run().jobs
    assert job.first_start == 1.0
    cfg = SimConfig(**base, batch_sched_delay=3.0, sched_tick_phase=0.5,
                    slurm_second_phase=0.25)
    (job,) = Simulator(wl, comp("fifo"), cluster(1), cfg).run().jobs
    assert job.first_start == pytest.approx(2.25)
    assert job.finish == pytest.approx(12.25)


def test_a_runs_phases_pair_each_first_start_with_its_last_release() -> None:
    """On a clock from epoch 995.73 (Slurm's seconds at x.27), job 1 was released at 0.0,
    held again and released at 2.0, and started at 2.27 (epoch 998); job 2, released at
    3.0, started at 5.27 (epoch 1001): the pass that started job 1 held the next three
    seconds. The phases found give both StartTimes from the releases they belong to, job
    1's earlier release counted as an ask."""
    origin = 995.73
    timings = Timings(rounds=[(origin, 0.05)],
                      releases=[(1, origin), (1, origin + 2.0), (2, origin + 3.0)],
                      runs={1: [998.0], 2: [1001.0]})
    tick, second = pass_phases([origin + 0.5], timings, origin=origin, first_round=origin)
    assert second == pytest.approx(0.27)
    clock = PassClock(BATCH_SCHED_DELAY, tick, second)
    for t in (0.5, 0.0):
        clock.ask(t)
    assert [clock.start_time(2.0), clock.start_time(3.0)] == pytest.approx([2.27, 5.27])


def test_a_handover_starts_on_its_stops_pass_not_the_calibrated_latency() -> None:
    """LAS on one GPU: B (job 1, arriving at 100 s) takes A's GPU in the round at 300 s, a stop
    made for it. Without the clock the handover takes the calibrated 5 s; with it, B
    starts on the pass A's completion runs, in the round's own second (no latency)."""
    wl = workload((0.0, 1, 1000.0), (100.0, 1, 200.0))
    base = dict(restart_cost=0.0, handover_latency=5.0)
    plain = Simulator(wl, comp("las"), cluster(1), SimConfig(**base)).run()
    clocked = Simulator(wl, comp("las"), cluster(1), SimConfig(
        **base, batch_sched_delay=3.0)).run()
    assert {r.id: r.first_start for r in plain.jobs} == {0: 0.0, 1: 305.0}
    # A, released at 0 just after the pass at 0 (the clock's start), waits for second 3
    assert {r.id: r.first_start for r in clocked.jobs} == {0: 3.0, 1: 300.0}


_secs = st.sampled_from([0.0, 5.0])


@settings(deadline=None)
@given(_secs, _secs, _secs, st.booleans(), st.booleans(), st.sampled_from([None, 2.0]),
       st.floats(0, 1e6))
def test_an_instant_world_would_have_been_told_zero_everywhere(
        start: float, restart: float, delay: float, starts: bool, stops: bool,
        batch: float | None, t: float) -> None:
    """``SlurmLatency.instant`` (the world then asks nothing at its starts and stops) holds
    only where every start's and restart's latency and every stop's run-on is 0."""
    cfg = SimConfig(start_latency=start, restart_latency=restart, stop_delay=delay,
                    start_latency_samples=(3.0,) if starts else (),
                    stop_delay_samples=(4.0,) if stops else (), batch_sched_delay=batch)
    latency = SlurmLatency(cfg)
    if latency.instant:
        assert latency.of(False, t) == latency.of(True, t) == (0.0, 0.0)
        assert latency.stop(t) == 0.0
    else:
        assert (start, restart, delay, starts, stops, batch) != (0.0, 0.0, 0.0, False, False,
                                                                 None)
