"""The CLI backend reads every supported Slurm by what its output says.

Each ``fixtures/<major.minor>/`` directory is one Slurm's real output for the same scene
(recorded by ``record_fixtures.py``: 3 v100 + 1 k80 nodes, node4 drained, eight jobs, one an
array with two tasks split off). The backend runs over a runner that answers from those files,
so the whole read path is tested: the dialect learnt from ``meta``, the node command it picks,
the plain queue read and the JSON one, the parsers, the errors. No Slurm needed. The
reference outputs in ``../shared/data/slurm`` (another scene) are read too when present.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _recorded import FILES, backend

from blox_slurm.slurm.client import SlurmError, SlurmJob, SlurmNode
from blox_slurm.slurm.dialect import Dialect, dialect_of
from blox_slurm.slurm.parse import MalformedField, job_from_json, node_from_json
from blox_slurm.slurm.queue_read import SHOW

FIX = Path(__file__).parent / "fixtures"
VERSIONS = sorted(p.name for p in FIX.iterdir() if (p / "release.txt").exists())
SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "slurm"
SHARED_FILES = {**FILES, ("scontrol", "show", "nodes", "--json"): "scontrol_show_node.json"}


def _read(version: str) -> tuple[str, list[SlurmJob], list[SlurmNode], list[tuple[str, ...]]]:
    cli, fake = backend(FIX / version)
    nodes = cli.list_nodes()
    jobs = cli.list_jobs(finished=True)
    return cli.version(), jobs, nodes, fake.argvs


def test_every_supported_version_has_recorded_fixtures() -> None:
    assert {"22.05", "24.11", "26.05"} <= set(VERSIONS), (
        "record them with tests/slurm/record_fixtures.py on each Slurm")


@pytest.mark.parametrize("version", VERSIONS)
def test_the_dialect_comes_from_meta_and_picks_the_node_call(version: str) -> None:
    release, _, _, argvs = _read(version)
    assert release == (FIX / version / "release.txt").read_text().strip()
    assert release.startswith(version)
    node_call = ("sinfo", "--json") if version == "22.05" else (
        "scontrol", "show", "nodes", "--json")
    one_line_per_record = "--array-unique" if version == "22.05" else "-r"
    # One read to learn the dialect (on 22.05 it is the node list itself), then the node
    # list, then the queue in the plain format (never `squeue --json` of the queue: the
    # requeued job's description is one whose code is known), then what the plain format
    # lacks: the running jobs' GPUs from one scontrol reading a `show job` for each (see
    # tests/slurm/test_queue_read.py).
    plain = ("squeue", "-h", "--noconvert", one_line_per_record, "--states=all")
    assert argvs[argvs.index(node_call) + 1] == plain
    assert argvs.count(SHOW) == 1 and argvs.index(SHOW) > argvs.index(plain)
    assert argvs.count(("sinfo", "--json")) == 1
    assert not [a for a in argvs if "--json" in a and a[0] == "squeue"]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_scene_parses_the_same_on_every_version(version: str) -> None:
    _, jobs, nodes, _ = _read(version)
    by_id = {j.job_id: j for j in jobs}
    assert sorted(by_id) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    for i, gpus in ((1, 2), (2, 4), (3, 3), (6, 1)):
        assert by_id[i].state == "RUNNING" and by_id[i].num_gpus == gpus
        assert sum(a.count for a in by_id[i].gpu_alloc.values()) == gpus
    assert by_id[1].gpu_type == "v100"
    assert by_id[4].held and by_id[4].num_gpus == 1 and by_id[4].exc_nodes == ("node4",)
    assert by_id[4].name == by_id[4].comment == "odd|name, with\ta tab\nand a newline"
    assert by_id[5].pending and not by_id[5].held and by_id[5].num_gpus == 8
    assert by_id[5].num_nodes == 2
    assert by_id[6].partition == "plain"
    assert by_id[7].held and by_id[7].restart_cnt == 1 and not by_id[7].nodes
    assert by_id[7].reason == "JobHeldUser"  # squeue shows "job requeued in held state"
    assert by_id[8].unsplit_array and by_id[8].array_tasks == "2-3"
    assert [(by_id[i].array_job_id, by_id[i].array_task_id) for i in (9, 10)] == [
        (8, 0), (8, 1)]
    assert {by_id[i].array_max_tasks for i in (8, 9, 10)} == {2}
    named = {n.name: n for n in nodes}
    assert sorted(named) == ["node1", "node2", "node3", "node4"]
    assert named["node4"].draining and not named["node4"].down
    assert named["node4"].gpu_type == "k80" and named["node4"].gpus_used == 0
    assert named["node4"].reason == "recorded for the parser tests"
    for n in ("node1", "node2", "node3"):
        assert not named[n].draining and not named[n].down and named[n].gpu_type == "v100"
        assert named[n].partitions == ("blox", "plain") and named[n].gpus_total == 4
    used = {(node, i) for j in jobs if j.in_run for node, a in j.gpu_alloc.items()
            for i in a.indices}
    assert used == {(n.name, i) for n in nodes for i in n.gpus_used_indices}


def _shape(jobs: list[SlurmJob], nodes: list[SlurmNode]) -> object:
    """What must not depend on the version (times, paths and priorities may)."""
    return ([(j.job_id, j.state, j.held, j.num_gpus, j.gpu_type, j.num_nodes, j.nodes,
              dict(j.gpu_alloc), j.partition, j.restart_cnt, j.requeue, j.cpus)
             for j in sorted(jobs, key=lambda j: j.job_id)],
            [(n.name, n.state, n.flags, n.gpus_total, n.gpus_used, n.gpu_type,
              n.gpus_used_indices, n.cpus, n.memory_mb, n.features) for n in nodes])


def test_all_versions_agree_record_for_record() -> None:
    shapes = {v: _shape(*_read(v)[1:3]) for v in VERSIONS}
    first = shapes[VERSIONS[0]]
    assert all(s == first for s in shapes.values()), {
        v: s for v, s in shapes.items() if s != first}


SHARED_VERSIONS = sorted(p.name for p in SHARED.glob("[0-9]*")) if SHARED.exists() else []


@pytest.mark.parametrize("version", SHARED_VERSIONS)
def test_reference_outputs_parse(version: str) -> None:
    """The issue's reference outputs: 4 x 4 GPUs, six jobs (three running)."""
    cli, _ = backend(SHARED / version, files=SHARED_FILES)
    nodes, jobs = cli.list_nodes(), [j for j in cli.json_jobs() if j.queued]
    assert cli.version().startswith(version)
    assert [n.gpus_used for n in nodes] == [2, 4, 3, 0]
    assert [j.state for j in jobs].count("RUNNING") == 3 and len(jobs) == 6
    assert sum(n.gpus_used for n in nodes) == sum(j.num_gpus for j in jobs if j.active)


