"""Agreement campaign: does the simulator predict what the controller does on Slurm?

    sudo PYTHONPATH=. python benchmarks/agreement.py                 # ~50 min on 2 cores
    sudo PYTHONPATH=. python benchmarks/agreement.py --scales compressed   # ~6 min
    sudo PYTHONPATH=. python benchmarks/agreement.py --scales compressed \
        --compositions tiresias --seeds 0 1 2 3     # four workloads, and all their jobs pooled
    ... --seeds 0 1 2 3 --pooled-calibration   # and each run simulated again with one
                                               # calibration from all four runs' stores
    python benchmarks/agreement.py --plot-only compressed.json minutes.json   # replot
    sudo PYTHONPATH=. python benchmarks/agreement.py --keep runs/ ...   # keep each run
    PYTHONPATH=. python benchmarks/agreement.py --replay runs/*.pkl     # simulate them again
    sudo PYTHONPATH=. python benchmarks/agreement.py --scales compressed --repeats 3
                                       # each workload three times: Slurm against itself

The same workload (16 fake jobs of 1/2/4 GPUs from three users, :func:`run_demo`) runs
through the controller on an emulated Slurm cluster and through the simulator, for FIFO,
LAS, Tiresias (thresholds compressed to the time scale) on 4 x 4 GPUs and Gavel on 2 V100 +
2 K80 nodes (the fake job runs 4x slower on a K80), at two time scales: the demo's
compressed one (1 s rounds, jobs of 8-45 s) and one with 15 s rounds and jobs of 1.5-7.5
minutes. Per composition it prints the per-job relative JCT difference (median / p90 /
worst), the preemptions in each world and the timing the simulator was given, for

* **after**: the simulator as it is, with the start latency and restart cost measured in that
  run (round start -> progress) and its rounds on the controller's rounds;
* **before**: the simulator as it was, on the same emulator run: no start latency, rounds
  counted from the first submission, the restart latency as its restart cost.

With ``--pooled-calibration`` each composition's runs are then simulated again with one
calibration from all their stores and the fake jobs' progress pooled (a 16-job run's own
restart cost rests on a few restarts), and the lines compare it with each run's own.

``--keep DIR`` pickles each emulator run (its rows, measured samples and replay) so that
``--replay`` can simulate the same runs again with another simulator, without Slurm: a
change to the simulator's model is judged on the emulator runs it was measured against,
not on new ones that differ by chance.

``--repeats N`` runs each seed's workload N times on the emulator. Slurm does not repeat
itself to the second (a start waits for its batch scheduler's next pass, a restart for the
next requeue), and in a 16-job run one such second can reorder a demotion and every start
after it; so each group of repeats adds two lines: one run of the emulator taken as the
prediction of another (every ordered pair of runs of one workload: how far Slurm agrees with
itself, the floor no simulator of it can beat run by run), and the simulator against the
runs' mean JCT per job (whether it predicts what Slurm does on average).

It writes a plot of simulated against emulated JCT per job (the diagonal is agreement) and
every row as JSON. This is a benchmark, not a test: it prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from itertools import permutations
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from rich.console import Console

from blox_slurm.demo.phases import pass_phases
from blox_slurm.demo.run import (
    COMPRESSED,
    MINUTES,
    DemoResult,
    Scale,
    demo_composition,
    fake_throughput,
    run_demo,
    timing,
)
from blox_slurm.demo.world import SHAPE
from blox_slurm.loading import build
from blox_slurm.sim.config import ClusterSpec, SimConfig
from blox_slurm.sim.simulator import Simulator
from blox_slurm.workloads.schema import JobSpec, Workload

HETERO = "v100:4x2,k80:4x2"
SPEEDS = {"v100": 1.0, "k80": 0.25}


@dataclass(frozen=True)
class Case:
    label: str
    config: str | None  # None: the demo's tiresias, thresholds compressed to the scale
    shape: str = SHAPE
    type_speed: dict[str, float] | None = None


CASES = {c.label: c for c in (Case("fifo", "fifo"), Case("las", "las"),
                              Case("tiresias", None), Case("gavel", "gavel", HETERO, SPEEDS))}
SCALES = {s.name: s for s in (COMPRESSED, MINUTES)}


def before(result: DemoResult, case: Case, scale: Scale) -> dict[int, float]:
    """The old simulator's prediction for the same emulator run (see the module docstring)."""
    specs = tuple(JobSpec(r.job_id, r.submit, r.gpus, r.iterations / scale.iters_per_sec,
                          user=r.user) for r in result.rows)
    data, _ = demo_composition(case.config, scale.compression)
    t = result.timing
    cfg = SimConfig(round_duration=scale.round_seconds, restart_cost=t.start_latency
                    + t.restart_latency + t.launch_cost + t.restart_cost)
    run = Simulator(Workload(specs), build(data), ClusterSpec.parse(case.shape).build(), cfg,
                    fake_throughput(case.type_speed)).run()
    return {j.id: j.jct for j in run.jobs}


