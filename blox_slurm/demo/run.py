"""``blox-slurm demo``: the controller on a real (emulated) Slurm, next to the simulator.

What a new admin sees in two minutes: a 4x4 emulator with the job-submit plugin comes up, a
small mixed workload from three users arrives through plain ``sbatch``, the controller runs
it with the composition (bundled ``tiresias`` by default) in compressed time, and each job's
completion time is printed beside the simulator's prediction for the same workload, cluster
shape, round length and the restart cost measured on Slurm. Everything is torn down at the end,
on Ctrl-C and on errors.

Compressed time (:data:`COMPRESSED`): fake jobs run 8-45 s, rounds are 1 s, and the
default composition's queue thresholds (GPU-seconds) are divided by the scale's
``compression`` so that Tiresias demotes and preempts within the demo (3600 -> 30 GPU-s). A
composition given with ``--config`` is used as it is. :data:`MINUTES` is the same workload
at a pace closer to a real cluster's (15 s rounds, jobs of 1.5-7.5 minutes), for the
agreement campaign (``benchmarks/agreement.py``).

Jobs are submitted in the middle of a round (:func:`mid_round`): one submitted just as a
round reads the queue would be seen a round apart in the two worlds by chance.

How the two worlds are measured: the emulator's JCT is the fake job's own finish time (its
last progress write) minus the moment ``sbatch`` was called; the simulator gets those submit
times, counted from the moment the controller's first round read the queue so that its
rounds fall where the controller's looked (:func:`first_look`), and
``iterations / iterations-per-second`` as durations (see
:func:`~blox_slurm.demo.world.to_workload`). Start latencies come from the fake job's
progress (each write carries the time and the iteration, so the moment a run began is exact)
against Slurm's StartTime of that run. The simulator gets Slurm's part measured from the
controller's store exactly as ``blox-slurm calibrate`` does (``start_latency``: round start
-> StartTime; ``stop_latency``: how much longer a start onto a stopped job's GPUs takes;
``restart_latency``: the extra of a restart), and the fake job's part from its progress
(``launch_cost``: its start-up; ``restart_cost``: its checkpoint restore).
"""

from __future__ import annotations

import bisect
import json
import math
import signal
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..cli_errors import exit_codes
from ..core.composition import Composition, CompositionError, read
from ..core.throughput import ParametricThroughput
from ..emulator.errors import EmulatorError
from ..logs import console as safe_console
from ..logs import setup_logging
from ..sim.config import ClusterSpec, SimConfig
from ..sim.simulator import Simulator
from ..slurm.calibrate import Timings, calibrate
from ..slurm.client import SlurmError
from ..slurm.controller import Controller, RoundReport
from ..slurm.controller_config import ConfigError, load_config
from ..slurm.store import Store
from ..workloads.schema import Workload
from .phases import BATCH_SCHED_DELAY, pass_phases
from .world import (
    PARTITION,
    SHAPE,
    FakeJob,
    ManagedWorld,
    NeedsRoot,
    mixed_workload,
    to_workload,
)

POLL_SECONDS = 0.5
# Simulator runs per prediction when it draws Slurm's latencies (see Replay.simulate). A
# job whose run hangs on a coin toss has a median that flips with too few draws (on recorded
# demo runs 7-31 draws moved the p90 by up to 11 points, 101 and 201 by under one); a
# 16-job run simulates in 4-9 ms.
DRAWS = 101


@dataclass(frozen=True)
class Scale:
    """The demo's pace: round length, the fake jobs' speed, the mean gap between arrivals,
    and by how much the default composition's GPU-second thresholds shrink to match."""

    name: str
    round_seconds: float
    iters_per_sec: float
    mean_gap: float
    compression: float


COMPRESSED = Scale("compressed", round_seconds=1.0, iters_per_sec=10.0, mean_gap=1.5,
                   compression=120.0)
MINUTES = Scale("minutes", round_seconds=15.0, iters_per_sec=1.0, mean_gap=15.0,
                compression=8.0)


def fake_throughput(type_speed: Mapping[str, float] | None) -> ParametricThroughput:
    """How fast the fake job runs, for the simulator: its speed on each GPU type (as the
    world gives it, see :class:`~blox_slurm.demo.world.ManagedWorld`), no spread penalty."""
    return ParametricThroughput(spread_penalty=1.0, type_speed=dict(type_speed or {}))


