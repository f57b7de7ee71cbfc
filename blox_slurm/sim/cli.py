"""``blox-slurm simulate | compare | policies | plot``: the researcher's side of the CLI."""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

from ..cli_errors import exit_codes
from ..core import registry
from ..core.composition import CompositionError, bundled_names
from ..loading import load
from ..logs import console
from ..workloads import LOADERS, format_of, loader_options
from ..workloads.loader_options import parse_pairs
from ..workloads.runnable import Unrunnable
from ..workloads.schema import WorkloadError
from ..workloads.throughput_spec import ThroughputSpec
from .config import ClusterSpec, SimConfig, mode_settings
from .experiment import (
    Experiment,
    WorkloadSpec,
    load_runs,
    prepare,
    run,
    run_all,
    save_runs,
)
from .metrics import summarize, summary_row, write_csv, write_json
from .options import measure_window, sim_table
from .progress import describe, progress
from .records import RunResult
from .simulator import SimulationError
from .synthesizer import choice_rows, choice_summary, evaluations

if TYPE_CHECKING:
    from rich.table import Table

DEFAULT_COMPARE = ["fifo", "las", "srtf", "tiresias", "las-load-based", "optimus"]

# Options shared by simulate and compare (declared once).
WorkloadOpt = Annotated[Path | None, typer.Option(
    "--workload", "-w", help="Trace file (.trace Gavel, .csv, .json Philly, .sacct, .toml "
    "generator config). Default: Blox's synthetic Poisson workload.")]
FormatOpt = Annotated[str | None, typer.Option(
    help=f"Trace format when the extension is not enough: {', '.join(LOADERS)}.")]
TraceOptionOpt = Annotated[list[str] | None, typer.Option(
    "--trace-option", help="A trace loader's option KEY=VALUE (repeatable; lists "
    "comma-separated), e.g. states=COMPLETED for helios/acme, fractional=filter for pai; "
    "docs/workloads.md lists them.")]
UnrunnableOpt = Annotated[Unrunnable, typer.Option(
    "--unrunnable", metavar="<choice>", help="Trace jobs that make no progress on some GPU "
    "type: error (stop before the run), drop (remove them, report how many) or restrict "
    "(run them only on the types they progress on).")]
SkipOpt = Annotated[bool, typer.Option("--skip-bad-rows", help="Skip malformed trace rows and "
                                       "report how many, instead of failing on the first.")]
JobsOpt = Annotated[int, typer.Option("--jobs", "-n", help="Synthetic: number of jobs.")]
SeedOpt = Annotated[int, typer.Option(help="Synthetic: random seed.")]
GpuDemandOpt = Annotated[str, typer.Option(
    help="Synthetic: GPU demand preset (single = all 1 GPU, blox-multi-gpu = 1/2/4/8 at "
    ".70/.10/.15/.05).")]
MeasureOpt = Annotated[str | None, typer.Option(
    help="Synthetic: measured job-id window FIRST:END (default 3000:4000 when --jobs >= 4000,"
    " else all). 'all' measures every job.")]
ClusterOpt = Annotated[str, typer.Option(
    "--cluster", help="GPU groups TYPE:GPUSxNODES[,...], e.g. v100:4x36,k80:4x36.")]
RoundOpt = Annotated[float | None, typer.Option("--round", help="Round duration in seconds.")]
QuantizeOpt = Annotated[bool | None, typer.Option(
    "--quantize/--exact", help="Blox accounting: jobs end at the end of their last round.")]
RestartOpt = Annotated[float | None, typer.Option(help="Seconds to restore after preemption.")]
ModeOpt = Annotated[str | None, typer.Option(
    "--mode", help="World: physical (spread jobs at spread rates, 30 s restarts), blox "
    "(Blox's accounting) or gavel (Gavel's: consolidated rates, free restarts, its round "
    "clock). Default: "
    "the composition's own settings.")]
CalibrationOpt = Annotated[Path | None, typer.Option(
    "--calibration", help="TOML with a \\[simulation] table from `blox-slurm calibrate`: "
    "round length, start latency and restart cost measured on a cluster.")]
ThroughputOpt = Annotated[Path | None, typer.Option(
    "--throughputs", help="Gavel simulation_throughputs.json: measured throughput model.")]