# ---------------------------------------------------------------------------- bad output


def _drop(name: str, key: str, index: int = 0) -> Callable[[str, dict[str, Any]], None]:
    def edit(file: str, data: dict[str, Any]) -> None:
        if file == name:
            records = data["jobs" if "jobs" in data else "nodes"]
            del records[index][key]
    return edit


def _set(name: str, key: str, value: object) -> Callable[[str, dict[str, Any]], None]:
    def edit(file: str, data: dict[str, Any]) -> None:
        if file == name:
            for r in data["jobs" if "jobs" in data else "nodes"]:
                r[key] = copy.deepcopy(value)
    return edit


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("edit", "read", "field"), [
    (_drop("squeue.json", "job_id"), "json_jobs", "job_id"),
    (_drop("squeue.json", "job_state"), "json_jobs", "job_state"),
    (_set("squeue.json", "priority", "high"), "json_jobs", "priority"),
    (_set("squeue.json", "job_state", []), "json_jobs", "job_state"),
    (_set("squeue.json", "nodes", {"a": 1}), "json_jobs", "nodes"),
    (_set("squeue.json", "submit_time", [1]), "json_jobs", "submit_time"),
    (_set("squeue.json", "nodes", "node[1-x]"), "json_jobs", "nodes"),
])
def test_a_bad_job_field_is_a_slurm_error_naming_field_command_and_version(
        version: str, edit: Any, read: str, field: str) -> None:
    cli, _ = backend(FIX / version, edit=edit)
    with pytest.raises(SlurmError) as e:
        getattr(cli, read)()
    message = str(e.value)
    assert f"`{field}" in message
    assert "`squeue --json --states=all`" in message and f"Slurm {version}" in message


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("key", "value"), [
    ("state", ["DRAIN"]),  # flags without a base state
    ("state", 7),
    ("name", None),
    ("gres", ["gpu:4"]),
    ("cpus", {"number": "many"}),
    ("active_features", [1, 2]),
])
def test_a_bad_node_field_is_a_slurm_error(version: str, key: str, value: object) -> None:
    node_file = "sinfo.json" if version == "22.05" else "scontrol_show_nodes.json"
    cli, _ = backend(FIX / version, edit=_set(node_file, key, value))
    with pytest.raises(SlurmError, match=f"`{key}`"):
        cli.list_nodes()