# Slurm's latencies as measured, which the simulator draws from (see Replay.simulate).
SAMPLED = ("start_latency_samples", "restart_latency_samples", "stop_delay_samples")
# The simulator's timing parameters the demo measures, as it prints them.
TIMING = {"round_duration": "round", "start_latency": "Slurm's start latency",
          "restart_latency": "Slurm's restart latency", "stop_latency": "stop latency",
          "handover_latency": "start after a stop", "launch_cost": "launch",
          "restart_cost": "restore"}


class DemoTimeout(RuntimeError):
    """The workload did not finish in time (the controller or Slurm is stuck)."""


@dataclass(frozen=True, slots=True)
class Row:
    job_id: int
    user: str
    gpus: int
    iterations: int
    submit: float  # seconds after the first submission
    emulator_jct: float
    simulator_jct: float | None
    emulator_preemptions: int
    simulator_preemptions: int | None

    @property
    def rel_diff(self) -> float | None:
        """|emulator - simulator| / simulator."""
        if self.simulator_jct is None:
            return None
        return abs(self.emulator_jct - self.simulator_jct) / self.simulator_jct


@dataclass
class DemoResult:
    composition: str
    rows: list[Row]
    timing: SimConfig  # the simulator's, measured in this run (see timing())
    rounds: int
    slurm_calls: int
    wall_seconds: float
    daemons: list[Any] = field(default_factory=list)  # the emulator's, for teardown checks
    measured: Measured | None = None  # the timing samples, to pool with other runs'
    replay: Replay | None = None  # to simulate the run again with another timing

    @property
    def rel_diffs(self) -> list[float]:
        return sorted(r.rel_diff for r in self.rows if r.rel_diff is not None)

    def stat(self, q: float) -> float | None:
        """The q-quantile (0..1, nearest rank) of the relative JCT differences."""
        d = self.rel_diffs
        return d[min(len(d) - 1, int(q * len(d)))] if d else None

    def as_dict(self) -> dict[str, Any]:
        d = self.rel_diffs
        return {
            "composition": self.composition,
            **self.timing.model_dump(include=set(TIMING)),
            **self.timing.model_dump(include=set(SAMPLED)),
            # slurmctld's tick and Slurm's seconds on the simulator's clock (None: not found)
            "pass_phases": None if self.replay is None else self.replay.passes,
            "rounds": self.rounds, "slurm_calls": self.slurm_calls,
            "wall_seconds": self.wall_seconds,
            "median_rel_diff": statistics.median(d) if d else None,
            "p90_rel_diff": self.stat(0.9), "worst_rel_diff": d[-1] if d else None,
            "jobs": [{**asdict(r), "rel_diff": r.rel_diff} for r in self.rows],
        }


# --------------------------------------------------------------------------- configuration


def demo_composition(config: str | None, compression: float = COMPRESSED.compression
                     ) -> tuple[dict[str, Any], str]:
    """The composition's TOML tables and its name: ``config`` as given, or the bundled
    ``tiresias`` with its thresholds compressed to the demo's time scale."""
    path, data = read(config or "tiresias")
    name = str(data.get("name") or path.stem)
    if config is None:
        sched = dict(data["scheduling"])
        sched["thresholds"] = [t / compression for t in sched.get("thresholds", [])]
        data = {**data, "scheduling": sched}
        name = f"{name} (thresholds / {compression:g})"
    return data, name


def _toml(values: Mapping[str, Any]) -> str:
    """Flat TOML key/value lines (strings, numbers, booleans, lists: JSON spells them alike)."""
    return "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items() if v is not None)


def write_controller_config(path: Path, world: ManagedWorld, comp: Mapping[str, Any],
                            name: str, round_seconds: float,
                            type_speed: Mapping[str, float] | None = None) -> Path:
    """A ``controller.toml`` with the composition inline, as an admin would write one (and
    the GPU types' speeds, which heterogeneity-aware policies need)."""
    ctl = {"partitions": [PARTITION], "round_seconds": round_seconds,
           "store": str(world.base / "state.db"), "heartbeat": str(world.heartbeat),
           "slurm_conf": str(world.emu.conf), "backend": "cli", "grace_seconds": 3.0}
    top = {k: v for k, v in comp.items() if not isinstance(v, dict)}
    tables = {"controller": ctl, **{k: v for k, v in comp.items() if isinstance(v, dict)}}
    if type_speed:
        tables["controller.throughput.type_speed"] = dict(type_speed)
    path.write_text(_toml({**top, "name": name}) + "".join(
        f"\n[{k}]\n{_toml(v)}" for k, v in tables.items()))
    return path


