"""The queue at any length: ``squeue``'s plain format, and bounded reads for what it lacks.

A read (see ``docs/controller.md``, "What a round does to Slurm"):

1. ``squeue -h --noconvert --states=all [--partition=P]`` plus one line per job record:
   ``--array-unique`` on 22.05, ``-r`` from 24.11 (which dropped ``--array-unique``; plain
   squeue folds an array's waiting tasks, split ones included, into one line, and ``-r``
   prints an array's own record once per waiting task, put back together here). Fields in
   :mod:`~.squeue_plain`'s format;
2. on a Slurm whose ``-O`` has no excluded nodes (22.05): the same with ``-o "%A %x"``;
3. for the jobs that began a run since the last read and hold GPUs: one ``scontrol``
   reading a ``show job REF`` for each from its stdin, with ``details`` and ``oneliner``
   (the records of ``scontrol -d show job -o REF``: the GPU indices each holds on each
   node), kept while that run lasts; for more new runs than :func:`show_limit` allows,
   one read of them all (on 22.05 the listing of every job, later their JSON records);
4. for each array first seen without a record that shows its throttle (``3-9%3``):
   ``scontrol show job -o REF`` of one record (``ArrayTaskThrottle``), kept while the array
   is in the queue;
5. for jobs whose reason Slurm shows as a description we cannot map to its code: one
   ``--json`` read (of only those jobs where Slurm honours ``--jobs``, of the whole queue on
   22.05), kept while the description stands.

Steps 3-5 cost nothing in a round where nothing new started, no array arrived and no new
description appeared. A record whose text is the same as in the last read is not parsed again:
between two rounds almost every waiting job is unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from types import MappingProxyType

from .arrays import bracket
from .client import GresAlloc, SlurmError, SlurmJob
from .dialect import Dialect
from .parse import MalformedField, ParsedJob, array_throttle, held_gpus, held_run, job_records
from .runner import Runner
from .squeue_plain import PlainFormat, job_from_plain

#: Slurm's descriptions that always stand for one reason code (checked on every supported
#: version by tests/slurm/test_queue_read_live.py): ``requeuehold`` sets this one.
DESCRIBED = {"job requeued in held state": "JobHeldUser"}
#: ... and descriptions that begin with their code: ``ReqNodeNotAvail, UnavailableNodes:n4``.
CODE_FIRST = ("ReqNodeNotAvail, ",)

#: The new runs' records, one ``show job`` a run read from stdin (:meth:`QueueReader._shown`).
SHOW = ("scontrol",)
#: What Slurm says of a job that left the queue before its ``show job``: 22.05 and 24.11
#: print an array task's "not found" on stdout, 26.05 on stderr.
GONE = re.compile(r"(?:slurm_load_jobs|scontrol_print_job) error: Invalid job id specified"
                  r"|Job \d+(?:[_+]\d+)? not found")
#: The listing of every job with the GPU indices each holds (``-d``), for 22.05.
LISTING = ("scontrol", "-d", "show", "job", "-o")
#: A ``show job`` costs slurmctld and ``scontrol`` about what this many records of the
#: listing do (22.05 at 20,000 queued jobs: 0.7 ms of wall time a ``show job``, 0.035 ms a
#: listed record; benchmarks/bench_queue_scale.py and docs/controller.md).
SHOW_COST = 20
#: ... and up to this many new runs are read by ``show job`` whatever the queue's length.
SHOW_ALWAYS = 64

JsonRead = Callable[[list[str]], list[SlurmJob]]
_Run = tuple[int, float | None]  # (job id, start of its run)
_Held = dict[_Run, Mapping[str, GresAlloc]]


def described(reason: str) -> bool:
    """Whether squeue printed a description instead of a reason code (codes are one word:
    ``JobHeldUser``, ``Resources``, ``launch_failed_requeued_held``)."""
    return " " in reason or "," in reason


def code_of(reason: str) -> str | None:
    """The code a description always stands for, or None if it is not one we know."""
    if reason in DESCRIBED:
        return DESCRIBED[reason]
    return next((p[:-2] for p in CODE_FIRST if reason.startswith(p)), None)


class QueueReader:
    """Reads the queue for one :class:`~.cli_backend.CliBackend` (its runner, and its reader
    of ``squeue --json`` records for a given argv), keeping what it may reuse between
    reads."""

    def __init__(self, runner: Runner, json_read: JsonRead) -> None:
        self.runner = runner
        self._json_read = json_read
        self._format: PlainFormat | None = None
        self._parsed: dict[str, ParsedJob] = {}  # raw record -> job, from the last read
        self._gpus: dict[_Run, Mapping[str, GresAlloc]] = {}
        self._throttles: dict[int, int] = {}  # array job id -> its throttle (0: none)
        self._codes: dict[tuple[int, str], str] = {}

    def plain_format(self, dialect: Dialect) -> PlainFormat:
        """This reader's format; the first call puts it into the runner's environment."""
        if self._format is None:
            self._format = PlainFormat.new(exc_nodes=dialect.plain_exc_nodes)
            self.runner.env = {**self.runner.env, **self._format.env()}
        return self._format

    def read(self, dialect: Dialect, partitions: Collection[str] | None) -> list[SlurmJob]:
        """Every job record in ``partitions`` (all when None), ended ones too."""
        fmt = self.plain_format(dialect)
        where = [] if partitions is None else [f"--partition={','.join(sorted(partitions))}"]
        argv = [*dialect.plain_squeue, *where]
        out = self.runner.run(argv, idempotent=True)
        excluded = None if fmt.exc_nodes else self._excluded(argv, dialect)
        try:
            jobs = _regrouped(self._parse(fmt, out, excluded))
        except MalformedField as e:
            raise SlurmError(f"`{' '.join(argv)}` on {dialect}: {e}", argv) from None
        jobs = self._with_throttles(jobs, dialect)
        self._gpus = self._gpus_of(jobs, dialect)
        held = [_holding(j, self._gpus.get((j.job_id, j.start_time))) for j in jobs]
        return self._with_codes(held, dialect)

    def _parse(self, fmt: PlainFormat, out: str, excluded: Mapping[int, str] | None
               ) -> list[ParsedJob]:
        """The records, each parsed once while its text stays the same."""
        seen: dict[str, ParsedJob] = {}
        jobs = []
        for record in fmt.records(out):
            exc = None if excluded is None else excluded.get(_leading_id(fmt, record), "")
            key = record if exc is None else f"{record}\n{exc}"
            job = seen[key] = self._parsed.get(key) or job_from_plain(fmt.values(record), exc)
            jobs.append(job)
        self._parsed = seen
        return jobs

    def _excluded(self, argv: list[str], dialect: Dialect) -> dict[int, str]:
        """Excluded nodes by job id (``-o "%A %x"``: an id, then a node list, which holds
        no space)."""
        out = self.runner.run([*argv, "-o", "%A %x"], idempotent=True)
        try:
            return {int(i): x.strip() for i, _, x in (line.partition(" ")
                                                       for line in out.splitlines())}
        except ValueError:
            raise SlurmError(f"`{' '.join(argv)} -o %A %x` on {dialect}: a line is not "
                             "`JOBID NODES`", argv) from None

    def _run(self, argv: list[str]) -> str:
        """A read of one job that may have left the queue since: "" then."""
        try:
            return self.runner.run(argv, idempotent=True)
        except SlurmError as e:
            if "Invalid job id" in e.stderr:
                return ""
            raise

    def _with_throttles(self, jobs: list[ParsedJob], dialect: Dialect) -> list[ParsedJob]:
        """Every record of a throttled array carries the throttle (``--array=0-9%3``), as
        the JSON gives it: squeue prints it only with the array's waiting tasks, on 22.05."""
        arrays = {j.array_job_id: j for j in jobs if j.array_job_id}
        shown = {j.array_job_id: j.array_max_tasks for j in jobs if j.array_max_tasks}
        throttles = {a: shown.get(a, self._throttles.get(a)) for a in arrays}
        for a, throttle in throttles.items():
            if throttle is None:
                throttles[a] = self._throttle_of(arrays[a], dialect)
        self._throttles = {a: t for a, t in throttles.items() if t is not None}
        return [replace(j, array_max_tasks=t) if j.array_job_id and
                (t := self._throttles.get(j.array_job_id, 0)) != j.array_max_tasks else j
                for j in jobs]

    def _throttle_of(self, job: ParsedJob, dialect: Dialect) -> int | None:
        argv = ["scontrol", "show", "job", "-o", job.ref]
        out = self._run(argv)
        try:
            return array_throttle(out) if out else None
        except MalformedField as e:
            raise SlurmError(f"`{' '.join(argv)}` on {dialect}: {e}", argv) from None

    def _gpus_of(self, jobs: list[ParsedJob], dialect: Dialect) -> _Held:
        """The GPUs each job in a run holds on each node, kept from the read that first saw
        that run (the indices do not change while it lasts). The new runs are read in one
        ``scontrol`` (:meth:`_shown`), or by one read of them all when there are more than
        :func:`show_limit` allows (a controller starting beside a busy cluster); a run not
        found there exactly once is read on its own."""
        running = {(j.job_id, j.start_time): j for j in jobs
                   if j.in_run and j.num_gpus and j.nodes}
        known = {k: a for k in running if (a := self._gpus.get(k)) is not None}
        new = [j for k, j in running.items() if k not in known]
        if new:
            many = len(new) > show_limit(len(jobs))
            known.update(self._held_all(new, dialect) if many else self._shown(new, dialect))
        known.update(((j.job_id, j.start_time), self._held(j, dialect)) for j in new
                     if (j.job_id, j.start_time) not in known)
        return known

    def _shown(self, new: list[ParsedJob], dialect: Dialect) -> _Held:
        """The new runs' records from one ``scontrol`` reading a ``show job REF`` for each
        from its stdin, as ``scontrol -d show job -o REF`` prints each: one process and a
        small RPC a job, instead of a process a job or the listing of every job. A job
        that left the queue meanwhile is missing from the output (:data:`GONE`). A ref is
        made of the integers parsed from the queue (``123``, ``123_4``), so no text a user
        chose reaches ``scontrol``'s commands."""
        script = "details\noneliner\n" + "".join(f"show job {j.ref}\n" for j in new)
        out = self.runner.run(SHOW, idempotent=True, stdin=script, gone=GONE)
        return self._runs_in(out, new, SHOW, dialect)

    def _held_all(self, new: list[ParsedJob], dialect: Dialect) -> _Held:
        """Many new runs in one read: their JSON records where Slurm honours ``--jobs``,
        else every job's ``scontrol -d show job -o`` record."""
        if dialect.json_filters:
            records = {j.job_id: j for j in self._json_jobs([j.job_id for j in new], dialect)}
            return {(j.job_id, j.start_time): r.gpu_alloc for j in new
                    if (r := records.get(j.job_id)) is not None and r.start_time == j.start_time}
        return self._runs_in(self.runner.run(LISTING, idempotent=True), new, LISTING, dialect)

    @staticmethod
    def _runs_in(out: str, new: list[ParsedJob], argv: tuple[str, ...], dialect: Dialect
                 ) -> _Held:
        """The runs of ``new`` whose records ``scontrol`` printed in ``out``: a job found
        there other than exactly once (gone, or a name posing as a record), or in another
        run than the queue's (requeued meanwhile), is left to a read of its own."""
        by_id = job_records(out, {j.job_id for j in new})
        try:
            runs = [(j, *held_run(found[0], j.job_id, j.name)) for j in new
                    if len(found := by_id.get(j.job_id, [])) == 1]
        except MalformedField as e:
            raise SlurmError(f"`{' '.join(argv)}` on {dialect}: {e}", argv) from None
        return {(j.job_id, j.start_time): MappingProxyType(alloc)
                for j, start, alloc in runs if start == j.start_time}

    def _json_jobs(self, ids: list[int], dialect: Dialect) -> list[SlurmJob]:
        """JSON records of at least ``ids`` (of every job where Slurm ignores ``--jobs``)."""
        return self._json_read(dialect.json_argv(ids))

    def _held(self, job: ParsedJob, dialect: Dialect) -> Mapping[str, GresAlloc]:
        argv = ["scontrol", "-d", "show", "job", "-o", job.ref]
        out = self._run(argv)
        try:
            return MappingProxyType(held_gpus(out, job.job_id, job.name) if out else {})
        except MalformedField as e:
            raise SlurmError(f"`{' '.join(argv)}` on {dialect}: {e}", argv) from None

    def _with_codes(self, jobs: list[ParsedJob], dialect: Dialect) -> list[SlurmJob]:
        """Jobs whose reason is a description get its code (:func:`code_of`, else the
        JSON's, read once while the description stands)."""
        todo = {(j.job_id, j.reason) for j in jobs if described(j.reason)}
        codes = {k: c for k in todo if (c := self._codes.get(k) or code_of(k[1]))}
        unknown = sorted(i for i, reason in todo if (i, reason) not in codes)
        if unknown:
            by_id = {j.job_id: j.reason for j in self._json_jobs(unknown, dialect)}
            codes.update(((i, r), by_id[i]) for i, r in todo if i in by_id)
        self._codes = codes
        return [replace(j, reason=codes[k]) if (k := (j.job_id, j.reason)) in codes else j
                for j in jobs]


