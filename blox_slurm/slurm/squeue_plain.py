"""``squeue``'s plain format, read so that no text a user can type breaks a record (pure).

Why not ``squeue --json``: at 20,000 jobs it prints 62 MB (22.05) to 151 MB (24.11), takes
3.6 s (22.05) to 12 s (24.11) and its process peaks at 0.9 GB (22.05) to 3 GB (24.11) on the
head node; this format prints 3.6 MB in 0.2 s from a 45 MB process on every version.

**The separator.** ``-O``/``-o`` print each field as it is, with no escaping, and a job's
name, comment, account and working directory are free text: a comma, a ``|``, a tab or a
newline are all ordinary there. So every field ends with a *token*, 12 random letters drawn
once per backend, and a record with a second one: nobody can type what they cannot know, and
the tokens never appear in an argv (``ps`` shows argvs to every user): the format reaches
``squeue`` through its environment (``SQUEUE_FORMAT2``), which only its owner and root can
read. A record that does not split into exactly the expected fields is a
:class:`~.parse.MalformedField`, never a shifted record.

**Times** come as epoch seconds (``SLURM_TIME_FORMAT=%s``), as the JSON gives them, not as
local time (which is ambiguous for an hour every autumn); ``--noconvert`` keeps memory in MB
(``1500M`` would otherwise print as ``1.46G``).

What this format does not carry, and where it comes from instead (see
:mod:`~.queue_read`): the GPU indices a running job holds on each node (``gres_detail``,
only in ``scontrol -d show job``), excluded nodes on 22.05 (``-O`` has no such field there:
``-o %x``), and the reason *code* of a job for which Slurm also keeps a description
(``Reason`` prints the description instead: ``job requeued in held state`` for the code
``JobHeldUser``).
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property, lru_cache
from types import MappingProxyType

from .client import GresAlloc
from .parse import (
    MISSING,
    MalformedField,
    ParsedJob,
    array_fields,
    make_parsed_job,
    mem_per_gpu,
    nodes_of,
    parse_mem_mb,
    requested,
)

#: The fields read, in order, as ``(our name, squeue -O name)``. The free-text ones come
#: last only for readability of a raw record; the tokens make any order safe.
FIELDS: tuple[tuple[str, str], ...] = (
    ("job_id", "jobid"),
    ("array_job_id", "arrayjobid"),
    ("array_task", "arraytaskid"),
    ("state", "state"),
    ("priority", "prioritylong"),
    ("tres_per_job", "tres-per-job"),
    ("tres_per_node", "tres-per-node"),
    ("tres_per_task", "tres-per-task"),
    ("num_nodes", "numnodes"),
    ("tasks", "numtasks"),
    ("nodes", "nodelist"),
    ("cpus", "numcpus"),
    ("mem_per_tres", "mem-per-tres"),
    ("min_memory", "minmemory"),
    ("tres", "tres-alloc"),
    ("submit_time", "submittime"),
    ("start_time", "starttime"),
    ("end_time", "endtime"),
    ("eligible_time", "eligibletime"),
    ("restarts", "restartcnt"),
    ("requeue", "requeue"),
    ("req_nodes", "reqnodes"),
    ("exc_nodes", "excnodes"),
    ("exit_code", "exit_code"),
    ("dependency", "dependency"),
    ("user", "username"),
    ("partition", "partition"),
    ("account", "account"),
    ("reason", "reason"),
    ("name", "name"),
    ("comment", "comment"),
    ("admin_comment", "admin_comment"),
    ("work_dir", "workdir"),
)
_NAMES = tuple(name for name, _ in FIELDS)
#: What squeue prints for a field that is not set.
_UNSET = frozenset({"", "N/A", "(null)", "NONE", "Unknown"})
#: The GPUs a job holds until its detail is read (:mod:`~.queue_read`): one shared empty map.
_NO_GPUS: Mapping[str, GresAlloc] = MappingProxyType({})


#: Letters in a token: 52**12 (about 2**68) values to guess, and 33 of them on every record.
TOKEN_LETTERS = 12


def _token() -> str:
    return "".join(secrets.choice(string.ascii_letters) for _ in range(TOKEN_LETTERS))


@dataclass(frozen=True)
class PlainFormat:
    """One backend's ``squeue -O`` format: the fields it reads and its two secret tokens.
    ``exc_nodes=False`` for a Slurm whose ``-O`` cannot print excluded nodes (22.05)."""

    exc_nodes: bool = True
    field_end: str = ""
    record_end: str = ""

    @classmethod
    def new(cls, exc_nodes: bool = True) -> PlainFormat:
        return cls(exc_nodes, _token(), _token())

    @cached_property
    def fields(self) -> tuple[str, ...]:
        return tuple(n for n in _NAMES if self.exc_nodes or n != "exc_nodes")

    @cached_property
    def spec(self) -> str:
        """The ``-O`` value: ``jobid:TOKEN,...,workdir:END`` (a suffix after ``:``)."""
        wanted = [(n, o) for n, o in FIELDS if n in self.fields]
        ends = [self.field_end] * (len(wanted) - 1) + [self.record_end]
        return ",".join(f"{o}:{end}" for (_, o), end in zip(wanted, ends, strict=True))

    def env(self) -> dict[str, str]:
        """The environment that makes a bare ``squeue -h`` print this format."""
        return {"SQUEUE_FORMAT2": self.spec, "SLURM_TIME_FORMAT": "%s"}

    def records(self, out: str) -> Iterator[str]:
        """Each record of ``squeue``'s output (its fields still joined by the token)."""
        chunks = out.split(self.record_end + "\n")
        if chunks[-1].strip():
            raise MalformedField("(record end)", chunks[-1][-80:], "squeue's last record")
        yield from chunks[:-1]

    def values(self, record: str) -> dict[str, str]:
        """One record's fields by name."""
        values = record.split(self.field_end)
        if len(values) != len(self.fields):
            raise MalformedField(
                "(record)",
                f"{len(values)} fields instead of {len(self.fields)}",
                f"squeue record {record[:40]!r}",
            )
        return dict(zip(self.fields, values, strict=True))