# --------------------------------------------------------------------------- the run


class Tracker:
    """What the demo knows while it runs: the controller's round reports (appended by the
    controller thread), submissions, Slurm's view and the fake jobs' progress."""

    def __init__(self, world: ManagedWorld, iters_per_sec: float) -> None:
        self.world = world
        self.ips = iters_per_sec
        self.client = world.client()  # our own: its calls are not the controller's
        self.reports: list[RoundReport] = []
        self.jobs: dict[int, FakeJob] = {}
        self.submitted: dict[int, float] = {}
        self.state: dict[int, str] = {}
        self.rank: dict[int, int] = {}
        self.preemptions: dict[int, int] = defaultdict(int)
        self.run_start: dict[int, dict[int, float]] = defaultdict(dict)  # job -> run -> time
        self.finished: dict[int, float] = {}
        self.t0 = time.time()

    def on_round(self, report: RoundReport) -> None:
        if report.plan is not None:
            for jid in report.plan.preempt:
                self.preemptions[jid] += 1
        if report.decisions is not None:
            self.rank = {j: r for r, j in enumerate(report.decisions.order)}
        self.reports.append(report)

    def submit(self, job: FakeJob) -> int:
        at = time.time()
        jid = self.world.submit_fake(job, self.ips)
        self.jobs[jid], self.submitted[jid] = job, at
        self.state[jid] = "PENDING"
        return jid

    def poll(self) -> None:
        try:
            seen = {j.job_id: j for j in self.client.list_jobs([PARTITION])}
        except SlurmError:
            seen = {}
        for jid, job in self.jobs.items():
            if jid in self.finished:
                continue
            p = self.world.progress(jid, job.user)
            if p is not None:
                first = p["history"][-1][0]
                rate = float(p.get("rate") or self.ips)  # this run's: its node's speed
                began = float(p["time"]) - (int(p["iteration"]) - first) / rate
                self.run_start[jid].setdefault(int(p["runs"]), began)
                if p["state"] == "done":
                    self.finished[jid] = float(p["time"])
                    self.state[jid] = "DONE"
                    continue
            if jid in seen:
                s = seen[jid]
                self.state[jid] = "HELD" if s.held else s.state

    @property
    def done(self) -> bool:
        return bool(self.jobs) and len(self.finished) == len(self.jobs)

    def launches(self, slurm_starts: Mapping[int, Sequence[float]]
                 ) -> tuple[list[float], list[float]]:
        """(first runs, restarts): seconds from Slurm's StartTime of each run (the store's;
        the latest at or before the run's first progress, as the store may have missed a
        run too short to observe) to the fake job's first progress in it: what the job
        itself takes to get going."""
        first: list[float] = []
        again: list[float] = []
        for jid, runs in self.run_start.items():
            starts = sorted(slurm_starts.get(jid, ()))
            for k, began in runs.items():
                i = bisect.bisect_right(starts, began) - 1
                if i >= 0:
                    (first if k == 1 else again).append(began - starts[i])
        return first, again


@dataclass(frozen=True)
class Replay:
    """What the simulator is given for one emulator run, but its timing: kept so that the
    run can be simulated again with another timing (several runs' calibration pooled)."""

    workload: Workload
    composition: Composition
    shape: str
    type_speed: Mapping[str, float] | None
    # The run's batch scheduler passes (tick phase, second phase; see .phases): with them a
    # first start gets the StartTime of its pass, not a drawn latency. None: drawn.
    passes: tuple[float, float] | None = None

    def simulate(self, cfg: SimConfig) -> dict[int, tuple[float, int]]:
        """Job id -> (JCT, preemptions) predicted by the simulator for the emulator's run:
        with measured latencies to draw from, each job's median over ``DRAWS`` runs that
        draw differently. Which of Slurm's latencies a job meets is chance, and at 1 s rounds
        it decides who is preempted: one draw predicts one such chance, the median what
        the job most likely meets."""
        if self.passes is not None:
            cfg = cfg.model_copy(update={"batch_sched_delay": BATCH_SCHED_DELAY,
                                         "sched_tick_phase": self.passes[0],
                                         "slurm_second_phase": self.passes[1]})
        runs = [self._run(cfg.model_copy(update={"latency_seed": seed}))
                for seed in range(DRAWS if _sampled(cfg) else 1)]
        ids = sorted({jid for run in runs for jid in run})
        return {jid: (statistics.median(r[jid][0] for r in runs if jid in r),
                      statistics.median_low(r[jid][1] for r in runs if jid in r))
                for jid in ids}

    def _run(self, cfg: SimConfig) -> dict[int, tuple[float, int]]:
        result = Simulator(self.workload, self.composition,
                           ClusterSpec.parse(self.shape).build(), cfg,
                           fake_throughput(self.type_speed)).run()
        return {r.id: (r.jct, r.preemptions) for r in result.jobs}


