"""Job accounting shared by every world: what a run is worth, and decayed usage for fair share.

The simulator learns that a run ended when it stops or completes a job; the controller's store
learns it from Slurm, a round later. Both hand the ended run to this module, so the same
history gives the same numbers in both worlds (``tests/test_accounting.py`` checks it as a
property): a run is worth ``gpus x (end - start)`` GPU-seconds of attained service, and for
fair share each ended run decays from its own end with the configured half-life, under the
user's and the account's ``usage_key`` (a job without an account counts for the account "").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .model import usage_key


def run_service(gpus: int, start: float, end: float) -> float:
    """GPU-seconds of one run; a run whose end precedes its start (clock skew) is worth 0."""
    return gpus * max(0.0, end - start)


@dataclass(frozen=True, slots=True)
class EndedRun:
    """One finished run of a job, as fair share counts it."""

    user: str
    account: str
    gpu_seconds: float
    end: float


class DecayedUsage:
    """Decayed GPU-seconds per ``usage_key``, kept incrementally: O(parties) per round.

    Values are stored as of ``self.t``. A run's GPU-seconds added at ``at`` are pre-scaled by
    2^((at - t) / half_life), so a later :meth:`at` decays every entry with one multiplication
    and no per-run pass (a simulation adds hundreds of thousands of runs).
    """

    _MAX_PRESCALE = 64.0  # half-lives; beyond this, decay first so 2^x stays far from overflow

    def __init__(self, half_life: float, t: float = 0.0) -> None:
        self.half_life = half_life
        self.t = t
        self.values: dict[str, float] = {}
        self._keys: dict[tuple[str, str], tuple[str, str]] = {}  # (user, account) -> keys

    def add(self, user: str, account: str, gpu_seconds: float, at: float) -> None:
        """Count a run of ``gpu_seconds`` that ended at ``at`` for its user and account."""
        if (at - self.t) / self.half_life > self._MAX_PRESCALE:
            self.at(at)
        scaled = gpu_seconds * 2.0 ** ((at - self.t) / self.half_life)
        party = (user, account)
        keys = self._keys.get(party)
        if keys is None:
            keys = self._keys[party] = (usage_key("user", user), usage_key("account", account))
        values = self.values
        for key in keys:
            values[key] = values.get(key, 0.0) + scaled

    def at(self, t: float) -> dict[str, float]:
        """The decayed values at ``t`` (a copy: snapshots are immutable)."""
        if t != self.t and self.values:
            f = 0.5 ** ((t - self.t) / self.half_life)
            self.values = {k: v * f for k, v in self.values.items()}
        self.t = t
        return dict(self.values)


def usage_at(runs: Iterable[EndedRun], now: float, half_life: float) -> dict[str, float]:
    """Decayed usage at ``now`` of a world that keeps its ended runs (the controller's store)."""
    usage = DecayedUsage(half_life, now)
    for run in runs:
        usage.add(run.user, run.account, run.gpu_seconds, run.end)
    return usage.at(now)
