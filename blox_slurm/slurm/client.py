"""The Slurm world's boundary: what blox-slurm reads from and asks of a Slurm controller.

Every backend (the CLI one, the pyslurm one) returns these records and raises
:class:`SlurmError`, so the snapshot builder and the controller never learn which backend
talks to slurmctld. Records keep Slurm's own vocabulary (state strings, reasons, indices on a
node); :mod:`blox_slurm.slurm.snapshot` translates them into the core model.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, Protocol, runtime_checkable

#: Slurm job states in which a job still holds (or is about to hold) its GPUs for work
#: (STOPPED: SIGSTOPped, its allocation kept, like SUSPENDED).
ACTIVE_STATES = frozenset({"RUNNING", "CONFIGURING", "SUSPENDED", "STOPPED"})
#: ... and those in which it waits. SPECIAL_EXIT: requeued held by ``RequeueExitHold``;
#: RESV_DEL_HOLD: held because its reservation was deleted.
PENDING_STATES = frozenset(
    {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SPECIAL_EXIT", "RESV_DEL_HOLD"}
)
#: ... those of a run not over yet (COMPLETING: ending, its allocation still held;
#: SIGNALING: being signalled on its way out; STAGE_OUT: its burst buffer staging out).
#: Slurm names a job by such a flag over its base state: read as ended, a job being
#: signalled would get a run end the store then has to take back.
IN_RUN_STATES = ACTIVE_STATES | {"COMPLETING", "SIGNALING", "STAGE_OUT"}
#: ... and every state of a job still in the queue.
QUEUED_STATES = PENDING_STATES | IN_RUN_STATES

#: Node state flags (upper case, as every version prints them) that mean "no new work here";
#: the node's running jobs go on. PLANNED (backfill reserved it for a pending job) is not one.
NO_NEW_WORK_FLAGS = frozenset({"DRAIN", "FAIL", "MAINTENANCE", "RESERVED", "REBOOT_REQUESTED",
                               "BLOCKED"})
#: ... and those that mean nothing runs there now.
DOWN_FLAGS = frozenset({"NOT_RESPONDING", "POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN",
                        "POWERING_UP", "REBOOT_ISSUED", "INVALID_REG"})

_NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]*$")


@dataclass(frozen=True, slots=True)
class GresAlloc:
    """One GPU allocation on one node, e.g. ``gpu:v100:2(IDX:0,2)``."""

    type: str  # "" when Slurm reports no type
    count: int
    indices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SlurmJob:
    job_id: int
    name: str
    user: str
    account: str
    partition: str
    state: str  # Slurm's base state, upper case: PENDING, RUNNING, COMPLETING, ...
    reason: str  # "None" when Slurm gives none
    priority: int
    num_gpus: int  # requested, whole job
    gpu_type: str = ""  # requested type ("" = any)
    num_nodes: int = 1
    nodes: tuple[str, ...] = ()  # allocated, in Slurm's order
    gpu_alloc: Mapping[str, GresAlloc] = field(default_factory=lambda: MappingProxyType({}))
    cpus: int = 0
    memory_mb: int = 0  # the whole job's: --mem times its nodes, or --mem-per-cpu times CPUs
    submit_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None  # as Slurm says: a projection while running
    eligible_time: float | None = None
    comment: str = ""
    admin_comment: str = ""
    restart_cnt: int = 0
    requeue: bool = True
    req_nodes: tuple[str, ...] = ()
    exc_nodes: tuple[str, ...] = ()
    work_dir: str = ""
    exit_code: int = 0
    dependency: str = ""  # as Slurm shows it: "afterok:12(unfulfilled)", "" when none
    array_job_id: int = 0  # the array a task belongs to; 0 when not an array task
    array_task_id: int | None = None  # None on a record still holding several pending tasks
    array_tasks: str = ""  # the pending tasks such a record holds, as Slurm prints them
    array_max_tasks: int = 0  # the array's throttle (``--array=0-31%4``); 0 when none

    @property
    def ref(self) -> str:
        """How ``scontrol`` and ``scancel`` must name this job. An array task is always
        ``A_T``: the array's first record keeps the array's id and becomes its last task, and
        ``scontrol release A`` means every task of the array."""
        if self.array_job_id and self.array_task_id is not None:
            return f"{self.array_job_id}_{self.array_task_id}"
        return str(self.job_id)

    @property
    def unsplit_array(self) -> bool:
        """A pending array record that still holds several tasks (``123_[0-31]``): one job to
        Slurm, which a release starts as many times as it finds room."""
        return bool(self.array_tasks)

    @property
    def held(self) -> bool:
        """Held by an admin/operator or the user (priority 0 and a hold reason)."""
        return self.state in PENDING_STATES and self.priority == 0 and (
            self.reason.startswith("JobHeld") or "held" in self.reason.lower()
        )

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def in_run(self) -> bool:
        """Running or completing: its current run has not ended yet."""
        return self.state in IN_RUN_STATES

    @property
    def queued(self) -> bool:
        """Still in the queue: waiting, running, or completing (not yet ended)."""
        return self.state in QUEUED_STATES

    @property
    def ended_run(self) -> tuple[float, float] | None:
        """``(start, end)`` of the run of a job that has ended, by Slurm's clock; ``None`` if
        it is still queued or never ran (cancelled while pending: Slurm sets its start to its
        end)."""
        if self.queued or self.start_time is None or self.end_time is None:
            return None
        if self.state == "CANCELLED" and self.end_time <= self.start_time:
            return None
        return (self.start_time, self.end_time)

    @property
    def pending(self) -> bool:
        return self.state in PENDING_STATES


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    state: str  # base state, lower case: idle, mixed, allocated, down, error, unknown, future
    flags: frozenset[str] = frozenset()  # upper case: DRAIN, COMPLETING, NOT_RESPONDING, ...
    reason: str = ""
    gpus_total: int = 0
    gpus_used: int = 0
    gpu_type: str = ""
    gpus_used_indices: tuple[int, ...] = ()
    cpus: int = 0
    cpus_alloc: int = 0
    memory_mb: int = 0
    memory_alloc: int = 0  # MB held by jobs; 0 where memory is not consumable (CR_CPU)
    features: frozenset[str] = frozenset()
    partitions: tuple[str, ...] = ()

    @property
    def draining(self) -> bool:
        """Takes no new work but lets its jobs finish: drained or draining, failing,
        in maintenance or a reservation, a reboot asked for, or blocked."""
        return bool(self.flags & NO_NEW_WORK_FLAGS) or self.state in (
            "drain", "draining", "drained")

    @property
    def down(self) -> bool:
        """Runs nothing: down, in error, unknown or future, not answering, powered down or
        rebooting, or registered with a configuration Slurm refused."""
        return self.state in ("down", "error", "unknown", "future") or bool(
            self.flags & DOWN_FLAGS)


# Seconds after "now" a lifted requeue delay ends: a start is always in a later second than the
# revocation (which came before Slurm showed the job pending), with a second to spare for
# clocks of slurmctld and slurmd that differ by less than one.
REVOKE_MARGIN = 2
LIFTED_START = f"now+{REVOKE_MARGIN}"


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """A pending job's new GPU request: an elastic job resized (``elastic=1``). ``count`` is
    per node for a job that asked per node (``--gres=gpu:N``), else for the whole job;
    ``gpu_type`` is kept from its request. Slurm 22.05 records ``TresPerNode=gres/gpu:N``
    on a pending job but allocates the old count; ``gres:gpu:N`` takes effect on every
    version (SLURM_NOTES.md)."""

    count: int
    per_node: bool
    gpu_type: str | None = None

    def __post_init__(self) -> None:
        if not 0 < self.count < 2**16:
            raise ValueError(f"GPU count {self.count} out of range")
        if self.gpu_type is not None and not _GPU_TYPE.fullmatch(self.gpu_type):
            raise ValueError(f"bad GPU type {self.gpu_type!r}")

    @property
    def field(self) -> str:
        """The ``scontrol update`` field that sets it."""
        kind = "TresPerNode" if self.per_node else "TresPerJob"
        typed = f"{self.gpu_type}:" if self.gpu_type else ""
        return f"{kind}=gres:gpu:{typed}{self.count}"


_GPU_TYPE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")


@dataclass(frozen=True, slots=True)
class JobUpdate:
    """Fields ``scontrol update JobId=..`` may change for the controller.

    ``lift_delay`` sets ``StartTime`` to :data:`LIFTED_START`: after a requeue Slurm delays a
    job's eligibility by ~120 s (``CredExpire``), and this is how the controller makes it
    schedulable almost at once. Not ``now``: slurmd refuses a job's credential made in the
    same second as (or before) the one it revoked when the job's last run was stopped
    (``cred->ctime <= revoked``), and a job started then fails ("Job credential revoked")
    instead of running. ``start_now`` sets ``StartTime=now``, for a job whose last run is
    known to have stopped more than :data:`REVOKE_MARGIN` seconds ago, or whose lifted begin
    time has passed: any job update sets off a scheduling pass, and Slurm starts nothing
    on its own when a begin time passes (only at its next event, or its periodic passes
    30-60 s apart). ``req_nodes=()`` clears a pin (an empty tuple means "clear", ``None``
    means "leave alone"). ``gpus`` resizes a pending elastic job (:class:`GpuRequest`).
    """

    priority: int | None = None
    req_nodes: tuple[str, ...] | None = None
    exc_nodes: tuple[str, ...] | None = None
    lift_delay: bool = False
    start_now: bool = False
    gpus: GpuRequest | None = None

    def __post_init__(self) -> None:
        if self.priority is not None and not 0 <= self.priority < 2**32 - 1:
            raise ValueError(f"priority {self.priority} out of range")
        if self.lift_delay and self.start_now:
            raise ValueError("lift_delay and start_now both set StartTime")
        check_node_names((*(self.req_nodes or ()), *(self.exc_nodes or ())))
        if self.empty:
            raise ValueError("JobUpdate changes nothing")

    @property
    def empty(self) -> bool:
        return (
            self.priority is None
            and self.req_nodes is None
            and self.exc_nodes is None
            and not self.lift_delay
            and not self.start_now
            and self.gpus is None
        )

    @property
    def start_time(self) -> str | None:
        """The ``StartTime`` it sets, as Slurm's clients spell it; None: left alone."""
        return LIFTED_START if self.lift_delay else "now" if self.start_now else None