def replay_of(tracker: Tracker, comp: Composition, timings: Timings) -> Replay:
    """The emulator's run as the simulator sees it: the submissions, counted from the
    controller's first look at the queue, the same cluster, and where its batch scheduler's
    passes fell."""
    origin = first_look(tracker.reports)
    workload = to_workload(tracker.jobs, tracker.submitted, tracker.ips, origin=origin)
    asks = [*tracker.submitted.values(), *tracker.finished.values()]
    passes = pass_phases(asks, timings, origin, tracker.reports[0].started)
    return Replay(workload, comp, tracker.world.shape, tracker.world.type_speed, passes)


def first_look(reports: Sequence[RoundReport]) -> float:
    """When the simulator's first round falls: the controller's first round start plus the
    typical time a round takes to read the queue. A round sees the jobs submitted before its
    read, not only those before it started; counted from ``started``, a job submitted in
    that gap arrived a round later in the simulator than on Slurm (and another round's
    decisions followed)."""
    lags = [r.observed - r.started for r in reports if r.observed is not None]
    return reports[0].started + (statistics.median(lags) if lags else 0.0)


@dataclass(frozen=True)
class Measured:
    """One run's timing samples, kept whole rather than as medians so that several runs
    can be calibrated together (:func:`timing`): a 16-job run has few restarts, and its
    restart cost depends on which jobs happened to be preempted."""

    timings: Timings  # Slurm's part, from the controller's store
    launches: tuple[float, ...]  # Slurm's StartTime -> the fake job's progress, first runs
    resumes: tuple[float, ...]  # the same for restarts (start-up and checkpoint restore)


def measure(tracker: Tracker, store: Store) -> Measured:
    timings = store.timings()
    first, again = tracker.launches(timings.runs)
    return Measured(timings, tuple(first), tuple(again))


def timing(measured: Sequence[Measured], round_seconds: float) -> SimConfig:
    """The simulator's timing from one run's samples or several runs' pooled: Slurm's part
    from the controllers' stores (``calibrate``), the fake job's launch and restore from
    its progress. A restart's Slurm part is a latency before the run (``restart_latency``),
    the restore a cost within it (``restart_cost``): Slurm's StartTime, and with it the
    service the controller counts, comes between them. Slurm's latencies themselves go
    along, for the simulator to draw each start's from (:meth:`Replay.simulate`)."""
    cal = calibrate(*(m.timings for m in measured))
    slurm, drawn = cal.simulation(), cal.samples()
    first = [v for m in measured for v in m.launches]
    again = [v for m in measured for v in m.resumes]
    launch = statistics.median(first) if first else 0.0
    restore = max(0.0, statistics.median(again) - launch) if again else 0.0
    return SimConfig(round_duration=round_seconds, start_latency=slurm.get("start_latency", 0.0),
                     restart_latency=slurm.get("restart_latency", 0.0),
                     stop_latency=slurm.get("stop_latency", 0.0),
                     handover_latency=slurm.get("handover_latency"), launch_cost=launch,
                     restart_cost=restore, stop_delay=slurm.get("stop_delay", 0.0),
                     start_latency_samples=drawn.get("start_latency_samples", ()),
                     restart_latency_samples=drawn.get("restart_latency_samples", ()),
                     stop_delay_samples=drawn.get("stop_delay_samples", ()))


