"""Pure parsers from Slurm's text and JSON into :mod:`blox_slurm.slurm.client` records.

No subprocesses here, so every format quirk is unit-tested from output recorded on every
supported version (22.05's openapi v0.0.38 to 26.05's data_parser v0.0.45; what differs is
listed in :mod:`~blox_slurm.slurm.dialect`). Bad JSON input raises :class:`MalformedField`
naming the field, never a bare ``KeyError``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from ..core.records import maker
from .client import GresAlloc, SlurmJob, SlurmNode

# ---------------------------------------------------------------------------- hostlists


@lru_cache(maxsize=4096)
def expand_hostlist(expr: str) -> tuple[str, ...]:
    """``node[1,3-4],gpu07`` -> ``(node1, node3, node4, gpu07)``; keeps zero padding
    (``n[08-10]`` -> n08 n09 n10) and expands several bracket groups in one name. Cached:
    a queue of 20,000 jobs names a few dozen node lists."""
    return tuple(name for part in _split_top(expr, ",") if part for name in _expand_one(part))


def _expand_one(name: str) -> Iterator[str]:
    m = re.search(r"\[([^\]]*)\]", name)
    if m is None:
        yield name
        return
    head, tail = name[: m.start()], name[m.end() :]
    for item in m.group(1).split(","):
        lo, _, hi = item.partition("-")
        width = len(lo)
        for i in range(int(lo), int(hi or lo) + 1):
            yield from _expand_one(f"{head}{i:0{width}d}{tail}")


def _split_top(text: str, sep: str) -> list[str]:
    """Split on ``sep`` outside brackets and parentheses."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def parse_index_list(text: str) -> tuple[int, ...]:
    """``0-2,5`` -> (0, 1, 2, 5); ``N/A`` or empty -> ()."""
    if not text or text == "N/A":
        return ()
    out: list[int] = []
    for item in text.split(","):
        lo, _, hi = item.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)


# ---------------------------------------------------------------------------- GRES / TRES

_GRES = re.compile(
    r"^(?:gres[:/])?gpu(?::(?P<type>[^:(]+?))?(?::(?P<count>\d+))?"
    r"(?:\((?:[^)]*?)IDX:(?P<idx>[^)]*)\))?(?:\(S:[^)]*\))?$"
)


@lru_cache(maxsize=1024)
def parse_gres(text: str) -> GresAlloc | None:
    """The GPU entry of one node's GRES string: ``gpu:4(IDX:2-5)``, ``gpu:v100:2(IDX:0,2)``,
    ``gpu:v100:4`` (a configured count), ``gres:gpu:2`` (a request). None if no GPU entry.
    Cached: every job of a queue asks with one of a few strings."""
    for entry in _split_top(text, ","):
        m = _GRES.match(entry)
        if m is None:
            continue
        t = m["type"] or ""
        if t.isdigit() and m["count"] is None:  # "gpu:4": the number is a count, not a type
            t, count = "", int(t)
        else:
            count = int(m["count"]) if m["count"] is not None else 1
        return GresAlloc(t, count, parse_index_list(m["idx"] or ""))
    return None


