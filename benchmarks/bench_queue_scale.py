"""A controller round at real queue lengths: 1,000 to 20,000 queued jobs on the emulator.

    sudo PYTHONPATH=. python3 benchmarks/bench_queue_scale.py            # ~10 min on 2 cores
    sudo PYTHONPATH=/path/to/older/checkout python3 benchmarks/bench_queue_scale.py  # before

A 32 x 4-GPU emulator with the job-submit plugin (and a heartbeat this script keeps fresh, so
every job submitted is held and marked for the controller), its GPUs filled by 128 running
1-GPU jobs, then held 1-GPU jobs submitted up to each queue length. At each length a
dry-run controller (FIFO) runs a first round on an empty store, then warm rounds, then a new
controller on the same store runs its first round (a daemon restarted); the table gives
medians of the warm ones, the first one and the restarted one, split into:

* ``slurm``: time in Slurm's client processes (``squeue``, ``sinfo``, ``scontrol``);
* ``parse``: the rest of the client's calls (turning their output into records, while no
  Slurm process runs);
* ``store``: the store's reads and writes;
* ``decide``: the policy and the plan; ``other``: the rest of the round;
* ``cpu``: the controller's own CPU time in the round (both its threads, none of Slurm's
  processes): what a before/after comparison on a loaded machine should look at, as the
  wall times above grow with the load;

then the jobs the policy saw (``seen``), the Slurm calls per round, the controller's resident
memory (its peak so far), and the peak resident memory of the Slurm client processes of one
more round (run through a small launcher that reports each child's peak: a fork of this
process would report the controller's own size). Timings on a shared 2-core machine are
noisy: run before and after alternately and compare medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from blox_slurm.core.composition import build
from blox_slurm.emulator.cluster import Emulator
from blox_slurm.emulator.spec import EmulatorSpec, parse_gpus
from blox_slurm.slurm import controller as controller_module
from blox_slurm.slurm.cli_backend import CliBackend
from blox_slurm.slurm.controller import Controller
from blox_slurm.slurm.controller_config import ControllerConfig
from blox_slurm.slurm.job_submit import write_config, write_heartbeat
from blox_slurm.slurm.runner import Runner
from blox_slurm.slurm.store import Store

PACKAGE = Path(controller_module.__file__).resolve().parents[1]
LUA = PACKAGE / "data" / "job_submit.lua"
PARTITION = "blox"
FIFO = {"name": "fifo", "scheduling": "fifo", "placement": "consolidated"}
#: Reports the peak resident memory of the command it runs (a fresh, small process: a fork
#: of the controller would count the controller's own pages as the child's).
LAUNCHER = ("import os, subprocess, sys\n"
            "p = subprocess.Popen(sys.argv[1:])\n"
            "_, status, usage = os.wait4(p.pid, 0)\n"
            "sys.stderr.write(f'\\nBLOX_PEAK_KB={usage.ru_maxrss}\\n')\n"
            "sys.exit(os.waitstatus_to_exitcode(status))\n")


class Clock:
    """Seconds spent per part of a round, added up by the proxies below."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        since = time.perf_counter()
        try:
            yield
        finally:
            self.spent[name] += time.perf_counter() - since

    def timed(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            with self.part(name):
                return fn(*args, **kwargs)
        return run


class Timed:
    """Every public method of ``obj`` timed under ``name`` (attributes pass through)."""

    def __init__(self, obj: Any, name: str, clock: Clock) -> None:
        self._obj, self._name, self._clock = obj, name, clock

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._obj, attr)
        if attr.startswith("_") or not callable(value):
            return value
        return self._clock.timed(self._name, value)


class World:
    """The 32 x 4 emulator with the plugin, a fresh heartbeat and room for 50,000 jobs."""

    def __init__(self, nodes: int) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="blox-bench-"))
        os.chmod(self.base, 0o755)
        self.heartbeat = self.base / "heartbeat"
        self.emu = Emulator(EmulatorSpec(
            run_dir=self.base / "emu", groups=parse_gpus(f"gpu:4x{nodes}"),
            job_submit_lua=LUA, extra_conf=("MaxJobCount=50000",)))

    def __enter__(self) -> World:
        write_heartbeat(self.heartbeat)
        self.emu.conf.parent.mkdir(parents=True)
        write_config(self.emu.conf.parent, [PARTITION], self.heartbeat, 3600)
        self.emu.up(timeout=120)
        return self

    def __exit__(self, *exc: object) -> None:
        self.emu.down()

    def submit(self, n: int) -> None:
        """``n`` 1-GPU sleep jobs, held and marked by the plugin (4 sbatch at a time)."""
        write_heartbeat(self.heartbeat)
        client = self.emu.client()
        argv = [f"--partition={PARTITION}", "--gres=gpu:1", "--output=/dev/null",
                f"--chdir={self.base}", "--wrap", "sleep 3600"]
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda _: client.submit(argv), range(n)))

    def fill_gpus(self, n: int) -> None:
        """``n`` running jobs: submitted (held by the plugin), then released by root."""
        client = self.emu.client()
        before = {j.job_id for j in client.list_jobs()}
        self.submit(n)
        ids = [j.job_id for j in client.list_jobs() if j.job_id not in before]
        client.release(ids)
        deadline = time.monotonic() + 120
        while sum(j.in_run for j in client.list_jobs()) < n:
            if time.monotonic() > deadline:
                raise SystemExit(f"{n} jobs did not start within 120 s")
            time.sleep(1)


