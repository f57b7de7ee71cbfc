"""Pure parsers from Slurm's text and JSON into :mod:`blox_slurm.slurm.client` records.

No subprocesses here, so every format quirk is unit-tested from recorded output. Formats are
those of Slurm 22.05 (``squeue``/``sinfo --json`` with data_parser v0.0.38); where later
versions wrap numbers as ``{"set": .., "number": ..}`` or states as lists, both are accepted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any

from .client import GresAlloc, SlurmJob, SlurmNode

# ---------------------------------------------------------------------------- hostlists


def expand_hostlist(expr: str) -> tuple[str, ...]:
    """``node[1,3-4],gpu07`` -> ``(node1, node3, node4, gpu07)``; keeps zero padding
    (``n[08-10]`` -> n08 n09 n10) and expands several bracket groups in one name."""
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


def parse_gres(text: str) -> GresAlloc | None:
    """The GPU entry of one node's GRES string: ``gpu:4(IDX:2-5)``, ``gpu:v100:2(IDX:0,2)``,
    ``gpu:v100:4`` (a configured count), ``gres:gpu:2`` (a request). None if no GPU entry."""
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
    total, gpu_type, _ = _requested(per_job, per_node, per_task, nodes, tasks)
    return total, gpu_type


def _requested(
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


# ---------------------------------------------------------------------------- JSON helpers


def _num(v: Any, default: int = 0) -> int:
    """A number as v0.0.38 gives it, or as later versions wrap it."""
    if isinstance(v, dict):
        if not v.get("set", True) or v.get("infinite"):
            return default
        v = v.get("number", default)
    if v is None:
        return default
    return int(v)


def _time(v: Any) -> float | None:
    t = _num(v)
    return float(t) if t > 0 else None


def _state(v: Any) -> str:
    if isinstance(v, list):
        return str(v[0]) if v else ""
    return str(v or "")


def _exit_status(v: Any) -> int:
    """v0.0.38 gives the raw wait status (75 << 8 for ``exit 75``), later versions a dict."""
    if isinstance(v, dict):
        return _num(v.get("return_code"))
    return (_num(v) >> 8) & 0xFF


def _nodes_of(expr: str) -> tuple[str, ...]:
    return expand_hostlist(expr) if expr and expr != "(null)" else ()


def job_from_json(j: Mapping[str, Any]) -> SlurmJob:
    """One entry of ``squeue --json``'s ``jobs`` list."""
    nodes = _nodes_of(str(j.get("nodes") or ""))
    node_count = _num(j.get("node_count"), 1)
    num_gpus, gpu_type, gpu_nodes = _requested(
        str(j.get("tres_per_job") or ""),
        str(j.get("tres_per_node") or ""),
        str(j.get("tres_per_task") or ""),
        node_count,
        _num(j.get("tasks"), 1),
    )
    alloc = _gres_by_node(nodes, [str(x) for x in j.get("gres_detail") or []])
    if alloc:
        num_gpus = sum(a.count for a in alloc.values())
    cpus = _num(j.get("cpus"))
    mem = _num(j.get("memory_per_node")) or _num(j.get("memory_per_cpu")) * cpus
    return ParsedJob(
        job_id=_num(j["job_id"]),
        name=str(j.get("name") or ""),
        user=str(j.get("user_name") or ""),
        account=str(j.get("account") or ""),
        partition=str(j.get("partition") or ""),
        state=_state(j.get("job_state")),
        reason=str(j.get("state_reason") or "None"),
        priority=_num(j.get("priority")),
        num_gpus=num_gpus,
        gpu_type=gpu_type,
        num_nodes=node_count,
        nodes=nodes,
        gpu_alloc=alloc,
        cpus=cpus,
        memory_mb=mem,
        submit_time=_time(j.get("submit_time")),
        start_time=_time(j.get("start_time")),
        end_time=_time(j.get("end_time")),
        eligible_time=_time(j.get("eligible_time")),
        comment=str(j.get("comment") or ""),
        admin_comment=str(j.get("admin_comment") or ""),
        restart_cnt=_num(j.get("restart_cnt")),
        requeue=bool(j.get("requeue", True)),
        req_nodes=_nodes_of(str(j.get("required_nodes") or "")),
        exc_nodes=_nodes_of(str(j.get("excluded_nodes") or "")),
        work_dir=str(j.get("current_working_directory") or ""),
        exit_code=_exit_status(j.get("exit_code")),
        gpu_nodes=gpu_nodes,
    )


