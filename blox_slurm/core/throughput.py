"""Throughput models: how fast a job progresses for a given allocation.

The unit is the job's *reference rate*: 1.0 means "as fast as at its requested GPU count,
consolidated on one node, on the reference GPU type", which is how ``Job.duration`` is defined.
The simulator turns a placement into a rate with :meth:`ThroughputModel.rate`; Optimus uses
the same numbers to decide who gains most from an extra GPU, so the policy and the world agree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from .model import Job


@runtime_checkable
class ThroughputModel(Protocol):
    def rate(self, job: Job, gpus: int, nodes: int, gpu_type: str) -> float:
        """Work-seconds per second for ``job`` on ``gpus`` GPUs of ``gpu_type`` over ``nodes``."""
        ...


@runtime_checkable
class ProgressCurve(Protocol):
    """One run's progress when it is not a constant rate: work (the unit of ``Job.duration``)
    as a function of time on one allocation, e.g. a Pollux job whose batch size and
    statistical efficiency change every epoch. Time counts from when the run makes progress
    (after its start-up and restart costs)."""

    def seconds_to_finish(self, work: float) -> float:
        """Seconds from ``work`` done until the job completes on this allocation."""
        ...

    def work_after(self, work: float, seconds: float) -> float:
        """Work done after ``seconds`` more on this allocation, starting from ``work``."""
        ...


@runtime_checkable
class CurveModel(Protocol):
    """A throughput model that may give a run a :class:`ProgressCurve` instead of a constant
    rate (the world asks when it places a job; ``None`` means "use :meth:`rate`").
    ``placement`` is the run's GPUs per node; ``rate`` stays the model's answer to policies
    (Optimus' marginal gains), an average over the run."""

    def rate(self, job: Job, gpus: int, nodes: int, gpu_type: str) -> float: ...

    def curve(self, job: Job, placement: tuple[int, ...], gpu_type: str) -> ProgressCurve | None:
        ...


@runtime_checkable
class StepsModel(Protocol):
    """A model built on measured steps per second (Gavel's throughput table): what a
    simulator that counts whole steps, as Gavel's does, needs besides the rates."""

    def knows(self, model: str) -> bool: ...

    def steps_per_second(self, model: str, gpus: int, gpu_type: str | None = None,
                         spread: bool = False) -> float: ...


# The mark (1.0) of a job that picks its own batch size for its GPUs (Pollux's jobs): a
# scheduler that co-adapts batch sizes sets it, a model with batch sizes reads it.
ADAPTIVE = "pollux.adaptive"


@runtime_checkable
class SpeedupModel(Protocol):
    """A model that knows what more GPUs are worth to a job *now*: Pollux's speedup, the
    goodput of the job's best configuration on ``gpus`` (packed on as few nodes as hold
    them) over that on one GPU, at the job's progress at ``now`` (statistical efficiency
    changes as training proceeds, so the answer does too)."""

    def speedup(self, job: Job, gpus: int, now: float) -> float: ...


@dataclass(frozen=True)
class ParametricThroughput:
    """A model for jobs with no measured throughput (synthetic workloads, Slurm jobs without
    hints): sub-linear scaling ``(n / requested) ** scaling``, a flat penalty when a job spans
    nodes, and a per-type speed factor (unknown types run at 1.0)."""

    scaling: float = 0.8
    spread_penalty: float = 0.85
    type_speed: Mapping[str, float] = field(default_factory=dict)

    def rate(self, job: Job, gpus: int, nodes: int, gpu_type: str) -> float:
        if gpus <= 0:
            return 0.0
        r = (gpus / job.num_gpus) ** self.scaling if gpus != job.num_gpus else 1.0
        if nodes > 1:
            r *= self.spread_penalty
        return r * self.type_speed.get(gpu_type, 1.0)


DEFAULT_THROUGHPUT = ParametricThroughput()


@dataclass(frozen=True)
class ConsolidatedRates:
    """``inner`` as Gavel's simulator reads a throughput table: every job runs at its
    consolidated rate whatever its placement (Gavel never looks at the ``*_unconsolidated``
    measurements), so spanning nodes costs nothing. The Gavel-compatible world
    (``SimConfig.rates = "consolidated"``) runs on it; the physical world charges the
    spread rate, as a job over several nodes pays on real hardware."""

    inner: ThroughputModel

    def rate(self, job: Job, gpus: int, nodes: int, gpu_type: str) -> float:
        return self.inner.rate(job, gpus, 1, gpu_type)


@dataclass(frozen=True)
class WholeSteps:
    """``inner`` as Gavel's simulator runs a job: a round of ``round_duration`` runs
    ``int(steps/s x round)`` whole steps, so a job makes that many per round, a fraction of a
    step less than its rate gives (``SimConfig.steps = "whole"``; over a job of hundreds of
    rounds it adds up to a round). Only the world runs on it: policies see ``inner``.
    Jobs whose model ``table`` does not measure run at ``inner``'s rate."""

    inner: ThroughputModel
    table: StepsModel
    round_duration: float
    _factor: dict[tuple[str, int, str], float] = field(default_factory=dict, compare=False)

    def rate(self, job: Job, gpus: int, nodes: int, gpu_type: str) -> float:
        key = (job.model, gpus, gpu_type)
        factor = self._factor.get(key)
        if factor is None:
            per_round = (self.table.steps_per_second(job.model, gpus, gpu_type)
                         * self.round_duration if self.table.knows(job.model) else 0.0)
            factor = self._factor[key] = (math.floor(per_round) / per_round
                                          if per_round >= 1 else 1.0)
        return self.inner.rate(job, gpus, nodes, gpu_type) * factor


def steps_model(model: ThroughputModel | None) -> StepsModel | None:
    """``model``'s steps/s table, seen through a :class:`ConsolidatedRates` wrapper; ``None``
    for a model without one."""
    inner = model.inner if isinstance(model, ConsolidatedRates) else model
    return inner if isinstance(inner, StepsModel) else None


def for_steps(model: ThroughputModel, steps: str, round_duration: float) -> ThroughputModel:
    """The model a world with ``SimConfig.steps`` runs jobs on: ``model`` itself, or
    :class:`WholeSteps` of it for ``"whole"`` when it has a steps table."""
    table = steps_model(model)
    if steps != "whole" or table is None:
        return model
    return WholeSteps(model, table, round_duration)


def for_rates(model: ThroughputModel, rates: str) -> ThroughputModel:
    """The model a world with ``SimConfig.rates`` runs on: ``model`` itself for
    ``"placement"``, wrapped in :class:`ConsolidatedRates` for ``"consolidated"``."""
    return ConsolidatedRates(model) if rates == "consolidated" else model