@lru_cache(maxsize=1024)
def parse_mem_mb(text: str) -> int:
    """``32G`` / ``512M`` / ``1T`` / ``1024`` (MB) -> MB."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGTP]?)", text.strip().upper())
    if m is None:
        raise ValueError(f"bad memory size {text!r}")
    scale = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}[m[2]]
    return int(float(m[1]) * scale)


def requested_gpus(
    per_job: str, per_node: str, per_task: str, nodes: int, tasks: int
) -> tuple[int, str]:
    """Total GPUs and type a job asked for, from Slurm's ``tres_per_*`` strings
    (``--gpus=5`` -> per job, ``--gres=gpu:2`` / ``--gpus-per-node`` -> per node,
    ``--gpus-per-task`` -> per task)."""
    total, gpu_type, _ = requested(per_job, per_node, per_task, nodes, tasks)
    return total, gpu_type


@lru_cache(maxsize=1024)
def requested(
    per_job: str, per_node: str, per_task: str, nodes: int, tasks: int
) -> tuple[int, str, int]:
    """:func:`requested_gpus` plus the node count the request binds the job to: for GPUs
    *per node* (``--gres=gpu:N``, ``--gpus-per-node``) Slurm hands out N on EVERY node of
    the allocation, so such a job must run on exactly its requested ``nodes`` (1 unless
    ``-N``); per job or per task the total is fixed whatever the node count (0 = free)."""
    for text, times, kind in ((per_job, 1, "job"), (per_node, max(nodes, 1), "node"),
                              (per_task, max(tasks, 1), "task")):
        g = parse_gres(text) if text else None
        if g is not None:
            return g.count * times, g.type, max(nodes, 1) if kind == "node" else 0
    return 0, "", 0


@dataclass(frozen=True, slots=True)
class ParsedJob(SlurmJob):
    """A :class:`SlurmJob` as read from Slurm, with what its GPU request says about nodes.

    ``gpu_nodes``: the exact node count a GPUs-per-node request binds the job to (its
    ``NumNodes``), 0 when it asked per job or per task (``--gpus=N``), whose total Slurm keeps
    exact over however many nodes it is pinned to. The snapshot turns it into the ``nodes``
    hint placements honour (:mod:`blox_slurm.slurm.snapshot`).
    """

    gpu_nodes: int = 0


#: ``ParsedJob(**fields)`` for the parsers' loops: 2.3 us a record instead of 3.9 (see
#: :mod:`blox_slurm.core.records`), 20,000 records in a first round's queue read.
make_parsed_job = maker(ParsedJob)


# ---------------------------------------------------------------------------- JSON records


class MalformedField(ValueError):
    """A field of one JSON record is missing or not what its name promises. The backend turns
    it into a :class:`~blox_slurm.slurm.client.SlurmError` naming the command and the Slurm
    version; parsers raise nothing else on bad input."""

    def __init__(self, field: str, value: object, record: str = "") -> None:
        self.field, self.value, self.record = field, value, record
        where = f" of {record}" if record else ""
        shown = "missing" if value is MISSING else f"malformed: {value!r:.80}"
        super().__init__(f"field `{field}`{where} is {shown}")


#: The value of a field that is not there at all (told apart from a malformed ``None``).
MISSING = object()


def _number(v: Any, default: int) -> int:
    """A number as v0.0.38 gives it, or wrapped as ``{"set", "infinite", "number"}`` later."""
    if isinstance(v, dict):
        if not v.get("set", True) or v.get("infinite"):
            return default
        v = v.get("number", default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise TypeError(v)
    return int(v)


def _num(d: Mapping[str, Any], key: str, default: int = 0) -> int:
    try:
        return _number(d.get(key), default)
    except (TypeError, ValueError):
        raise MalformedField(key, d.get(key)) from None


def _time(d: Mapping[str, Any], key: str) -> float | None:
    t = _num(d, key)
    return float(t) if t > 0 else None


def _text(d: Mapping[str, Any], key: str, default: str = "") -> str:
    v = d.get(key)
    if v is None or v == "":
        return default
    if isinstance(v, str | int) and not isinstance(v, bool):
        return str(v)
    raise MalformedField(key, v)


def _words(d: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """A list of names: a JSON list (v0.0.39+) or a comma-separated string (v0.0.38)."""
    v = d.get(key)
    if v is None:
        return ()
    if isinstance(v, str):
        items = v.split(",")
    elif isinstance(v, list) and all(isinstance(x, str) for x in v):
        items = v
    else:
        raise MalformedField(key, v)
    return tuple(x for x in (i.strip() for i in items) if x and x != "(null)")


def _required(d: Mapping[str, Any], key: str) -> Any:
    if key not in d or d[key] is None:
        raise MalformedField(key, MISSING)
    return d[key]


#: Job state flags in the order Slurm's own ``job_state_string()`` lets them win over the base
#: state, so a v0.0.39+ state list reads as the one word 22.05 printed (``["COMPLETED",
#: "COMPLETING"]`` -> ``COMPLETING``, ``["PENDING", "REQUEUE_HOLD"]`` -> ``REQUEUE_HOLD``).
_JOB_FLAG_ORDER = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED",
                   "REQUEUE_FED", "REQUEUE_HOLD", "SPECIAL_EXIT", "STOPPED", "REVOKED",
                   "RESV_DEL_HOLD", "SIGNALING")


def _job_state(d: Mapping[str, Any]) -> str:
    v = _required(d, "job_state")
    if isinstance(v, str) and v:
        return v.upper()
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        words = [x.upper() for x in v]
        return next((f for f in _JOB_FLAG_ORDER if f in words), words[0])
    raise MalformedField("job_state", v)


#: Slurm's base node states (``NODE_STATE_BASE``); every other state word is a flag.
NODE_BASE_STATES = frozenset({"UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED",
                              "FUTURE"})


def _node_state(d: Mapping[str, Any]) -> tuple[str, frozenset[str]]:
    """(base state in lower case, flags in upper case). v0.0.38: ``"mixed"`` plus a
    ``state_flags`` list; v0.0.39+: one list of base state and flags (``["IDLE","DRAIN"]``)."""
    v = _required(d, "state")
    words = v.split("+") if isinstance(v, str) else v
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise MalformedField("state", v)
    words = [w.upper() for w in words] + [w.upper() for w in _words(d, "state_flags")]
    base = [w for w in words if w in NODE_BASE_STATES]
    if len(base) != 1:
        raise MalformedField("state", v)
    return base[0].lower(), frozenset(w for w in words if w not in NODE_BASE_STATES)


def _exit_status(d: Mapping[str, Any]) -> int:
    """v0.0.38 gives the raw wait status (75 << 8 for ``exit 75``), later versions a dict."""
    v = d.get("exit_code")
    if isinstance(v, dict):
        return _num(v, "return_code")
    return (_num(d, "exit_code") >> 8) & 0xFF


def nodes_of(expr: str) -> tuple[str, ...]:
    return expand_hostlist(expr) if expr and expr != "(null)" else ()


def job_from_json(j: Mapping[str, Any]) -> SlurmJob:
    """One entry of ``squeue --json``'s ``jobs`` list (the same fields on every supported
    version). :class:`MalformedField` names the field that is missing or malformed."""
    job_id = _num(j, "job_id")
    if job_id <= 0:
        raise MalformedField("job_id", j.get("job_id", MISSING))
    try:
        return _job_fields(j, job_id)
    except MalformedField as e:
        raise MalformedField(e.field, e.value, f"job {job_id}") from None
    except ValueError as e:  # a hostlist or GRES string Slurm would never print
        raise MalformedField("nodes/gres", str(e), f"job {job_id}") from None


def _job_fields(j: Mapping[str, Any], job_id: int) -> ParsedJob:
    nodes = nodes_of(_text(j, "nodes"))
    node_count = _num(j, "node_count", 1)
    num_gpus, gpu_type, gpu_nodes = requested(
        _text(j, "tres_per_job"), _text(j, "tres_per_node"), _text(j, "tres_per_task"),
        node_count, _num(j, "tasks", 1),
    )
    alloc = gres_by_node(nodes, [str(x) for x in j.get("gres_detail") or []])
    if alloc:
        num_gpus = sum(a.count for a in alloc.values())
    cpus = _num(j, "cpus")
    return make_parsed_job(
        job_id=job_id,
        name=_text(j, "name"),
        user=_text(j, "user_name"),
        account=_text(j, "account"),
        partition=_text(j, "partition"),
        state=_job_state(j),
        reason=_text(j, "state_reason", "None"),
        priority=_num(j, "priority"),
        num_gpus=num_gpus,
        gpu_type=gpu_type,
        num_nodes=node_count,
        nodes=nodes,
        gpu_alloc=alloc,
        cpus=cpus,
        memory_mb=(mem_per_gpu(_text(j, "memory_per_tres")) * num_gpus
                   or _num(j, "memory_per_node") * node_count
                   or _num(j, "memory_per_cpu") * cpus),
        submit_time=_time(j, "submit_time"),
        start_time=_time(j, "start_time"),
        end_time=_end_time(j),
        eligible_time=_time(j, "eligible_time"),
        comment=_text(j, "comment"),
        admin_comment=_text(j, "admin_comment"),
        restart_cnt=_num(j, "restart_cnt"),
        requeue=bool(j.get("requeue", True)),
        req_nodes=nodes_of(_text(j, "required_nodes")),
        exc_nodes=nodes_of(_text(j, "excluded_nodes")),
        work_dir=_text(j, "current_working_directory"),
        exit_code=_exit_status(j),
        dependency=_text(j, "dependency"),
        gpu_nodes=gpu_nodes,
        **array_fields(_num(j, "array_job_id"), _optional_num(j, "array_task_id"),
                 _text(j, "array_task_string"), _num(j, "array_max_tasks")),
    )


def _end_time(j: Mapping[str, Any]) -> float | None:
    """When the job's run ends or ended. None for a job with no time limit whose end lies
    ahead: Slurm fills in a placeholder there (its start plus a year while it runs, a stale
    value while it waits), which ``squeue`` prints as ``NONE``."""
    end = _time(j, "end_time")
    limit = j.get("time_limit")
    unlimited = limit is None or (isinstance(limit, dict) and (
        bool(limit.get("infinite")) or not limit.get("set", True)))
    return None if end is not None and unlimited and end > time.time() else end


def mem_per_gpu(text: str) -> int:
    """MB per GPU from Slurm's memory-per-TRES (``--mem-per-gpu``: ``gres:gpu:3072``,
    ``gres/gpu:3072``, read as a GRES count); 0 when it gives none. With it, Slurm still
    shows a default ``memory_per_cpu``: the per-GPU figure is the one it allocates."""
    g = parse_gres(text) if text else None
    return g.count if g is not None else 0


def _optional_num(d: Mapping[str, Any], key: str) -> int | None:
    """A number that may be unset: ``null`` (v0.0.38) or ``{"set": false}`` (later)."""
    return None if d.get(key) is None else (n if (n := _num(d, key, -1)) >= 0 else None)


def array_fields(array_job_id: int, task_id: int | None, pending: str, throttle: int
           ) -> dict[str, Any]:
    """The array fields of a job record. Slurm prints the pending tasks of a record that
    still holds several as ``0-7%2`` (the throttle after ``%``); a record holding one
    pending task is that task (``--array=5`` lists ``5`` with no task id), so it gets the
    task id and no pending list. The list is not checked here: one that cannot be read (cut
    short by ``SLURM_BITSTR_LEN``) leaves that array unsplit (see
    :func:`blox_slurm.slurm.arrays.splits`), it does not fail the whole queue read."""
    tasks = pending.split("%", 1)[0]
    if task_id is None and tasks.isdigit():
        task_id, tasks = int(tasks), ""
    return {"array_job_id": array_job_id, "array_task_id": task_id, "array_tasks": tasks,
            "array_max_tasks": throttle}


def gres_by_node(nodes: tuple[str, ...], details: list[str]) -> Mapping[str, GresAlloc]:
    """``gres_detail`` has one entry per allocated node, in the node list's order."""
    out = {}
    for node, detail in zip(nodes, details, strict=False):
        g = parse_gres(detail)
        if g is not None and g.count:
            out[node] = g
    return MappingProxyType(out)


