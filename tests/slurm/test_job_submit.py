"""slurm_conf/job_submit.lua inside a real slurmctld (JobSubmitPlugins=lua), 2 nodes x 2 GPUs.

Submissions go through plain ``sbatch`` so that what users see (stderr) is what is checked.
Tests that act as an ordinary user run sbatch/scontrol as ``nobody`` via ``runuser`` (auth/none
takes the caller's uid), which needs root: they fail, not skip, without it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _live import wait_for

from blox_slurm.demo.world import ManagedWorld
from blox_slurm.slurm.job_submit import (
    ManagedMark,
    parse_admin_comment,
    write_config,
    write_heartbeat,
)

pytestmark = pytest.mark.slurm

MAX_AGE = 30
USER = "nobody"


class Cluster:
    def __init__(self, world: ManagedWorld) -> None:
        self.emu = world.emu
        self.heartbeat = world.heartbeat
        self.run = world.run
        self.ids: list[int] = []

    def sbatch(self, *options: str, user: str | None = None) -> subprocess.CompletedProcess[str]:
        """One GPU unless the options ask otherwise (or ``--gres=none``)."""
        gpus = [] if any("gpu" in o or o.startswith("--gres") for o in options) else [
            "--gres=gpu:1"]
        out = self.run("sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", *gpus,
                       *[o for o in options if o != "--gres=none"], "--wrap", "sleep 300",
                       user=user)
        if out.returncode == 0:
            self.ids.append(int(out.stdout.strip().split(";")[0]))
        return out

    def submit(self, *options: str, user: str | None = None) -> int:
        out = self.sbatch(*options, user=user)
        assert out.returncode == 0, out.stderr
        return self.ids[-1]

    def show(self, job: int | str) -> dict[str, str]:
        out = self.run("scontrol", "show", "job", "-o", str(job))
        assert out.returncode == 0, out.stderr
        return dict(re.findall(r"(\w+)=(\S*)", out.stdout))

    def refused(self, job: int, message: str) -> bool:
        """scontrol shows users only an error code for a refused update: the plugin says why
        in slurmctld's log."""
        log = self.emu.layout.controller_log().read_text(errors="replace")
        return f"refused an update of job {job} by uid" in log and message in log

    def fresh(self) -> None:
        write_heartbeat(self.heartbeat)

    def cancel_all(self) -> None:
        if self.ids:
            self.run("scancel", *map(str, self.ids))
            self.ids.clear()


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with ManagedWorld(shape="gpu:2x2", max_age=MAX_AGE) as world:
        yield Cluster(world)


@pytest.fixture
def c(cluster: Cluster) -> Iterator[Cluster]:
    cluster.fresh()
    yield cluster
    cluster.cancel_all()


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("acting as an ordinary user needs root (runuser)", pytrace=False)


def test_managed_job_is_held_marked_and_requeueable(c: Cluster) -> None:
    job = c.submit("--partition=blox", "--comment=blox:model=resnet50,iters=0020000")
    time.sleep(1)  # Slurm schedules at submit time: a job not held would be running by now
    info = c.show(job)
    assert info["JobState"] == "PENDING" and info["Priority"] == "0"
    # A hold set at submission is a *user* hold in Slurm 22.05, even for root.
    assert info["Reason"] == "JobHeldUser"
    assert info["AdminComment"] == "blox:managed;iters=20000;model=resnet50"
    assert info["Requeue"] == "1"
    assert info["Comment"] == "blox:model=resnet50,iters=0020000"  # the user's text is kept
    assert parse_admin_comment(info["AdminComment"]) == ManagedMark(
        False, {"iters": 20000, "model": "resnet50"}
    )


def test_job_without_partition_falls_to_the_default_managed_partition(c: Cluster) -> None:
    info = c.show(c.submit())
    assert info["Partition"] == "blox" and info["Priority"] == "0"
    assert info["AdminComment"] == "blox:managed"


