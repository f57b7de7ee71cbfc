"""The plain-format reader gives what its first, field-by-field version gave, on any record.

:func:`job_from_plain` reads a record with cached conversions and maps instead of a call a
field (a first round reads 20,000 records). The reference below is the reader as it was before
(commit 87e28ef), kept here as the oracle: every field read by name, one small function each.
Both read records drawn from what squeue prints (unset words, requests, node lists, arrays,
exit codes of every release, free text) and junk; a job both read must be equal, and a record
one refuses the other must refuse with the same message when one field is junk.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blox_slurm.slurm.parse import (
    MISSING,
    MalformedField,
    ParsedJob,
    array_fields,
    mem_per_gpu,
    nodes_of,
    parse_mem_mb,
    requested,
)
from blox_slurm.slurm.squeue_plain import PlainFormat, job_from_plain, tres_memory

_UNSET = frozenset({"", "N/A", "(null)", "NONE", "Unknown"})


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
    v = f[key]
    return default if v == "(null)" or v == "" else v


def _opt(f: Mapping[str, str], key: str) -> str:
    v = f[key]
    return "" if v in _UNSET else v


def _exit_code(f: Mapping[str, str]) -> int:
    code, colon, _ = f["exit_code"].partition(":")
    if colon:
        return _int({"exit_code": code}, "exit_code")
    return (_int(f, "exit_code") >> 8) & 0xFF


def _memory(f: Mapping[str, str], num_gpus: int, nodes: int, cpus: int) -> int:
    per_gpu = mem_per_gpu(_opt(f, "mem_per_tres"))
    if per_gpu and num_gpus:
        return per_gpu * num_gpus
    text = _opt(f, "min_memory")
    per = parse_mem_mb(text) if text else 0
    if per * nodes == tres_memory(_opt(f, "tres")):
        return per * nodes
    return per * cpus


def reference(f: Mapping[str, str], exc_nodes: str | None = None) -> ParsedJob:
    """:func:`job_from_plain` as of 87e28ef (which built the record through a maker, equal
    to ``ParsedJob(...)``)."""
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
    return ParsedJob(
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
        **array_fields(
            _int(f, "array_job_id") if task else 0,
            None,
            task,
            int(throttle) if throttle.isdigit() else 0,
        ),
    )


UNSET = ["", "N/A", "(null)", "NONE", "Unknown"]
NUMBER = st.one_of(st.sampled_from(["0", "1", "42", "-3", *UNSET]), st.integers().map(str))
TIME = st.one_of(st.sampled_from(["0", "-1", "1765000000", *UNSET]), st.integers().map(str))
REQUEST = st.sampled_from(
    [
        "gres/gpu:1",
        "gres:gpu:2",
        "gres/gpu:v100:2",
        "gres:gpu:a100:4",
        "gpu:3",
        "gres/gpu",
        "cpu=1",
        "gres/gpu:4(IDX:0-3)",
        *UNSET,
    ]
)
NODES = st.sampled_from(["n1", "node[1-3]", "gpu[01-02],cpu7", "a,b", *UNSET])
TEXT = st.one_of(
    st.sampled_from(["alice", "blox", "None", "JobHeldUser", *UNSET]),
    st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\0"), max_size=12),
)
#: Well-formed values of each field, as squeue prints them on some release.
GOOD: dict[str, st.SearchStrategy[str]] = {
    "job_id": st.integers(1, 10**7).map(str),
    "array_job_id": NUMBER,
    "array_task": st.sampled_from(["5", "3-9%3", "9%3", "0-7", "0-7%", "1,3,5%2", *UNSET]),
    "state": st.sampled_from(["PENDING", "RUNNING", "COMPLETED"]),
    "priority": NUMBER,
    "tres_per_job": REQUEST,
    "tres_per_node": REQUEST,
    "tres_per_task": REQUEST,
    "num_nodes": st.sampled_from(["1", "2", "4", *UNSET]),
    "tasks": st.sampled_from(["1", "2", "8", *UNSET]),
    "nodes": NODES,
    "cpus": st.sampled_from(["0", "1", "3", "16", *UNSET]),
    "mem_per_tres": st.sampled_from(["gres:gpu:1500", "gres/gpu:3072", "gres:gpu:0", *UNSET]),
    "min_memory": st.sampled_from(["0", "700M", "1500M", "1.5G", "4096", "1T", *UNSET]),
    "tres": st.sampled_from(
        [
            "cpu=1",
            "cpu=3,mem=2100M,node=1",
            "cpu=3,mem=3000M,node=2",
            "cpu=1,mem=1000M,node=1",
            "cpu=1,mem=1.5G,node=1",
            *UNSET,
        ]
    ),
    "submit_time": TIME,
    "start_time": TIME,
    "end_time": TIME,
    "eligible_time": TIME,
    "restarts": NUMBER,
    "requeue": st.sampled_from(["0", "1"]),
    "req_nodes": NODES,
    "exc_nodes": NODES,
    "exit_code": st.sampled_from(["0", "768", "3:0", "0:15", "1:0", "256", *UNSET]),
    "dependency": st.sampled_from(["afterok:12", "singleton", *UNSET]),
    **{
        k: TEXT
        for k in (
            "user",
            "partition",
            "account",
            "reason",
            "name",
            "comment",
            "admin_comment",
            "work_dir",
        )
    },
}
#: What no squeue prints in a numeric or structured field, but a broken one might.
JUNK = st.sampled_from(
    [
        "x",
        "1.5",
        "2-x",
        "node[1-x]",
        "lots",
        "x:0",
        "1:",
        "%",
        "1%²",
        "²",
        "gres/gpu:x:y:z",
        "cpu=1,mem=lots",
        "gres:gpu:1500x",
        " 7",
        "0x10",
    ]
)
FMT = PlainFormat()
Reader = Callable[[Mapping[str, str], str | None], ParsedJob]


def _outcome(read: Reader, f: Mapping[str, str], exc: str | None) -> ParsedJob | str:
    """The job read, or the message of the error that refused the record."""
    try:
        return read(f, exc)
    except MalformedField as e:
        return f"MalformedField: {e}"


@st.composite
def records(draw: st.DrawFn, junk: int) -> dict[str, str]:
    """A record's fields by name, ``junk`` of them (at random) not what squeue prints."""
    f = {name: draw(GOOD[name]) for name in FMT.fields}
    for name in draw(
        st.lists(st.sampled_from(FMT.fields), min_size=junk, max_size=junk, unique=True)
    ):
        f[name] = draw(JUNK)
    return f


