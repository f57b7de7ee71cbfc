"""Shared fixtures of the reliability campaign (``pytest -m reliability``).

``managed_world``: ONE 4 nodes x 4 GPUs emulator for the whole folder, with the job-submit
plugin installed and configured *before* slurmctld starts (``blox_job_submit.conf`` with a short
lease, :data:`LEASE` seconds, so fail-open can be shown within seconds), a heartbeat file and
world-accessible per-user directories (jobs run as daemon/bin/nobody with the system Python).
Every test leaves the queue empty (``clean_queue``), so tests can share it.

If Slurm's packages are missing or we are not root the fixture *fails*: nothing here is ever
reported as skipped or passed on a machine that cannot run it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from blox_slurm.demo.world import ManagedWorld
from blox_slurm.emulator.cluster import check_packages
from blox_slurm.emulator.errors import MissingPackage

LEASE = 4  # seconds: the plugin's max_age and the controller's lease_seconds


@pytest.fixture(scope="session")
def managed_world() -> Iterator[ManagedWorld]:
    try:
        check_packages()
    except MissingPackage as e:
        pytest.fail(f"the reliability tests need Slurm's Debian packages: {e}", pytrace=False)
    if os.geteuid() != 0:
        pytest.fail("the reliability tests run jobs as daemon/bin/nobody: run them as root",
                    pytrace=False)
    with ManagedWorld(max_age=LEASE) as world:
        yield world


@pytest.fixture
def clean_queue(managed_world: ManagedWorld) -> Iterator[ManagedWorld]:
    """The world, with every job cancelled after the test (pass or fail)."""
    yield managed_world
    client = managed_world.client()
    try:
        ids = [j.job_id for j in client.list_jobs()]
        if ids:
            client.cancel(ids)
        deadline = time.monotonic() + 30
        while client.list_jobs() and time.monotonic() < deadline:
            time.sleep(0.3)
    except Exception as exc:  # cleanup must not hide the test's own failure
        print(f"clean_queue: {exc}", file=sys.stderr)


def write_controller_toml(path: Path, world: ManagedWorld, store: Path,
                          composition: str | dict[str, Any], round_seconds: float,
                          **extra: object) -> Path:
    """A controller.toml as an admin would write one (lease = the plugin's max_age).
    ``composition``: a bundled name, or the composition's tables (``{"scheduling": {...}}``)."""
    values = {"partitions": ["blox"], "round_seconds": round_seconds, "store": str(store),
              "heartbeat": str(world.heartbeat), "lease_seconds": float(LEASE),
              "slurm_conf": str(world.emu.conf), "backend": "cli", "grace_seconds": 3.0,
              **extra}
    tables: dict[str, Any] = {}
    if isinstance(composition, str):
        values["composition"] = composition
    else:
        tables = composition

    def lines(d: dict[str, Any]) -> str:
        return "".join(f"{k} = {json.dumps(v)}\n" for k, v in d.items())

    path.write_text("name = \"reliability\"\n[controller]\n" + lines(values) + "".join(
        f"[{k}]\n{lines(v)}" for k, v in tables.items()))
    return path