PolicyPathOpt = Annotated[list[Path] | None, typer.Option(
    "--policy-path", help="Python file registering extra policies (repeatable).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
OutOpt = Annotated[Path | None, typer.Option(
    "--out", "-o", help="Directory for results.json, results.csv, jobs.csv, runs.json, plots.")]
ProcOpt = Annotated[int | None, typer.Option("--processes", "-j", help="Worker processes.")]

def user_errors() -> AbstractContextManager[None]:
    """Bad input exits 2 with one clear message, runtime failures exit 1; no tracebacks."""
    return exit_codes((CompositionError, WorkloadError, registry.PolicyError, ValueError,
                       ValidationError), (SimulationError,))


def _trace(workload: Path | None, format: str | None, skip_bad_rows: bool,
           trace_option: list[str] | None, unrunnable: Unrunnable) -> WorkloadSpec | None:
    """The trace every experiment reads, ``None`` for the synthetic workload; its loader
    options are checked here, before any run."""
    if workload is None:
        if trace_option or format:
            raise WorkloadError("--trace-option and --format apply to a trace: give -w FILE")
        return None
    options = parse_pairs(trace_option or [])
    loader_options(format_of(workload, format), options)
    return WorkloadSpec(path=str(workload), format=format, skip_bad_rows=skip_bad_rows,
                        options=options, unrunnable=unrunnable)


def _experiments(
    configs: list[str], rates: list[float], trace: WorkloadSpec | None, jobs: int, seed: int,
    gpu_demand: str, measure: str | None, cluster: str, cli_sim: dict[str, Any],
    throughputs: Path | None, policy_paths: list[Path] | None,
) -> list[Experiment]:
    paths = [str(p) for p in policy_paths or []]
    for p in paths:
        registry.load_policy_file(p)
    ClusterSpec.parse(cluster)  # fail early on a bad shape
    thr = ThroughputSpec(kind="gavel", path=str(throughputs)) if throughputs else ThroughputSpec()
    thr.build()  # a bad table is an input error now, not a worker crash later
    exps = []
    for name in configs:
        comp = load(name)
        sim = SimConfig.model_validate({**sim_table(name), **cli_sim})
        for rate in rates if trace is None else [None]:
            wl = trace or WorkloadSpec(generator={
                "n_jobs": jobs, "jobs_per_hour": rate, "seed": seed, "gpu_demand": gpu_demand,
                "measure": measure_window(measure, jobs, "--measure")})
            label: dict[str, Any] = ({"jobs_per_hour": rate} if trace is None
                                     else {"workload": trace.path})
            exps.append(Experiment(composition=comp.config, workload=wl, cluster=cluster,
                                   sim=sim, throughput=thr, policy_paths=paths, label=label))
    if trace is not None and len(exps) > 1:
        prepare(exps[0])  # a bad trace or an unrunnable job fails once, not in every worker
    return exps


def _trace_notes(exp: Experiment, result: RunResult) -> None:
    """On stderr, what became of the trace's rows and jobs that the run did not simulate."""
    if "skipped_rows" not in result.params and "unrunnable_jobs" not in result.params:
        return
    err = console(stderr=True)
    if "skipped_rows" in result.params:
        err.print(f"skipped {result.params['skipped_rows']} bad row(s) in "
                  f"{exp.workload.path}", markup=False)
    if "unrunnable_jobs" in result.params:
        how = ("dropped" if exp.workload.unrunnable == "drop"
               else "restricted to the types they progress on")
        err.print(f"{result.params['unrunnable_jobs']} job(s) make no progress on some GPU "
                  f"type: {how} (--unrunnable {exp.workload.unrunnable})", markup=False)


def _sim_overrides(calibration: Path | None, round_: float | None, quantize: bool | None,
                   restart_cost: float | None, mode: str | None = None) -> dict[str, Any]:
    """What the command line sets over each composition's ``[simulation]``: a ``--mode``'s
    world, a calibration file's table (``blox-slurm calibrate``) over it, then the explicit
    options over both."""
    base = sim_table(calibration) if calibration is not None else {}
    if calibration is not None and not base:
        raise CompositionError(f"{calibration}: no [simulation] table (write one with "
                               "`blox-slurm calibrate --out`)")
    return {**mode_settings(mode), **base, **{k: v for k, v in (("round_duration", round_),
                                        ("quantize_to_rounds", quantize),
                                        ("restart_cost", restart_cost)) if v is not None}}


def _run_with_progress(exp: Experiment, quiet: bool) -> RunResult:
    """One run with a rich progress bar on stderr (jobs of the measured window finished)."""
    err = None if quiet else console(stderr=True)  # quiet (--json): Rich is never loaded
    if err is None or not err.is_terminal:
        return run(exp)
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    # The composition's name is shown as given, never read as markup.
    with Progress(TextColumn("{task.description}", style="progress.description", markup=False),
                  BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err,
                  transient=True) as bar:
        task = bar.add_task(str(exp.composition.get("name")), total=None)
        last = [-1]

        def update(done: int, total: int) -> None:
            if done - last[0] >= max(1, total // 200) or done == total:
                last[0] = done
                bar.update(task, completed=done, total=total)

        return run(exp, progress=update)


#: Dropped, in this order, when the table is wider than the terminal (all are in --json and
#: results.csv): a table cut at the edge is unreadable, one with fewer columns is not.
OPTIONAL_COLUMNS = ("wall s", "queue s", "p50 h", "jobs")


def _table(results: list[RunResult], title: str, width: int | None = None) -> Table:
    def f(v: float | None, scale: float = 1.0, fmt: str = "{:.1f}") -> str:
        return "-" if v is None else fmt.format(v / scale)

    rows = []
    for r in results:
        m = summarize(r)
        load_ = r.params.get("jobs_per_hour")
        rows.append({
            "composition": r.name, "load": "-" if load_ is None else f"{load_:g}/h",
            "jobs": str(m.count), "avg JCT h": f(m.avg_jct, 3600, "{:.2f}"),
            "p50 h": f(m.p50_jct, 3600, "{:.2f}"), "p99 h": f(m.p99_jct, 3600, "{:.2f}"),
            "resp. s": f(m.avg_responsiveness, fmt="{:.0f}"),
            "queue s": f(m.avg_queueing_delay, fmt="{:.0f}"),
            "util %": f(None if m.utilization is None else m.utilization * 100),
            "preempt": str(m.preemptions), "wall s": f"{r.wall_seconds:.2f}"})
    columns = list(rows[0]) if rows else ["composition"]
    for optional in OPTIONAL_COLUMNS:
        if width is None or _width(rows, columns) <= width:
            break
        columns.remove(optional)
    from rich import box  # Rich only when a table is printed: --json starts without it
    from rich.table import Table

    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    for col in columns:
        t.add_column(col, justify="left" if col == "composition" else "right",
                     no_wrap=col != "composition", overflow="fold")
    for row in rows:
        t.add_row(*(row[c] for c in columns))
    return t


def _width(rows: list[dict[str, str]], columns: list[str]) -> int:
    """The table's width with SIMPLE_HEAD: each column's widest cell plus 2 of padding."""
    return sum(max(len(c), *(len(r[c]) for r in rows)) + 2 for c in columns)


def _report(results: list[RunResult], title: str, as_json: bool, out: Path | None) -> None:
    rows = [summary_row(r) for r in results]
    # A meta-policy's choices (the synthesizer's evaluations) go with its row in the JSON;
    # a CSV cell cannot hold them, so they have their own file.
    with_choices = [{**row, "choices": evaluations(r.choices)} if r.choices else row
                    for row, r in zip(rows, results, strict=True)]
    if out is not None:
        from .metrics import job_rows
        from .plot import write_plots

        out.mkdir(parents=True, exist_ok=True)
        write_json(with_choices, out / "results.json")  # metrics with what each row is for
        write_csv(rows, out / "results.csv")
        write_csv([{"composition": r.name, **row} for r in results for row in job_rows(r)],
                  out / "jobs.csv")
        if picks := choice_rows(results):
            write_csv(picks, out / "choices.csv")
        save_runs(results, out / "runs.json")
        sweep = rows if len({r.params.get("jobs_per_hour") for r in results}) > 1 else []
        write_plots(results, out, rows=[{**row, "policy": row["composition"],
                                         "load": row.get("jobs_per_hour")} for row in sweep])
    if as_json:
        typer.echo(json.dumps(with_choices, default=str, indent=2))
    else:
        screen = console()
        screen.print(_table(results, title, screen.width if screen.is_terminal else None))
        for line in filter(None, map(choice_summary, results)):
            screen.print(line, markup=False, highlight=False)
        if out is not None:
            screen.print(f"results and plots in {out}/")


def simulate(
    config: Annotated[str, typer.Option("--config", "-c", help="Composition TOML file or "
                                        "bundled composition name.")] = "fifo",
    rate: Annotated[float, typer.Option("--rate", "-r", help="Synthetic: jobs/hour.")] = 6.0,
    workload: WorkloadOpt = None, format: FormatOpt = None, skip_bad_rows: SkipOpt = False,
    trace_option: TraceOptionOpt = None, unrunnable: UnrunnableOpt = "error",
    jobs: JobsOpt = 5000, seed: SeedOpt = 0, gpu_demand: GpuDemandOpt = "single",
    measure: MeasureOpt = None, cluster: ClusterOpt = "gpu:4x32", round_: RoundOpt = None,
    quantize: QuantizeOpt = None, restart_cost: RestartOpt = None, mode: ModeOpt = None,
    calibration: CalibrationOpt = None, throughputs: ThroughputOpt = None,
    policy_path: PolicyPathOpt = None, as_json: JsonOpt = False, out: OutOpt = None,
) -> None:
    """Simulate one composition on a workload and print its metrics."""
    with user_errors():
        cli_sim = _sim_overrides(calibration, round_, quantize, restart_cost, mode)
        trace = _trace(workload, format, skip_bad_rows, trace_option, unrunnable)
        (exp,) = _experiments([config], [rate], trace, jobs, seed, gpu_demand, measure,
                              cluster, cli_sim, throughputs, policy_path)
        results = [_run_with_progress(exp, quiet=as_json)]
        _trace_notes(exp, results[0])
        _report(results, f"simulation on {cluster}", as_json, out)


def compare(
    config: Annotated[list[str] | None, typer.Option(
        "--config", "-c", help="Compositions to compare (repeatable; files or bundled "
        f"names). Default: {', '.join(DEFAULT_COMPARE)}.")] = None,
    rate: Annotated[list[float] | None, typer.Option(
        "--rate", "-r", help="Synthetic loads in jobs/hour (repeatable). Default 8.")] = None,
    workload: WorkloadOpt = None, format: FormatOpt = None, skip_bad_rows: SkipOpt = False,
    trace_option: TraceOptionOpt = None, unrunnable: UnrunnableOpt = "error",
    jobs: JobsOpt = 5000, seed: SeedOpt = 0, gpu_demand: GpuDemandOpt = "single",
    measure: MeasureOpt = None, cluster: ClusterOpt = "gpu:4x32", round_: RoundOpt = None,
    quantize: QuantizeOpt = None, restart_cost: RestartOpt = None, mode: ModeOpt = None,
    calibration: CalibrationOpt = None, throughputs: ThroughputOpt = None,
    policy_path: PolicyPathOpt = None, processes: ProcOpt = None, as_json: JsonOpt = False,
    out: OutOpt = None,
) -> None:
    """Run several compositions x loads on the identical job stream and compare them.

    With no options: Blox's Figure-6 setup (32 nodes x 4 GPUs, 1-GPU jobs,
    300 s rounds, Poisson arrivals, jobs 3000-4000 measured) at 8 jobs/hour
    for six compositions.
    """
    with user_errors():
        cli_sim = _sim_overrides(calibration, round_, quantize, restart_cost, mode)
        trace = _trace(workload, format, skip_bad_rows, trace_option, unrunnable)
        exps = _experiments(config or DEFAULT_COMPARE, rate or [8.0], trace, jobs, seed,
                            gpu_demand, measure, cluster, cli_sim, throughputs, policy_path)
        if as_json:
            results = run_all(exps, processes)
        else:
            with progress(len(exps)) as tick:
                results = run_all(exps, processes, on_done=lambda exp: tick(describe(exp)))
        _trace_notes(exps[0], results[0])
        _report(results, f"comparison on {cluster}", as_json, out)


def policies(policy_path: PolicyPathOpt = None, as_json: JsonOpt = False) -> None:
    """List the policies (per extension point) and the bundled compositions."""
    with user_errors():
        for p in policy_path or []:
            registry.load_policy_file(p)
        specs = registry.available()
        if as_json:
            typer.echo(json.dumps({
                "policies": [{"kind": s.kind, "name": s.name, "summary": s.summary,
                              "params": s.params.model_json_schema().get("properties", {})}
                             for s in specs],
                "compositions": bundled_names()}, indent=2))
            return
        from rich.table import Table

        t = Table(title="policies")
        for col in ("kind", "name", "parameters", "what it does"):
            t.add_column(col)
        for s in specs:
            params = ", ".join(f"{k}={v.get_default(call_default_factory=True)!r}"
                               for k, v in s.params.model_fields.items())
            t.add_row(s.kind, s.name, params, s.summary)
        screen = console()
        screen.print(t)
        screen.print("bundled compositions: " + ", ".join(bundled_names()))


def plot(
    runs: Annotated[Path, typer.Argument(help="runs.json written by simulate/compare --out.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for the PNGs.")] =
    Path("plots"),
) -> None:
    """Write JCT CDF and utilization PNGs (and sweep plots for several loads)."""
    from .plot import write_plots

    with user_errors():
        results = load_runs(runs)
        rows = [{**summary_row(r), "policy": r.name, "load": r.params.get("jobs_per_hour")}
                for r in results]
        sweep = rows if len({row["load"] for row in rows}) > 1 else []
        for path in write_plots(results, out, rows=sweep):
            typer.echo(str(path))
