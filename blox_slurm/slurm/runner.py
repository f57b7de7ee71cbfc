"""Run one Slurm command: argv only, a timeout, retries with exponential backoff, a call count.

Why retries are split by how far a request got: a *refused* connection never reached
slurmctld, so repeating any verb is safe; a *timed-out* socket may have been executed, so only
idempotent calls (queries, hold, release, update) are repeated — a second ``sbatch`` or
``requeue`` after a timeout could double-submit or requeue a restarted job.
"""

from __future__ import annotations

import enum
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from .client import SlurmError, SlurmUnavailable

APT_PACKAGE = {
    "squeue": "slurm-client",
    "sinfo": "slurm-client",
    "scontrol": "slurm-client",
    "scancel": "slurm-client",
    "sbatch": "slurm-client",
}


class Transience(enum.Enum):
    PERMANENT = "permanent"  # Slurm understood and refused: retrying changes nothing
    UNREACHED = "unreached"  # the request never reached slurmctld
    UNCERTAIN = "uncertain"  # it may or may not have been executed


_UNREACHED = re.compile(
    r"Connection refused|Unable to contact slurm controller|connect failure"
    r"|Slurm backup controller in standby mode|No route to host",
    re.I,
)
_UNCERTAIN = re.compile(
    r"Socket timed out|Zero Bytes were transmitted or received|Transport endpoint"
    r"|Resource temporarily unavailable|Connection reset",
    re.I,
)
#: A plain job id in Slurm's error text; never the array part of an array task ("9_5").
_JOB_ID = re.compile(r"(?:for job|job id|JobId=|job_id)\s*(\d+)(?![_\d])", re.I)


def classify(stderr: str) -> Transience:
    if _UNREACHED.search(stderr):
        return Transience.UNREACHED
    if _UNCERTAIN.search(stderr):
        return Transience.UNCERTAIN
    return Transience.PERMANENT


def failed_ids(stderr: str) -> tuple[int, ...]:
    """Job ids Slurm names in an error (``Invalid job id specified for job 999``)."""
    return tuple(dict.fromkeys(int(x) for x in _JOB_ID.findall(stderr)))


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    base_delay: float = 0.2
    factor: float = 2.0
    max_delay: float = 5.0

    def delays(self) -> Iterator[float]:
        """The waits between attempts: ``attempts - 1`` of them, growing exponentially."""
        d = self.base_delay
        for _ in range(self.attempts - 1):
            yield min(d, self.max_delay)
            d *= self.factor


DEFAULT_RETRY = RetryPolicy()


class Runner:
    """Runs Slurm client commands for one cluster (``SLURM_CONF`` in ``env``)."""

    def __init__(
        self,
        conf: str | None = None,
        timeout: float = 30.0,
        retry: RetryPolicy = DEFAULT_RETRY,
        sleep: Callable[[float], None] = time.sleep,
        execute: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run,
    ) -> None:
        env = dict(os.environ)
        if conf is not None:
            env["SLURM_CONF"] = conf
        # squeue and scontrol cut an array's pending-task list at 64 bytes ("3,17,42,...")
        # unless told otherwise; the controller must read every task it may split off.
        env["SLURM_BITSTR_LEN"] = "0"
        self.env: Mapping[str, str] = env
        self.timeout = timeout
        self.retry = retry
        self.calls = 0
        # A runner may be shared by threads (bench_queue_scale.py submits through one in
        # four): ``calls += 1`` is no atomic step.
        self._counting = threading.Lock()
        self._sleep = sleep
        self._execute = execute

    def run(self, argv: Sequence[str], *, idempotent: bool, stdin: str | None = None,
            gone: re.Pattern[str] | None = None) -> str:
        """stdout of ``argv``; raises :class:`SlurmError` (or :class:`SlurmUnavailable` when
        slurmctld stayed unreachable through every retry).

        ``gone``: for one command that reads several jobs (``scontrol`` reading ``show job``
        commands from ``stdin``), the words Slurm says of a job that has left the queue.
        Such a job makes the exit code 1 while the others' records are there; an exit 1
        whose every error line is such words still returns stdout, and the caller finds the
        missing records missing. Any other error fails the call as usual."""
        argv = list(argv)
        delays = self.retry.delays()
        while True:
            rc, text, transience = self._attempt(argv, stdin, gone)
            if rc == 0:
                return text
            retryable = transience is Transience.UNREACHED or (
                idempotent and transience is Transience.UNCERTAIN
            )
            delay = next(delays, None) if retryable else None
            if delay is None:
                cls = SlurmUnavailable if transience is not Transience.PERMANENT else SlurmError
                raise cls(
                    f"{argv[0]} failed (exit {rc}): {text.strip() or 'no message'}",
                    argv, rc, text, failed_ids(text),
                )
            self._sleep(delay)

    def _attempt(self, argv: list[str], stdin: str | None, gone: re.Pattern[str] | None
                 ) -> tuple[int, str, Transience]:
        """(exit code, stdout on success else the error text, how transient the error is)."""
        with self._counting:
            self.calls += 1
        try:
            p = self._execute(argv, input=stdin, capture_output=True, text=True,
                              timeout=self.timeout, env=self.env, check=False)
        except subprocess.TimeoutExpired:
            return -1, f"timed out after {self.timeout:g} s", Transience.UNCERTAIN
        except FileNotFoundError:
            pkg = APT_PACKAGE.get(os.path.basename(argv[0]), "slurm-client")
            raise SlurmError(
                f"{argv[0]} not found: install the Debian package {pkg} "
                f"(`apt-get install --no-install-recommends {pkg}`)",
                argv,
            ) from None
        if p.returncode == 0 or (p.returncode == 1 and gone is not None
                                 and all(gone.fullmatch(line) for line in
                                         p.stderr.splitlines() if line.strip())):
            return 0, p.stdout, Transience.PERMANENT
        err = p.stderr or p.stdout
        return p.returncode, err, classify(err)

