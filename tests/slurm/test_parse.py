"""Pure parsing, retry and snapshot logic, on output recorded from the real emulator
(tests/slurm/fixtures: 3 v100 + 1 k80 nodes, node3 drained, five jobs). No Slurm needed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from blox_slurm.core.model import Decisions, JobState, NodeState, Start
from blox_slurm.slurm.apply import make_plan
from blox_slurm.slurm.client import GresAlloc, JobUpdate, SlurmError, SlurmUnavailable
from blox_slurm.slurm.parse import (
    ParsedJob,
    expand_hostlist,
    job_from_json,
    job_from_scontrol,
    node_from_json,
    parse_gres,
    parse_index_list,
    parse_mem_mb,
    requested_gpus,
    scontrol_pairs,
)
from blox_slurm.slurm.runner import RetryPolicy, Runner, Transience, classify, failed_ids
from blox_slurm.slurm.snapshot import JobExtras, build_snapshot, natural_key

FIX = Path(__file__).parent / "fixtures"


def _squeue() -> dict[int, dict]:  # type: ignore[type-arg]
    return {j["job_id"]: j for j in json.loads((FIX / "squeue.json").read_text())["jobs"]}


def _jobs():  # type: ignore[no-untyped-def]
    return [job_from_json(j) for j in _squeue().values()]


def _nodes():  # type: ignore[no-untyped-def]
    return [node_from_json(n) for n in json.loads((FIX / "sinfo.json").read_text())["nodes"]]


@pytest.mark.parametrize(("expr", "names"), [
    ("node1", ("node1",)),
    ("node[1,3-4]", ("node1", "node3", "node4")),
    ("n[08-10],gpu7", ("n08", "n09", "n10", "gpu7")),
    ("r[1-2]-n[1-2]", ("r1-n1", "r1-n2", "r2-n1", "r2-n2")),
    ("", ()),
])
def test_expand_hostlist(expr: str, names: tuple[str, ...]) -> None:
    assert expand_hostlist(expr) == names


@pytest.mark.parametrize(("text", "alloc"), [
    ("gpu:4(IDX:2-5)", GresAlloc("", 4, (2, 3, 4, 5))),
    ("gpu:v100:2(IDX:0,2)", GresAlloc("v100", 2, (0, 2))),
    ("gpu:k80:4(IDX:0-1,3)", GresAlloc("k80", 4, (0, 1, 3))),
    ("gpu:v100:0(IDX:N/A)", GresAlloc("v100", 0, ())),
    ("gpu:v100:4", GresAlloc("v100", 4, ())),
    ("gpu:v100:4(S:0-1)", GresAlloc("v100", 4, ())),
    ("gres:gpu:2", GresAlloc("", 2, ())),
    ("gres/gpu:a100:8", GresAlloc("a100", 8, ())),
    ("gpu", GresAlloc("", 1, ())),
    ("shard:2,gpu:a100:1(IDX:7)", GresAlloc("a100", 1, (7,))),
])
def test_parse_gres(text: str, alloc: GresAlloc) -> None:
    assert parse_gres(text) == alloc


def test_parse_gres_without_gpu() -> None:
    assert parse_gres("shard:4") is None and parse_gres("(null)") is None


def test_index_lists_and_memory() -> None:
    assert parse_index_list("0-2,5") == (0, 1, 2, 5) and parse_index_list("N/A") == ()
    assert [parse_mem_mb(x) for x in ("32G", "512M", "1T", "1024")] == [32768, 512, 1048576, 1024]
    with pytest.raises(ValueError):
        parse_mem_mb("lots")


def test_requested_gpus_per_job_node_task() -> None:
    assert requested_gpus("gres:gpu:6", "", "", 2, 2) == (6, "")
    assert requested_gpus("", "gres:gpu:v100:3", "", 2, 2) == (6, "v100")
    assert requested_gpus("", "", "gres:gpu:1", 1, 4) == (4, "")
    assert requested_gpus("", "", "", 1, 1) == (0, "")


def test_squeue_json_fields() -> None:
    jobs = {j.job_id: j for j in _jobs()}
    a = jobs[1]
    assert (a.state, a.partition, a.user, a.comment, a.num_gpus, a.gpu_type) == (
        "RUNNING", "blox", "root", "model=resnet50", 2, "v100")
    assert a.nodes == ("node1",) and a.gpu_alloc["node1"] == GresAlloc("v100", 2, (0, 1))
    assert a.submit_time and a.start_time and a.start_time >= a.submit_time
    multi = jobs[2]  # --gpus-per-node=v100:3 -N 2
    assert multi.nodes == ("node2", "node3") and multi.num_gpus == 6 and multi.num_nodes == 2
    spread = jobs[4]  # --gpus=6: 2 v100 on node1 + 4 k80 on node4
    assert spread.gpu_alloc["node1"].indices == (2, 3)
    assert spread.gpu_alloc["node4"] == GresAlloc("k80", 4, (0, 1, 2, 3))
    assert spread.num_gpus == 6
    held = jobs[3]
    assert held.pending and held.held and held.priority == 0 and held.reason == "JobHeldUser"
    assert held.num_gpus == 2 and not held.nodes and held.start_time is None
    plain = jobs[5]
    assert (plain.partition, plain.reason, plain.gpu_type) == ("plain", "Resources", "k80")


def test_later_openapi_versions_wrap_numbers() -> None:
    raw = dict(_squeue()[1])
    raw["priority"] = {"set": True, "infinite": False, "number": 7}
    raw["job_state"] = ["RUNNING"]
    raw["exit_code"] = {"status": "SUCCESS", "return_code": {"set": True, "number": 3}}
    j = job_from_json(raw)
    assert (j.priority, j.state, j.exit_code) == (7, "RUNNING", 3)


def test_sinfo_json_nodes() -> None:
    nodes = {n.name: n for n in _nodes()}
    assert nodes["node3"].draining and nodes["node3"].reason == "fixture drain"
    assert not nodes["node1"].draining and not nodes["node1"].down
    assert (nodes["node4"].gpu_type, nodes["node4"].gpus_total, nodes["node4"].gpus_used) == (
        "k80", 4, 4)
    assert nodes["node2"].gpus_used_indices == (0, 1, 2)
    assert nodes["node1"].features == frozenset({"v100"})
    assert nodes["node1"].partitions == ("blox", "plain")


def test_scontrol_pairs_keep_spaces_and_repeats() -> None:
    pairs = scontrol_pairs("JobId=4 OS=Linux 6.1 #1 SMP Nodes=node1 GRES=gpu:1 Nodes=node4 X=")
    assert pairs == [("JobId", "4"), ("OS", "Linux 6.1 #1 SMP"), ("Nodes", "node1"),
                     ("GRES", "gpu:1"), ("Nodes", "node4"), ("X", "")]


def test_scontrol_show_job_lines_match_the_json() -> None:
    lines = (FIX / "scontrol_show_job.txt").read_text().splitlines()
    from_json = {j.job_id: j for j in _jobs()}
    for line in lines:
        s = job_from_scontrol(line)
        j = from_json[s.job_id]
        for f in ("state", "reason", "priority", "partition", "user", "num_gpus", "nodes",
                  "gpu_alloc", "comment", "restart_cnt", "requeue", "num_nodes", "cpus"):
            assert getattr(s, f) == getattr(j, f), (s.job_id, f)
    four = job_from_scontrol(lines[3])  # two "Nodes=.. GRES=.." detail groups
    assert four.gpu_alloc["node1"] == GresAlloc("v100", 2, (2, 3))
    assert four.gpu_alloc["node4"] == GresAlloc("k80", 4, (0, 1, 2, 3))


def test_transience_classification() -> None:
    assert classify("slurm_load_jobs error: Socket timed out on send/recv operation") is (
        Transience.UNCERTAIN)
    assert classify("Unable to contact slurm controller (connect failure)") is (
        Transience.UNREACHED)
    assert classify("error: Connection refused") is Transience.UNREACHED
    assert classify("Invalid job id specified") is Transience.PERMANENT
    assert failed_ids("Invalid job id specified for job 999\nJob is pending execution "
                      "for job 3\nscancel: error: Kill job error on job id 12: x") == (999, 3, 12)


class _Fake:
    """Stands in for subprocess.run to feed the retry loop scripted outcomes (the retry
    policy is logic of ours; its real counterpart is exercised by the live tests)."""

    def __init__(self, *outcomes: tuple[int, str]) -> None:
        self.outcomes = list(outcomes)
        self.argvs: list[list[str]] = []

    def __call__(self, argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        self.argvs.append(argv)
        rc, text = self.outcomes.pop(0)
        if rc == -1:
            raise subprocess.TimeoutExpired(argv, 1)
        return subprocess.CompletedProcess(argv, rc, text if rc == 0 else "", text)


def _runner(fake: _Fake, sleeps: list[float]) -> Runner:
    return Runner(None, retry=RetryPolicy(attempts=4, base_delay=0.1, factor=3),
                  sleep=sleeps.append, execute=fake)


def test_retries_back_off_exponentially_then_succeed() -> None:
    fake = _Fake((1, "Socket timed out on send/recv"), (1, "Connection refused"), (0, "ok"))
    sleeps: list[float] = []
    r = _runner(fake, sleeps)
    assert r.run(["squeue", "--json"], idempotent=True) == "ok"
    assert sleeps == pytest.approx([0.1, 0.3]) and r.calls == 3


def test_uncertain_failures_are_not_retried_for_non_idempotent_verbs() -> None:
    fake = _Fake((-1, ""), (0, "5"))
    r = _runner(fake, [])
    with pytest.raises(SlurmUnavailable):
        r.run(["sbatch", "--parsable"], idempotent=False)
    assert r.calls == 1  # a timed-out sbatch may have submitted: never repeated
    fake = _Fake((1, "Unable to contact slurm controller (connect failure)"), (0, "5"))
    assert _runner(fake, []).run(["sbatch"], idempotent=False) == "5"  # never arrived: safe


def test_retries_give_up_with_a_typed_error() -> None:
    fake = _Fake(*[(1, "Connection refused")] * 4)
    with pytest.raises(SlurmUnavailable) as err:
        _runner(fake, []).run(["scontrol", "hold", "1,2"], idempotent=True)
    assert err.value.argv == ("scontrol", "hold", "1,2") and err.value.returncode == 1
    fake = _Fake((1, "Invalid job id specified for job 2"))
    with pytest.raises(SlurmError) as perm:
        _runner(fake, []).run(["scontrol", "hold", "1,2"], idempotent=True)
    assert not isinstance(perm.value, SlurmUnavailable) and perm.value.failed_ids == (2,)
    assert len(fake.argvs) == 1


def test_missing_binary_names_the_package() -> None:
    r = Runner(None)
    with pytest.raises(SlurmError, match="slurm-client"):
        r.run(["/nonexistent/squeue"], idempotent=True)


def test_job_update_validation() -> None:
    with pytest.raises(ValueError):
        JobUpdate()
    with pytest.raises(ValueError):
        JobUpdate(req_nodes=("node1; rm -rf /",))
    with pytest.raises(ValueError):
        JobUpdate(priority=-1)
    assert JobUpdate(req_nodes=()).req_nodes == ()


def test_snapshot_from_recorded_cluster() -> None:
    snap = build_snapshot(_jobs(), _nodes(), ["blox"], now=2e9,
                          extras={3: JobExtras(attained_base=50.0, admitted=True, preemptions=2,
                                               duration=600.0, last_event=1.9e9)})
    assert [n.name for n in snap.nodes] == ["node1", "node2", "node3", "node4"]
    assert [n.state for n in snap.nodes] == [NodeState.UP, NodeState.UP, NodeState.DRAIN,
                                             NodeState.UP]
    assert [g.id for g in snap.gpus] == list(range(16))
    assert (snap.gpus[13].node, snap.gpus[13].index, snap.gpus[13].type) == ("node4", 1, "k80")
    jobs = {j.id: j for j in snap.jobs}
    assert 5 not in jobs  # the plain partition
    assert jobs[1].gpus == (0, 1) and jobs[1].state is JobState.RUNNING and jobs[1].admitted
    assert jobs[2].gpus == (4, 5, 6, 8, 9, 10)
    assert jobs[4].gpus == (2, 3, 12, 13, 14, 15)
    assert jobs[1].run_since == jobs[1].first_start == jobs[1].last_event
    held = jobs[3]
    assert (held.state, held.gpus, held.num_gpus) == (JobState.PENDING, (), 2)
    assert (held.attained_base, held.admitted, held.preemptions, held.duration) == (
        50.0, True, 2, 600.0)
    assert held.last_event == 1.9e9 and held.remaining(snap.now) == 600.0
    assert all(len(j.gpus) == j.num_gpus for j in snap.jobs if j.running)
    # No GPU is held twice.
    used = [g for j in snap.jobs for g in j.gpus]
    assert len(used) == len(set(used))


def test_snapshot_without_partition_filter_and_defaults() -> None:
    snap = build_snapshot(_jobs(), _nodes(), now=2e9)
    jobs = {j.id: j for j in snap.jobs}
    assert 5 in jobs and not jobs[5].admitted and jobs[5].last_event == jobs[5].submit_time
    assert [j.id for j in snap.jobs] == sorted(jobs, key=lambda i: (jobs[i].submit_time, i))


def test_natural_node_order() -> None:
    assert sorted(["node10", "node2", "node1"], key=natural_key) == ["node1", "node2", "node10"]


# ------------------------------------------------------------------ node-bound GPU requests
# Slurm applies a per-node GPU request (--gres=gpu:N, --gpus-per-node) to every node of the
# job's allocation, and ReqNodeList=<k nodes> makes that allocation k nodes: such a job is
# bound to its requested node count (1 unless -N). Per job (--gpus=N) the total stays N.


def test_parsed_jobs_know_whether_their_gpus_are_per_node() -> None:
    jobs = {j.job_id: j for j in _jobs()}
    assert all(isinstance(j, ParsedJob) for j in jobs.values())
    # 1, 3, 5: --gres=gpu:..:N on one node; 2: -N 2 --gres=gpu:v100:3; 4: --gpus=6
    assert {i: j.gpu_nodes for i, j in jobs.items()} == {1: 1, 2: 2, 3: 1, 4: 0, 5: 1}
    lines = (FIX / "scontrol_show_job.txt").read_text().splitlines()
    by_scontrol = {j.job_id: j.gpu_nodes for j in map(job_from_scontrol, lines) if j}
    assert by_scontrol == {i: j.gpu_nodes for i, j in jobs.items() if i in by_scontrol}


def test_snapshot_binds_per_node_gpu_jobs_to_their_node_count() -> None:
    snap = build_snapshot(_jobs(), _nodes(), now=2e9)
    jobs = {j.id: j for j in snap.jobs}
    assert jobs[3].hint("nodes") == "1" and jobs[5].hint("nodes") == "1"
    assert jobs[2].hint("nodes") == "2"
    assert jobs[4].hint("nodes") is None  # --gpus=6: may span nodes
    fixed = str(jobs[5].num_gpus)  # not elastic: exactly its request
    assert jobs[5].hints == (("gpu_type", "k80"), ("max_gpus", fixed), ("min_gpus", fixed),
                             ("nodes", "1"))  # sorted (key, value)


def test_store_hints_cannot_set_or_clear_the_slurm_constraints() -> None:
    """The store's hints are the user's --comment hints: whatever they hold, ``nodes`` (and
    ``gpu_type``) are Slurm's request, rebuilt every snapshot."""
    forged = {"nodes": "4", "gpu_type": "a100", "model": "resnet50"}
    extras = {i: JobExtras(hints=forged) for i in (3, 4)}
    jobs = {j.id: j for j in build_snapshot(_jobs(), _nodes(), now=2e9, extras=extras).jobs}
    n3, n4 = str(jobs[3].num_gpus), str(jobs[4].num_gpus)
    assert jobs[3].hints == (("max_gpus", n3), ("min_gpus", n3), ("model", "resnet50"),
                             ("nodes", "1"))  # not cleared, not 4
    assert jobs[4].hints == (("max_gpus", n4), ("min_gpus", n4),
                             ("model", "resnet50"))  # per-job request: not set either


