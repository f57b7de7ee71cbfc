"""Hostile ``--comment`` hints through real ``sbatch`` against ``slurm_conf/job_submit.lua`` in a
real slurmctld (issue 5, item 4a). Submissions run as ``nobody`` (``runuser``; auth/none takes
the caller's uid), so this needs root and fails, not skips, without it.

For every hostile hint: sbatch is refused with the plugin's message, the shell canary never
appears, slurmctld keeps answering, and another user's job (``daemon``'s) is byte-for-byte the
same before and after (state, priority, admin_comment, comment). Accepted jobs are held by the
plugin (priority 0): nobody raised their own priority. Then ~50 hypothesis hints go through
sbatch and must match the Python parser's verdict.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from test_bad_input import CANARY, HINTS, HOSTILE_HINTS

from blox_slurm.demo.world import ManagedWorld
from blox_slurm.slurm.job_submit import HintError, parse_user_hints

pytestmark = [pytest.mark.reliability, pytest.mark.slurm]

ROOT = Path(__file__).resolve().parents[2]
COUNTS: dict[str, int] = {}


class Plugin:
    def __init__(self, world: ManagedWorld) -> None:
        self.emu = world.emu
        self.run = world.run
        self.ids: list[int] = []

    def sbatch(self, comment: str, user: str = "nobody") -> subprocess.CompletedProcess[str]:
        out = self.run("sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null",
                       "--partition=blox", "--gres=gpu:1", f"--comment={comment}", "--wrap",
                       "sleep 300",
                       user=user)
        if out.returncode == 0:
            self.ids.append(int(out.stdout.strip().split(";")[0]))
        return out

    def show(self, job: int) -> dict[str, str]:
        out = self.run("scontrol", "show", "job", "-o", str(job))
        assert out.returncode == 0, out.stderr
        return dict(re.findall(r"(\w+)=(\S*)", out.stdout))

    def snapshot(self, job: int) -> dict[str, str]:
        info = self.show(job)
        return {k: info.get(k, "") for k in ("JobState", "Priority", "AdminComment", "Comment",
                                            "UserId", "Partition", "Nice", "Reason")}


@pytest.fixture(scope="module")
def plugin() -> Iterator[Plugin]:
    # A fresh heartbeat and a long lease: the plugin holds (it is not failing open). Leaving
    # the world stops Slurm, which ends the jobs.
    with ManagedWorld(shape="gpu:2x2", max_age=3600) as world:
        Path(CANARY).unlink(missing_ok=True)
        yield Plugin(world)
        total = sum(COUNTS.values())
        print("".join(f"\n[reliability] bad input (live): {k}: {v} cases"
                      for k, v in sorted(COUNTS.items()))
              + f"\n[reliability] bad input (live) total: {total} cases")


@pytest.fixture(scope="module")
def victim(plugin: Plugin) -> int:
    """Another user's job: ``daemon`` submits it with a valid hint."""
    out = plugin.sbatch("blox:model=bert,iters=100", user="daemon")
    assert out.returncode == 0, out.stderr
    return plugin.ids[-1]


def test_hostile_hints_are_refused_by_the_real_plugin(plugin: Plugin, victim: int) -> None:
    before = plugin.snapshot(victim)
    assert before["Priority"] == "0" and before["AdminComment"] == \
        "blox:managed;iters=100;model=bert"
    corpus = [*HOSTILE_HINTS, f"blox:jobid={victim}", f"blox:model=x,jobid={victim}",
              f"blox:model=$(scontrol release {victim})"]
    problems = []
    for comment in corpus:
        if "\x00" in comment:
            continue  # argv cannot carry NUL; the parser corpus covers it
        try:
            parse_user_hints(comment)
            expected = None
        except HintError as exc:
            expected = str(exc)
        out = plugin.sbatch(comment)
        if out.returncode == 0 or expected is None or expected not in out.stderr:
            problems.append((comment[:80], out.returncode, out.stderr[-300:], expected))
    COUNTS["hints: hand-written via sbatch"] = len(corpus)
    assert not problems, problems
    assert not os.path.exists(CANARY), "a shell ran a hint"
    assert plugin.run("scontrol", "ping").returncode == 0  # slurmctld still up
    assert plugin.snapshot(victim) == before  # the other user's job is untouched
    assert plugin.ids == [victim]  # nothing hostile was accepted


@settings(max_examples=50, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(HINTS)
def test_hypothesis_hints_through_sbatch_match_the_parser(plugin: Plugin, victim: int,
                                                          comment: str) -> None:
    if "\x00" in comment or not comment.isprintable() and "\n" not in comment:
        comment = "".join(c if c.isprintable() else "?" for c in comment)  # argv-safe
    try:
        hints = parse_user_hints(comment)
        expected = None
    except HintError as exc:
        hints, expected = None, str(exc)
    before = plugin.snapshot(victim)
    out = plugin.sbatch(comment)
    COUNTS["hints: hypothesis via sbatch"] = COUNTS.get("hints: hypothesis via sbatch", 0) + 1
    if expected is not None:
        assert out.returncode != 0 and expected in out.stderr, (comment, out.stderr)
    else:
        assert out.returncode == 0, (comment, out.stderr)
        info = plugin.show(plugin.ids[-1])
        # Accepted: held by the plugin (priority 0), marked with exactly the parsed hints.
        assert info["Priority"] == "0" and info["JobState"] == "PENDING", info
        if hints:
            mark = "blox:managed" + "".join(f";{k}={hints[k]}" for k in sorted(hints))
            assert info["AdminComment"] == mark, (comment, info["AdminComment"])
        plugin.run("scancel", str(plugin.ids[-1]))
    assert not os.path.exists(CANARY)
    assert plugin.snapshot(victim) == before
