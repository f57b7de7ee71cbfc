"""Typed failures of the emulator launcher.

Each carries a message an admin can act on (the apt package to install, the port that is
taken, the last log lines of the daemon that died), because "slurmd failed" alone sends people
reading log files they cannot find.
"""

from __future__ import annotations


class EmulatorError(RuntimeError):
    """Any failure to start, inspect or stop the emulator (CLI exit code 1)."""


class SpecError(ValueError):
    """A malformed emulator option such as ``--gpus v100:4x`` (CLI exit code 2)."""


class MissingPackage(EmulatorError):
    def __init__(self, binary: str, package: str) -> None:
        self.binary = binary
        self.package = package
        super().__init__(
            f"{binary} not found: install the Debian package with "
            f"`apt-get install --no-install-recommends {package}`"
        )


class PortInUse(EmulatorError):
    def __init__(self, port: int) -> None:
        self.port = port
        super().__init__(
            f"port {port} is already in use: choose another --base-port, or omit it to pick "
            f"free ports automatically"
        )


class DaemonDied(EmulatorError):
    def __init__(self, daemon: str, returncode: int | None, log_tail: str) -> None:
        self.daemon = daemon
        self.returncode = returncode
        self.log_tail = log_tail
        super().__init__(
            f"{daemon} exited during start-up (exit code {returncode}); last log lines:\n"
            f"{log_tail}"
        )


class NotRunning(EmulatorError):
    """``status``/``down`` on a run directory with no emulator state file."""
