"""Helpers for the live Slurm tests: polling with a timeout, and per-test job bookkeeping."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from blox_slurm.slurm.client import SlurmClient, SlurmJob

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T | None], timeout: float = 15.0, what: str = "condition"
) -> T:
    """Poll ``probe`` until it returns something truthy; fail with ``what`` on timeout."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)


class Jobs:
    """Submits test jobs into a per-test directory and cancels whatever is left afterwards,
    so tests sharing the session's cluster never see each other's GPUs taken."""

    def __init__(self, client: SlurmClient, workdir: Path) -> None:
        self.client = client
        self.workdir = workdir
        self.ids: list[int] = []

    def submit(self, *options: str, cmd: str = "sleep 300", partition: str = "blox") -> int:
        job = self.client.submit(
            [f"--partition={partition}", f"--chdir={self.workdir}",
             f"--output={self.workdir}/%j.out", "--open-mode=append", *options, "--wrap", cmd]
        )
        self.ids.append(job)
        return job

    def get(self, job_id: int) -> SlurmJob:
        found = [j for j in self.client.list_jobs(finished=True) if j.job_id == job_id]
        assert found, f"job {job_id} not in squeue"
        return found[0]

    def wait_state(self, job_id: int, *states: str, timeout: float = 15.0) -> SlurmJob:
        def probe() -> SlurmJob | None:
            j = self.get(job_id)
            return j if j.state in states else None

        return wait_for(probe, timeout, f"job {job_id} to be {'/'.join(states)}")

    def cleanup(self) -> None:
        live = [j.job_id for j in self.client.list_jobs() if j.job_id in self.ids]
        if live:
            self.client.cancel(live)
        wait_for(
            lambda: not any(
                j.job_id in self.ids and (j.active or j.state == "COMPLETING")
                for j in self.client.list_jobs()
            ),
            30.0,
            "test jobs to finish",
        )
