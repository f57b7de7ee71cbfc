"""``telemetry_guard``: act on GPU telemetry, idle jobs and failing GPUs.

Two rules, both read only ``snapshot.telemetry`` (samples keyed by cluster GPU id):

* **Idle jobs.** A running job whose every GPU read at most ``idle_threshold`` percent for the
  whole last ``idle_window`` seconds is reported (``idle_action = "flag"``, the default: a
  dry-run that only records the finding) or stopped (``"preempt"``: requeued held, its GPUs go
  back to the queue this round).
* **GPU errors.** A node with a sample reporting ``errors > 0`` (XID / uncorrected ECC) in the
  last ``error_window`` seconds is drained in Slurm (running jobs finish, nothing new starts)
  and takes no new work this round already, before Slurm has acted on the drain.

Why "no data is not idleness": telemetry can be missing because an agent is down, a node is
partitioned from the controller, or the job only just started. Treating silence as 0% would
turn any agent outage into a mass preemption. So a GPU counts as idle only when its samples
*cover* the window: samples taken during the job's current run, one of them at or before the
window's start (the reading in force when the window opened), each later one at most
``max_sample_gap`` seconds after the previous and the newest at most that long before now.
Every one of those readings must be idle, on every GPU of the job: a job using one GPU of two
is not idle (it may be a pipeline stage or a data-parallel job waiting on one straggler).

The controller keeps only ``telemetry_window`` seconds of samples in the snapshot, so it must
be at least ``idle_window`` (and ``error_window``) or this policy never sees enough data.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from blox_slurm.core.abstractions import ClusterView
from blox_slurm.core.model import ClusterSnapshot, Drain, GpuId, GpuSample, Job, NodeState
from blox_slurm.core.registry import register


def _by_gpu(samples: Iterable[GpuSample]) -> dict[GpuId, list[GpuSample]]:
    out: dict[GpuId, list[GpuSample]] = defaultdict(list)
    for s in samples:
        out[s.gpu].append(s)
    for series in out.values():
        series.sort(key=lambda s: s.time)
    return out


@register("cluster", "telemetry_guard")
class TelemetryGuard:
    """Flag (default) or preempt jobs whose GPUs stayed idle; drain nodes with GPU errors."""

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        idle_window: float = Field(default=1800.0, gt=0)  # seconds
        idle_threshold: float = Field(default=0.0, ge=0, le=100)  # percent; <= counts as idle
        idle_action: Literal["flag", "preempt"] = "flag"
        max_sample_gap: float = Field(default=300.0, gt=0)  # seconds without data = no data
        drain_on_errors: bool = True
        error_window: float = Field(default=600.0, gt=0)  # seconds

    def __init__(self, params: Params | None = None) -> None:
        self.p = params or self.Params()

    def manage(self, snapshot: ClusterSnapshot) -> ClusterView:
        if not snapshot.telemetry:
            return ClusterView()
        series = _by_gpu(snapshot.telemetry)
        drains = self._drains(snapshot, series) if self.p.drain_on_errors else ()
        idle = [j.id for j in snapshot.jobs if j.running and self.idle(j, series, snapshot.now)]
        if self.p.idle_action == "preempt":
            flag: tuple[tuple[int, str], ...] = ()
            preempt = tuple(idle)
        else:
            why = (f"idle: every GPU at <= {self.p.idle_threshold:g}% utilization for the last "
                   f"{self.p.idle_window:g} s (telemetry_guard, dry-run)")
            flag, preempt = tuple((j, why) for j in idle), ()
        return ClusterView(unschedulable=frozenset(d.node for d in drains), drain=drains,
                           flag=flag, preempt=preempt)

    def idle(self, job: Job, series: Mapping[GpuId, Sequence[GpuSample]], now: float) -> bool:
        """Whether every GPU of ``job`` has samples covering the window, all idle."""
        return bool(job.gpus) and all(
            self._gpu_idle(series.get(g, ()), job.run_since, now) for g in job.gpus)

    def _gpu_idle(self, samples: Sequence[GpuSample], run_since: float | None,
                  now: float) -> bool:
        start = now - self.p.idle_window
        # Readings of this run only: before it the GPU was free (0%) or someone else's.
        run = [s for s in samples if run_since is None or s.time >= run_since]
        opening = [i for i, s in enumerate(run) if s.time <= start]
        if not opening:
            return False  # nothing in force when the window opened: not covered
        window = run[opening[-1]:]
        times = [s.time for s in window] + [now]
        gap = self.p.max_sample_gap
        if any(b - a > gap for a, b in zip(times, times[1:], strict=False)):
            return False
        return all(s.utilization <= self.p.idle_threshold for s in window)

    def _drains(self, snapshot: ClusterSnapshot,
                series: Mapping[GpuId, Sequence[GpuSample]]) -> tuple[Drain, ...]:
        since = snapshot.now - self.p.error_window
        gpus = snapshot.gpus
        errors: dict[str, dict[int, int]] = defaultdict(dict)
        for g, samples in series.items():
            count = sum(s.errors for s in samples if s.time >= since)
            if count > 0:
                errors[gpus[g].node][gpus[g].index] = count
        out = []
        for node in snapshot.nodes:  # node order: deterministic decisions
            bad = errors.get(node.name)
            if bad and node.state is NodeState.UP:  # DRAIN/DOWN: already out of service
                detail = ", ".join(f"gpu {i}: {n} error(s)" for i, n in sorted(bad.items()))
                out.append(Drain(node.name, f"blox-slurm: GPU errors on {node.name}: {detail} "
                                            f"in the last {self.p.error_window:g} s"))
        return tuple(out)
