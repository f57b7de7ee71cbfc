"""Slurm-style fair share by user or account, with another policy breaking ties."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from blox_slurm.core import registry
from blox_slurm.core.abstractions import Schedule, SchedulingBase
from blox_slurm.core.model import ClusterSnapshot, Job, usage_key
from blox_slurm.core.registry import register


@register("scheduling", "fair_share")
class FairShare(SchedulingBase):
    """Slurm's classic fair-share factor F = 2^(-U / S) per user or account, highest first.

    U is the party's share of all decayed usage and S its normalized share, over the parties
    that have usage or jobs in this round. Usage is the world's decayed GPU-seconds of
    finished runs (``snapshot.usage``, see ``usage_key``) plus, with ``include_running``,
    the GPU-seconds of the current runs of the party's running jobs (undecayed: they are
    recent), so a party that holds many GPUs now loses priority without waiting for the runs
    to end. No usage anywhere means F = 1 for all. Shares are equal unless ``shares`` gives
    weights (unlisted parties weigh 1).

    Jobs with equal factors (the same party, or parties with identical usage and shares) keep
    the order of the ``then`` scheduling policy (``then_params`` its parameters), which also
    supplies GPU counts, types and marks: fair share can rank parties above any policy, and
    with one party it is that policy.
    """

    time_dependent = True  # running jobs' usage grows

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        by: Literal["user", "account"] = "user"
        shares: dict[str, float] = Field(default_factory=dict)
        include_running: bool = True
        then: str = "fifo"
        then_params: dict[str, Any] = Field(default_factory=dict)

        @field_validator("shares")
        @classmethod
        def _positive(cls, v: dict[str, float]) -> dict[str, float]:
            bad = sorted(k for k, w in v.items() if not w > 0)
            if bad:
                raise ValueError(f"shares must be positive (bad: {', '.join(bad)})")
            return v

    def __init__(self, params: Params | None = None) -> None:
        p = params or self.Params()
        if p.then == "fair_share":
            raise registry.PolicyError("fair_share cannot break its own ties (then = "
                                       "'fair_share')")
        self.by = p.by
        self.shares = dict(p.shares)
        self.include_running = p.include_running
        try:
            self.then = registry.get("scheduling", p.then).build(p.then_params)
        except ValidationError as exc:
            raise registry.PolicyError(f"then_params for {p.then!r}: {exc}") from None

    def party(self, job: Job) -> str:
        return job.user if self.by == "user" else job.account

    def usage(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> dict[str, float]:
        """Usage per party this round: the world's decayed history plus current runs."""
        prefix = usage_key(self.by, "")
        used = {k[len(prefix):]: v for k, v in snapshot.usage.items() if k.startswith(prefix)}
        now = snapshot.now
        for j in jobs:
            p = self.party(j)
            used.setdefault(p, 0.0)
            if self.include_running and j.running and j.run_since is not None:
                used[p] += len(j.gpus) * (now - j.run_since)
        return used

    def factors(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> dict[str, float]:
        used = self.usage(snapshot, jobs)
        total_usage = sum(used.values())
        if total_usage <= 0:
            return dict.fromkeys(used, 1.0)
        weight = {p: self.shares.get(p, 1.0) for p in used}
        total_shares = sum(weight.values())
        return {p: 2.0 ** -((u / total_usage) / (weight[p] / total_shares))
                for p, u in used.items()}

    def order(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> Schedule:
        inner = self.then.order(snapshot, jobs)
        factor = self.factors(snapshot, jobs)
        # Stable sort on the factor alone: equal factors keep the tie-breaker's order.
        ranked = sorted(inner.order, key=lambda j: -factor[self.party(j)])
        return replace(inner, order=ranked)