@settings(deadline=None, max_examples=400)
@given(f=records(junk=0), exc=st.one_of(st.none(), NODES))
def test_every_well_formed_record_reads_as_before(f: dict[str, str], exc: str | None) -> None:
    assert _outcome(job_from_plain, f, exc) == _outcome(reference, f, exc)


@settings(deadline=None, max_examples=400)
@given(f=records(junk=1), exc=st.one_of(st.none(), NODES))
def test_one_junk_field_reads_or_fails_as_before(f: dict[str, str], exc: str | None) -> None:
    assert _outcome(job_from_plain, f, exc) == _outcome(reference, f, exc)


@settings(deadline=None, max_examples=200)
@given(f=records(junk=3))
def test_a_record_refused_before_is_refused(f: dict[str, str]) -> None:
    """With several junk fields either reader may name a different one first."""
    new, old = _outcome(job_from_plain, f, None), _outcome(reference, f, None)
    assert new == old or (isinstance(new, str) and isinstance(old, str))


def test_the_cached_conversions_refuse_a_bad_field_every_time() -> None:
    """A conversion that raised caches nothing: the same bad record fails again."""
    f = {name: "0" for name in FMT.fields} | {"job_id": "7", "min_memory": "lots"}
    for _ in range(2):
        with pytest.raises(MalformedField, match="job 7"):
            job_from_plain(f)