def _pending_world():  # type: ignore[no-untyped-def]
    """The fixture cluster with only job 3 (pending, held, --gres=gpu:2 on one node)."""
    jobs = [j for j in _jobs() if j.job_id == 3]
    return build_snapshot(jobs, _nodes(), ["blox"], now=2e9), {j.job_id: j for j in jobs}


def test_plan_refuses_to_pin_a_single_node_job_over_two_nodes() -> None:
    snap, managed = _pending_world()
    assert managed[3].held
    spread = Decisions(start=(Start(3, (0, 4)),))  # node1 + node2: Slurm would give it 4
    plan = make_plan(managed, spread, snap)
    assert plan.release == {} and 3 in plan.refused and "2 (node1,node2)" in plan.refused[3]
    assert not plan.empty
    one = make_plan(managed, Decisions(start=(Start(3, (4, 5)),)), snap)
    assert one.release == {("node2",): (3,)} and one.refused == {}


@pytest.mark.parametrize(("words", "queued", "in_run", "active"), [
    (["RUNNING", "SIGNALING"], True, True, False),  # being signalled on its way out
    (["COMPLETED", "STAGE_OUT"], True, True, False),
    (["PENDING", "RESV_DEL_HOLD"], True, False, False),
    (["RUNNING", "STOPPED"], True, True, True),
    (["CANCELLED"], False, False, False),
])
def test_every_job_state_flag_slurm_prints_has_a_place(words: list[str], queued: bool,
                                                        in_run: bool, active: bool) -> None:
    """A flag Slurm names a job by (its ``job_state_string``) used to read as "ended" unless
    listed: the store then recorded a run end for a job still running."""
    raw = {**_squeue()[min(_squeue())], "job_state": words}
    job = job_from_json(raw)
    assert (job.queued, job.in_run, job.active) == (queued, in_run, active), job.state


