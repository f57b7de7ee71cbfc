"""The default :class:`SlurmClient`: Slurm's own command-line tools.

Reads with ``squeue --json`` / ``sinfo --json`` (one call each for the whole cluster: in 22.05
``--json`` ignores ``-p``/``-j`` filters, so filtering happens here), acts with ``scontrol`` and
``scancel``. Verbs take comma-joined ids in one call where Slurm allows it; job fields are only
ever argv values, never parsed by a shell.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from typing import Any

from .client import (
    JobUpdate,
    NodeAction,
    SlurmError,
    SlurmJob,
    SlurmNode,
    SlurmUnavailable,
    check_node_names,
)
from .parse import job_from_json, job_from_scontrol, node_from_json
from .runner import DEFAULT_RETRY, RetryPolicy, Runner

_SIGNAL = re.compile(r"^(?:SIG)?[A-Z0-9]{2,8}$")


def _ids(ids: Sequence[int]) -> str:
    if not ids:
        raise ValueError("no job ids given")
    return ",".join(str(int(i)) for i in ids)


class CliBackend:
    name = "cli"

    def __init__(
        self,
        conf: str | None = None,
        timeout: float = 30.0,
        retry: RetryPolicy = DEFAULT_RETRY,
        runner: Runner | None = None,
    ) -> None:
        self.runner = runner or Runner(conf, timeout, retry)

    @property
    def calls(self) -> int:
        return self.runner.calls

    # ------------------------------------------------------------------ reads

    def _json(self, argv: list[str]) -> dict[str, Any]:
        # 22.05's `squeue/sinfo --json` exit 0 with only an "errors" list (stderr empty) when
        # slurmctld cannot be reached, so the runner never sees a failure to retry: a read is
        # idempotent, so retry it here with the same backoff.
        delays = self.runner.retry.delays()
        while True:
            out = self.runner.run(argv, idempotent=True)
            try:
                data = json.loads(out)
            except json.JSONDecodeError as e:
                raise SlurmError(f"{argv[0]} --json printed no JSON: {e}", argv) from None
            if not data.get("errors"):
                return dict(data)
            delay = next(delays, None)
            if delay is None:
                raise SlurmUnavailable(
                    f"{argv[0]} --json reported errors (slurmctld unreachable?): "
                    f"{data['errors']}", argv)
            self.runner._sleep(delay)

    def version(self) -> str:
        meta = self._json(["sinfo", "--json"])["meta"]
        return str(meta["Slurm"]["release"])

    def ping(self) -> bool:
        try:
            out = self.runner.run(["scontrol", "ping"], idempotent=True)
        except SlurmError:
            return False
        return "UP" in out

    def list_jobs(
        self, partitions: Collection[str] | None = None, *, finished: bool = False
    ) -> list[SlurmJob]:
        wanted = set(partitions) if partitions is not None else None
        jobs = [job_from_json(j) for j in self._json(["squeue", "--json"])["jobs"]]
        return [
            j
            for j in jobs
            if (wanted is None or j.partition in wanted)
            and (finished or j.queued)
        ]

    def get_job(self, job_id: int) -> SlurmJob | None:
        """One job via ``scontrol -d show job -o`` (cheaper than the whole queue as JSON)."""
        try:
            out = self.runner.run(
                ["scontrol", "-d", "show", "job", "-o", str(int(job_id))], idempotent=True
            )
        except SlurmError as e:
            if "Invalid job id" in e.stderr:
                return None
            raise
        line = out.strip().splitlines()[0] if out.strip() else ""
        return job_from_scontrol(line) if line else None

    def list_nodes(self) -> list[SlurmNode]:
        return [node_from_json(n) for n in self._json(["sinfo", "--json"])["nodes"]]

    # ------------------------------------------------------------------ job verbs

    def _scontrol(self, *args: str, idempotent: bool) -> None:
        self.runner.run(["scontrol", *args], idempotent=idempotent)

    def hold(self, ids: Sequence[int]) -> None:
        self._scontrol("hold", _ids(ids), idempotent=True)

    def release(self, ids: Sequence[int]) -> None:
        self._scontrol("release", _ids(ids), idempotent=True)

    def requeue(self, ids: Sequence[int]) -> None:
        self._scontrol("requeue", _ids(ids), idempotent=False)

    def requeue_hold(self, ids: Sequence[int]) -> None:
        self._scontrol("requeuehold", _ids(ids), idempotent=False)

    def update_jobs(self, ids: Sequence[int], update: JobUpdate) -> None:
        """``scontrol update JobId=..``. Slurm takes a comma list of ids for Priority and
        StartTime but rejects it ("Invalid job ID 2,3") with ReqNodeList/ExcNodeList, so
        node-list updates cost one call per job. Slurm refuses ``Priority`` on a held job:
        release first."""
        fields = []
        if update.priority is not None:
            fields.append(f"Priority={update.priority}")
        if update.req_nodes is not None:
            fields.append(f"ReqNodeList={','.join(update.req_nodes)}")
        if update.exc_nodes is not None:
            fields.append(f"ExcNodeList={','.join(update.exc_nodes)}")
        if update.start_now:
            fields.append("StartTime=now")
        if update.req_nodes is None and update.exc_nodes is None:
            self._scontrol("update", f"JobId={_ids(ids)}", *fields, idempotent=True)
            return
        failures: list[tuple[int, SlurmError]] = []
        for i in ids:
            try:
                self._scontrol("update", f"JobId={int(i)}", *fields, idempotent=True)
            except SlurmError as e:
                failures.append((int(i), e))
        if failures:
            first = failures[0][1]
            raise SlurmError(
                "; ".join(str(e) for _, e in failures),
                first.argv,
                first.returncode,
                "\n".join(e.stderr for _, e in failures),
                tuple(i for i, _ in failures),
            )

    def signal(self, ids: Sequence[int], signal: str) -> None:
        """``scancel --signal --full``: without ``--full`` Slurm spares the batch script,
        which for a plain sbatch job is the training process itself."""
        if not _SIGNAL.match(signal):
            raise ValueError(f"bad signal name {signal!r}")
        _ids(ids)
        argv = ["scancel", f"--signal={signal}", "--full", *(str(int(i)) for i in ids)]
        self.runner.run(argv, idempotent=True)

    def cancel(self, ids: Sequence[int]) -> None:
        _ids(ids)
        self.runner.run(["scancel", *(str(int(i)) for i in ids)], idempotent=True)

    def update_nodes(self, names: Sequence[str], action: NodeAction, reason: str = "") -> None:
        check_node_names(names)
        if not names:
            raise ValueError("no node names given")
        if "\n" in reason or "\r" in reason:
            raise ValueError("a node reason must be one line")
        if action == "drain":
            state = ["State=DRAIN", f"Reason={reason or 'blox-slurm'}"]
        elif action == "resume":
            state = ["State=RESUME"]
        else:
            raise ValueError(f"unknown node action {action!r}")
        self._scontrol("update", f"NodeName={','.join(names)}", *state, idempotent=True)

    def submit(self, argv: Sequence[str], script: str | None = None) -> int:
        out = self.runner.run(["sbatch", "--parsable", *argv], idempotent=False, stdin=script)
        try:
            return int(out.strip().split(";")[0])
        except ValueError:
            raise SlurmError(f"sbatch printed no job id: {out!r}", ["sbatch", *argv]) from None