def run_demo(n_jobs: int = 16, seed: int = 0, config: str | None = None, *,
             live: bool = True, console: Console | None = None,
             scale: Scale = COMPRESSED, timeout: float = 300.0, shape: str = SHAPE,
             type_speed: Mapping[str, float] | None = None) -> DemoResult:
    """Run the whole demo; raises :class:`NeedsRoot`, :class:`DemoTimeout`, Slurm/emulator
    errors. The emulator is down when this returns or raises."""
    console = console or safe_console()
    t_wall = time.monotonic()
    data, name = demo_composition(config, scale.compression)
    workload = mixed_workload(n_jobs, seed, scale.mean_gap)
    console.print(f"bringing up a {shape} emulator with the job-submit plugin ...")
    with ManagedWorld(shape, type_speed=type_speed) as world, _sigterm_as_interrupt():
        path = write_controller_config(world.base / "controller.toml", world, data, name,
                                       scale.round_seconds, type_speed)
        cfg, comp = load_config(path)
        tracker = Tracker(world, scale.iters_per_sec)
        ctl = Controller(cfg, comp, world.client(), Store(cfg.store))
        stop = threading.Event()
        thread = threading.Thread(target=ctl.run, args=(stop, None, tracker.on_round),
                                  daemon=True, name="blox-controller")
        thread.start()
        try:
            _drive(tracker, workload, live, console, timeout, scale.round_seconds)
        finally:
            stop.set()
            thread.join(30)
        measured = measure(tracker, ctl.store)
        sim_cfg = timing([measured], scale.round_seconds)
        replay = replay_of(tracker, comp, measured.timings)
        rows = _rows(tracker, replay.simulate(sim_cfg))
        result = DemoResult(comp.name, rows, sim_cfg, len(tracker.reports),
                            sum(r.slurm_calls for r in tracker.reports), 0.0, world.daemons,
                            measured, replay)
    result.wall_seconds = time.monotonic() - t_wall
    return result


def _rows(tracker: Tracker, sim: Mapping[int, tuple[float, int]]) -> list[Row]:
    """Each job's JCT and preemptions in both worlds."""
    t0 = min(tracker.submitted.values())
    return [Row(jid, j.user, j.gpus, j.iterations, tracker.submitted[jid] - t0,
                tracker.finished[jid] - tracker.submitted[jid],
                sim[jid][0] if jid in sim else None, tracker.preemptions[jid],
                sim[jid][1] if jid in sim else None)
            for jid, j in sorted(tracker.jobs.items())]


def mid_round(arrival: float, round_seconds: float) -> float:
    """``arrival`` moved to the middle of its round. A job submitted as a round reads the
    queue is in that round or the next by a few milliseconds of chance, and so may start a
    round apart in the two worlds, and every later decision with it; half a round from
    either read, both worlds see it in the same round. (The demo chooses its arrivals; a
    real cluster's fall where they fall.)"""
    return (math.floor(arrival / round_seconds) + 0.5) * round_seconds


def _drive(tracker: Tracker, workload: list[FakeJob], live: bool, console: Console,
           timeout: float, round_seconds: float) -> None:
    """Submit at the arrival times (counted from the controller's first round, in the middle
    of a round), watch, until every job finished."""
    while not tracker.reports:  # the first round makes the heartbeat fresh
        time.sleep(0.1)
    start = tracker.reports[0].started
    due = sorted(workload, key=lambda j: j.arrival)
    with _view(tracker, live, console) as refresh:
        while not tracker.done:
            now = time.time()
            while due and mid_round(due[0].arrival, round_seconds) <= now - start:
                tracker.submit(due.pop(0))
            tracker.poll()
            refresh()
            if now - start > timeout:
                raise DemoTimeout(f"{len(tracker.jobs) - len(tracker.finished)} jobs still "
                                  f"unfinished after {timeout:g} s")
            time.sleep(POLL_SECONDS if not due else min(POLL_SECONDS, 0.1))


@contextmanager
def _view(tracker: Tracker, live: bool, console: Console) -> Iterator[Callable[[], None]]:
    if live:
        with Live(_render(tracker), console=console, refresh_per_second=4) as view:
            yield lambda: view.update(_render(tracker))
        return
    last: list[str] = [""]

    def line() -> None:
        text = _summary(tracker)
        if text != last[0]:
            console.print(text, highlight=False)
            last[0] = text

    yield line


def _summary(tracker: Tracker) -> str:
    states = list(tracker.state.values())
    r = tracker.reports[-1] if tracker.reports else None
    return (f"round {r.round_id if r else 0}: {len(tracker.jobs)} submitted, "
            f"{states.count('RUNNING')} running, {len(tracker.finished)} done, "
            f"{sum(tracker.preemptions.values())} preemptions; Slurm calls last round "
            f"{r.slurm_calls if r else 0}")