def _int(f: Mapping[str, str], key: str, default: int = 0) -> int:
    v = f[key]
    if v in _UNSET:
        return default
    try:
        return int(v)
    except ValueError:
        raise MalformedField(key, v) from None


def _time(f: Mapping[str, str], key: str) -> float | None:
    t = _int(f, key)
    return float(t) if t > 0 else None


def _text(f: Mapping[str, str], key: str, default: str = "") -> str:
    """A text field: ``(null)`` is how squeue prints one that was never set (a comment of
    exactly ``(null)`` reads as none)."""
    v = f[key]
    return default if v == "(null)" or v == "" else v


def _opt(f: Mapping[str, str], key: str) -> str:
    """A structured field (TRES, node list, dependency): unset in any of squeue's words."""
    v = f[key]
    return "" if v in _UNSET else v


def _exit_code(f: Mapping[str, str]) -> int:
    """The exit code: 22.05 prints the raw wait status (``768`` for ``exit 3``), later
    releases ``3:0`` (code, signal)."""
    code, colon, _ = f["exit_code"].partition(":")
    if colon:
        return _int({"exit_code": code}, "exit_code")
    return (_int(f, "exit_code") >> 8) & 0xFF


@lru_cache(maxsize=1024)
def tres_memory(tres: str) -> int:
    """MB of ``mem=`` in a TRES string (``cpu=2,mem=1500M,node=1``); 0 without one."""
    for item in tres.split(","):
        key, _, value = item.partition("=")
        if key == "mem":
            return parse_mem_mb(value)
    return 0


def _memory(f: Mapping[str, str], num_gpus: int, nodes: int, cpus: int) -> int:
    """The job's memory as the JSON path computes it (:func:`~.parse.job_memory`): per GPU,
    else per node times nodes, else per CPU times CPUs. ``MinMemory`` does not say whether it
    is per node or per CPU; the job's TRES (its whole memory) tells them apart, and where
    both products are equal so is the answer."""
    per_gpu = mem_per_gpu(_opt(f, "mem_per_tres"))
    if per_gpu and num_gpus:
        return per_gpu * num_gpus
    text = _opt(f, "min_memory")
    per = parse_mem_mb(text) if text else 0
    if per * nodes == tres_memory(_opt(f, "tres")):
        return per * nodes
    return per * cpus


def job_from_plain(f: Mapping[str, str], exc_nodes: str | None = None) -> ParsedJob:
    """One record (:meth:`PlainFormat.values`) as the JSON path would read the same job.
    ``exc_nodes`` when the format has none (22.05's, read with ``-o %x``). The reason is
    squeue's (a description where Slurm has one): :mod:`~.queue_read` turns it into the
    code. :class:`MalformedField` names the field that is wrong."""
    job_id = _int(f, "job_id")
    if job_id <= 0:
        raise MalformedField("job_id", f["job_id"] or MISSING)
    try:
        return _fields(f, job_id, _opt(f, "exc_nodes") if exc_nodes is None else exc_nodes)
    except MalformedField as e:
        raise MalformedField(e.field, e.value, f"job {job_id}") from None
    except ValueError as e:
        raise MalformedField("nodes/gres/memory", str(e), f"job {job_id}") from None


def _fields(f: Mapping[str, str], job_id: int, exc: str) -> ParsedJob:
    node_count = _int(f, "num_nodes", 1)
    num_gpus, gpu_type, gpu_nodes = requested(
        _opt(f, "tres_per_job"),
        _opt(f, "tres_per_node"),
        _opt(f, "tres_per_task"),
        node_count,
        _int(f, "tasks", 1),
    )
    cpus = _int(f, "cpus")
    task = _opt(f, "array_task")
    throttle = task.partition("%")[2]
    return make_parsed_job(
        job_id=job_id,
        name=_text(f, "name"),
        user=_text(f, "user"),
        account=_text(f, "account"),
        partition=_text(f, "partition"),
        state=f["state"],
        reason=_text(f, "reason", "None"),
        priority=_int(f, "priority"),
        num_gpus=num_gpus,
        gpu_type=gpu_type,
        num_nodes=node_count,
        nodes=nodes_of(_opt(f, "nodes")),
        gpu_alloc=_NO_GPUS,
        cpus=cpus,
        memory_mb=_memory(f, num_gpus, node_count, cpus),
        submit_time=_time(f, "submit_time"),
        start_time=_time(f, "start_time"),
        end_time=_time(f, "end_time"),
        eligible_time=_time(f, "eligible_time"),
        comment=_text(f, "comment"),
        admin_comment=_text(f, "admin_comment"),
        restart_cnt=_int(f, "restarts"),
        requeue=f["requeue"] != "0",
        req_nodes=nodes_of(_opt(f, "req_nodes")),
        exc_nodes=nodes_of(exc),
        work_dir=_text(f, "work_dir"),
        exit_code=_exit_code(f),
        dependency=_opt(f, "dependency"),
        gpu_nodes=gpu_nodes,
        # not an array task: squeue prints the job's own id as its array's. A task's id
        # comes as the one task it holds, which array_fields reads as JSON's task id.
        **array_fields(
            _int(f, "array_job_id") if task else 0,
            None,
            task,
            int(throttle) if throttle.isdigit() else 0,
        ),
    )
