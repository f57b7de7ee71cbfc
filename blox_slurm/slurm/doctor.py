"""``blox-slurm doctor``: what this machine offers the Slurm world, checked, with reasons.

Each check is independent and never raises: an admin runs doctor precisely when things are
broken, so a missing binary must not hide the answer about NVML.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from ..emulator.cluster import REQUIRED
from .backends import select_backend
from .checks import Check, Report
from .cli_backend import CliBackend
from .client import SlurmError
from .controller_config import ControllerConfig
from .deployment import deployment
from .dialect import TESTED_SERIES
from .runner import RetryPolicy


def _binaries(conf: str | None) -> list[Check]:
    """Each Slurm binary and its ``-V``; client tools need a config even for that."""
    env = {**os.environ, **({"SLURM_CONF": conf} if conf else {})}
    out = []
    for binary, package in REQUIRED.items():
        path = shutil.which(binary) or shutil.which(binary, path="/usr/sbin:/sbin")
        if path is None:
            out.append(Check(binary, False, f"not found: apt-get install {package}"))
            continue
        try:
            p = subprocess.run(  # noqa: S603 - a found Slurm binary, fixed flag
                [path, "-V"], capture_output=True, text=True, timeout=10, check=False, env=env
            )
            tail = (p.stderr.strip().splitlines() or [""])[-1]
            version = p.stdout.strip() or f"(version unknown: {tail})"
        except (OSError, subprocess.TimeoutExpired) as e:
            version = f"(version unknown: {e})"
        out.append(Check(binary, True, f"{path}: {version}"))
    return out


def slurm_check(cli: CliBackend) -> Check:
    """The running Slurm as its own output names it, and whether CI tests that version."""
    try:
        dialect = cli.dialect()
    except SlurmError as e:
        return Check("slurm", False, f"cannot read Slurm's version: {e}")
    if dialect.series in TESTED_SERIES:
        return Check("slurm", True, f"{dialect}: a version tested in CI")
    return Check("slurm", True, f"{dialect}: not one of the versions tested in CI "
                                f"({', '.join(TESTED_SERIES)}); it is read by its data_parser")


def nvml_check() -> Check:
    """NVML is optional (the emulator uses emulated telemetry); report what it says."""
    try:
        import pynvml
    except ImportError:
        return Check("nvml", False, "nvidia-ml-py is not installed")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibraryNotFound:
        return Check("nvml", False, "no NVIDIA driver on this node (NVML library not found)")
    except pynvml.NVMLError as e:
        return Check("nvml", False, f"NVML failed to initialise: {e}")
    try:
        count = pynvml.nvmlDeviceGetCount()
        driver = pynvml.nvmlSystemGetDriverVersion()
    finally:
        pynvml.nvmlShutdown()
    return Check("nvml", True, f"driver {driver}, {count} GPU(s)")


def diagnose(conf: str | None = None, cfg: ControllerConfig | None = None) -> Report:
    """This machine's Slurm side, and with ``cfg`` the controller's whole deployment."""
    conf = conf or (cfg.slurm_conf if cfg else None) or os.environ.get("SLURM_CONF")
    # Slurm's tools retry a missing config file for many seconds: never hand them one.
    usable_conf = conf if conf is None or os.path.isfile(conf) else None
    report = Report(_binaries(usable_conf))
    if conf is None:
        report.checks.append(Check("SLURM_CONF", True, "unset: Slurm's default config is used"))
    else:
        report.checks.append(Check("SLURM_CONF", usable_conf is not None,
                                   conf if usable_conf else f"{conf} does not exist"))
    answers = False
    if conf is None or usable_conf is not None:
        answers = CliBackend(usable_conf, timeout=5.0, retry=RetryPolicy(attempts=1)).ping()
    report.checks.append(
        Check("slurmctld", answers, "answers `scontrol ping`" if answers else "does not answer")
    )
    if answers:
        report.checks.append(slurm_check(CliBackend(usable_conf, timeout=10.0)))
        client, reason = select_backend(usable_conf)
        report.checks.append(Check("backend", True, f"{client.name}: {reason}"))
    else:
        report.checks.append(Check("backend", True, "cli: no controller to check pyslurm against"))
    if cfg is not None:
        cli = CliBackend(usable_conf, timeout=10.0) if answers else None
        report.checks.extend(deployment(cfg, cli))
    report.checks.append(nvml_check())
    return report
