"""Helpers for the live Slurm tests: polling with a timeout, per-test job bookkeeping, and
controllers of a managed world."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from _wait import wait_for as wait_for

from blox_slurm.core.composition import Composition
from blox_slurm.demo.world import ManagedWorld
from blox_slurm.slurm.client import SlurmClient, SlurmJob
from blox_slurm.slurm.controller import Controller, RoundReport
from blox_slurm.slurm.controller_config import ControllerConfig
from blox_slurm.slurm.store import Store


def installed_release(conf: Path) -> str:
    """The installed client's own version (``sinfo --version``: ``slurm-wlm 24.11.5``; it
    needs a config even for that), to check what the backend reads from slurmctld's JSON
    against something independent."""
    out = subprocess.run(["sinfo", "--version"], capture_output=True, text=True, check=True,
                         env={**os.environ, "SLURM_CONF": str(conf)})
    return out.stdout.split()[-1]


def world_controller(w: ManagedWorld, comp: Composition, store: str) -> Controller:
    """A controller of ``w``'s managed partition running ``comp`` in 1 s rounds, with its
    own store file ``store`` in the world's directory."""
    cfg = ControllerConfig(partitions=["blox"], round_seconds=1.0, heartbeat=str(w.heartbeat),
                           store=str(w.base / store), slurm_conf=str(w.emu.conf))
    return Controller(cfg, comp, w.emu.client(), Store(cfg.store))


def clean_round(ctl: Controller) -> RoundReport:
    """One round, which must not fail."""
    report = ctl.round()
    assert report.error == "", report.error
    return report


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
        """On timeout the message names the job's last state, reason and restart count: a
        flake that cannot be reproduced must at least say what Slurm was doing."""
        last: list[SlurmJob] = []

        def probe() -> SlurmJob | None:
            j = self.get(job_id)
            last[:] = [j]
            return j if j.state in states else None

        def what() -> str:
            seen = (f" (last seen {last[0].state}, reason {last[0].reason},"
                    f" restarts {last[0].restart_cnt}, eligible at {last[0].eligible_time})"
                    if last else "")
            return f"job {job_id} to be {'/'.join(states)}{seen}"

        return wait_for(probe, timeout, what)

    def cleanup(self) -> None:
        live = [j.job_id for j in self.client.list_jobs() if j.job_id in self.ids]
        if live:
            self.client.cancel(live)
        wait_for(
            lambda: not any(
                j.job_id in self.ids and j.in_run
                for j in self.client.list_jobs()
            ),
            30.0,
            "test jobs to finish",
        )