def node_from_json(n: Mapping[str, Any]) -> SlurmNode:
    """One entry of a ``nodes`` list: 22.05's ``sinfo --json`` or 23.02+'s ``scontrol show
    nodes --json`` (one entry per node; the same field names, states and features shaped per
    :mod:`~blox_slurm.slurm.dialect`). :class:`MalformedField` names what is wrong."""
    name = _required(n, "name")
    if not isinstance(name, str) or not name:
        raise MalformedField("name", name)
    try:
        return _node_fields(n, name)
    except MalformedField as e:
        raise MalformedField(e.field, e.value, f"node {name}") from None
    except ValueError as e:
        raise MalformedField("gres", str(e), f"node {name}") from None


def _node_fields(n: Mapping[str, Any], name: str) -> SlurmNode:
    total = parse_gres(_text(n, "gres"))
    used = parse_gres(_text(n, "gres_used"))
    state, flags = _node_state(n)
    reason = n.get("reason")
    return SlurmNode(
        name=name,
        state=state,
        flags=flags,
        reason=_text(reason, "description") if isinstance(reason, dict) else _text(n, "reason"),
        gpus_total=total.count if total else 0,
        gpus_used=used.count if used else 0,
        gpu_type=(total.type if total else "") or "",
        gpus_used_indices=used.indices if used else (),
        cpus=_num(n, "cpus"),
        cpus_alloc=_num(n, "alloc_cpus"),
        memory_mb=_num(n, "real_memory"),
        memory_alloc=_num(n, "alloc_memory"),
        features=frozenset(_words(n, "active_features") or _words(n, "features")),
        partitions=_words(n, "partitions"),
    )


