"""The shadow-mode report: for every managed job, when the policy (run with ``dry_run``)
would have started it against when Slurm did.

In shadow mode Slurm schedules alone and the controller only records what it would have
done, round by round, from Slurm's real state. So a job Slurm starts while the policy still
ranks it behind others never gets a "start" decision: the policy's last word on it was to
hold it. Counting only jobs with a start decision (as the first version did) compared a third
of the jobs and hid exactly the ones where the two schedulers disagree most. Every job falls
in one of these cases:

* ``compared``: the policy would have started it while Slurm still had it pending; the
  difference is Slurm's start minus the policy's.
* ``policy_held``: Slurm started it while the policy would still have held it (the policy
  would have started it later, by how much no one can know); the figure is how long the
  policy had held it by then.
* ``policy_started``: the policy would have started it, Slurm has not yet.
* ``both_waiting``: pending for both.
* ``unseen``: Slurm started it before any round saw it pending (between two rounds).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

CASES = ("compared", "policy_held", "policy_started", "both_waiting", "unseen")
SAME = 1.0  # seconds: Slurm's start times are whole seconds, rounds take a fraction of one


@dataclass(frozen=True)
class ShadowJob:
    """What the store knows of one job in dry-run rounds (times are epoch seconds)."""

    job_id: int
    slurm_start: float | None  # Slurm's first start
    policy_start: float | None  # the first dry-run round that would have started it
    policy_hold: float | None  # the first dry-run round that would have held it

    @property
    def case(self) -> str:
        if self.policy_start is not None:
            return "compared" if self.slurm_start is not None else "policy_started"
        if self.policy_hold is not None:
            return "policy_held" if self.slurm_start is not None else "both_waiting"
        return "unseen"

    @property
    def slurm_minus_policy(self) -> float | None:
        """Seconds from the policy's start (or, for a job it held, its first hold) to
        Slurm's start: positive when the policy would have started it earlier."""
        if self.slurm_start is None:
            return None
        policy = self.policy_start if self.policy_start is not None else self.policy_hold
        return None if policy is None else self.slurm_start - policy


@dataclass(frozen=True)
class ShadowReport:
    jobs: tuple[ShadowJob, ...]
    would_have_preempted: int
    counts: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        counts = dict.fromkeys(CASES, 0)
        for j in self.jobs:
            counts[j.case] += 1
        object.__setattr__(self, "counts", counts)

    def summary(self) -> dict[str, Any]:
        diffs = [d for j in self.jobs if j.case == "compared"
                 and (d := j.slurm_minus_policy) is not None]
        held = [d for j in self.jobs if j.case == "policy_held"
                and (d := j.slurm_minus_policy) is not None]
        return {
            "jobs": len(self.jobs), **self.counts,
            "policy_earlier": sum(1 for d in diffs if d >= SAME),
            "policy_later": sum(1 for d in diffs if d <= -SAME),
            "same_time": sum(1 for d in diffs if -SAME < d < SAME),
            "median_slurm_minus_policy": statistics.median(diffs) if diffs else None,
            "median_held_seconds_when_slurm_started": statistics.median(held) if held else None,
            "would_have_preempted": self.would_have_preempted,
        }


def shadow_report(jobs: Iterable[ShadowJob], would_have_preempted: int) -> ShadowReport:
    return ShadowReport(tuple(sorted(jobs, key=lambda j: j.job_id)), would_have_preempted)
