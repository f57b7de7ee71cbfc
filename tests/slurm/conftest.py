"""One real emulated Slurm cluster for the whole session: 3 v100 nodes + 1 k80 node, 4 GPUs each.

If Slurm's packages are missing the fixture *fails* with the apt command: a machine that
cannot run these tests must not report them as passed or skipped.

``client`` is parametrized over every SlurmClient backend importable here, so each test that
uses it is a contract test run once per backend. The CLI backend is always a parameter; the
pyslurm one is added only when pyslurm imports and matches the running Slurm (PyPI has no
build for Debian 12's Slurm 22.05) — when it is absent it is simply not a parameter, so nothing
is skipped and nothing is counted as passing on its behalf.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest
from _live import Jobs

from blox_slurm.emulator.cluster import Emulator, check_packages
from blox_slurm.emulator.errors import MissingPackage
from blox_slurm.emulator.spec import EmulatorSpec, parse_gpus
from blox_slurm.slurm.backends import pyslurm_status, select_backend
from blox_slurm.slurm.cli_backend import CliBackend
from blox_slurm.slurm.client import SlurmClient

GROUPS = "v100:4x3,k80:4x1"


@pytest.fixture(scope="session")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    try:
        check_packages()
    except MissingPackage as e:
        pytest.fail(f"the Slurm tests need Slurm's Debian packages: {e}", pytrace=False)
    emu = Emulator(EmulatorSpec(run_dir=tmp_path_factory.mktemp("emu"), groups=parse_gpus(GROUPS)))
    emu.up()
    yield emu
    emu.down()


def _backends() -> list[str]:
    # Whether pyslurm matches the running Slurm can only be asked once slurmctld runs: the
    # fixture fails (not skips) when an installed pyslurm turns out unusable.
    return ["cli", "pyslurm"] if importlib.util.find_spec("pyslurm") else ["cli"]


@pytest.fixture(params=_backends())
def client(request: pytest.FixtureRequest, emulator: Emulator) -> SlurmClient:
    if request.param == "cli":
        return CliBackend(str(emulator.conf), timeout=10.0)
    status = pyslurm_status(CliBackend(str(emulator.conf)).version(), str(emulator.conf))
    if not status.usable:
        pytest.fail(f"pyslurm is installed but unusable: {status.reason}", pytrace=False)
    backend, _ = select_backend(str(emulator.conf), prefer="pyslurm")
    return backend


@pytest.fixture
def jobs(client: SlurmClient, tmp_path: Path) -> Iterator[Jobs]:
    j = Jobs(client, tmp_path)
    yield j
    j.cleanup()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """A failed live test carries the tail of slurmctld's log: CI's fresh clone is deleted
    afterwards, and a timing flake is only explained by what the daemon logged meanwhile."""
    outcome = yield
    report = outcome.get_result()
    emu = getattr(item, "funcargs", {}).get("emulator")
    if report.failed and isinstance(emu, Emulator):
        log = emu.layout.controller_log()
        if log.exists():
            tail = log.read_text(errors="replace").splitlines()[-40:]
            report.sections.append(("slurmctld log (last 40 lines)", "\n".join(tail)))