# ---------------------------------------------------------------------------- scontrol -o

_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_:/]*)=(.*)$", re.S)


def scontrol_pairs(line: str) -> list[tuple[str, str]]:
    """``Key=Value`` pairs of one ``scontrol show ... -o`` line, in order, repeats kept.

    A value may contain spaces (``OS=Linux 6.1 #1 SMP``): a token without ``=`` continues the
    previous value. A user comment that itself looks like ``a=b c=d`` is ambiguous in this
    format, which is why the JSON path is the primary one.
    """
    pairs: list[tuple[str, str]] = []
    for token in line.strip().split(" "):
        m = _KEY.match(token)
        if m is not None:
            pairs.append((m[1], m[2]))
        elif pairs and token:
            k, v = pairs[-1]
            pairs[-1] = (k, f"{v} {token}" if v else token)
    return pairs


def _null(v: str) -> str:
    return "" if v in ("(null)", "N/A") else v


def _stime(v: str) -> float | None:
    """scontrol prints local time, second resolution (epoch seconds under
    ``SLURM_TIME_FORMAT=%s``, as the CLI backend runs it); ``Unknown``/``None`` for unset."""
    if v.isdigit():
        return float(v) if int(v) > 0 else None
    try:
        return datetime.fromisoformat(v).timestamp()
    except ValueError:
        return None