@pytest.mark.parametrize(("comment", "message"), [
    ("blox:colour=red", "unknown hint 'colour'"),
    ("blox:priority=100000", "unknown hint 'priority'"),
    ("blox:model=$(reboot)", "bad value for hint 'model'"),
    ("blox:model=a;reboot", "bad value for hint 'model'"),
    ("blox:model=a\nb", "bad value for hint 'model'"),
    ("blox:model=" + "x" * 10_000, "at most 512 characters"),
    ("blox:model=résnet", "bad value for hint 'model'"),
    ("blox:iters=1,iters=2", "'iters' given twice"),
])
def test_bad_hints_are_rejected_with_a_message(c: Cluster, comment: str, message: str) -> None:
    out = c.sbatch("--partition=blox", f"--comment={comment}")
    assert out.returncode != 0 and not out.stdout.strip()
    assert message in out.stderr


def test_mixed_partition_list_is_rejected(c: Cluster) -> None:
    out = c.sbatch("--partition=blox,plain")
    assert out.returncode != 0 and "mixes partitions blox-slurm schedules" in out.stderr


def test_unmanaged_partition_job_is_untouched(c: Cluster) -> None:
    # Hints are not even parsed outside managed partitions: this comment is just a comment.
    job = c.submit("--partition=plain", "--gres=gpu:1", "--comment=blox:priority=1")
    wait_for(lambda: c.show(job)["JobState"] == "RUNNING", 15, "the unmanaged job to start")
    info = c.show(job)
    assert "AdminComment" not in info and info["Comment"] == "blox:priority=1"


@pytest.mark.parametrize("heartbeat", ["missing", "old", "garbage", "future"])
def test_stale_heartbeat_fails_open(c: Cluster, heartbeat: str) -> None:
    now = time.time()
    if heartbeat == "missing":
        c.heartbeat.unlink()
    elif heartbeat == "old":
        write_heartbeat(c.heartbeat, now - MAX_AGE - 5)
    elif heartbeat == "garbage":
        c.heartbeat.write_text("soon\n")
    else:
        write_heartbeat(c.heartbeat, now + 10 * MAX_AGE)
    job = c.submit("--partition=blox", "--comment=blox:duration=60")
    wait_for(lambda: c.show(job)["JobState"] == "RUNNING", 15, "the fail-open job to start")
    mark = parse_admin_comment(c.show(job)["AdminComment"])
    assert mark == ManagedMark(True, {"duration": 60})


def test_fresh_heartbeat_holds_again_after_a_stale_one(c: Cluster) -> None:
    write_heartbeat(c.heartbeat, time.time() - MAX_AGE - 5)
    stale = c.submit()
    c.fresh()
    held = c.submit()
    assert c.show(stale)["AdminComment"] == "blox:managed,failopen"
    assert c.show(held)["AdminComment"] == "blox:managed" and c.show(held)["Priority"] == "0"


def test_release_by_root_is_not_held_again(c: Cluster) -> None:
    job = c.submit("--partition=blox", "--comment=blox:model=bert")
    out = c.run("scontrol", "release", str(job))
    assert out.returncode == 0, out.stderr
    wait_for(lambda: c.show(job)["JobState"] == "RUNNING", 15, "the released job to start")
    assert c.show(job)["AdminComment"] == "blox:managed;model=bert"


def test_user_cannot_release_reprioritize_or_mark_a_managed_job(c: Cluster) -> None:
    needs_root()
    job = c.submit("--partition=blox", "--priority=99999", user=USER)  # --priority: ignored
    info = c.show(job)
    assert info["UserId"].startswith(USER) and info["Priority"] == "0"
    out = c.run("scontrol", "release", str(job), user=USER)
    assert out.returncode != 0 and "Access/permission denied" in out.stderr
    assert c.refused(job, "blox-slurm schedules this job")
    out = c.run("scontrol", "update", f"JobId={job}", "Priority=5", user=USER)
    assert out.returncode != 0 and "Access/permission denied" in out.stderr
    out = c.run("scontrol", "update", f"JobId={job}", "AdminComment=blox:managed,failopen",
                user=USER)
    assert out.returncode != 0  # Slurm itself: admin_comment is for admins
    time.sleep(1)
    info = c.show(job)
    assert info["Priority"] == "0" and info["JobState"] == "PENDING"
    assert info["AdminComment"] == "blox:managed"