NodeAction = Literal["drain", "resume"]


class SlurmError(RuntimeError):
    """A Slurm call failed. ``failed_ids`` lists the job ids Slurm named in its complaint
    (a batched verb can fail for some ids and succeed for the rest), so the caller can split
    the batch and retry or drop exactly those."""

    def __init__(
        self,
        message: str,
        argv: Sequence[str] = (),
        returncode: int | None = None,
        stderr: str = "",
        failed_ids: tuple[int, ...] = (),
    ) -> None:
        self.argv = tuple(argv)
        self.returncode = returncode
        self.stderr = stderr
        self.failed_ids = failed_ids
        super().__init__(message)


class SlurmUnavailable(SlurmError):
    """slurmctld could not be reached even after the retries."""


def check_node_names(names: Collection[str]) -> None:
    """Node names end up as argv values; reject anything that is not a plain host name."""
    for n in names:
        if not _NODE_NAME.match(n):
            raise ValueError(f"bad node name {n!r}")


@runtime_checkable
class SlurmClient(Protocol):
    """Everything blox-slurm needs from Slurm. Verbs taking ``ids`` act on all of them in as
    few slurmctld round trips as the backend allows; ``calls`` counts the round trips made
    (benchmarks report it per scheduling round)."""

    name: str

    @property
    def calls(self) -> int:
        """slurmctld round trips made so far (each subprocess or RPC, retries included)."""
        ...

    def version(self) -> str: ...

    def ping(self) -> bool: ...

    def list_jobs(
        self, partitions: Collection[str] | None = None, *, finished: bool = False
    ) -> list[SlurmJob]:
        """Jobs in ``partitions`` (all when None); finished ones only if ``finished``."""
        ...

    def get_job(self, job_id: int) -> SlurmJob | None: ...

    def list_nodes(self) -> list[SlurmNode]: ...

    def hold(self, ids: Sequence[int]) -> None: ...

    def release(self, ids: Sequence[int]) -> None: ...

    def requeue(self, ids: Sequence[int]) -> None: ...

    def requeue_hold(self, ids: Sequence[int]) -> None: ...

    def update_jobs(self, ids: Sequence[int], update: JobUpdate) -> None: ...

    def signal(self, ids: Sequence[int], signal: str) -> None:
        """Send ``signal`` (e.g. ``USR1``) to the batch script and all steps of the jobs."""
        ...

    def cancel(self, ids: Sequence[int]) -> None: ...

    def update_nodes(self, names: Sequence[str], action: NodeAction, reason: str = "") -> None: ...

    def split_array(self, array_job_id: int, tasks: Sequence[int]) -> None:
        """Give each of these pending tasks of an array its own job record, held (see
        :mod:`blox_slurm.slurm.arrays`)."""
        ...

    def submit(self, argv: Sequence[str], script: str | None = None,
               as_user: str | None = None) -> int:
        """``sbatch`` with ``argv`` options (and ``script`` on stdin), as ``as_user`` when
        given (the caller must be root); returns the job id."""
        ...