def stats(diffs: list[float]) -> tuple[float, float, float]:
    d = sorted(diffs)
    return statistics.median(d), d[min(len(d) - 1, int(0.9 * len(d)))], d[-1]


TIMING_KEYS = ("start_latency", "stop_latency", "launch_cost", "restart_latency",
               "restart_cost")


def run_case(case: Case, scale: Scale, jobs: int, seed: int, repeat: int
             ) -> tuple[dict[str, object], DemoResult]:
    """One emulator run's row (JSON) and its result, kept for a pooled calibration."""
    t0 = time.monotonic()
    result = run_demo(jobs, seed, case.config, live=False, console=Console(quiet=True),
                      scale=scale, timeout=60 * scale.round_seconds * jobs,
                      shape=case.shape, type_speed=case.type_speed)
    old = before(result, case, scale)
    rows = [{"job": r.job_id, "gpus": r.gpus, "emulator": r.emulator_jct,
             "after": r.simulator_jct, "before": old.get(r.job_id),
             "preempt_emulator": r.emulator_preemptions,
             "preempt_sim": r.simulator_preemptions} for r in result.rows]
    return {"scale": scale.name, "composition": case.label, "seed": seed, "repeat": repeat,
            "rows": rows,
            **result.timing.model_dump(include=set(TIMING_KEYS)),
            "wall_seconds": time.monotonic() - t0}, result


def predict(rows: list[dict[str, Any]], sim: Mapping[int, tuple[float, int]], jct: str,
            preemptions: str) -> None:
    """Each row's simulated JCT and preemptions under the keys ``jct`` and ``preemptions``
    (None for a job the simulator did not finish)."""
    for row in rows:
        row[jct], row[preemptions] = sim.get(row["job"], (None, None))


def pool_calibration(runs: list[tuple[dict[str, Any], DemoResult]], scale: Scale) -> SimConfig:
    """Calibrate once from every run's samples pooled and simulate each run again with that
    timing (rows' ``pooled`` and ``preempt_pooled``): a run's own calibration rests on its
    few restarts and stops, and varies from seed to seed with which jobs were preempted."""
    cfg = timing([d.measured for _, d in runs if d.measured is not None], scale.round_seconds)
    for res, demo in runs:
        assert demo.replay is not None
        predict(res["rows"], demo.replay.simulate(cfg), "pooled", "preempt_pooled")
        res["pooled_calibration"] = cfg.model_dump(include=set(TIMING_KEYS))
    return cfg


def figures(diffs: list[float]) -> str:
    """Median, p90 and worst of relative differences, as a line's columns."""
    med, p90, worst = stats(diffs)
    return f"{med:6.1%} {p90:6.1%} {worst:7.1%}"


def agreement(res: dict[str, object], rows: list[dict[str, Any]], label: object,
              keys: tuple[str, ...] = ("before", "after")) -> list[str]:
    """A line's first columns: scale, composition, ``label`` (seed), then the median / p90 /
    worst relative JCT difference of ``rows`` for each simulator prediction in ``keys``."""
    parts = [f"{res['scale']:<10} {res['composition']:<9} {label!s:<6}"]
    for key in keys:
        parts.append(figures([abs(r[key] - r["emulator"]) / r["emulator"] for r in rows
                              if r.get(key) is not None]))
    return parts


