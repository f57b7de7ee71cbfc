"""The daemon loop's timing: a round whose starts wait for requeued jobs is followed by a
short one, never two short ones in a row (pure: rounds are given, no Slurm is called)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from blox_slurm.controller import Controller, RoundReport, restarts_deferred
from blox_slurm.controller_config import ControllerConfig
from blox_slurm.loading import load
from blox_slurm.model import Decisions, Start
from blox_slurm.slurm.apply import Plan
from blox_slurm.store import Store

MOVE = (Decisions(start=(Start(1, (0,)),), preempt=(1,)), Plan(preempt=(1,)))  # 1 moves
VICTIM = (Decisions(start=(Start(2, (0,)),), preempt=(1,)), Plan(preempt=(1,)))  # 1 stops
QUIET = (Decisions(), Plan())


def report(kind: tuple[Decisions, Plan], error: str = "") -> RoundReport:
    d, plan = kind
    return RoundReport(1, 0.0, 0.0, 1, 0, 1, d, plan, 2, 0, error)


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


def test_restarts_deferred_only_when_a_stopped_job_is_also_started() -> None:
    assert restarts_deferred(report(MOVE))
    assert not restarts_deferred(report(VICTIM)) and not restarts_deferred(report(QUIET))
    assert not restarts_deferred(report(MOVE, error="squeue timed out"))


def test_a_move_is_followed_by_a_short_round_but_never_two_in_a_row(tmp_path: Path) -> None:
    got = waits(tmp_path, [report(k) for k in (MOVE, MOVE, QUIET, VICTIM, MOVE, QUIET)])
    assert got == pytest.approx([3.0, 30.0, 30.0, 30.0, 3.0, 30.0], abs=0.05)


def test_followup_zero_or_dry_run_keeps_the_round_period(tmp_path: Path) -> None:
    assert waits(tmp_path, [report(MOVE)], followup_seconds=0) == pytest.approx([30.0], abs=0.05)
    assert waits(tmp_path, [report(MOVE)], dry_run=True) == pytest.approx([30.0], abs=0.05)
    assert waits(tmp_path, [report(MOVE)], round_seconds=2.0) == pytest.approx([2.0], abs=0.05)