def _user(v: str) -> str:
    return v.split("(", 1)[0]


def job_from_scontrol(line: str) -> SlurmJob:
    """One line of ``scontrol -d show job -o`` (``-d`` adds the per-node ``GRES=..(IDX:..)``).
    :class:`MalformedField` when a field the record needs is missing or not a number."""
    try:
        return _scontrol_fields(line)
    except KeyError as e:
        raise MalformedField(str(e.args[0]), MISSING, "an `scontrol show job` line") from None
    except ValueError as e:
        raise MalformedField("(a number or time)", str(e), "an `scontrol show job` line") from None


def held_gpus(out: str, job_id: int, name: str) -> dict[str, GresAlloc]:
    """The GPUs one job holds per node, from ``scontrol -d show job -o REF`` for it
    (see :func:`held_run`)."""
    return held_run(out, job_id, name)[1]


def held_run(out: str, job_id: int, name: str) -> tuple[float | None, dict[str, GresAlloc]]:
    """The start of the run a job's ``scontrol -d show job -o`` record shows, and the GPUs
    that run holds per node. The start tells whether a record read apart from the queue
    (before it, or after it while the job was requeued) is of the run the queue shows.

    Read only between the job's name, which the caller knows from the queue (so the name
    itself may hold anything), and ``MinCPUsNode=``: nothing a user can type lies between
    (the comment, the command, the working directory and the output paths all come later),
    so no text in the job can pose as a detail group. :class:`MalformedField` if the output
    is not that job's record."""
    head = f" JobName={name} "
    at = out.find(head) if out.startswith(f"JobId={job_id} ") else -1
    end = out.find(" MinCPUsNode=", at + len(head)) if at >= 0 else -1
    if end < 0:
        raise MalformedField("JobName/MinCPUsNode", out[:80], f"job {job_id}")
    pairs = scontrol_pairs(out[at + len(head):end])
    try:
        return _stime(dict(pairs).get("StartTime", "")), _detail_alloc(pairs)
    except ValueError as e:
        raise MalformedField("GRES", str(e), f"job {job_id}") from None


_RECORD_HEAD = re.compile(r"\nJobId=(\d+) ")


def job_records(out: str, wanted: Collection[int] | None = None) -> dict[int, list[str]]:
    """``scontrol show job -o``'s records by job id (of ``wanted`` only, when given). A
    record starts where a line starts with ``JobId=<digits> ``; a name or comment holding a
    newline and ``JobId=`` can pose as a record, so an id may come with several: the caller
    trusts only a single one.

    The heads are found by one regular expression with a literal start (17 ms for the 20 MB
    listing of 20,000 jobs, where splitting on a ``(?:^|\n)`` lookahead took 0.23-0.39 s),
    and only the records of ``wanted`` are cut out: a controller reads this listing for the
    GPUs of its running jobs, a few hundred of the 20,000."""
    text = "\n" + out  # the first record's line start, like every other's
    heads = [(m.start() + 1, int(m.group(1))) for m in _RECORD_HEAD.finditer(text)]
    ends = [at - 1 for at, _ in heads[1:]] + [len(text)]  # each record ends at the next's
    by_id: dict[int, list[str]] = {}
    for (at, job_id), end in zip(heads, ends[:len(heads)], strict=True):
        if wanted is None or job_id in wanted:
            by_id.setdefault(job_id, []).append(text[at:end])
    return by_id


def array_throttle(out: str) -> int:
    """An array's throttle (``--array=..%N``; 0 without one) from ``scontrol show job -o``
    of one of its records, read before ``JobName=`` (only ids come first, no user text)."""
    head = out.partition(" JobName=")[0]
    fields = dict(scontrol_pairs(head))
    if "ArrayJobId" not in fields:
        raise MalformedField("ArrayJobId", head[:80] or MISSING, "an array's record")
    try:
        return int(fields.get("ArrayTaskThrottle", "0"))
    except ValueError:
        raise MalformedField("ArrayTaskThrottle", fields["ArrayTaskThrottle"]) from None


