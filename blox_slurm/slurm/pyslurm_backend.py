"""A :class:`SlurmClient` that sends control verbs through pyslurm's object API in-process.

Optional (``pip install blox-slurm[pyslurm]``), and only usable when pyslurm was built for the
running Slurm's major.minor (PyPI has no build for Debian 12's 22.05; see SLURM_NOTES.md).

Verbs — ``Job.hold/release/requeue/modify/send_signal`` — go through pyslurm: one RPC per job
but no fork/exec per call, which is what makes it cheaper than the CLI for large rounds.
Reads deliberately stay on ``squeue``/``sinfo --json`` (inherited from :class:`CliBackend`):
pyslurm 22.5's ``Nodes.load()`` reports ``allocated_gres`` empty, and a job's per-node GPU
indices sit behind ``get_resource_layout_per_node()``, which pyslurm marks as subject to
change. One read path means both backends return identical records, which the shared
contract tests check.

Never import this module's ``pyslurm`` at top level: ``import pyslurm`` without a valid
``SLURM_CONF`` terminates the interpreter from C (no exception to catch). :func:`load_pyslurm`
imports it only after :func:`blox_slurm.slurm.backends.pyslurm_status` has vetted it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from .cli_backend import CliBackend
from .client import JobUpdate, SlurmError
from .runner import DEFAULT_RETRY, RetryPolicy


def load_pyslurm() -> ModuleType:
    return importlib.import_module("pyslurm")


class PyslurmBackend(CliBackend):
    name = "pyslurm"

    def __init__(
        self,
        conf: str | None = None,
        timeout: float = 30.0,
        retry: RetryPolicy = DEFAULT_RETRY,
        module: ModuleType | None = None,
    ) -> None:
        super().__init__(conf, timeout, retry)
        self.pyslurm = module or load_pyslurm()

    def _each(self, ids: Sequence[int], verb: str, act: Callable[[Any], None],
              cli: Callable[[Sequence[int]], None]) -> None:
        """Apply ``act`` to every job; one error naming all the ids that failed. Array tasks
        go through ``cli``, the CLI's verb, which names them ``A_T``: pyslurm's ``Job(id)``
        of the record that kept the array's id would act on the whole array."""
        tasks = [i for i in ids if int(i) in self._refs]
        cli_error: SlurmError | None = None
        if tasks:
            try:
                cli(tasks)
            except SlurmError as e:
                cli_error = e
        failed: list[tuple[int, str]] = []
        for i in (i for i in ids if int(i) not in self._refs):
            self.runner.calls += 1
            try:
                act(self.pyslurm.Job(int(i)))
            except self.pyslurm.RPCError as e:
                failed.append((int(i), str(e)))
        if failed:
            raise SlurmError(
                f"pyslurm {verb} failed: "
                + "; ".join(f"job {i}: {msg}" for i, msg in failed),
                argv=("pyslurm", verb),
                stderr="\n".join(msg for _, msg in failed),
                failed_ids=tuple(i for i, _ in failed) + (
                    cli_error.failed_ids if cli_error is not None else ()),
            )
        if cli_error is not None:
            raise cli_error

    def hold(self, ids: Sequence[int]) -> None:
        self._each(ids, "hold", lambda j: j.hold(), super().hold)

    def release(self, ids: Sequence[int]) -> None:
        self._each(ids, "release", lambda j: j.release(), super().release)

    def requeue(self, ids: Sequence[int]) -> None:
        self._each(ids, "requeue", lambda j: j.requeue(), super().requeue)

    def requeue_hold(self, ids: Sequence[int]) -> None:
        self._each(ids, "requeuehold", lambda j: j.requeue(hold=True), super().requeue_hold)

    def update_jobs(self, ids: Sequence[int], update: JobUpdate) -> None:
        if update.gpus is not None:  # a resize: scontrol's TRES syntax is the tested one
            CliBackend.update_jobs(self, ids, update)
            return
        fields: dict[str, Any] = {}
        if update.priority is not None:
            fields["priority"] = update.priority
        if update.req_nodes is not None:
            fields["required_nodes"] = ",".join(update.req_nodes)
        if update.exc_nodes is not None:
            fields["excluded_nodes"] = ",".join(update.exc_nodes)
        if update.start_time is not None:
            fields["begin_time"] = update.start_time
        desc = self.pyslurm.JobSubmitDescription
        self._each(ids, "update", lambda j: j.modify(desc(**fields)),
                   lambda t: CliBackend.update_jobs(self, t, update))

    def signal(self, ids: Sequence[int], signal: str) -> None:
        self._each(ids, f"signal {signal}", lambda j: j.send_signal(signal, steps="all"),
                   lambda t: CliBackend.signal(self, t, signal))

    def cancel(self, ids: Sequence[int]) -> None:
        self._each(ids, "cancel", lambda j: j.cancel(), super().cancel)
