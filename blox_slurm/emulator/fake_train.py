"""The fake training job run inside emulated Slurm jobs.

It does what a well-behaved checkpointing trainer does, minus the GPU: it runs ``total``
iterations at ``iters_per_sec`` (``time_scale`` times faster than real), publishes progress,
and on SIGTERM or SIGUSR1 saves the number of *completed* iterations and exits, so a requeued
run resumes exactly there. An iteration is counted only once it completes, and the checkpoint
records every run's ``[first, end)`` range: across any number of preemptions the ranges tile
``[0, total)`` with no gap and no overlap, which is what the tests check.

Exit codes: 0 finished; :data:`EXIT_PREEMPTED` (75, ``EX_TEMPFAIL``) checkpointed on a signal.
When Slurm itself stops the job (``scontrol requeue``/``requeuehold``, ``scancel``) the code is
irrelevant; when only the signal arrives (``scancel --signal=USR1``), the emulator's
``RequeueExitHold=75`` makes Slurm requeue the job held instead of marking it FAILED, so the
controller's checkpoint-then-requeue preemption cannot lose a job to a race.

``--node-speed node1=1,node2=0.25`` makes it run at that fraction of ``iters_per_sec`` on
the named node (``SLURMD_NODENAME``): how the emulator gives GPU types different speeds, for
heterogeneity-aware policies such as Gavel.

``--scaling E`` (0 < E <= 1) makes it an elastic job's trainer: ``iters_per_sec`` is its
speed on one GPU, and on ``g`` GPUs it runs ``1 + E (g - 1)`` times faster, with a global
batch of ``--batch-per-gpu`` times ``g`` (a data-parallel trainer keeping its per-GPU batch).
``g`` is what Slurm gave this run (:func:`allocated_gpus`), so a job the controller resized
(``blox:elastic=1``) adapts on its next start. Without it the speed ignores the GPU count.

Files (JSON, written atomically via rename): progress ``{iteration, total, time, state, runs,
history, model, rate, gpus, batch_size}`` (``rate``: iterations per second this run makes)
and the checkpoint. Default location ``.blox-fake/`` in the job's working
directory (``sbatch --chdir``), as ``<SLURM_JOB_ID>.progress.json`` / ``.ckpt.json``; override with
``--progress-file``/``--checkpoint-file`` or ``BLOX_PROGRESS_FILE``/``BLOX_CHECKPOINT_FILE``.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EXIT_PREEMPTED = 75
DEFAULT_ITERS_PER_SEC = 10.0


@dataclass
class Checkpoint:
    iteration: int = 0
    history: list[list[int]] = field(default_factory=list)  # [first, end) of every run

    @classmethod
    def load(cls, path: Path) -> Checkpoint:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return cls()
        return cls(int(data["iteration"]), [list(map(int, r)) for r in data["history"]])


def default_paths(job_id: str | None = None) -> tuple[Path, Path]:
    """(progress, checkpoint) files for this job, honouring the environment overrides."""
    env = os.environ
    job = job_id or env.get("SLURM_JOB_ID", "local")
    base = Path.cwd() / ".blox-fake"
    progress = env.get("BLOX_PROGRESS_FILE") or str(base / f"{job}.progress.json")
    checkpoint = env.get("BLOX_CHECKPOINT_FILE") or str(base / f"{job}.ckpt.json")
    return Path(progress), Path(checkpoint)


def allocated_gpus(env: dict[str, str] | os._Environ[str] = os.environ) -> int:
    """GPUs of this run: those the batch node's ``CUDA_VISIBLE_DEVICES`` lists (Slurm sets it
    from the job's gres) times ``SLURM_JOB_NUM_NODES``, exact for a per-node request and for
    any job on one node; 1 outside Slurm or with no GPU (the speed of one)."""
    visible = [d for d in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    nodes = env.get("SLURM_JOB_NUM_NODES", "1")
    return max(1, len(visible) * (int(nodes) if nodes.isdigit() and int(nodes) > 0 else 1))


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomic: a reader sees the old or the new file, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def read_progress(path: Path) -> dict[str, Any] | None:
    """What the controller (or a test) reads; None before the first write."""
    try:
        return dict(json.loads(path.read_text()))
    except FileNotFoundError:
        return None


_STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGUSR1})


@dataclass
class FakeTrainer:
    total: int
    progress_file: Path
    checkpoint_file: Path
    iters_per_sec: float = DEFAULT_ITERS_PER_SEC
    time_scale: float = 1.0
    model: str = ""
    progress_interval: float = 0.1  # seconds of real time between progress writes
    gpus: int = 1  # this run's allocation
    scaling: float = 0.0  # > 0: elastic, speed 1 + scaling * (gpus - 1) times one GPU's
    batch_per_gpu: int = 0

    def __post_init__(self) -> None:
        if self.total < 0 or self.iters_per_sec <= 0 or self.time_scale <= 0:
            raise ValueError("iterations >= 0, iterations/s > 0 and time scale > 0 required")
        if not 0 <= self.scaling <= 1 or self.gpus < 1 or self.batch_per_gpu < 0:
            raise ValueError("scaling in [0, 1], gpus >= 1 and batch per GPU >= 0 required")
        self._signal: int | None = None
        self._blocked = False  # handle_signals() ran: stop signals wait for the loop

    @property
    def rate(self) -> float:
        """Iterations per second this run makes."""
        return self.iters_per_sec * self.time_scale * (1 + self.scaling * (self.gpus - 1))

    def handle_signals(self) -> None:
        """Take SIGTERM and SIGUSR1 in the training loop: blocked until then, and collected
        there with ``sigtimedwait`` (:meth:`_interrupted`). A handler that set a
        ``threading.Event`` could deadlock: when the signal landed while the loop held the
        Event's lock, ``set()`` waited for that lock forever, and the trainer hung (seen in
        the test suite under load)."""
        signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        self._blocked = True

    def _interrupted(self, seconds: float) -> bool:
        """Wait one iteration's ``seconds``; true, at once, if a stop signal comes."""
        if not self._blocked:
            time.sleep(seconds)
            return False
        info = signal.sigtimedwait(_STOP_SIGNALS, seconds)
        if info is None:
            return False
        self._signal = info.si_signo
        return True

    def run(self) -> int:
        """Train from the checkpoint; returns the process exit code."""
        ckpt = Checkpoint.load(self.checkpoint_file)
        first = done = min(ckpt.iteration, self.total)
        step = 1.0 / self.rate
        last_write = 0.0
        self._publish(done, ckpt.history, first, "running")
        while done < self.total:
            if self._interrupted(step):
                break  # the interrupted iteration does not count
            done += 1
            now = time.monotonic()
            if now - last_write >= self.progress_interval:
                self._publish(done, ckpt.history, first, "running")
                last_write = now
        history = [*ckpt.history, [first, done]]
        write_json(self.checkpoint_file, {"iteration": done, "history": history})
        state = "done" if done >= self.total else "preempted"
        self._publish(done, ckpt.history, first, state, history)
        return 0 if state == "done" else EXIT_PREEMPTED

    def _publish(
        self,
        done: int,
        past: list[list[int]],
        first: int,
        state: str,
        history: list[list[int]] | None = None,
    ) -> None:
        write_json(
            self.progress_file,
            {
                "iteration": done,
                "total": self.total,
                "time": time.time(),
                "state": state,
                "runs": len(past) + 1,
                "history": history if history is not None else [*past, [first, done]],
                "model": self.model,
                "rate": self.rate,
                "gpus": self.gpus,
                "batch_size": self.batch_per_gpu * self.gpus,
                "job_id": os.environ.get("SLURM_JOB_ID", ""),
                "signal": self._signal,
            },
        )