def _detail_alloc(pairs: list[tuple[str, str]]) -> dict[str, GresAlloc]:
    """The GPUs held per node, from ``-d``'s detail groups (``Nodes=node[1-2] CPU_IDs=..
    Mem=.. GRES=gpu:v100:2(IDX:0-1)``), a group's GRES being what *each* of its nodes holds.
    Read from the pairs in order: every group repeats the keys, so the line's dict keeps
    only the last group."""
    alloc: dict[str, GresAlloc] = {}
    current: tuple[str, ...] = ()
    for k, v in pairs:
        if k == "Nodes":
            current = nodes_of(v)
        elif k == "GRES" and current:
            g = parse_gres(v)
            if g is not None and g.count:
                alloc.update(dict.fromkeys(current, g))
    return alloc


def _least(v: str, default: int) -> int:
    """A count scontrol prints as a range when the job asked for one (``-N 1-2`` shows
    ``NumNodes=1-2`` while it waits): the lower bound; ``default`` when empty."""
    return int(v.split("-")[0] or default)


def _scontrol_memory(f: Mapping[str, str], num_gpus: int, num_nodes: int, cpus: int) -> int:
    """The job's memory in MB: per GPU (see :func:`mem_per_gpu`), else per node, else per
    CPU. Unlike the JSON path, a per-node figure that is there wins even when it is 0."""
    mem = f.get("MinMemoryNode") or ""
    mem_cpu = f.get("MinMemoryCPU") or ""
    return (mem_per_gpu(_null(f.get("MemPerTres", ""))) * num_gpus
            or (parse_mem_mb(mem) * num_nodes if mem
                else parse_mem_mb(mem_cpu) * cpus if mem_cpu else 0))


def _scontrol_fields(line: str) -> ParsedJob:
    pairs = scontrol_pairs(line)
    f = dict(pairs)
    alloc = _detail_alloc(pairs)
    nodes = nodes_of(_null(f.get("NodeList", "")))
    num_nodes = _least(f.get("NumNodes", "1"), 1)
    cpus = _least(f.get("NumCPUs", "0"), 0)
    num_gpus, gpu_type, gpu_nodes = requested(
        _null(f.get("TresPerJob", "")),
        _null(f.get("TresPerNode", "")),
        _null(f.get("TresPerTask", "")),
        num_nodes,
        int(f.get("NumTasks", "1") or 1),
    )
    if alloc:
        num_gpus = sum(a.count for a in alloc.values())
    memory_mb = _scontrol_memory(f, num_gpus, num_nodes, cpus)
    return make_parsed_job(
        job_id=int(f["JobId"]),
        name=f.get("JobName", ""),
        user=_user(f.get("UserId", "")),
        account=_null(f.get("Account", "")),
        partition=f.get("Partition", ""),
        state=f.get("JobState", ""),
        reason=f.get("Reason", "None"),
        priority=int(f.get("Priority", "0")),
        num_gpus=num_gpus,
        gpu_type=gpu_type,
        num_nodes=num_nodes,
        nodes=nodes,
        gpu_alloc=MappingProxyType(alloc),
        cpus=cpus,
        memory_mb=memory_mb,
        submit_time=_stime(f.get("SubmitTime", "")),
        start_time=_stime(f.get("StartTime", "")),
        end_time=_stime(f.get("EndTime", "")),
        eligible_time=_stime(f.get("EligibleTime", "")),
        comment=_null(f.get("Comment", "")),
        admin_comment=_null(f.get("AdminComment", "")),
        restart_cnt=int(f.get("Restarts", "0")),
        requeue=f.get("Requeue", "1") == "1",
        req_nodes=nodes_of(_null(f.get("ReqNodeList", ""))),
        exc_nodes=nodes_of(_null(f.get("ExcNodeList", ""))),
        work_dir=_null(f.get("WorkDir", "")),
        exit_code=int(f.get("ExitCode", "0:0").split(":")[0]),
        dependency=_null(f.get("Dependency", "")),
        gpu_nodes=gpu_nodes,
        **array_fields(int(f.get("ArrayJobId", "0")), None, f.get("ArrayTaskId", ""),
                 int(f.get("ArrayTaskThrottle", "0"))),
    )