def pooled_line(runs: list[dict[str, object]], keys: tuple[str, ...] = ("before", "after")
                ) -> str:
    """Every job of every seed's run pooled: one 16-job run is chaotic (a 1 s difference in
    one start can flip a Tiresias demotion and every placement after it), so the pooled
    figure is the one to compare."""
    rows = [r for res in runs for r in res["rows"]]  # type: ignore[attr-defined]
    return ("  ".join(agreement(runs[0], rows, "pooled", keys))
            + f"  {len(runs)} runs, {len(rows)} jobs")


def repeat_groups(runs: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The runs of each seed that ran more than once (``--repeats``)."""
    by_seed: dict[object, list[dict[str, Any]]] = {}
    for res in runs:
        by_seed.setdefault(res["seed"], []).append(res)
    return [group for group in by_seed.values() if len(group) > 1]


def self_agreement(groups: list[list[dict[str, Any]]]) -> list[float]:
    """Each job's relative JCT difference between two emulator runs of one workload, over
    every ordered pair of runs (the second run the reference, as the emulator is for the
    simulator)."""
    diffs: list[float] = []
    for group in groups:
        for pred, ref in permutations(group, 2):
            truth = {r["job"]: r["emulator"] for r in ref["rows"]}
            diffs += [abs(r["emulator"] - truth[r["job"]]) / truth[r["job"]]
                      for r in pred["rows"] if r["job"] in truth]
    return diffs


def against_mean(groups: list[list[dict[str, Any]]], key: str = "after") -> list[float]:
    """The simulator's mean JCT per job (each run simulated with its own calibration)
    against the emulator runs' mean, for jobs every run finished in both worlds."""
    diffs: list[float] = []
    for group in groups:
        jobs = set.intersection(*({r["job"] for r in res["rows"] if r.get(key) is not None}
                                  for res in group))
        for job in sorted(jobs):
            rows = [r for res in group for r in res["rows"] if r["job"] == job]
            emu = statistics.fmean(r["emulator"] for r in rows)
            diffs.append(abs(statistics.fmean(r[key] for r in rows) - emu) / emu)
    return diffs


def repeatability_lines(runs: list[dict[str, Any]]) -> list[str]:
    """With ``--repeats``: the emulator against itself, and the simulator against the
    emulator runs' mean (see the module docstring); nothing without repeats."""
    groups = repeat_groups(runs)
    if not groups:
        return []
    head = f"{runs[0]['scale']:<10} {runs[0]['composition']:<9} {'':<6}"
    pairs = sum(len(g) * (len(g) - 1) for g in groups)
    return [f"{head}  {figures(self_agreement(groups))}  emulator vs emulator, "
            f"{pairs} ordered pairs of runs of {len(groups)} workloads",
            f"{head}  {figures(against_mean(groups))}  simulator vs the emulator runs' "
            "mean JCT per job"]


def preemptions(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> str:
    """The preemptions counted in each world, emulator first: ``e/s`` or ``e/s/s``."""
    return "/".join(str(sum(r[k] or 0 for r in rows)) for k in ("preempt_emulator", *keys))


def summary_line(res: dict[str, object]) -> str:
    rows = res["rows"]
    assert isinstance(rows, list)
    repeat = res.get("repeat", 0)
    parts = agreement(res, rows, f"{res['seed']}r{repeat}" if repeat else res["seed"])
    parts.append(f"{preemptions(rows, ('preempt_sim',)):>9}"
                 f" {res['start_latency']:5.2f} {res['stop_latency']:5.2f}"
                 f" {res['launch_cost']:5.2f} {res.get('restart_latency', 0.0):5.2f}"
                 f" {res['restart_cost']:5.2f}"
                 f" {res['wall_seconds']:5.0f}")
    return "  ".join(parts)


def pooled_calibration_lines(runs: list[dict[str, object]], cfg: SimConfig) -> list[str]:
    """Each run and all pooled, with its own calibration (``after``) beside the pooled one."""
    figures = ", ".join(f"{k} {getattr(cfg, k):.2f}" for k in TIMING_KEYS)
    stats_head = f"{'median    p90   worst':>22}"
    lines = [f"pooled calibration from {len(runs)} runs: {figures}",
             f"{'':<28}{'own calibration':^22}  {'pooled calibration':^22}",
             f"{'scale':<10} {'comp.':<9} {'seed':<6}  {stats_head}  {stats_head}"
             "  preempt e/own/pooled"]
    for res in runs:
        rows = res["rows"]
        assert isinstance(rows, list)
        lines.append("  ".join([*agreement(res, rows, res["seed"], ("after", "pooled")),
                                f"{preemptions(rows, ('preempt_sim', 'preempt_pooled')):>9}"]))
    return [*lines, pooled_line(runs, ("after", "pooled"))]


def plot(results: list[dict[str, object]], path: Path) -> None:
    scales = sorted({str(r["scale"]) for r in results}, key=list(SCALES).index)
    fig = Figure(figsize=(5.2 * len(scales), 4.8), dpi=110, layout="tight")
    FigureCanvasAgg(fig)
    for i, name in enumerate(scales, 1):
        ax = fig.add_subplot(1, len(scales), i)
        top = 0.0
        # one colour per composition in every panel, whatever order the runs came in
        for res in sorted((r for r in results if r["scale"] == name),
                          key=lambda r: list(CASES).index(str(r["composition"]))):
            rows = res["rows"]
            assert isinstance(rows, list)
            xs = [r["emulator"] for r in rows if r["after"] is not None]
            ys = [r["after"] for r in rows if r["after"] is not None]
            label = str(res["composition"])
            ax.scatter(xs, ys, s=18, label=label, color=f"C{list(CASES).index(label)}")
            top = max(top, *xs, *ys)
        ax.plot([0, top * 1.05], [0, top * 1.05], color="grey", lw=0.8, ls="--")
        ax.set_xlim(0, top * 1.05)
        ax.set_ylim(0, top * 1.05)
        ax.set_xlabel("emulator + controller JCT (s)")
        ax.set_ylabel("simulator JCT (s)")
        ax.set_title(f"{name} time scale: one point per job")
        ax.legend(loc="upper left", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")


Run = tuple[dict[str, Any], DemoResult]


def run_one(case: Case, scale: Scale, jobs: int, seed: int, repeat: int,
            keep: Path | None) -> Run | None:
    """One emulator run and its line; a failure is printed, not raised: one world failing
    must not lose the others' figures."""
    try:
        res, demo = run_case(case, scale, jobs, seed, repeat)
    except Exception as exc:
        print(f"{scale.name:<10} {case.label:<9} {seed:<6}  failed: {exc!r}", flush=True)
        return None
    print(summary_line(res), flush=True)
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        demo.daemons = []  # processes, gone with the run
        suffix = f"-r{repeat}" if repeat else ""
        (keep / f"{scale.name}-{case.label}-{seed}{suffix}.pkl").write_bytes(
            pickle.dumps((res, demo)))
    return res, demo


def kept_passes(res: dict[str, Any], demo: DemoResult) -> tuple[float, float]:
    """The pass phases of a run kept before runs kept them: its clock's origin taken as the
    first round's start (a few hundredths early), its jobs' ends as submission + JCT."""
    assert demo.replay is not None and demo.measured is not None
    t = demo.measured.timings
    origin = t.rounds[0][0]
    submits = {s.id: origin + s.submit_time for s in demo.replay.workload.jobs}
    ends = [submits[r["job"]] + r["emulator"] for r in res["rows"]]
    return pass_phases([*submits.values(), *ends], t, origin, origin)


def replayed(path: Path, passes: bool) -> Run:
    """A kept run simulated again with this simulator and the run's own calibration: its
    ``after`` rows are replaced, its ``before`` (the old simulator) kept. ``passes``: with
    Slurm's batch scheduler's passes for first starts (else drawn latencies)."""
    res, demo = pickle.loads(path.read_bytes())
    assert demo.replay is not None and demo.measured is not None
    phases = (demo.replay.passes or kept_passes(res, demo)) if passes else None
    demo.replay = replace(demo.replay, passes=phases)
    cfg = timing([demo.measured], demo.timing.round_duration)
    predict(res["rows"], demo.replay.simulate(cfg), "after", "preempt_sim")
    res.update(cfg.model_dump(include=set(TIMING_KEYS)))
    return res, demo


def report(runs: list[Run], scale: Scale, pooled_calibration: bool
           ) -> list[dict[str, object]]:
    """The lines of one composition's runs at one scale: the pooled line, and with
    ``pooled_calibration`` every run simulated again with one calibration from all."""
    rows = [res for res, _ in runs]
    if len(runs) > 1:
        print("\n".join([pooled_line(rows), *repeatability_lines(rows)]), flush=True)
    if pooled_calibration and runs:
        cfg = pool_calibration(runs, scale)
        print("\n".join(pooled_calibration_lines(rows, cfg)), flush=True)
    return rows


def campaign(a: argparse.Namespace) -> list[dict[str, object]]:
    """Every composition at every scale, ``--repeats`` emulator runs per seed, the seeds
    taken in turn so that a change in the machine's load spreads over all of them
    (``--keep``: pickled)."""
    results: list[dict[str, object]] = []
    for scale in (SCALES[s] for s in a.scales):
        for case in (CASES[c] for c in a.compositions):
            runs = [r for repeat in range(a.repeats) for seed in a.seeds
                    if (r := run_one(case, scale, a.jobs, seed, repeat, a.keep)) is not None]
            results += report(runs, scale, a.pooled_calibration)
            a.json.write_text(json.dumps(results, indent=1))
    return results


def replay_all(a: argparse.Namespace) -> list[dict[str, object]]:
    """The kept runs simulated again, grouped by scale and composition as a campaign."""
    groups: dict[tuple[str, str], list[Run]] = {}
    for path in a.replay:
        res, demo = replayed(path, not a.no_passes)
        print(summary_line(res), flush=True)
        groups.setdefault((res["scale"], res["composition"]), []).append((res, demo))
    results: list[dict[str, object]] = []
    for (scale, _), runs in groups.items():
        results += report(runs, SCALES[scale], a.pooled_calibration)
    a.json.write_text(json.dumps(results, indent=1))
    return results


def first_seeds(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The plot's runs: each scale's lowest seed."""
    first = {r["scale"]: min(x["seed"] for x in rows if x["scale"] == r["scale"])
             for r in rows}
    return [r for r in rows if r["seed"] == first[r["scale"]]]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scales", nargs="+", default=list(SCALES), choices=list(SCALES))
    p.add_argument("--compositions", nargs="+", default=list(CASES), choices=list(CASES))
    p.add_argument("--jobs", type=int, default=16)
    p.add_argument("--seeds", type=int, nargs="+", default=[0],
                   help="workload seeds, one emulator run each; several add a pooled line")
    p.add_argument("--repeats", type=int, default=1, metavar="N",
                   help="run each seed's workload N times: adds the emulator against "
                        "itself and the simulator against the runs' mean")
    p.add_argument("--pooled-calibration", action="store_true",
                   help="after each composition's runs, calibrate once from all their stores "
                        "and simulate every run again with that")
    p.add_argument("--plot", type=Path, default=Path("docs/agreement.png"))
    p.add_argument("--plot-only", type=Path, nargs="+", metavar="JSON",
                   help="no runs: plot the rows of these JSON files (e.g. one per scale)")
    p.add_argument("--json", type=Path, default=Path("agreement.json"))
    p.add_argument("--keep", type=Path, metavar="DIR",
                   help="pickle each emulator run into DIR, for --replay")
    p.add_argument("--no-passes", action="store_true",
                   help="with --replay: first starts' latencies drawn, not Slurm's batch "
                        "scheduler's passes (the simulator before them)")
    p.add_argument("--replay", type=Path, nargs="+", metavar="PKL",
                   help="no emulator: simulate runs kept with --keep again (trusted files "
                        "only: they are pickles)")
    a = p.parse_args()
    if a.plot_only:
        plot(first_seeds([r for f in a.plot_only for r in json.loads(f.read_text())]),
             a.plot)
        return
    print(f"{'':<28}{'before':^22}  {'after':^22}")
    stats_head = f"{'median    p90   worst':>22}"
    print(f"{'scale':<10} {'comp.':<9} {'seed':<6}  {stats_head}  {stats_head}"
          f"  preempt e/s  start  stop launch  rlat  rest. wall s")
    results = replay_all(a) if a.replay else campaign(a)
    plot(first_seeds(results), a.plot)
    print(f"rows in {a.json}, plot in {a.plot}")


if __name__ == "__main__":
    main()