def test_user_comment_updates_are_validated(c: Cluster) -> None:
    needs_root()
    job = c.submit("--partition=blox", "--comment=blox:iters=10", user=USER)
    out = c.run("scontrol", "update", f"JobId={job}", "Comment=blox:priority=1", user=USER)
    assert out.returncode != 0 and c.refused(job, "unknown hint 'priority'")
    assert c.show(job)["Comment"] == "blox:iters=10"
    out = c.run("scontrol", "update", f"JobId={job}", "Comment=blox:iters=20", user=USER)
    assert out.returncode == 0, out.stderr
    info = c.show(job)
    # Hints are taken at submission only: the scheduler's copy does not follow the comment.
    assert info["Comment"] == "blox:iters=20" and info["AdminComment"] == "blox:managed;iters=10"


def test_user_cannot_move_a_job_into_a_managed_partition(c: Cluster) -> None:
    needs_root()
    job = c.submit("--partition=plain", "--hold", user=USER)
    out = c.run("scontrol", "update", f"JobId={job}", "Partition=blox", user=USER)
    assert out.returncode != 0 and c.refused(job, "cannot be moved into a partition")
    assert c.show(job)["Partition"] == "plain"


@pytest.mark.parametrize(("update", "field"), [
    # red team item 4: an unpreemptible job kept its GPUs, requeuehold failed every round
    pytest.param("Requeue=0", "requeue", id="item4-requeue"),
    # item 11: moved to an unmanaged partition, held there for ever
    pytest.param("Partition=plain", "partition", id="item11-partition"),
    pytest.param("Partition=blox,plain", "partition", id="item11-partition-list"),
    # item 6: in the release window (or held) a 1-GPU grant ran with 4 GPUs elsewhere
    pytest.param("ExcNodeList=node1", "exc_nodes", id="item6-exc-nodes"),
    pytest.param("ReqNodeList=node2", "req_nodes", id="item6-req-nodes"),
    pytest.param("NumNodes=2", "min_nodes", id="item6-num-nodes"),
    pytest.param("TresPerNode=gres/gpu:2", "tres_per_node", id="item6-gpus"),
])
def test_items_4_6_11_owner_cannot_undo_the_schedulers_decisions(c: Cluster, update: str,
                                                                 field: str) -> None:
    """Held or released (the window between release and start), a managed job's owner cannot
    change what the policy decided or relies on; root (the controller) still can."""
    needs_root()
    job = c.submit("--partition=blox", "--gres=gpu:1", "--begin=now+1hour", user=USER)
    before = c.show(job)
    for released in (False, True):
        if released:  # --begin keeps it pending once released: the race window, held open
            assert c.run("scontrol", "release", str(job)).returncode == 0
        out = c.run("scontrol", "update", f"JobId={job}", update, user=USER)
        assert out.returncode != 0, (update, released, out.stdout)
        assert c.refused(job, f"{field} cannot change")
    after = c.show(job)
    for key in ("Requeue", "Partition", "ExcNodeList", "ReqNodeList", "NumNodes", "TresPerNode"):
        assert after.get(key) == before.get(key), key
    out = c.run("scontrol", "update", f"JobId={job}", "ExcNodeList=node1")
    assert out.returncode == 0, out.stderr  # root: an operator


def test_owner_may_still_change_what_the_scheduler_does_not_decide(c: Cluster) -> None:
    needs_root()
    job = c.submit("--partition=blox", "--gres=gpu:1", "--time=30", user=USER)
    out = c.run("scontrol", "update", f"JobId={job}", "TimeLimit=20", "Name=renamed", user=USER)
    assert out.returncode == 0, out.stderr
    info = c.show(job)
    assert info["TimeLimit"] == "00:20:00" and info["JobName"] == "renamed"


