"""The queue at any length: ``squeue``'s plain format, and bounded reads for what it lacks.

A read (see ``docs/controller.md``, "What a round does to Slurm"):

1. ``squeue -h --noconvert --states=all [--partition=P]`` plus one line per job record:
   ``--array-unique`` on 22.05, ``-r`` from 24.11 (which dropped ``--array-unique``; plain
   squeue folds an array's waiting tasks, split ones included, into one line, and ``-r``
   prints an array's own record once per waiting task, put back together here). Fields in
   :mod:`~.squeue_plain`'s format;
2. on a Slurm whose ``-O`` has no excluded nodes (22.05): the same with ``-o "%A %x"``;
3. for each job that began a run since the last read and holds GPUs: ``scontrol -d show
   job -o REF`` (the GPU indices it holds on each node), kept while that run lasts; for
   more than :data:`ONE_BY_ONE` new runs, one read of them all (on 22.05 the listing of
   every job, later their JSON records), which a reader's first read makes beside the
   queue read (:meth:`QueueReader._read_ahead`);
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

from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TypeVar

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

#: More new runs than this in one read are read in one call (see ``_gpus_of``): one
#: ``scontrol`` costs ~5 ms, one read of them all 0.15 s (24.11, JSON) to 0.4 s (22.05) at
#: 20,000 queued jobs, benchmarks/bench_queue_scale.py.
ONE_BY_ONE = 16
#: The listing of every job with the GPU indices each holds (``-d``), for 22.05.
LISTING = ("scontrol", "-d", "show", "job", "-o")
#: The running jobs' JSON records, for a Slurm whose ``--json`` honours filters (24.11 on).
RUNNING_JSON = ("squeue", "--json", "--states=RUNNING")

JsonRead = Callable[[list[str]], list[SlurmJob]]
_Run = tuple[int, float | None]  # (job id, start of its run)
_T = TypeVar("_T")


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
        self._first = True  # no read has succeeded yet: see _listing_ahead

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
        with self._read_ahead(dialect, where) as ahead:
            out = self.runner.run(argv, idempotent=True)
            excluded = None if fmt.exc_nodes else self._excluded(argv, dialect)
            try:
                jobs = _regrouped(self._parse(fmt, out, excluded))
            except MalformedField as e:
                raise SlurmError(f"`{' '.join(argv)}` on {dialect}: {e}", argv) from None
            jobs = self._with_throttles(jobs, dialect)
            self._gpus = self._gpus_of(jobs, dialect, ahead)
        self._first = False
        held = [_holding(j, self._gpus.get((j.job_id, j.start_time))) for j in jobs]
        return self._with_codes(held, dialect)

    @contextmanager
    def _read_ahead(self, dialect: Dialect, where: list[str]) -> Iterator[_Ahead]:
        """On this reader's first read, the read of every run's GPUs, started in a second
        thread before the queue read: the listing of every job on 22.05 (:data:`LISTING`,
        spooled, see :meth:`Runner.run`), the running jobs' JSON records later
        (:data:`RUNNING_JSON`). A controller starting beside a busy cluster needs it for the
        GPUs of every run, and read after the queue it was the slowest call of that round
        (0.45 s of ``scontrol`` at 20,000 jobs, most of it the client's own formatting,
        which a second core does while this one parses the queue). Later reads know the runs
        already and read a new one on its own. What was read ahead may be a moment older
        or newer than the queue: :meth:`_held_all` takes from it only the runs whose start
        it shows. Leaving waits for the read, so no thread or Slurm client outlives the
        call."""
        if not self._first:
            yield _Ahead()
            return
        with ThreadPoolExecutor(1, thread_name_prefix="blox-read-ahead") as pool:
            if dialect.json_filters:
                yield _Ahead(running=pool.submit(self._json_read, [*RUNNING_JSON, *where]))
            else:
                yield _Ahead(listing=pool.submit(self.runner.run, LISTING, idempotent=True,
                                                 spool=True))

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

    def _gpus_of(self, jobs: list[ParsedJob], dialect: Dialect, ahead: _Ahead
                 ) -> dict[_Run, Mapping[str, GresAlloc]]:
        """The GPUs each job in a run holds on each node, kept from the read that first saw
        that run (the indices do not change while it lasts). New runs are read one by one,
        or all in one read when there are more than :data:`ONE_BY_ONE` (a controller
        starting beside a busy cluster) or it was read ``ahead`` anyway."""
        running = {(j.job_id, j.start_time): j for j in jobs
                   if j.in_run and j.num_gpus and j.nodes}
        known = {k: a for k in running if (a := self._gpus.get(k)) is not None}
        new = [j for k, j in running.items() if k not in known]
        if new and (ahead.started or len(new) > ONE_BY_ONE):
            known.update(self._held_all(new, dialect, ahead))
        known.update(((j.job_id, j.start_time), self._held(j, dialect)) for j in new
                     if (j.job_id, j.start_time) not in known)
        return known

    def _held_all(self, new: list[ParsedJob], dialect: Dialect, ahead: _Ahead
                  ) -> dict[_Run, Mapping[str, GresAlloc]]:
        """Many new runs in one read: their JSON records where Slurm honours ``--jobs``,
        else every job's ``scontrol -d show job -o`` record (what was read ``ahead``, when it
        was and did not fail). A job not found there exactly once (gone, or a name posing as
        a record), or found in another run than the queue's, is left to a read of its own."""
        if dialect.json_filters:
            read = _result(ahead.running)
            if read is None:
                read = self._json_jobs([j.job_id for j in new], dialect)
            records = {j.job_id: j for j in read}
            return {(j.job_id, j.start_time): r.gpu_alloc for j in new
                    if (r := records.get(j.job_id)) is not None and r.start_time == j.start_time}
        out = _result(ahead.listing)
        if out is None:
            out = self.runner.run(LISTING, idempotent=True)
        by_id = job_records(out, {j.job_id for j in new})
        try:
            runs = [(j, *held_run(found[0], j.job_id, j.name)) for j in new
                    if len(found := by_id.get(j.job_id, [])) == 1]
        except MalformedField as e:
            raise SlurmError(f"`{' '.join(LISTING)}` on {dialect}: {e}", LISTING) from None
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


@dataclass(frozen=True)
class _Ahead:
    """What a first read reads beside the queue (see :meth:`QueueReader._read_ahead`): the
    listing of every job (22.05) or the running jobs' JSON records; neither on other
    reads."""

    listing: Future[str] | None = None
    running: Future[list[SlurmJob]] | None = None

    @property
    def started(self) -> bool:
        return self.listing is not None or self.running is not None


def _result(read: Future[_T] | None) -> _T | None:
    """What a read ahead gave; None when there was none or it failed: the caller reads
    again, and a failure that lasts is that read's to report."""
    if read is None:
        return None
    try:
        return read.result()
    except SlurmError:
        return None


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
