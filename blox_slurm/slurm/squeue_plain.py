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
        return dict(zip(self.fields, values, strict=False))  # counted above


#: A text field as read: squeue prints one never set as ``(null)`` (so a comment of exactly
#: ``(null)`` reads as none), or nothing.
_TEXT = {"(null)": "", "": ""}
#: The reason as read: ``None`` where squeue printed none.
_REASON = {"(null)": "None", "": "None"}
#: A structured field (TRES, node list, dependency) as read: unset in any of squeue's words.
_OPT = dict.fromkeys(_UNSET, "")
#: The array fields of a job that is not an array task (:func:`~.parse.array_fields`).
_NOT_AN_ARRAY = array_fields(0, None, "", 0)


def _int(v: str, key: str, default: int = 0) -> int:
    if v in _UNSET:
        return default
    try:
        return int(v)
    except ValueError:
        raise MalformedField(key, v) from None


def _time(v: str, key: str) -> float | None:
    """A time in epoch seconds; None unset or not after the epoch (``0``: not yet known)."""
    if v in _UNSET:
        return None
    try:
        t = int(v)
    except ValueError:
        raise MalformedField(key, v) from None
    return float(t) if t > 0 else None


@lru_cache(maxsize=1024)
def _exit_code(v: str) -> int:
    """The exit code: 22.05 prints the raw wait status (``768`` for ``exit 3``), later
    releases ``3:0`` (code, signal). Cached: a queue holds a few distinct codes."""
    code, colon, _ = v.partition(":")
    if colon:
        return _int(code, "exit_code")
    return (_int(v, "exit_code") >> 8) & 0xFF


@lru_cache(maxsize=1024)
def _nodes(v: str) -> tuple[str, ...]:
    """A node list field (allocated, required, excluded). Cached: most jobs print none."""
    return nodes_of(_OPT.get(v, v))


@lru_cache(maxsize=1024)
def tres_memory(tres: str) -> int:
    """MB of ``mem=`` in a TRES string (``cpu=2,mem=1500M,node=1``); 0 without one."""
    for item in tres.split(","):
        key, _, value = item.partition("=")
        if key == "mem":
            return parse_mem_mb(value)
    return 0


#: What a job asks for: (node count, GPUs, GPU type, the nodes its GPU request binds it to,
#: CPUs, memory in MB).
_Request = tuple[int, int, str, int, int, int]


@lru_cache(maxsize=1024)
def _request(
    per_job: str,
    per_node: str,
    per_task: str,
    num_nodes: str,
    tasks: str,
    cpus: str,
    mem_per_tres: str,
    min_memory: str,
    tres: str,
) -> _Request:
    """What a job asks for, from the nine fields that say it. Cached on their text: the
    jobs of a queue ask in a few shapes, and these are a dozen calls of a record's reading
    (a first round reads 20,000 records)."""
    node_count = _int(num_nodes, "num_nodes", 1)
    num_gpus, gpu_type, gpu_nodes = requested(
        _OPT.get(per_job, per_job),
        _OPT.get(per_node, per_node),
        _OPT.get(per_task, per_task),
        node_count,
        _int(tasks, "tasks", 1),
    )
    cpu_count = _int(cpus, "cpus")
    memory = _memory(
        _OPT.get(mem_per_tres, mem_per_tres),
        _OPT.get(min_memory, min_memory),
        _OPT.get(tres, tres),
        num_gpus,
        node_count,
        cpu_count,
    )
    return node_count, num_gpus, gpu_type, gpu_nodes, cpu_count, memory


def _memory(
    mem_per_tres: str, min_memory: str, tres: str, num_gpus: int, nodes: int, cpus: int
) -> int:
    """The job's memory as the JSON path computes it (:func:`~.parse.job_memory`): per GPU,
    else per node times nodes, else per CPU times CPUs. ``MinMemory`` does not say whether it
    is per node or per CPU; the job's TRES (its whole memory) tells them apart, and where
    both products are equal so is the answer."""
    per_gpu = mem_per_gpu(mem_per_tres)
    if per_gpu and num_gpus:
        return per_gpu * num_gpus
    per = parse_mem_mb(min_memory) if min_memory else 0
    if per * nodes == tres_memory(tres):
        return per * nodes
    return per * cpus