def test_memory_per_gpu_is_what_slurm_allocates() -> None:
    """``--mem-per-gpu=3G`` with 2 GPUs: Slurm allocates 6 GB (TRES mem=6G) while squeue
    still shows the default memory_per_cpu (22.05, read from the emulator)."""
    raw = {**_squeue()[min(_squeue())], "memory_per_tres": "gres:gpu:3072",
           "memory_per_cpu": 4096, "memory_per_node": None}
    job = job_from_json(raw)
    assert job.memory_mb == 3072 * job.num_gpus
    assert job_from_json({**raw, "memory_per_tres": "gres/gpu:1024"}).memory_mb == \
        1024 * job.num_gpus
    assert job_from_json({**raw, "memory_per_tres": ""}).memory_mb == 4096 * job.cpus
    line = ("JobId=5 JobName=w UserId=bob(1) Priority=0 JobState=PENDING Reason=None "
            "Partition=blox NumNodes=1 NumCPUs=1 NumTasks=1 TresPerNode=gres:gpu:2 "
            "MinMemoryCPU=4G MemPerTres=gres:gpu:2048")
    assert job_from_scontrol(line).memory_mb == 2 * 2048


def test_a_batch_with_gone_jobs_still_gives_the_others_records() -> None:
    """``gone``: exit 1 whose every error line says a job left the queue returns stdout;
    any other error line, or another exit code, fails as without it."""
    gone = re.compile(r"Job \d+ not found")

    def cmd(err: str, rc: int = 1) -> list[str]:
        return [sys.executable, "-c", f"import sys; print('JobId=1 '); "
                f"sys.stderr.write({err!r}); sys.exit({rc})"]

    r = Runner(None, retry=RetryPolicy(attempts=1))
    assert r.run(cmd("Job 5 not found\nJob 6 not found\n"), idempotent=True,
                 gone=gone) == "JobId=1 \n"
    for bad in (cmd("Job 5 not found\nUnable to contact slurm controller\n"),
                cmd("Job 5 not found\n", rc=2)):
        with pytest.raises(SlurmError):
            r.run(bad, idempotent=True, gone=gone)
    with pytest.raises(SlurmError) as err:
        r.run(cmd("Job 5 not found\n"), idempotent=True)
    assert err.value.returncode == 1
