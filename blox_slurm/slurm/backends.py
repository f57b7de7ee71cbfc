"""Which :class:`SlurmClient` to use here, and why (``blox-slurm doctor`` prints the why)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass

from .cli_backend import CliBackend
from .client import SlurmClient, SlurmError

_PROBE = "import pyslurm; print(pyslurm.version())"


@dataclass(frozen=True)
class PyslurmStatus:
    usable: bool
    reason: str
    version: str = ""


def major_minor(version: str) -> tuple[int, int] | None:
    """``22.05.8`` and pyslurm's ``22.5.3`` both -> (22, 5)."""
    parts = version.strip().split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def pyslurm_match(slurm_version: str) -> str:
    """Which pyslurm fits this Slurm and how to get it. pyslurm numbers its releases after
    the Slurm it is built for (Slurm 24.11 -> pyslurm 24.11.x, 22.05 -> 22.5.x) and refuses to
    build against any other major.minor; PyPI carries only some series (in 2026: 25.11, and the
    old 17.11/18.8), and no Debian suite ships a Slurm 25.11 to build that one against."""
    mm = major_minor(slurm_version)
    if mm is None:
        return f"cannot tell which pyslurm matches Slurm {slurm_version!r}"
    series = f"{mm[0]}.{mm[1]}"
    return (f"pyslurm {series}.x matches Slurm {slurm_version}: `pip install "
            f"'pyslurm=={series}.*'` where PyPI has that series, else build PySlurm's "
            f"v{series}.x source release against libslurm-dev "
            f"(SLURM_INCLUDE_DIR=/usr/include, SLURM_LIB_DIR=/usr/lib/<arch>)")


def pyslurm_status(slurm_version: str, conf: str | None = None) -> PyslurmStatus:
    """Whether pyslurm can be used against a Slurm of ``slurm_version``. The import is first
    tried in a child interpreter: a bad import exits the process instead of raising."""
    if importlib.util.find_spec("pyslurm") is None:
        return PyslurmStatus(False, f"pyslurm is not installed; {pyslurm_match(slurm_version)}")
    conf = conf or os.environ.get("SLURM_CONF")
    if not conf or not os.path.isfile(conf):
        return PyslurmStatus(False, "SLURM_CONF is not set to a readable file: importing "
                                    "pyslurm would terminate the process")
    try:
        p = subprocess.run(  # noqa: S603 - our own interpreter, a fixed program
            [sys.executable, "-c", _PROBE],
            capture_output=True, text=True, timeout=30,
            env={**os.environ, "SLURM_CONF": conf}, check=False,
        )
    except subprocess.TimeoutExpired:
        return PyslurmStatus(False, "importing pyslurm timed out")
    if p.returncode != 0:
        return PyslurmStatus(False, f"importing pyslurm fails: {p.stderr.strip()[-200:]}")
    version = p.stdout.strip()
    if major_minor(version) != major_minor(slurm_version) or major_minor(version) is None:
        return PyslurmStatus(False, f"pyslurm {version} does not match Slurm "
                                    f"{slurm_version}; {pyslurm_match(slurm_version)}", version)
    return PyslurmStatus(True, f"pyslurm {version} matches Slurm {slurm_version}", version)


def select_backend(conf: str | None = None, prefer: str = "auto") -> tuple[SlurmClient, str]:
    """(client, reason). ``prefer``: ``auto`` (pyslurm when it matches, else the CLI),
    ``cli`` or ``pyslurm`` (an error when it cannot be used)."""
    cli = CliBackend(conf)
    try:  # also teaches the CLI backend its dialect: the first round then costs 2 calls
        dialect = cli.dialect()
    except SlurmError as e:
        if prefer == "pyslurm":
            raise
        return cli, f"CLI backend: cannot ask slurmctld for its version ({e})"
    if prefer == "cli":
        return cli, f"the CLI backend was requested; {dialect}"
    status = pyslurm_status(dialect.release, conf)
    if status.usable:
        if conf:
            os.environ["SLURM_CONF"] = conf  # pyslurm reads the environment at import
        from .pyslurm_backend import PyslurmBackend

        return PyslurmBackend(conf), status.reason
    if prefer == "pyslurm":
        raise SlurmError(f"the pyslurm backend cannot be used: {status.reason}")
    return cli, f"CLI backend: {status.reason}"