def peak_execute(peaks: list[tuple[str, int]]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """A Runner ``execute`` that runs each command through :data:`LAUNCHER`."""
    def execute(argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        p = subprocess.run([sys.executable, "-S", "-c", LAUNCHER, *argv], **kw)  # noqa: S603
        err, _, peak = p.stderr.rpartition("\nBLOX_PEAK_KB=")
        peaks.append((argv[0], int(peak) if peak.strip().isdigit() else 0))
        return subprocess.CompletedProcess(p.args, p.returncode, p.stdout, err)
    return execute


def controller(world: World, tag: str, clock: Clock, runner: Runner | None = None
               ) -> Controller:
    cfg = ControllerConfig(partitions=[PARTITION], dry_run=True, round_seconds=1.0,
                           store=str(world.base / f"{tag}.db"),
                           heartbeat=str(world.heartbeat))
    cli = CliBackend(runner=runner) if runner else world.emu.client()
    return Controller(cfg, build(FIFO), Timed(cli, "client", clock),  # type: ignore[arg-type]
                      Timed(Store(cfg.store), "store", clock))  # type: ignore[arg-type]


def slurm_time(runner: Runner, clock: Clock) -> None:
    """Time spent waiting for Slurm's client processes, counted apart from the client."""
    runner._execute = clock.timed("slurm", runner._execute)  # noqa: SLF001


def vm(key: str) -> float:
    """MiB of ``VmRSS``/``VmHWM`` of this process."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def one_round(ctl: Controller, clock: Clock) -> dict[str, float]:
    clock.spent.clear()
    cpu = time.process_time()
    with clock.part("round"):
        report = ctl.round()
    cpu = time.process_time() - cpu
    if report.error:
        raise SystemExit(f"round failed: {report.error}")
    s = dict(clock.spent)
    client = s.get("client", 0.0)
    return {"round": s["round"], "slurm": s.get("slurm", 0.0),
            "parse": client - s.get("slurm", 0.0), "store": s.get("store", 0.0),
            "decide": s.get("decide", 0.0),
            "other": s["round"] - client - s.get("store", 0.0) - s.get("decide", 0.0),
            "cpu": cpu, "calls": report.slurm_calls, "jobs": report.jobs}


def measure(world: World, queued: int, warm: int) -> dict[str, Any]:
    clock = Clock()
    controller_module.decide = clock.timed("decide", DECIDE)  # type: ignore[attr-defined]
    controller_module.make_plan = clock.timed("decide", PLAN)  # type: ignore[attr-defined]
    runner = world.emu.client().runner
    slurm_time(runner, clock)
    ctl = controller(world, f"q{queued}", clock, runner)
    first = one_round(ctl, clock)
    rounds = [one_round(ctl, clock) for _ in range(warm)]
    restart = one_round(controller(world, f"q{queued}", clock, runner), clock)
    peaks: list[tuple[str, int]] = []
    probe = Runner(str(world.emu.conf), timeout=120, execute=peak_execute(peaks))
    one_round(controller(world, f"q{queued}-mem", Clock(), probe), Clock())
    return {"queued": queued, "first": first, "restart": restart,
            "warm": {k: statistics.median(r[k] for r in rounds) for k in rounds[0]},
            "rss": vm("VmRSS"), "hwm": vm("VmHWM"),
            "client_peak": max((kb for _, kb in peaks), default=0) / 1024,
            "client_peak_by": max(peaks, key=lambda p: p[1])[0] if peaks else ""}


DECIDE = controller_module.decide
PLAN = controller_module.make_plan


def table(rows: list[dict[str, Any]], version: str, nodes: int) -> str:
    head = (f"Controller round (dry run, FIFO), {nodes} x 4 GPUs, all busy, Slurm {version}\n"
            f"{'queued':>7} {'seen':>6} {'round':>7} {'slurm':>7} {'parse':>7} {'store':>7} "
            f"{'decide':>7} {'other':>7} {'cpu':>7} {'calls':>6} {'ctl MiB':>8} {'(peak)':>7} "
            f"{'client MiB':>11}")
    lines = [head]
    for r in rows:
        for label in ("warm", "first", "restart"):
            w = r[label]
            lines.append(
                f"{r['queued'] if label == 'warm' else label:>7} {w['jobs']:>6g} "
                f"{w['round']:>7.3f} {w['slurm']:>7.3f} {w['parse']:>7.3f} {w['store']:>7.3f} "
                f"{w['decide']:>7.3f} {w['other']:>7.3f} {w['cpu']:>7.3f} {w['calls']:>6g}" + (
                    f" {r['rss']:>8.0f} {r['hwm']:>7.0f} {r['client_peak']:>7.0f} "
                    f"({r['client_peak_by']})" if label == "warm" else ""))
    lines.append("seconds; a queue length's first line: the median of the warm rounds, its "
                 "second: the first round on an empty store, its third: the first round of a "
                 "controller started again on that store")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,5000,10000,20000",
                   help="queue lengths to measure at, ascending, comma-separated")
    p.add_argument("--nodes", type=int, default=32, help="emulated 4-GPU nodes")
    p.add_argument("--warm", type=int, default=5, help="warm rounds per queue length")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with World(args.nodes) as world:
        world.fill_gpus(4 * args.nodes)
        rows, waiting = [], 0
        for n in sizes:
            world.submit(n - waiting)
            waiting = n
            rows.append(measure(world, n, args.warm))
            print("\n".join(table(rows[-1:], world.emu.client().version(), args.nodes)
                            .splitlines()[2:5]), flush=True)
        print(table(rows, world.emu.client().version(), args.nodes))


if __name__ == "__main__":
    main()
