"""Read one application's traces from the Pollux artifact (``traces/<app>/``).

The artifact measured each application offline: ``placements.csv`` holds step and
synchronization times per placement and local batch size (the throughput model's input),
``validation-<batch>.csv`` the per-epoch progress and gradient statistics of a run at that
batch size (statistical efficiency's input), and ``scalability.csv`` extra
``(num_nodes, num_replicas, local_bsz)`` rows for placements beyond ``placements.csv``.
This is the only module of :mod:`blox_slurm.pollux` that touches files, so everything
else stays testable on values; a malformed file raises :class:`TraceError` naming the file
and line, because a silently dropped row would change every fitted parameter.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from dataclasses import dataclass
from math import isfinite
from os import PathLike
from pathlib import Path

PLACEMENT_COLUMNS = ("placement", "local_bsz", "step_time", "sync_time")
VALIDATION_COLUMNS = ("progress", "iteration", "metric", "grad_sqr", "grad_var")
SCALABILITY_COLUMNS = ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")
_VALIDATION_NAME = re.compile(r"validation-(\d+)\.csv")


class TraceError(ValueError):
    """A malformed or missing trace file; the message names the file (and line)."""


@dataclass(frozen=True, slots=True)
class StepSample:
    """One measured configuration: a placement's shape, its local batch and its times;
    ``placement`` (GPUs per node) where the file gives it, empty for ``scalability.csv``."""

    num_nodes: int
    num_replicas: int
    local_bsz: int
    step_time: float
    sync_time: float
    placement: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class EpochStats:
    """The state of a validation run at the end of one epoch."""

    progress: float
    iteration: float
    metric: float
    grad_sqr: float
    grad_var: float


@dataclass(frozen=True, slots=True)
class ApplicationTrace:
    """Everything measured about one application; ``validation`` is keyed by batch size
    in increasing order."""

    name: str
    placements: tuple[StepSample, ...]
    scalability: tuple[StepSample, ...]
    validation: dict[int, tuple[EpochStats, ...]]


def load_application(directory: str | PathLike[str]) -> ApplicationTrace:
    """The traces of the application in ``directory`` (its name is the directory's)."""
    root = Path(directory)
    if not root.is_dir():
        raise TraceError(f"{root}: no such trace directory (expected traces/<application>/)")
    runs = {}
    for path in root.glob("validation-*.csv"):
        match = _VALIDATION_NAME.fullmatch(path.name)
        if match is None or int(match.group(1)) < 1:
            raise TraceError(f"{path}: expected a name validation-<batch size>.csv")
        runs[int(match.group(1))] = tuple(_validation_rows(path))
    if not runs:
        raise TraceError(f"{root}: no validation-<batch size>.csv files")
    scalability = root / "scalability.csv"
    return ApplicationTrace(
        name=root.name,
        placements=tuple(_placement_rows(root / "placements.csv")),
        scalability=tuple(_scalability_rows(scalability)) if scalability.exists() else (),
        validation=dict(sorted(runs.items())),
    )


def _placement_rows(path: Path) -> Iterator[StepSample]:
    for line, row in _rows(path, PLACEMENT_COLUMNS):
        digits = row["placement"]
        if not digits.isdigit() or "0" in digits:
            raise TraceError(f"{path}:{line}: placement must be GPUs per node as digits 1-9, "
                             f"got {digits!r}")
        yield StepSample(
            num_nodes=len(digits),
            num_replicas=sum(int(d) for d in digits),
            local_bsz=_count(path, line, "local_bsz", row["local_bsz"]),
            step_time=_number(path, line, "step_time", row["step_time"], positive=True),
            sync_time=_number(path, line, "sync_time", row["sync_time"]),
            placement=tuple(int(d) for d in digits),
        )


def _scalability_rows(path: Path) -> Iterator[StepSample]:
    for line, row in _rows(path, SCALABILITY_COLUMNS):
        yield StepSample(
            num_nodes=_count(path, line, "num_nodes", row["num_nodes"]),
            num_replicas=_count(path, line, "num_replicas", row["num_replicas"]),
            local_bsz=_count(path, line, "local_bsz", row["local_bsz"]),
            step_time=_number(path, line, "step_time", row["step_time"], positive=True),
            sync_time=_number(path, line, "sync_time", row["sync_time"]),
        )


def _validation_rows(path: Path) -> Iterator[EpochStats]:
    previous = 0.0
    for line, row in _rows(path, VALIDATION_COLUMNS):
        stats = EpochStats(*(_number(path, line, c, row[c]) for c in VALIDATION_COLUMNS))
        if not stats.progress > previous:
            raise TraceError(f"{path}:{line}: progress must increase from epoch to epoch, "
                             f"got {stats.progress:g} after {previous:g}")
        previous = stats.progress
        yield stats


def _rows(path: Path, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """``(line, row)`` of each data row, after checking the header names ``columns``."""
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = [h.strip() for h in next(reader, [])]
        if header != list(columns):
            raise TraceError(f"{path}:1: expected the header {','.join(columns)}, "
                             f"got {','.join(header) or 'nothing'}")
        for fields in reader:
            if not fields:
                continue
            if len(fields) != len(columns):
                raise TraceError(f"{path}:{reader.line_num}: expected {len(columns)} fields "
                                 f"({','.join(columns)}), got {len(fields)}")
            yield reader.line_num, dict(zip(columns, (v.strip() for v in fields), strict=True))


def _number(path: Path, line: int, name: str, text: str, positive: bool = False) -> float:
    try:
        value = float(text)
    except ValueError:
        raise TraceError(f"{path}:{line}: {name} must be a number, got {text!r}") from None
    if not isfinite(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise TraceError(f"{path}:{line}: {name} must be finite and {bound}, got {text!r}")
    return value


def _count(path: Path, line: int, name: str, text: str) -> int:
    value = _number(path, line, name, text, positive=True)
    if not value.is_integer():
        raise TraceError(f"{path}:{line}: {name} must be a whole number, got {text!r}")
    return int(value)