@pytest.mark.parametrize("version", VERSIONS)
def test_a_missing_list_or_meta_is_a_slurm_error(version: str) -> None:
    def no_jobs(file: str, data: dict[str, Any]) -> None:
        if file == "squeue.json":
            del data["jobs"]

    def no_meta(file: str, data: dict[str, Any]) -> None:
        data.pop("meta")

    with pytest.raises(SlurmError, match="`jobs`.* missing"):
        backend(FIX / version, edit=no_jobs)[0].json_jobs()
    with pytest.raises(SlurmError, match="without a `meta` block"):
        backend(FIX / version, edit=no_meta)[0].list_jobs()


def test_unknown_extra_fields_are_ignored() -> None:
    version = VERSIONS[-1]
    cli, _ = backend(FIX / version, edit=_set("squeue.json", "a_field_from_27_05", {"x": [1]}))
    assert len(cli.json_jobs()) == 10


@pytest.mark.parametrize(("state", "base", "flags"), [
    ("mixed", "mixed", frozenset()),
    (["IDLE", "DRAIN"], "idle", frozenset({"DRAIN"})),
    (["DOWN", "NOT_RESPONDING"], "down", frozenset({"NOT_RESPONDING"})),
    (["ALLOCATED", "MAINTENANCE", "RESERVED"], "allocated",
     frozenset({"MAINTENANCE", "RESERVED"})),
    (["MIXED", "PLANNED"], "mixed", frozenset({"PLANNED"})),
])
def test_node_state_is_a_base_state_and_flags(state: object, base: str,
                                              flags: frozenset[str]) -> None:
    n = node_from_json({"name": "n1", "state": state})
    assert (n.state, n.flags) == (base, flags)


def test_what_node_flags_mean_for_placement() -> None:
    def node(*state: str) -> SlurmNode:
        return node_from_json({"name": "n1", "state": list(state)})

    assert node("IDLE", "DRAIN").draining and not node("IDLE", "DRAIN").down
    assert node("MIXED", "MAINTENANCE").draining and node("IDLE", "RESERVED").draining
    assert node("IDLE", "POWERED_DOWN").down and node("IDLE", "NOT_RESPONDING").down
    assert node("DOWN").down and node("FUTURE").down
    planned = node("MIXED", "PLANNED")
    assert not planned.draining and not planned.down


@pytest.mark.parametrize(("states", "word"), [
    (["RUNNING"], "RUNNING"),
    (["COMPLETED", "COMPLETING"], "COMPLETING"),
    (["PENDING", "REQUEUE_HOLD"], "REQUEUE_HOLD"),
    (["PENDING", "REQUEUED"], "REQUEUED"),
    ("RUNNING", "RUNNING"),
])
def test_job_state_lists_read_as_22_05_printed_them(states: object, word: str) -> None:
    assert job_from_json({"job_id": 3, "job_state": states}).state == word


def test_meta_names_the_dialect() -> None:
    d = dialect_of({"meta": {"plugin": {"type": "openapi/v0.0.38"},
                             "Slurm": {"release": "22.05.8"}}}, ["sinfo", "--json"])
    assert d == Dialect("22.05.8", "v0.0.38") and d.node_argv == ["sinfo", "--json"]
    d = dialect_of({"meta": {"plugin": {"data_parser": "data_parser/v0.0.45"},
                             "slurm": {"release": "26.05.5"}}}, ["squeue", "--json"])
    assert d.node_argv[:2] == ["scontrol", "show"] and str(d) == (
        "Slurm 26.05.5 (data_parser v0.0.45)")
    with pytest.raises(SlurmError, match="names no Slurm release"):
        dialect_of({"meta": {"slurm": {"release": None}}}, ["squeue", "--json"])


def test_parsers_raise_only_malformed_field() -> None:
    with pytest.raises(MalformedField, match="`job_id`.*missing"):
        job_from_json({"job_state": "RUNNING"})
    with pytest.raises(MalformedField, match="node n1"):
        node_from_json({"name": "n1", "state": "idle", "gres": "gpu:v100:4(IDX:3-x)"})
