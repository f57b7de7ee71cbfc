"""How a Pollux job runs in the simulator: the world's throughput model for the artifact's
workloads.

A job's speed depends on its placement, its batch size and the epoch it is in, so the world
gets a :class:`~blox_slurm.core.throughput.ProgressCurve` per run (:meth:`PolluxModel.curve`)
instead of a constant rate. Work is counted in the unit of ``Job.duration``: seconds alone at
the tuned request on the packed placement (:func:`blox_slurm.workloads.pollux.load_pollux`),
mapped to and from progress along that reference run, which is piecewise linear (one rate
per epoch), so policies reading ``remaining`` (SRTF, Optimus) see seconds at the request.

A job the scheduler marks :data:`ADAPTIVE` (Pollux) picks, each epoch, the batch size and
accumulation of highest goodput on its placement (:func:`~.goodput.best_config` on the step
time model fitted to its application's measurements, with that epoch's gradient statistics);
any other job (the TunedJobs baselines) trains at its tuned batch size whatever its GPUs.
Either way it runs at the *measured* step time of that configuration, as the artifact's
simulator does. The scheduler sees only the fitted model (:meth:`PolluxModel.speedup`), as
the artifact's Pollux does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..core.model import Job
from ..core.throughput import ADAPTIVE
from .application import GPUS_PER_NODE, Application
from .goodput import BatchConfig, best_config, goodput, packed_placement, tuned_config
from .measured import MeasuredSteps, normalize, step_seconds
from .progress import advance, rate_at
from .throughput import PerfParams, fit_perf_params

# The artifact's Pollux runs ncf at this batch size on one GPU (its simulator sets it).
FIXED_BATCH = {"ncf": 32768}

__all__ = ["ADAPTIVE", "PolluxCurve", "PolluxModel"]


@dataclass(frozen=True)
class PolluxCurve:
    """One run: progress per second ``rates[epoch]`` on its allocation, and the reference
    run (tuned request, packed) that turns progress into work: epoch ends ``ends`` are
    reached at work ``marks``."""

    app: Application
    rates: tuple[float, ...]
    ends: np.ndarray
    marks: np.ndarray

    def seconds_to_finish(self, work: float) -> float:
        return advance(self.app, self._progress(work), math.inf, self._rate).elapsed

    def work_after(self, work: float, seconds: float) -> float:
        done = advance(self.app, self._progress(work), seconds, self._rate)
        return float(np.interp(done.progress, self.ends, self.marks))

    def _progress(self, work: float) -> float:
        return float(np.interp(work, self.marks, self.ends))

    def _rate(self, epoch: int) -> float:
        return self.rates[epoch]


class PolluxModel:
    """The throughput model of a Pollux workload: ``apps`` by name (with their measured step
    times), the tuned batch size of each job id. Rates per (application, placement, batch
    mode, epoch) are computed once: a run of 160 jobs asks for a few thousand."""

    def __init__(self, apps: Mapping[str, tuple[Application, MeasuredSteps]],
                 tuned: Mapping[int, int], gpus_per_node: int = GPUS_PER_NODE) -> None:
        self._apps, self._tuned, self._per_node = apps, tuned, gpus_per_node
        self._perf: dict[str, PerfParams] = {}
        self._rates: dict[tuple[str, tuple[int, ...], int | None], tuple[float, ...]] = {}
        self._refs: dict[tuple[str, int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._goodputs: dict[tuple[str, int, int, int, bool], float] = {}

    def curve(self, job: Job, placement: tuple[int, ...], gpu_type: str) -> PolluxCurve:
        """The run of ``job`` on ``placement`` (GPUs per node); every GPU type is alike."""
        app = self._app(job)
        ends, marks = self._reference(job)
        return PolluxCurve(app, self.epoch_rates(job, normalize(placement)), ends, marks)

    def rate(self, job: Job, gpus: int, nodes: int, gpu_type: str) -> float:
        """Speed relative to the tuned request over the whole run: what a policy weighing
        GPU counts (Optimus) reads. ``gpus`` spread as evenly as ``nodes`` allow, over as
        many nodes as they need at least."""
        if gpus <= 0:
            return 0.0
        nodes = min(gpus, max(nodes, -(-gpus // self._per_node)))
        base, extra = divmod(gpus, nodes)
        placement = tuple(base + 1 if i < extra else base for i in range(nodes))
        curve = self.curve(job, placement, gpu_type)
        return float(curve.marks[-1]) / curve.seconds_to_finish(0.0)

    def speedup(self, job: Job, gpus: int, now: float) -> float:
        """Pollux's speedup of ``job`` on ``gpus`` packed: the goodput of its configuration
        there over that on one GPU, on the fitted step times and the statistics of the epoch
        its work at ``now`` is in (0 where no batch size fits). It is the speedup ``job``
        would have adapting its batch, marked :data:`ADAPTIVE` or not yet."""
        app = self._app(job)
        ends, marks = self._reference(job)
        progress = float(np.interp(job.work_done(now), marks, ends))
        epoch = min(app.epoch_at(progress), app.max_epochs - 1)
        nodes = -(-gpus // self._per_node)
        fixed = app.name in FIXED_BATCH
        base = self._goodput(app, epoch, 1, 1, fixed)
        return self._goodput(app, epoch, nodes, gpus, fixed) / base if base > 0 else 0.0

    def _goodput(self, app: Application, epoch: int, nodes: int, replicas: int,
                 fixed: bool) -> float:
        """Goodput on the fitted model of the configuration a job adapting its batch (or,
        ``fixed``, keeping the application's fixed one) runs on ``replicas`` over ``nodes``."""
        key = (app.name, epoch, nodes, replicas, fixed)
        if key not in self._goodputs:
            try:
                config = (tuned_config(app, replicas, FIXED_BATCH[app.name]) if fixed
                          else self._choose(app, nodes, replicas, epoch))
            except ValueError:  # no batch size fits this many replicas
                self._goodputs[key] = 0.0
                return 0.0
            batch = min(config.batch_size, app.max_batch_size)
            self._goodputs[key] = float(goodput(
                self.perf(app.name), app.grad_stats(batch, epoch), app.init_batch_size, nodes,
                replicas, config.atomic_bsz, config.accum_steps))
        return self._goodputs[key]

    def batch(self, job: Job) -> int | None:
        """The fixed batch size ``job`` trains at; ``None`` when it chooses its own."""
        name = job.model
        if job.mark(ADAPTIVE):
            return FIXED_BATCH.get(name)
        if job.id not in self._tuned:
            raise ValueError(f"job {job.id} has no tuned batch size (not a Pollux workload?)")
        return self._tuned[job.id]

    def perf(self, name: str) -> PerfParams:
        """The step-time model fitted to all of ``name``'s measurements (fitted once)."""
        if name not in self._perf:
            self._perf[name] = fit_perf_params(self._apps[name][0].trace.placements)
        return self._perf[name]

    def epoch_rates(self, job: Job, placement: tuple[int, ...]) -> tuple[float, ...]:
        """Progress per second in each epoch of ``job`` on ``placement`` (normalized)."""
        batch = self.batch(job)
        key = (job.model, placement, batch)
        if key not in self._rates:
            app, steps = self._apps[job.model]
            self._rates[key] = tuple(self._epoch_rate(app, steps, placement, batch, e)
                                     for e in range(app.max_epochs))
        return self._rates[key]

    def _epoch_rate(self, app: Application, steps: MeasuredSteps, placement: tuple[int, ...],
                    batch: int | None, epoch: int) -> float:
        replicas = sum(placement)
        config = (tuned_config(app, replicas, batch) if batch is not None
                  else self._choose(app, len(placement), replicas, epoch))
        step = step_seconds(steps, placement, config.atomic_bsz, config.accum_steps)
        return rate_at(app, config, step)(epoch)

    def _choose(self, app: Application, nodes: int, replicas: int, epoch: int) -> BatchConfig:
        """The adaptive job's configuration in ``epoch``: best goodput with the statistics
        at the initial batch size, then again with those at the batch chosen (the statistics
        depend on the batch they were measured at)."""
        perf = self.perf(app.name)
        stats = app.grad_stats(app.init_batch_size, epoch)
        for _ in range(2):
            found = best_config(app, perf, stats, nodes, replicas)
            if found is None:
                raise ValueError(f"{app.name}: no batch size fits {replicas} GPUs")
            config = found[0]
            stats = app.grad_stats(min(config.batch_size, app.max_batch_size), epoch)
        return config

    def _app(self, job: Job) -> Application:
        if job.model not in self._apps:
            raise ValueError(f"job {job.id}: unknown application {job.model!r}; the model "
                             f"has {', '.join(sorted(self._apps))}")
        return self._apps[job.model][0]

    def _reference(self, job: Job) -> tuple[np.ndarray, np.ndarray]:
        """Epoch ends (progress) and the work at which the tuned, packed run reaches them."""
        batch = self._tuned.get(job.id)
        if batch is None:
            raise ValueError(f"job {job.id} has no tuned batch size (not a Pollux workload?)")
        key = (job.model, job.num_gpus, batch)
        if key not in self._refs:
            app, steps = self._apps[job.model]
            config = tuned_config(app, job.num_gpus, batch)
            placement = packed_placement(job.num_gpus, self._per_node)
            rate = rate_at(app, config, step_seconds(steps, placement, config.atomic_bsz,
                                                     config.accum_steps))
            ends, marks, elapsed, start = [0.0], [0.0], 0.0, 0.0
            for e in range(app.max_epochs):
                end = app.epoch_end(e)
                elapsed += (end - start) / rate(e)
                ends.append(end)
                marks.append(elapsed)
                start = end
            self._refs[key] = (np.array(ends), np.array(marks))
        return self._refs[key]