def node_speeds(text: str) -> dict[str, float]:
    """``node1=1,node2=0.25`` -> ``{"node1": 1.0, "node2": 0.25}``; factors must be > 0."""
    out: dict[str, float] = {}
    for item in filter(None, text.split(",")):
        node, sep, factor = item.partition("=")
        speed = float(factor) if sep else 0.0
        if not node or not speed > 0:
            raise ValueError(f"--node-speed wants NODE=FACTOR with FACTOR > 0, got {item!r}")
        out[node] = speed
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m blox_slurm.emulator.fake_train`` (no typer: starts fast inside jobs)."""
    import argparse

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", type=int, required=True)
    p.add_argument("--iters-per-sec", type=float, default=DEFAULT_ITERS_PER_SEC)
    p.add_argument("--time-scale", type=float, default=1.0)
    p.add_argument("--model", default="")
    p.add_argument("--progress-file", type=Path)
    p.add_argument("--checkpoint-file", type=Path)
    p.add_argument("--node-speed", type=node_speeds, default={},
                   help="NODE=FACTOR,...: speed on each node (default 1)")
    p.add_argument("--scaling", type=float, default=0.0,
                   help="E in (0, 1]: elastic, 1 + E (gpus - 1) times one GPU's speed")
    p.add_argument("--batch-per-gpu", type=int, default=0,
                   help="per-GPU batch; the global batch it reports is this times its GPUs")
    a = p.parse_args(argv)
    progress, checkpoint = default_paths()
    speed = a.node_speed.get(os.environ.get("SLURMD_NODENAME", ""), 1.0)
    trainer = FakeTrainer(
        a.iterations,
        a.progress_file or progress,
        a.checkpoint_file or checkpoint,
        a.iters_per_sec,
        a.time_scale * speed,
        a.model,
        gpus=allocated_gpus(),
        scaling=a.scaling,
        batch_per_gpu=a.batch_per_gpu,
    )
    trainer.handle_signals()
    return trainer.run()


if __name__ == "__main__":
    raise SystemExit(main())