def show_limit(queued: int) -> int:
    """How many new runs a read takes by ``show job`` before one read of them all is
    cheaper, with ``queued`` records in the queue (see :data:`SHOW_COST`)."""
    return max(SHOW_ALWAYS, queued // SHOW_COST)


def _holding(job: ParsedJob, alloc: Mapping[str, GresAlloc] | None) -> ParsedJob:
    """``job`` with the GPUs it holds, as the JSON path counts them."""
    if not alloc:
        return job
    return replace(job, gpu_alloc=alloc, num_gpus=sum(a.count for a in alloc.values()))


def _leading_id(fmt: PlainFormat, record: str) -> int:
    """The job id a record starts with (the format's first field)."""
    head = record.partition(fmt.field_end)[0]
    if not head.isdigit():
        raise MalformedField("job_id", head)
    return int(head)


def _regrouped(jobs: list[ParsedJob]) -> list[ParsedJob]:
    """One record per job id. ``-r`` prints an array's own record once per waiting task
    (24.11+): that is one record again, listing those tasks as the JSON does (``3-5,9``).
    Any other id listed twice is a :class:`MalformedField`."""
    by_id: dict[int, list[ParsedJob]] = {}
    for j in jobs:
        by_id.setdefault(j.job_id, []).append(j)
    out = []
    for job_id, same in by_id.items():
        tasks = [j.array_task_id for j in same]
        if len(same) > 1 and (same[0].array_job_id != job_id or None in tasks
                              or len(set(tasks)) != len(same)):
            raise MalformedField("job_id", f"{job_id} listed {len(same)} times")
        if len(same) == 1:
            out.append(same[0])
        else:
            out.append(replace(same[0], array_task_id=None,
                               array_tasks=bracket([t for t in tasks if t is not None])[1:-1]))
    return out
