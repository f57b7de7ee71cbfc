"""An in-memory :class:`~blox_slurm.slurm.client.SlurmClient`: the controller's logic in
milliseconds, without slurmctld.

It models what the controller relies on, the way the live suites found Slurm 22.05 to 26.05
behave, and nothing else:

* jobs are submitted held and marked, as the job-submit plugin does while the heartbeat is
  fresh (``failopen=True`` submits them unheld, marked ``,failopen``);
* a held job never starts; a released one starts at the next :meth:`FakeSlurm.schedule` if
  its begin time has passed and its GPUs (per job, or per node on exactly its node count),
  CPUs and memory fit on the nodes it is pinned to (``ReqNodeList``) or else any node of its
  partition, in priority order, no backfill; a pin to a full node leaves it waiting (``Resources``);
* ``requeuehold`` stops a running job: pending, held, ``Restarts`` + 1, a new ``SubmitTime``,
  and (as Slurm's requeue delay) not eligible for 120 s unless the update lifts the delay
  (``StartTime=now+2``); the nodes it ran on revoke its credential, so a start there in the
  same whole second fails the job, as slurmd's ``Job credential revoked`` does;
* :meth:`FakeSlurm.advance` schedules every time, unless ``event_passes``: then, as
  slurmctld does, only after an event (a submit, a job's end, any verb on a job or node)
  and every :data:`PASS_INTERVAL` seconds; a pass shows a released job whose begin time is
  ahead as ``BeginTime`` (Slurm's ``EligibleTime`` is the begin time);
* a job needs ``runtime`` seconds of running in all, then completes and stays listed as
  ended; a preempted run keeps its progress (jobs checkpoint, as the emulator's fake
  training job does on SIGTERM);
* every verb on a job that is gone, or ``requeuehold`` of a pending one, is a
  :class:`SlurmError` naming the job, as Slurm's batched verbs do.

Not modelled: arrays (no unsplit records), dependencies, reservations, QOS limits, node
failures other than draining. The live suites keep everything that needs a real Slurm.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from ..slurm.client import (
    REVOKE_MARGIN,
    GresAlloc,
    JobUpdate,
    NodeAction,
    SlurmError,
    SlurmJob,
    SlurmNode,
)
from ..slurm.job_submit import format_hints
from ..slurm.parse import ParsedJob

REQUEUE_DELAY = 120.0
PASS_INTERVAL = 60.0  # slurmctld's periodic pass (sched_interval's default)
MARK = "blox:managed"


@dataclass
class FakeNode:
    name: str
    gpus: int
    cpus: int = 8
    memory_mb: int = 32768
    partitions: tuple[str, ...] = ("blox",)
    drained: bool = False
    used: set[int] = field(default_factory=set)  # GPU indices taken
    cpus_used: int = 0
    memory_used: int = 0

    def free_gpus(self) -> list[int]:
        """The GPU indices not taken, lowest first: the ones a job placed here gets."""
        return [i for i in range(self.gpus) if i not in self.used]

    def holds(self, cpus: int, memory: int) -> bool:
        """Whether ``cpus`` more CPUs and ``memory`` more MB fit on this node."""
        return self.cpus - self.cpus_used >= cpus and self.memory_mb - self.memory_used >= memory


@dataclass
class FakeJob:
    job: ParsedJob  # what Slurm shows
    runtime: float  # seconds of running it needs in all
    begin: float = 0.0  # eligible from (requeue delay, --begin)
    done: float = 0.0  # seconds run in earlier runs
    revoked: dict[str, int] = field(default_factory=dict)  # node: second its last run stopped


class FakeSlurm:
    """``nodes`` groups as ``(count, gpus_per_node)``; ``now`` is the fake's clock, which only
    :meth:`advance` moves (give the controller ``clock=lambda: fake.now``)."""

    name = "fake"

    def __init__(self, nodes: Iterable[tuple[int, int]] = ((4, 4),), now: float = 1e6,
                 event_passes: bool = False) -> None:
        self.now = now
        self.calls = 0
        self.event_passes = event_passes
        self.stirred = False  # an event since the last scheduling pass
        self.last_pass = now
        self.nodes: dict[str, FakeNode] = {}
        for count, gpus in nodes:
            for _ in range(count):
                name = f"node{len(self.nodes) + 1}"
                self.nodes[name] = FakeNode(name, gpus)
        self.jobs: dict[int, FakeJob] = {}
        self._ids = itertools.count(1)
        self.starts: list[tuple[int, tuple[str, ...]]] = []  # (job, nodes) in start order

    # ------------------------------------------------------------------ the world's side

    def submit_job(self, gpus: int, runtime: float, *, user: str = "alice",
                   partition: str = "blox", gpus_per_node: bool = False, nodes: int = 1,
                   cpus: int = 1, memory_mb: int = 0, failopen: bool = False,
                   hints: Mapping[str, str | int] | None = None) -> int:
        """A job as ``sbatch`` and the plugin leave it; ``gpus_per_node`` asks ``gpus`` on
        each of ``nodes`` nodes (``--gres=gpu:N -N k``), else ``gpus`` in all (``--gpus``);
        ``hints`` as its ``--comment=blox:..`` gave them (the plugin's normal form)."""
        job_id = next(self._ids)
        total = gpus * nodes if gpus_per_node else gpus
        job = ParsedJob(
            job_id=job_id, name=f"job{job_id}", user=user, account="", partition=partition,
            state="PENDING", reason="None" if failopen else "JobHeldUser",
            priority=1 if failopen else 0, num_gpus=total, num_nodes=nodes, cpus=cpus,
            memory_mb=memory_mb, submit_time=self.now, eligible_time=self.now,
            admin_comment=MARK + (",failopen" if failopen else "") + format_hints(hints or {}),
            gpu_nodes=nodes if gpus_per_node else 0)
        self.jobs[job_id] = FakeJob(job, runtime, self.now)
        self.stirred = True
        return job_id

    def advance(self, seconds: float) -> None:
        """Move the clock: runs that are done complete, then Slurm schedules."""
        self.now += seconds
        for fj in self.jobs.values():
            j = fj.job
            if j.state == "RUNNING" and fj.done + self.now - (j.start_time or 0) >= fj.runtime:
                self._free(j)
                fj.job = replace(j, state="COMPLETED", end_time=self.now, reason="None")
                self.stirred = True
        if (not self.event_passes or self.stirred
                or self.now - self.last_pass >= PASS_INTERVAL):
            self.schedule()

    def schedule(self) -> None:
        """A scheduling pass: start every eligible released job that fits, by priority then
        id; one whose begin time is ahead waits with reason ``BeginTime``."""
        self.stirred, self.last_pass = False, self.now
        for fj in self.jobs.values():
            if fj.job.pending and fj.job.priority > 0 and fj.begin > self.now:
                self._set(fj, reason="BeginTime")
        waiting = sorted((fj for fj in self.jobs.values() if self._eligible(fj)),
                         key=lambda fj: (-fj.job.priority, fj.job.job_id))
        for fj in waiting:
            placed = self._fit(fj.job)
            if placed is None:
                fj.job = replace(fj.job, reason="Resources")
                continue
            self._take(fj, placed)

    def check(self) -> None:
        """The invariants Slurm keeps: no GPU, CPU or memory given twice or past a node."""
        for n in self.nodes.values():
            holders = [j.job for j in self.jobs.values() if j.job.state == "RUNNING"
                       and n.name in j.job.gpu_alloc]
            indices = [i for j in holders for i in j.gpu_alloc[n.name].indices]
            assert len(indices) == len(set(indices)) == len(n.used) <= n.gpus, (n, holders)
            assert 0 <= n.cpus_used <= n.cpus and 0 <= n.memory_used <= n.memory_mb, n

    # ------------------------------------------------------------------ SlurmClient

    def version(self) -> str:
        return "fake"

    def ping(self) -> bool:
        return True

    def list_jobs(self, partitions: Collection[str] | None = None, *,
                  finished: bool = False) -> list[SlurmJob]:
        self.calls += 1
        return [fj.job for fj in self.jobs.values()
                if (partitions is None or fj.job.partition in partitions)
                and (finished or fj.job.queued)]

    def get_job(self, job_id: int) -> SlurmJob | None:
        self.calls += 1
        fj = self.jobs.get(job_id)
        return fj.job if fj is not None else None

    def list_nodes(self) -> list[SlurmNode]:
        self.calls += 1
        return [self._node(n) for n in self.nodes.values()]

    def hold(self, ids: Sequence[int]) -> None:
        self._each(ids, "hold", lambda fj: self._set(fj, priority=0, reason="JobHeldAdmin"),
                   pending=True)

    def release(self, ids: Sequence[int]) -> None:
        self._each(ids, "release", lambda fj: self._set(fj, priority=1, reason="None"),
                   pending=True)

    def requeue(self, ids: Sequence[int]) -> None:
        self._each(ids, "requeue", lambda fj: self._requeue(fj, held=False), running=True)

    def requeue_hold(self, ids: Sequence[int]) -> None:
        self._each(ids, "requeuehold", lambda fj: self._requeue(fj, held=True), running=True)

    def update_jobs(self, ids: Sequence[int], update: JobUpdate) -> None:
        def apply(fj: FakeJob) -> None:
            if update.req_nodes is not None:
                fj.job = replace(fj.job, req_nodes=update.req_nodes)
            if update.exc_nodes is not None:
                fj.job = replace(fj.job, exc_nodes=update.exc_nodes)
            if update.priority is not None:
                fj.job = replace(fj.job, priority=update.priority)
            if update.lift_delay:
                self._begin(fj, int(self.now) + REVOKE_MARGIN)
            if update.start_now:
                self._begin(fj, int(self.now))
            if update.gpus is not None:  # a per-node count applies on each of its nodes
                per = fj.job.gpu_nodes if update.gpus.per_node and fj.job.gpu_nodes else 1
                fj.job = replace(fj.job, num_gpus=update.gpus.count * per)
        self._each(ids, "update", apply, pending=True)

    def signal(self, ids: Sequence[int], signal: str) -> None:
        self._each(ids, f"signal {signal}", lambda fj: None, running=True)

    def cancel(self, ids: Sequence[int]) -> None:
        def end(fj: FakeJob) -> None:
            self._free(fj.job)
            fj.job = replace(fj.job, state="CANCELLED", end_time=self.now)
        self._each(ids, "cancel", end)

    def update_nodes(self, names: Sequence[str], action: NodeAction, reason: str = "") -> None:
        self.calls += 1
        self.stirred = True
        for name in names:
            self.nodes[name].drained = action == "drain"

    def split_array(self, array_job_id: int, tasks: Sequence[int]) -> None:
        raise SlurmError(f"the fake has no job arrays (array {array_job_id})")

    def submit(self, argv: Sequence[str], script: str | None = None,
               as_user: str | None = None) -> int:
        raise SlurmError("the fake takes jobs through submit_job(), not sbatch options")

    # ------------------------------------------------------------------ internals

    def _each(self, ids: Sequence[int], verb: str, act: Callable[[FakeJob], None], *,
              pending: bool = False,
              running: bool = False) -> None:
        """One batched verb: acts on every job it can, then names the ones it could not."""
        if not ids:
            raise ValueError("no job ids given")
        self.calls += 1
        failed = []
        for job_id in ids:
            fj = self.jobs.get(job_id)
            if fj is None or not fj.job.queued:
                failed.append((job_id, "Invalid job id specified"))
            elif pending and not fj.job.pending:
                failed.append((job_id, "Job is no longer pending execution"))
            elif running and not fj.job.active:
                failed.append((job_id, "Job is pending execution"))
            else:
                act(fj)
                self.stirred = True
        if failed:
            text = "\n".join(f"{why} for job {job_id}" for job_id, why in failed)
            raise SlurmError(f"scontrol {verb} failed: {text}", ("scontrol", verb), 1, text,
                             tuple(job_id for job_id, _ in failed))

    def _begin(self, fj: FakeJob, at: float) -> None:
        fj.begin = at
        self._set(fj, eligible_time=at)

    def _set(self, fj: FakeJob, **fields: object) -> None:
        fj.job = replace(fj.job, **fields)  # type: ignore[arg-type]

    def _requeue(self, fj: FakeJob, held: bool) -> None:
        fj.revoked = dict.fromkeys(fj.job.nodes, int(self.now))
        self._free(fj.job)
        fj.done += self.now - (fj.job.start_time or self.now)
        fj.begin = self.now + REQUEUE_DELAY
        fj.job = replace(fj.job, state="PENDING", eligible_time=fj.begin, priority=0 if held else 1,
                         reason="JobHeldAdmin" if held else "BeginTime",
                         restart_cnt=fj.job.restart_cnt + 1, submit_time=self.now,
                         start_time=None, nodes=(), gpu_alloc=MappingProxyType({}))

    def _eligible(self, fj: FakeJob) -> bool:
        j = fj.job
        return j.state == "PENDING" and j.priority > 0 and fj.begin <= self.now

    def _fit(self, j: ParsedJob) -> dict[str, list[int]] | None:
        """GPU indices per node for ``j``, or None: per node on exactly ``gpu_nodes`` nodes,
        else its total over the candidate nodes in order (all it is pinned to, if pinned);
        then each node must hold its even share of the job's CPUs and memory."""
        placed = self._first_fit(j, self._candidates(j))
        return placed if placed is not None and self._room(j, placed) else None

    def _candidates(self, j: ParsedJob) -> list[FakeNode]:
        """The nodes ``j`` may run on, in the order they are tried: those it is pinned to,
        else its partition's, less those it excludes."""
        names = j.req_nodes or tuple(n for n, node in self.nodes.items()
                                     if j.partition in node.partitions)
        return [self.nodes[n] for n in names if n in self.nodes and n not in j.exc_nodes]

    def _first_fit(self, j: ParsedJob, nodes: list[FakeNode]) -> dict[str, list[int]] | None:
        """The GPUs of the first ``nodes`` that take ``j``'s GPUs and what is known up front
        of its CPUs and memory per node; None when the nodes run out first, or when a node
        it is pinned to cannot take its share (Slurm then waits rather than go elsewhere)."""
        per_node = j.num_gpus // j.gpu_nodes if j.gpu_nodes else 0
        # a node-bound job's share of CPUs and memory per node is known up front; a spread
        # one needs a CPU on each node and is checked once its nodes are chosen (_room)
        cpus, memory = _share(j, j.gpu_nodes) if j.gpu_nodes else (1, 0)
        out: dict[str, list[int]] = {}
        left = j.num_gpus
        for n in nodes:
            free = n.free_gpus()
            want = per_node or min(left, len(free))
            if n.drained or not 0 < want <= len(free) or not n.holds(cpus, memory):
                if j.req_nodes:
                    return None
                continue
            out[n.name] = free[:want]
            left -= want
            complete = len(out) == j.gpu_nodes if per_node else left == 0
            if complete:
                return out
        return None

    def _room(self, j: ParsedJob, placed: dict[str, list[int]]) -> bool:
        cpus, memory = _share(j, len(placed))
        return all(self.nodes[n].holds(cpus, memory) for n in placed)

    def _take(self, fj: FakeJob, placed: dict[str, list[int]]) -> None:
        j = fj.job
        if any(fj.revoked.get(name, -1) >= int(self.now) for name in placed):
            fj.job = replace(j, state="FAILED", reason="NonZeroExitCode", end_time=self.now)
            return
        cpus, memory = _share(j, len(placed))
        for name, indices in placed.items():
            node = self.nodes[name]
            node.used.update(indices)
            node.cpus_used += cpus
            node.memory_used += memory
        alloc = {name: GresAlloc("gpu", len(ix), tuple(ix)) for name, ix in placed.items()}
        fj.job = replace(j, state="RUNNING", reason="None", start_time=self.now,
                         nodes=tuple(placed), gpu_alloc=MappingProxyType(alloc))
        self.starts.append((j.job_id, tuple(placed)))

    def _free(self, j: ParsedJob) -> None:
        if j.state != "RUNNING":
            return
        cpus, memory = _share(j, len(j.gpu_alloc))
        for name, alloc in j.gpu_alloc.items():
            node = self.nodes[name]
            node.used.difference_update(alloc.indices)
            node.cpus_used -= cpus
            node.memory_used -= memory

    def _node(self, n: FakeNode) -> SlurmNode:
        state = "idle" if not n.used else "allocated" if len(n.used) == n.gpus else "mixed"
        return SlurmNode(
            name=n.name, state=state, flags=frozenset({"DRAIN"}) if n.drained else frozenset(),
            gpus_total=n.gpus, gpus_used=len(n.used), gpu_type="gpu",
            gpus_used_indices=tuple(sorted(n.used)), cpus=n.cpus, cpus_alloc=n.cpus_used,
            memory_mb=n.memory_mb, memory_alloc=n.memory_used, partitions=n.partitions)


def _share(j: ParsedJob, nodes: int) -> tuple[int, int]:
    """The CPUs and memory a job holds on each of its ``nodes`` nodes (an even split)."""
    nodes = max(1, nodes)
    return -(-j.cpus // nodes), -(-j.memory_mb // nodes)
