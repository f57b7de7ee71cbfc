"""A managed emulator world for the demo and the controller benchmark.

The emulator alone is a plain Slurm; the controller additionally needs the job-submit plugin
(configured *before* slurmctld starts, since it reads ``blox_job_submit.conf`` when it loads),
a fresh heartbeat, and jobs from several Unix users. Those run as ``daemon``/``bin``/``nobody``
with the system Python in world-accessible directories, which is why the world needs root and
lives outside any private temporary directory.

Also here: the fake-job workload (what the demo submits) and its conversion into the
simulator's :class:`~blox_slurm.workloads.schema.Workload`, so that the demo and the agreement
benchmark feed the simulator the same thing the emulator ran.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..emulator.cluster import Daemon, Emulator
from ..emulator.fake_train import read_progress
from ..emulator.spec import EmulatorSpec, parse_gpus
from ..slurm.cli_backend import CliBackend
from ..slurm.job_submit import write_config, write_heartbeat
from ..workloads.schema import JobSpec, Workload

PACKAGE = Path(__file__).resolve().parents[1]  # blox_slurm/
# slurm_conf/job_submit.lua, shipped inside the package (blox_slurm/data links to it) so the
# demo also runs from an installed wheel.
LUA = PACKAGE / "data" / "job_submit.lua"
TRAINER = PACKAGE / "emulator" / "fake_train.py"
USERS = ("daemon", "bin", "nobody")
PYTHON = "/usr/bin/python3"  # the system Python: the jobs' users cannot read a venv under /root
PARTITION = "blox"
SHAPE = "gpu:4x4"


class NeedsRoot(RuntimeError):
    """The world runs jobs as other users, which only root may do."""


@dataclass(frozen=True, slots=True)
class FakeJob:
    """One demo job: whose, how many GPUs, how many iterations, when (seconds after start)."""

    user: str
    gpus: int
    iterations: int
    arrival: float


def mixed_workload(n: int, seed: int, mean_gap: float = 1.5) -> list[FakeJob]:
    """``n`` jobs of 1/2/4 GPUs from the three users, 8-45 s long at 10 iterations/s,
    Poisson arrivals ``mean_gap`` s apart: enough contention on 16 GPUs for queueing and
    preemption, short enough to finish in a couple of minutes."""
    rng = random.Random(seed)
    jobs, t = [], 0.0
    for i in range(n):
        jobs.append(FakeJob(USERS[i % len(USERS)], rng.choice((1, 1, 2, 2, 4)),
                            rng.randrange(80, 450, 10), round(t, 2)))
        t += rng.expovariate(1 / mean_gap)
    return jobs


def to_workload(jobs: Mapping[int, FakeJob], submitted: Mapping[int, float],
                iters_per_sec: float, source: str = "emulator",
                origin: float | None = None) -> Workload:
    """The simulator's view of what the emulator ran: Slurm job ids, submit times (as
    measured when ``sbatch`` was called) relative to ``origin`` (default the first
    submission; the controller's first round puts the simulator's rounds where the
    controller's were), isolated duration = iterations / iterations per second, on one node
    (the fake jobs ask ``--gres=gpu:N``, per node, without ``-N``: Slurm gives them one
    node, and a simulator that spread them started 4-GPU jobs earlier than Slurm could)."""
    t0 = min(submitted.values()) if origin is None else origin
    specs = sorted((JobSpec(jid, submitted[jid] - t0, j.gpus, j.iterations / iters_per_sec,
                            user=j.user, nodes=1) for jid, j in jobs.items()),
                   key=lambda s: (s.submit_time, s.id))
    return Workload(tuple(specs), source=source)


def require_root() -> None:
    if os.geteuid() != 0:
        raise NeedsRoot("the demo runs its fake jobs as the users daemon, bin and nobody, "
                        "which needs root: run it as root (e.g. in the emulator container "
                        "or with sudo)")


class ManagedWorld:
    """A 4x4 emulator with the plugin installed, a heartbeat, and per-user job directories.
    Use as a context manager: leaving it (normally, on Ctrl-C or on an error) cancels every
    job, stops every daemon and removes the files."""

    def __init__(self, shape: str = SHAPE, max_age: int = 90,
                 type_speed: Mapping[str, float] | None = None,
                 extra_conf: Sequence[str] = ()) -> None:
        """``type_speed``: how fast a fake job runs on each GPU type (default all 1);
        ``extra_conf``: slurm.conf lines of a site's tuning (appended last)."""
        require_root()
        self.base = Path(tempfile.mkdtemp(prefix="blox-demo-"))
        os.chmod(self.base, 0o755)
        self.heartbeat = self.base / "heartbeat"
        self.work = self.base / "work"
        self.emu = Emulator(EmulatorSpec(run_dir=self.base / "emu", groups=parse_gpus(shape),
                                         job_submit_lua=LUA, extra_conf=tuple(extra_conf)))
        self.max_age = max_age
        self.shape = shape
        self.type_speed = dict(type_speed or {})
        speed = self.type_speed
        self.node_speed = {node: speed.get(group.gpu_type, 1.0)
                           for group, nodes in self.emu.spec.nodes_by_group() for node in nodes}
        self.daemons: list[Daemon] = []  # what we started, kept for checks after teardown

    def __enter__(self) -> ManagedWorld:
        try:
            write_heartbeat(self.heartbeat)
            self.emu.conf.parent.mkdir(parents=True)
            write_config(self.emu.conf.parent, [PARTITION], self.heartbeat, self.max_age)
            self.emu.up()
            self.daemons = list(self.emu.daemons)
            self.work.mkdir()
            os.chmod(self.work, 0o755)
            shutil.copy(TRAINER, self.work / TRAINER.name)
            os.chmod(self.work / TRAINER.name, 0o644)
            for u in USERS:
                (self.work / u).mkdir()
                os.chmod(self.work / u, 0o1777)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.emu.down()
        finally:
            shutil.rmtree(self.base, ignore_errors=True)

    def client(self) -> CliBackend:
        return self.emu.client()

    def run(self, *argv: str, user: str | None = None) -> subprocess.CompletedProcess[str]:
        """A Slurm command (argv list, never a shell) against this world, as root or as the
        Unix ``user`` via ``runuser`` (auth/none takes the caller's uid): how tests act as an
        ordinary user, e.g. to check what the job-submit plugin tells them."""
        prefix = ["runuser", "-u", user, "--", "env", f"SLURM_CONF={self.emu.conf}"] if user else []
        return subprocess.run([*prefix, *argv], capture_output=True, text=True,  # noqa: S603
                              env={**os.environ, **self.emu.env()}, cwd="/", timeout=30)

    def submit_fake(self, job: FakeJob, iters_per_sec: float, options: Sequence[str] = (),
                    trainer: str = "", per_job: bool = False) -> int:
        """Plain ``sbatch`` into the managed partition, as ``job.user``, with more sbatch
        ``options`` (``--comment=blox:...``) and ``trainer`` options (``--scaling 0.9``;
        numbers and flags written by the caller, never a job field). GPUs per node
        (``--gres``), or ``per_job`` (``--gpus``: a total that may span nodes)."""
        wd = self.work / job.user
        cmd = (f"{PYTHON} {self.work / TRAINER.name} --iterations {job.iterations} "
               f"--iters-per-sec {iters_per_sec:g} {trainer}").rstrip()
        if any(v != 1.0 for v in self.node_speed.values()):
            cmd += " --node-speed " + ",".join(f"{n}={v:g}" for n, v in self.node_speed.items())
        return self.client().submit([
            f"--partition={PARTITION}",
            f"--gpus={job.gpus}" if per_job else f"--gres=gpu:{job.gpus}", *options,
            f"--chdir={wd}", f"--output={wd}/%j.out", "--open-mode=append", "--wrap", cmd],
            as_user=job.user)

    def submit_sleep(self, count: int, seconds: int = 3600) -> list[int]:
        """``count`` 1-GPU ``sleep`` jobs (as root): queue filler for the benchmark."""
        client = self.client()
        return [client.submit([f"--partition={PARTITION}", "--gres=gpu:1",
                               f"--chdir={self.work}", "--output=/dev/null",
                               "--wrap", f"sleep {seconds}"]) for _ in range(count)]

    def progress(self, job_id: int, user: str) -> dict[str, Any] | None:
        return read_progress(self.work / user / ".blox-fake" / f"{job_id}.progress.json")


def alive(daemons: Sequence[Daemon]) -> list[Daemon]:
    """Those of ``daemons`` still running (by pid *and* command line: pids get recycled)."""
    return [d for d in daemons if d.ours()]