def _render(tracker: Tracker) -> Group:
    table = Table("job", "user", "GPUs", "iters", "state", "rank", "preempted",
                  title="managed jobs (partition blox)")
    for jid, j in sorted(tracker.jobs.items()):
        rank = tracker.rank.get(jid)
        table.add_row(str(jid), j.user, str(j.gpus), str(j.iterations), tracker.state[jid],
                      "" if rank is None or jid in tracker.finished else str(rank),
                      str(tracker.preemptions[jid] or ""))
    total = sum(r.slurm_calls for r in tracker.reports)
    return Group(Text.assemble((_summary(tracker), "bold"), f" (total {total})"), table)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM tears down like Ctrl-C (only the main thread may install handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


# --------------------------------------------------------------------------- output + CLI


def print_comparison(result: DemoResult, console: Console) -> None:
    table = Table("job", "user", "GPUs", "submit s", "emulator JCT", "simulator JCT",
                  "rel. diff", "preempt emu/sim",
                  title=f"{result.composition}: emulator + controller vs simulator")
    for r in result.rows:
        sim = "-" if r.simulator_jct is None else f"{r.simulator_jct:.1f}"
        rel = "-" if r.rel_diff is None else f"{r.rel_diff:.0%}"
        table.add_row(str(r.job_id), r.user, str(r.gpus), f"{r.submit:.1f}",
                      f"{r.emulator_jct:.1f}", sim, rel,
                      f"{r.emulator_preemptions}/{r.simulator_preemptions}")
    console.print(table)
    d = result.as_dict()
    console.print(
        f"relative JCT difference: median {d['median_rel_diff']:.0%}, p90 "
        f"{d['p90_rel_diff']:.0%}, worst {d['worst_rel_diff']:.0%}. Simulator timing "
        "(measured in this run): " + ", ".join(
            f"{label} {d[key]:.2f} s" for key, label in TIMING.items()
            if d[key] is not None) + ". " + _draws(result)
        + f"{result.rounds} rounds, {result.slurm_calls} Slurm calls, "
        f"{result.wall_seconds:.0f} s wall.", highlight=False)


def _sampled(cfg: SimConfig) -> int:
    """How many measured latencies the simulator draws from (0: it charges the medians)."""
    return sum(len(getattr(cfg, key)) for key in SAMPLED)


def _draws(result: DemoResult) -> str:
    """How the simulator's column was predicted: Slurm's batch passes for first starts (when
    the run's were found), latencies drawn for the rest."""
    n = _sampled(result.timing)
    passes = result.replay.passes if result.replay is not None else None
    firsts = ("" if passes is None else
              f"First starts on Slurm's batch scheduler passes (at most every "
              f"{BATCH_SCHED_DELAY:.0f} s, slurmctld looking at +{passes[0]:.2f} s). ")
    drawn = "each restart's latency" if passes is not None else "each start's latency"
    return firsts + (f"Simulator JCT: each job's median over {DRAWS} runs, {drawn} and "
                     f"stop's delay drawn from the {n} measured. " if n else "")


def demo(
    jobs: Annotated[int, typer.Option("--jobs", min=1, max=64,
                                      help="How many fake jobs to submit.")] = 16,
    seed: Annotated[int, typer.Option("--seed", help="Workload seed.")] = 0,
    config: Annotated[str | None, typer.Option(
        "--config", help="Composition (bundled name or TOML path); default: bundled "
                         "tiresias with thresholds compressed to demo time.")] = None,
    no_live: Annotated[bool, typer.Option("--no-live",
                                          help="Plain progress lines.")] = False,
    as_json: Annotated[bool, typer.Option("--json",
                                          help="Print the comparison as JSON.")] = False,
) -> None:
    """Emulator + controller on a small mixed workload, beside the simulator's prediction.

    Needs root and Slurm's Debian packages; takes about two minutes.
    """
    setup_logging(daemon=False)  # the controller's warnings, in its thread
    console = safe_console(stderr=as_json)
    try:
        with exit_codes((ConfigError, CompositionError),
                        (NeedsRoot, EmulatorError, SlurmError, DemoTimeout)):
            result = run_demo(jobs, seed, config, live=not no_live and not as_json,
                              console=console)
    except KeyboardInterrupt:
        console.print("interrupted: the emulator was torn down")
        raise typer.Exit(130) from None
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=1))
    else:
        print_comparison(result, console)