def _gres_by_node(nodes: tuple[str, ...], details: list[str]) -> Mapping[str, GresAlloc]:
    """``gres_detail`` has one entry per allocated node, in the node list's order."""
    out = {}
    for node, detail in zip(nodes, details, strict=False):
        g = parse_gres(detail)
        if g is not None and g.count:
            out[node] = g
    return MappingProxyType(out)


def node_from_json(n: Mapping[str, Any]) -> SlurmNode:
    """One entry of ``sinfo --json``'s ``nodes`` list (one per node, not per partition)."""
    total = parse_gres(str(n.get("gres") or ""))
    used = parse_gres(str(n.get("gres_used") or ""))
    features = str(n.get("active_features") or n.get("features") or "")
    return SlurmNode(
        name=str(n["name"]),
        state=_state(n.get("state")).lower(),
        flags=frozenset(str(f).upper() for f in n.get("state_flags") or []),
        reason=str(n.get("reason") or ""),
        gpus_total=total.count if total else 0,
        gpus_used=used.count if used else 0,
        gpu_type=(total.type if total else "") or "",
        gpus_used_indices=used.indices if used else (),
        cpus=_num(n.get("cpus")),
        cpus_alloc=_num(n.get("alloc_cpus")),
        memory_mb=_num(n.get("real_memory")),
        features=frozenset(f for f in features.split(",") if f and f != "(null)"),
        partitions=tuple(str(p) for p in n.get("partitions") or []),
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
    """scontrol prints local time, second resolution; ``Unknown``/``None`` for unset."""
    try:
        return datetime.fromisoformat(v).timestamp()
    except ValueError:
        return None


def _user(v: str) -> str:
    return v.split("(", 1)[0]


def job_from_scontrol(line: str) -> SlurmJob:
    """One line of ``scontrol -d show job -o`` (``-d`` adds the per-node ``GRES=..(IDX:..)``)."""
    pairs = scontrol_pairs(line)
    f = dict(pairs)
    alloc: dict[str, GresAlloc] = {}
    current: tuple[str, ...] = ()
    for k, v in pairs:  # -d detail: "Nodes=node[1-2] CPU_IDs=.. Mem=.. GRES=gpu:v100:2(IDX:0-1)"
        if k == "Nodes":
            current = _nodes_of(v)
        elif k == "GRES" and current:
            g = parse_gres(v)
            if g is not None and g.count:
                alloc.update(dict.fromkeys(current, g))
    nodes = _nodes_of(_null(f.get("NodeList", "")))
    num_nodes = int(f.get("NumNodes", "1").split("-")[0] or 1)
    cpus = int(f.get("NumCPUs", "0").split("-")[0] or 0)
    num_gpus, gpu_type, gpu_nodes = _requested(
        _null(f.get("TresPerJob", "")),
        _null(f.get("TresPerNode", "")),
        _null(f.get("TresPerTask", "")),
        num_nodes,
        int(f.get("NumTasks", "1") or 1),
    )
    if alloc:
        num_gpus = sum(a.count for a in alloc.values())
    mem = f.get("MinMemoryNode") or ""
    mem_cpu = f.get("MinMemoryCPU") or ""
    memory_mb = parse_mem_mb(mem) if mem else parse_mem_mb(mem_cpu) * cpus if mem_cpu else 0
    return ParsedJob(
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
        req_nodes=_nodes_of(_null(f.get("ReqNodeList", ""))),
        exc_nodes=_nodes_of(_null(f.get("ExcNodeList", ""))),
        work_dir=_null(f.get("WorkDir", "")),
        exit_code=int(f.get("ExitCode", "0:0").split(":")[0]),
        gpu_nodes=gpu_nodes,
    )
