"""The default :class:`SlurmClient`: Slurm's own command-line tools.

Reads the queue in ``squeue``'s plain format (:mod:`~.queue_read`; ``--json`` costs seconds
and gigabytes on the head node at 20,000 jobs) and the nodes with one ``--json`` call per
:class:`~.dialect.Dialect`; acts with ``scontrol`` and ``scancel``. Verbs take comma-joined
ids in one call where Slurm allows it; job fields are only ever argv values, never parsed by
a shell.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Sequence
from typing import Any, NoReturn, TypeVar

from .arrays import bracket
from .client import (
    JobUpdate,
    NodeAction,
    SlurmError,
    SlurmJob,
    SlurmNode,
    SlurmUnavailable,
    check_node_names,
)
from .dialect import Dialect, dialect_of
from .parse import MISSING, MalformedField, job_from_json, job_from_scontrol, node_from_json
from .queue_read import QueueReader
from .runner import DEFAULT_RETRY, RetryPolicy, Runner

_SIGNAL = re.compile(r"^(?:SIG)?[A-Z0-9]{2,8}$")
R = TypeVar("R")


def _not_a_record(key: str, value: object) -> NoReturn:
    raise MalformedField(f"{key}[]", value)


#: How Slurm names an array task in an error: ``9_5: Invalid job id specified``.
_TASK_REF = re.compile(r"\b(\d+_\d+)\b")


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
        self._dialect: Dialect | None = None
        self._queue = QueueReader(self.runner, self._json_jobs)
        # job id -> "A_T" for every array task of the last read (see SlurmJob.ref)
        self._refs: dict[int, str] = {}

    @property
    def calls(self) -> int:
        return self.runner.calls

    # ------------------------------------------------------------------ reads

    def _json(self, argv: list[str]) -> dict[str, Any]:
        """One ``--json`` read, its dialect learnt from its ``meta``. 22.05's tools exit 0 with
        only an "errors" list (stderr empty) when slurmctld cannot be reached, so the runner
        never sees a failure to retry: a read is idempotent, so retry it here."""
        delays = self.runner.retry.delays()
        while True:
            out = self.runner.run(argv, idempotent=True)
            try:
                data = json.loads(out)
            except json.JSONDecodeError as e:
                raise SlurmError(f"`{' '.join(argv)}` printed no JSON: {e}", argv) from None
            if not isinstance(data, dict):
                raise SlurmError(f"`{' '.join(argv)}` printed JSON that is not an object", argv)
            if not data.get("errors"):
                self._dialect = dialect_of(data, argv)
                return data
            delay = next(delays, None)
            if delay is None:
                raise SlurmUnavailable(
                    f"{argv[0]} --json reported errors (slurmctld unreachable?): "
                    f"{data['errors']}", argv)
            self.runner._sleep(delay)

    def _records(self, argv: list[str], key: str, parse: Callable[[Any], R],
                 data: dict[str, Any] | None = None) -> list[R]:
        """Every record of ``data[key]`` (read with ``argv`` unless given) parsed; anything
        missing or malformed is a :class:`SlurmError` naming the field, the command and the
        Slurm version."""
        if data is None:
            data = self._json(argv)
        records = data.get(key)
        try:
            if not isinstance(records, list):
                raise MalformedField(key, records if key in data else MISSING)
            return [parse(r) if isinstance(r, dict) else _not_a_record(key, r) for r in records]
        except MalformedField as e:
            raise SlurmError(f"`{' '.join(argv)}` on {self._dialect}: {e}", argv) from None

    def dialect(self) -> Dialect:
        """The Slurm we talk to, as its own output names it (asked once, then kept fresh by
        every read)."""
        if self._dialect is None:
            self._json(["sinfo", "--json"])
        assert self._dialect is not None
        return self._dialect

    def version(self) -> str:
        return self.dialect().release

    def ping(self) -> bool:
        try:
            out = self.runner.run(["scontrol", "ping"], idempotent=True)
        except SlurmError:
            return False
        return "UP" in out

    def config(self) -> dict[str, str]:
        """The running slurmctld's configuration (``scontrol show config``): what it loaded,
        which is not always what slurm.conf on this host says."""
        out = self.runner.run(["scontrol", "show", "config"], idempotent=True)
        pairs = (line.split("=", 1) for line in out.splitlines() if " = " in line)
        return {key.strip(): value.strip() for key, value in pairs}

    def list_jobs(
        self, partitions: Collection[str] | None = None, *, finished: bool = False
    ) -> list[SlurmJob]:
        """The queue in ``squeue``'s plain format plus bounded reads for what it lacks
        (:mod:`~.queue_read`): the same records ``squeue --json`` gives, at a fraction of
        its cost on the head node."""
        if partitions is not None and not partitions:
            return []
        jobs = self._queue.read(self.dialect(), partitions)
        self._refs = {j.job_id: j.ref for j in jobs if j.ref != str(j.job_id)}
        return [j for j in jobs if finished or j.queued]

    def json_jobs(self, ids: Sequence[int] | None = None) -> list[SlurmJob]:
        """Job records as ``squeue --json`` gives them, ended ones too: every job, or at
        least ``ids`` (only those where Slurm honours ``--jobs``). The reference the plain
        read is tested against, and where it takes the reason codes Slurm prints as a
        description (:mod:`~.queue_read`); seconds and gigabytes at 20,000 jobs."""
        return self._json_jobs(self.dialect().json_argv(ids))

    def _json_jobs(self, argv: list[str]) -> list[SlurmJob]:
        """The job records of one ``squeue --json`` read."""
        return self._records(argv, "jobs", job_from_json)

    def get_job(self, job_id: int) -> SlurmJob | None:
        """One job via ``scontrol -d show job -o`` (cheaper than the whole queue as JSON)."""
        argv = ["scontrol", "-d", "show", "job", "-o", str(int(job_id))]
        try:
            out = self.runner.run(argv, idempotent=True)
        except SlurmError as e:
            if "Invalid job id" in e.stderr:
                return None
            raise
        # An array's id lists every record of the array, one per line.
        line = next((x for x in out.splitlines() if x.startswith(f"JobId={int(job_id)} ")), "")
        try:
            job = job_from_scontrol(line) if line else None
        except MalformedField as e:
            raise SlurmError(f"`{' '.join(argv)}`: {e}", argv) from None
        if job is not None and job.ref != str(job.job_id):
            self._refs[job.job_id] = job.ref
        return job

    def list_nodes(self) -> list[SlurmNode]:
        """Every node once (:attr:`Dialect.node_argv`: ``sinfo --json`` on 22.05, ``scontrol
        show nodes --json`` later). A backend that has read nothing yet asks ``sinfo`` for the
        version first, which on 22.05 is already the answer."""
        if self._dialect is None:
            probe = ["sinfo", "--json"]
            data = self._json(probe)
            if self.dialect().node_argv == probe:
                return self._records(probe, "nodes", node_from_json, data)
        return self._records(self.dialect().node_argv, "nodes", node_from_json)

    # ------------------------------------------------------------------ job verbs

    def _refs_of(self, ids: Sequence[int]) -> list[str]:
        """The names Slurm must be given for these jobs (:attr:`SlurmJob.ref`)."""
        if not ids:
            raise ValueError("no job ids given")
        return [self._refs.get(int(i)) or str(int(i)) for i in ids]

    def _ids(self, ids: Sequence[int]) -> str:
        return ",".join(self._refs_of(ids))

    def _run(self, argv: list[str], idempotent: bool) -> None:
        """Run a verb; an error naming array tasks (``9_5: ...``) names their job ids too."""
        try:
            self.runner.run(argv, idempotent=idempotent)
        except SlurmError as e:
            ids = {ref: job_id for job_id, ref in self._refs.items()}
            named = tuple(ids[r] for r in _TASK_REF.findall(e.stderr) if r in ids)
            if named:
                e.failed_ids = tuple(dict.fromkeys((*e.failed_ids, *named)))
            raise

    def _scontrol(self, *args: str, idempotent: bool) -> None:
        self._run(["scontrol", *args], idempotent)

    def hold(self, ids: Sequence[int]) -> None:
        self._scontrol("hold", self._ids(ids), idempotent=True)

    def release(self, ids: Sequence[int]) -> None:
        self._scontrol("release", self._ids(ids), idempotent=True)

    def requeue(self, ids: Sequence[int]) -> None:
        self._scontrol("requeue", self._ids(ids), idempotent=False)

    def requeue_hold(self, ids: Sequence[int]) -> None:
        self._scontrol("requeuehold", self._ids(ids), idempotent=False)

    def split_array(self, array_job_id: int, tasks: Sequence[int]) -> None:
        """``scontrol hold A_[tasks]``: a hold naming some of an array's pending tasks gives
        each its own job record (one naming all of them holds the array whole)."""
        if not tasks:
            raise ValueError("no array tasks given")
        self._scontrol("hold", f"{int(array_job_id)}_{bracket(tasks)}", idempotent=True)

    def update_jobs(self, ids: Sequence[int], update: JobUpdate) -> None:
        """``scontrol update JobId=..``. Slurm takes a comma list of ids for Priority and
        StartTime but rejects it ("Invalid job ID 2,3") with ReqNodeList/ExcNodeList, so
        node-list updates (and resizes, which go with a pin) cost one call per job. Slurm
        refuses ``Priority`` on a held job: release first."""
        fields = []
        if update.priority is not None:
            fields.append(f"Priority={update.priority}")
        if update.req_nodes is not None:
            fields.append(f"ReqNodeList={','.join(update.req_nodes)}")
        if update.exc_nodes is not None:
            fields.append(f"ExcNodeList={','.join(update.exc_nodes)}")
        if update.start_time is not None:
            fields.append(f"StartTime={update.start_time}")
        if update.gpus is not None:
            fields.append(update.gpus.field)
        if update.req_nodes is None and update.exc_nodes is None and update.gpus is None:
            self._scontrol("update", f"JobId={self._ids(ids)}", *fields, idempotent=True)
            return
        failures: list[tuple[int, SlurmError]] = []
        for i, ref in zip(ids, self._refs_of(ids), strict=True):
            try:
                self._scontrol("update", f"JobId={ref}", *fields, idempotent=True)
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
        self._run(["scancel", f"--signal={signal}", "--full", *self._refs_of(ids)], True)

    def cancel(self, ids: Sequence[int]) -> None:
        self._run(["scancel", *self._refs_of(ids)], True)

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

    def submit(self, argv: Sequence[str], script: str | None = None,
               as_user: str | None = None) -> int:
        """Submit with ``sbatch``; ``as_user`` (root only) runs sbatch as that Unix user via
        ``runuser``, since Slurm takes the caller's uid and 26.05 refuses ``--uid``."""
        prefix = ["runuser", "-u", as_user, "--"] if as_user else []
        out = self.runner.run([*prefix, "sbatch", "--parsable", *argv], idempotent=False,
                              stdin=script)
        try:
            return int(out.strip().split(";")[0])
        except ValueError:
            raise SlurmError(f"sbatch printed no job id: {out!r}", ["sbatch", *argv]) from None

