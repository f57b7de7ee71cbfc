"""Backend selection and ``blox-slurm doctor`` against the session's emulator."""

from __future__ import annotations

import importlib.util
import json

import pytest
from _live import installed_release
from typer.testing import CliRunner

from blox_slurm.cli import app
from blox_slurm.emulator.cluster import Emulator
from blox_slurm.slurm.backends import (
    major_minor,
    pyslurm_match,
    pyslurm_status,
    select_backend,
)
from blox_slurm.slurm.cli_backend import CliBackend


def test_major_minor_matches_slurm_and_pyslurm_spellings() -> None:
    assert major_minor("22.05.8") == major_minor("22.5.3") == (22, 5)
    assert major_minor("25.11.0") != major_minor("22.05.8")
    assert major_minor("garbage") is None


def test_pyslurm_advice_names_the_matching_series() -> None:
    advice = pyslurm_match("24.11.5")
    assert "pyslurm 24.11.x matches Slurm 24.11.5" in advice and "'pyslurm==24.11.*'" in advice
    assert "pyslurm 22.5.x" in pyslurm_match("22.05.8")
    assert "cannot tell" in pyslurm_match("unknown")


def test_pyslurm_is_never_imported_without_a_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_CONF", raising=False)
    status = pyslurm_status("22.05.8")
    assert not status.usable
    expected = "not installed" if importlib.util.find_spec("pyslurm") is None else "SLURM_CONF"
    assert expected in status.reason


@pytest.mark.slurm
def test_select_backend_says_why(emulator: Emulator) -> None:
    client, reason = select_backend(str(emulator.conf))
    status = pyslurm_status(CliBackend(str(emulator.conf)).version(), str(emulator.conf))
    assert client.name == ("pyslurm" if status.usable else "cli")
    assert status.reason in reason
    cli, why = select_backend(str(emulator.conf), prefer="cli")
    assert cli.name == "cli" and "requested" in why


@pytest.mark.slurm
def test_doctor_reports_slurm_backend_and_nvml(emulator: Emulator) -> None:
    r = CliRunner().invoke(app, ["doctor", "--conf", str(emulator.conf), "--json"])
    assert r.exit_code == 0, r.output
    checks = {c["name"]: c for c in json.loads(r.output)["checks"]}
    release = installed_release(emulator.conf)
    assert checks["slurmctld"]["ok"] and release in checks["sinfo"]["detail"]
    assert checks["slurm"]["ok"] and checks["slurm"]["detail"].startswith(f"Slurm {release} (")
    assert "a version tested in CI" in checks["slurm"]["detail"]
    assert checks["SLURM_CONF"]["detail"] == str(emulator.conf)
    assert checks["backend"]["detail"].startswith(("cli:", "pyslurm:"))
    nvml = checks["nvml"]
    assert nvml["ok"] or "no NVIDIA driver" in nvml["detail"] or "not installed" in nvml["detail"]


def test_doctor_without_a_controller_exits_1(tmp_path: object) -> None:
    r = CliRunner().invoke(app, ["doctor", "--conf", "/nonexistent/slurm.conf"])
    assert r.exit_code == 1 and "does not exist" in r.output