@pytest.mark.parametrize(("options", "message"), [
    # red team item 10: a GPU-less job was held for ever
    pytest.param(("--gres=none",), "this partition runs GPU jobs", id="item10-no-gpus"),
    pytest.param(("--gres=gpu:0",), "this partition runs GPU jobs", id="item10-gpu-0"),
    # item 7: a 1-GPU grant became 3 GPUs on 3 nodes
    pytest.param(("-N", "1-3", "--gres=gpu:1"), "give a fixed node count (-N 1)",
                 id="item7-node-range"),
])
def test_items_7_10_submissions_the_scheduler_cannot_honour_are_refused(
        c: Cluster, options: tuple[str, ...], message: str) -> None:
    needs_root()
    out = c.sbatch("--partition=blox", *options, user=USER)
    assert out.returncode != 0 and message in out.stderr, (out.returncode, out.stderr)
    assert c.ids == []
    out = c.sbatch("--partition=plain", *options, user=USER)  # elsewhere: not our business
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("partitions", [("blox", "plain"), ("plain", "blox"), ("blox", "blox")])
def test_item9_heterogeneous_jobs_touching_a_managed_partition_are_refused(
        c: Cluster, partitions: tuple[str, str]) -> None:
    """Red team item 9: a het job's components were never started (pinning fails for them)
    and one could mix a managed and an unmanaged partition."""
    needs_root()
    script = Path(tempfile.mkdtemp(prefix="blox-het-")) / "het.sh"  # pytest's dirs are 0700
    script.write_text("#!/bin/bash\n#SBATCH -p {} --gres=gpu:1\n#SBATCH hetjob\n"
                      "#SBATCH -p {} --gres=gpu:1\nsleep 1\n".format(*partitions))
    script.chmod(0o755)
    script.parent.chmod(0o755)
    out = c.run("sbatch", "--chdir=/tmp", "--output=/dev/null", str(script), user=USER)
    shutil.rmtree(script.parent)
    assert out.returncode != 0 and "heterogeneous jobs are not scheduled here" in out.stderr, (
        out.returncode, out.stderr)


def test_item5_an_arrays_split_tasks_stay_marked_held_and_guarded(c: Cluster) -> None:
    """Red team item 5: arrays were refused (a release of the array started every task).
    The plugin now marks and holds an array as one job; the tasks the controller splits off
    (``scontrol hold A_[..]``) get their own ids and keep the mark, the hold and the guards."""
    needs_root()
    array = c.submit("--partition=blox", "--gres=gpu:1", "--array=0-3", user=USER)
    assert c.show(array)["AdminComment"] == "blox:managed"
    out = c.run("scontrol", "hold", f"{array}_[0-1]")
    assert out.returncode == 0, out.stderr
    for task in (0, 1):
        info = c.show(f"{array}_{task}")
        assert info["JobId"] != str(array), info  # its own record
        assert info["AdminComment"] == "blox:managed" and info["Priority"] == "0", info
        assert c.run("scontrol", "release", f"{array}_{task}", user=USER).returncode != 0
        out = c.run("scontrol", "update", f"JobId={array}_{task}", "ExcNodeList=node1",
                    user=USER)
        assert out.returncode != 0 and c.refused(int(info["JobId"]), "exc_nodes cannot change")
    assert c.show(f"{array}_3")["JobId"] == str(array)


@pytest.mark.parametrize("gpus", [("--gres=gpu:1",), ("--gpus=2",), ("--gpus-per-node=1",),
                                  ("--gpus-per-task=1", "--ntasks=1"), ("--gres=gpu:v100:1",)])
def test_every_way_of_asking_for_gpus_is_accepted(c: Cluster, gpus: tuple[str, ...]) -> None:
    assert c.show(c.submit("--partition=blox", *gpus))["AdminComment"] == "blox:managed"


def test_config_is_reread_when_the_script_changes(c: Cluster) -> None:
    """Slurm reloads job_submit.lua when its mtime moves; the config is read with it."""
    script = c.emu.layout.job_submit_lua

    def reload(partitions: list[str]) -> None:
        write_config(script.parent, partitions, c.heartbeat, MAX_AGE)
        mtime = script.stat().st_mtime + 1
        os.utime(script, (mtime, mtime))

    try:
        reload(["plain"])
        info = c.show(c.submit("--partition=plain"))
        assert info.get("AdminComment") == "blox:managed" and info["Priority"] == "0"
        assert "AdminComment" not in c.show(c.submit("--partition=blox"))
    finally:
        reload(["blox"])
    assert c.show(c.submit("--partition=blox"))["AdminComment"] == "blox:managed"
