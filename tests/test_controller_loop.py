"""The daemon loop's timing: a round that left a moved job stopped but not yet restarted (Slurm
did not show it pending in time) is followed by a short one, never two short ones in a row
(pure: rounds are given, no Slurm is called)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from blox_slurm.core.model import Decisions, Move
from blox_slurm.loading import load
from blox_slurm.slurm.apply import Plan
from blox_slurm.slurm.controller import Controller, RoundReport
from blox_slurm.slurm.controller_config import ControllerConfig
from blox_slurm.slurm.store import Store

DEFERRED = (Decisions(move=(Move(1, (0,)),)), Plan(preempt=(1,), move={("node1",): (1,)}), (1,))
MOVED = (Decisions(move=(Move(1, (0,)),)), Plan(preempt=(1,), move={("node1",): (1,)}), ())
QUIET = (Decisions(), Plan(), ())


def report(kind: tuple[Decisions, Plan, tuple[int, ...]]) -> RoundReport:
    d, plan, deferred = kind
    return RoundReport(1, 0.0, 0.0, 1, 0, 1, d, plan, 2, 0, deferred=deferred)


class Scripted(Controller):
    """The real loop over scripted rounds."""

    def __init__(self, cfg: ControllerConfig, store: Store, rounds: list[RoundReport]) -> None:
        super().__init__(cfg, load("fifo"), None, store)  # type: ignore[arg-type]
        self.rounds = rounds

    def round(self) -> RoundReport:
        return self.rounds.pop(0)


class Waits(threading.Event):
    """Records how long the loop waits between rounds, without waiting."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        return False


def waits(tmp_path: Path, rounds: list[RoundReport], **cfg: object) -> list[float]:
    config = ControllerConfig.model_validate(
        {"round_seconds": 30.0, "store": str(tmp_path / "s.db"),
         "heartbeat": str(tmp_path / "heartbeat"), **cfg})
    stop = Waits()
    Scripted(config, Store(config.store), rounds).run(stop, max_rounds=len(rounds))
    return stop.waits


def test_a_deferred_move_is_followed_by_a_short_round_but_never_two_in_a_row(
        tmp_path: Path) -> None:
    got = waits(tmp_path, [report(k) for k in
                           (DEFERRED, DEFERRED, QUIET, MOVED, DEFERRED, QUIET)])
    assert got == pytest.approx([3.0, 30.0, 30.0, 30.0, 3.0, 30.0], abs=0.05)


def test_followup_zero_or_a_short_period_keeps_the_round_period(tmp_path: Path) -> None:
    assert waits(tmp_path, [report(DEFERRED)], followup_seconds=0) == pytest.approx(
        [30.0], abs=0.05)
    assert waits(tmp_path, [report(DEFERRED)], round_seconds=2.0) == pytest.approx(
        [2.0], abs=0.05)
