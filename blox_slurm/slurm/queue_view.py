"""What users may see about their managed jobs: a public snapshot the controller writes.

Users see ``JobHeldUser`` in ``squeue`` and nothing else: not their place in the policy's
order, not why the job waits. The store has the answer but also every job's hints, marks and
history, and it is the controller's to write (0600 under the service user). So after every
round the controller publishes one small world-readable JSON file, written atomically, with
only what ``squeue`` already shows everyone plus the scheduler's answer: rank among the waiting
jobs, why a job waits, since when. ``blox-slurm queue`` reads it on any host that sees the file.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..core.accounting import run_service
from .store import Store

FORMAT = 1


class QueueFileError(ValueError):
    """The queue file is missing or unreadable; the message says what to do."""


@dataclass(frozen=True)
class QueueEntry:
    job_id: int
    user: str
    state: str  # pending | running
    held: bool
    gpus: int
    position: int | None  # 1-based place among the waiting jobs, in the policy's order
    waiting: int  # jobs waiting in all
    since: float  # submitted, or last stopped (preempted): when the current wait began
    reason: str
    preemptions: int
    gpu_hours: float  # received so far, the current run included


def received(row: dict[str, Any]) -> float:
    """GPU-seconds a job has received, its current run up to when it was last seen included
    (the store's ``attained_base`` counts ended runs only)."""
    base = row.get("attained_base") or 0.0
    if row.get("run_start") is None:
        return base
    return base + run_service(row.get("run_gpus") or 0, row["run_start"],
                              row.get("run_last_seen") or row["run_start"])


def entries(rows: list[dict[str, Any]]) -> list[QueueEntry]:
    """Active jobs, waiting ones in the policy's order first (unranked last), then running."""
    waiting = sorted((r for r in rows if r["state"] == "pending"),
                     key=lambda r: (r["rank"] is None, r["rank"] or 0, r["job_id"]))
    running = sorted((r for r in rows if r["state"] == "running"), key=lambda r: r["job_id"])
    out = []
    for i, r in enumerate(waiting + running):
        pending = r["state"] == "pending"
        out.append(QueueEntry(
            r["job_id"], r["user"], r["state"], bool(r["held"]), r["num_gpus"],
            i + 1 if pending else None, len(waiting),
            r["last_event"] or r["submit_time"] or 0.0, r["reason"] or "",
            r["preemptions"] or 0, received(r) / 3600))
    return out


def snapshot(store: Store, lease_seconds: float, now: float) -> dict[str, Any]:
    last = store.last_round()
    return {"format": FORMAT, "written": now, "lease_seconds": lease_seconds,
            "round": last["id"] if last else None,
            "composition": last["composition"] if last else None,
            "jobs": [asdict(e) for e in entries(store.jobs())]}


def publish(store: Store, path: str | Path, lease_seconds: float,
            now: float | None = None) -> None:
    """Write the snapshot atomically (a reader never sees half a file), mode 0644."""
    path = Path(path)
    data = snapshot(store, lease_seconds, time.time() if now is None else now)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, separators=(",", ":"))
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class QueueFile:
    written: float
    lease_seconds: float
    round: int | None
    composition: str | None
    jobs: list[QueueEntry]

    def stale(self, now: float) -> bool:
        """Older than the lease: the controller is gone and Slurm schedules on its own."""
        return now - self.written > self.lease_seconds


def read(path: str | Path) -> QueueFile:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}, expected {FORMAT}")
        return QueueFile(float(data["written"]), float(data["lease_seconds"]), data["round"],
                         data["composition"], [QueueEntry(**j) for j in data["jobs"]])
    except FileNotFoundError:
        raise QueueFileError(f"no queue file at {path}: the controller has not run here, or "
                             "writes it elsewhere (ask your admin for its queue_file, then "
                             "pass --file or set BLOX_SLURM_QUEUE)") from None
    except OSError as exc:
        raise QueueFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise QueueFileError(f"{path} is not a blox-slurm queue file ({exc})") from None