@lru_cache(maxsize=1024)
def _array(array_job_id: str, task: str) -> Mapping[str, object]:
    """The array fields of an array task's record (``task`` set: ``5``, ``3-9%3``). A
    task's id comes as the one task it holds, which array_fields reads as JSON's task id.
    Cached, and only ever unpacked into a record."""
    throttle = task.partition("%")[2]
    return array_fields(
        _int(array_job_id, "array_job_id"), None, task, int(throttle) if throttle.isdigit() else 0
    )


def job_from_plain(f: Mapping[str, str], exc_nodes: str | None = None) -> ParsedJob:
    """One record (:meth:`PlainFormat.values`) as the JSON path would read the same job.
    ``exc_nodes`` when the format has none (22.05's, read with ``-o %x``). The reason is
    squeue's (a description where Slurm has one): :mod:`~.queue_read` turns it into the
    code. :class:`MalformedField` names the field that is wrong."""
    job_id = _int(f["job_id"], "job_id")
    if job_id <= 0:
        raise MalformedField("job_id", f["job_id"] or MISSING)
    try:
        return _fields(f, job_id, exc_nodes)
    except MalformedField as e:
        raise MalformedField(e.field, e.value, f"job {job_id}") from None
    except ValueError as e:
        raise MalformedField("nodes/gres/memory", str(e), f"job {job_id}") from None


def _fields(f: Mapping[str, str], job_id: int, exc: str | None) -> ParsedJob:
    """The record's fields, each read once: the request through :func:`_request`, node
    lists and exit codes through caches, text through a map. A first round reads every
    record (20,000 at 12 us each were its largest cost beside Slurm's, a call a field; 10
    us so, ``benchmarks/bench_parse_plain.py``)."""
    node_count, num_gpus, gpu_type, gpu_nodes, cpus, memory = _request(
        f["tres_per_job"],
        f["tres_per_node"],
        f["tres_per_task"],
        f["num_nodes"],
        f["tasks"],
        f["cpus"],
        f["mem_per_tres"],
        f["min_memory"],
        f["tres"],
    )
    text, task, dependency = _TEXT.get, f["array_task"], f["dependency"]
    return make_parsed_job(
        job_id=job_id,
        name=text(f["name"], f["name"]),
        user=text(f["user"], f["user"]),
        account=text(f["account"], f["account"]),
        partition=text(f["partition"], f["partition"]),
        state=f["state"],
        reason=_REASON.get(f["reason"], f["reason"]),
        priority=_int(f["priority"], "priority"),
        num_gpus=num_gpus,
        gpu_type=gpu_type,
        num_nodes=node_count,
        nodes=_nodes(f["nodes"]),
        gpu_alloc=_NO_GPUS,
        cpus=cpus,
        memory_mb=memory,
        submit_time=_time(f["submit_time"], "submit_time"),
        start_time=_time(f["start_time"], "start_time"),
        end_time=_time(f["end_time"], "end_time"),
        eligible_time=_time(f["eligible_time"], "eligible_time"),
        comment=text(f["comment"], f["comment"]),
        admin_comment=text(f["admin_comment"], f["admin_comment"]),
        restart_cnt=_int(f["restarts"], "restarts"),
        requeue=f["requeue"] != "0",
        req_nodes=_nodes(f["req_nodes"]),
        exc_nodes=_nodes(f["exc_nodes"]) if exc is None else nodes_of(exc),
        work_dir=text(f["work_dir"], f["work_dir"]),
        exit_code=_exit_code(f["exit_code"]),
        dependency=_OPT.get(dependency, dependency),
        gpu_nodes=gpu_nodes,
        # not an array task: squeue prints the job's own id as its array's
        **(_NOT_AN_ARRAY if task in _UNSET else _array(f["array_job_id"], task)),
    )
