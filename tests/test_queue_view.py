"""What users see of their managed jobs (`blox-slurm queue`) and what admins see (`status`,
`explain`): the public queue file the controller publishes after a round, read back, and the
read commands on a store made by real rounds against the in-memory Slurm."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blox_slurm.cli import app
from blox_slurm.loading import load
from blox_slurm.slurm.controller import Controller
from blox_slurm.slurm.controller_config import ControllerConfig
from blox_slurm.slurm.queue_view import QueueFileError, publish, read
from blox_slurm.slurm.store import Store
from blox_slurm.testing.fake_slurm import FakeSlurm

runner = CliRunner()


@pytest.fixture
def cluster(tmp_path: Path) -> tuple[FakeSlurm, Controller, Path]:
    """A small cluster, seven jobs of 1-8 GPUs from three users, three Tiresias rounds."""
    fake = FakeSlurm([(4, 2)])
    for i, gpus in enumerate([4, 2, 4, 1, 2, 8, 1]):
        fake.submit_job(gpus, runtime=600.0, user=f"user{i % 3}")
    cfg = ControllerConfig(store=str(tmp_path / "state.db"), heartbeat=str(tmp_path / "hb"),
                           plugin_config="", round_seconds=30)
    ctl = Controller(cfg, load("tiresias"), fake, Store(cfg.store), clock=lambda: fake.now)
    for _ in range(3):
        ctl.round()
        fake.advance(30)
    toml = tmp_path / "controller.toml"
    toml.write_text(f'[controller]\nstore = "{cfg.store}"\nheartbeat = "{cfg.heartbeat}"\n'
                    'plugin_config = ""\ncomposition = "tiresias"\n')
    return fake, ctl, toml


def test_the_queue_file_lists_waiting_jobs_in_the_policys_order(
        cluster: tuple[FakeSlurm, Controller, Path], tmp_path: Path) -> None:
    fake, ctl, _ = cluster
    path = tmp_path / "queue.json"
    publish(ctl.store, path, lease_seconds=90, now=fake.now)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # users must be able to read it
    q = read(path)
    waiting = [e for e in q.jobs if e.state == "pending"]
    ranks = {r["job_id"]: r["rank"] for r in ctl.store.jobs()}
    assert [e.job_id for e in waiting] == sorted(ranks_of := [e.job_id for e in waiting],
                                                key=lambda j: ranks[j]) and ranks_of
    assert [e.position for e in waiting] == list(range(1, len(waiting) + 1))
    assert all(e.waiting == len(waiting) and e.reason for e in waiting)
    running = [e for e in q.jobs if e.state == "running"]
    assert running and all(e.position is None and e.gpu_hours > 0 for e in running)
    assert {e.job_id for e in q.jobs} == {j for j, fj in fake.jobs.items() if fj.job.queued}
    assert not q.stale(fake.now + 90) and q.stale(fake.now + 91)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".queue")] == []


def test_queue_shows_a_user_only_their_jobs_and_why_they_wait(
        cluster: tuple[FakeSlurm, Controller, Path], tmp_path: Path) -> None:
    _, ctl, _ = cluster
    path = tmp_path / "queue.json"
    publish(ctl.store, path, lease_seconds=90)
    result = runner.invoke(app, ["queue", "--file", str(path), "--user", "user2", "--json"])
    assert result.exit_code == 0, result.output
    jobs = json.loads(result.output)["jobs"]
    assert jobs and {j["user"] for j in jobs} == {"user2"}
    text = runner.invoke(app, ["queue", "--user", "user2"],
                         env={"BLOX_SLURM_QUEUE": str(path)}).output
    held = [j for j in jobs if j["state"] == "pending"]
    assert held and all(f"{j['job_id']}: {j['reason']}" in text for j in held)
    assert f"{held[0]['position']} of {held[0]['waiting']}" in text
    assert "user0" not in text


def test_a_stale_queue_file_says_slurm_schedules_alone(
        cluster: tuple[FakeSlurm, Controller, Path], tmp_path: Path) -> None:
    _, ctl, _ = cluster
    path = tmp_path / "queue.json"
    publish(ctl.store, path, lease_seconds=90, now=0.0)
    result = runner.invoke(app, ["queue", "--file", str(path), "--all"])
    assert result.exit_code == 0 and "Slurm schedules the partition on its own" in result.output


@pytest.mark.parametrize("content, message", [
    (None, "no queue file at"),
    (b"\x92not json", "is not a blox-slurm queue file"),
    (b'{"format": 99}', "format 99"),
    (b'{"format": 1, "written": 0}', "is not a blox-slurm queue file"),
])
def test_a_missing_or_foreign_queue_file_is_one_clear_line(
        tmp_path: Path, content: bytes | None, message: str) -> None:
    path = tmp_path / "queue.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(QueueFileError, match=message):
        read(path)
    result = runner.invoke(app, ["queue", "--file", str(path)])
    assert result.exit_code == 2 and message in result.output
    assert len(result.output.strip().splitlines()) == 1 or "\n" not in result.output.strip()


def test_status_fits_80_columns_and_reasons_are_text_not_markup(
        cluster: tuple[FakeSlurm, Controller, Path]) -> None:
    _, ctl, toml = cluster
    job = ctl.store.jobs()[-1]["job_id"]
    ctl.store.db.execute("UPDATE jobs SET reason = ?, state = 'pending', held = 1 "
                         "WHERE job_id = ?", ["waits for [bold]pyslurm[/bold] [x]", job])
    result = runner.invoke(app, ["status"], env={"BLOX_SLURM_CONFIG": str(toml),
                                                 "COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert f"{job}: waits for [bold]pyslurm[/bold] [x]" in result.output
    table = [ln for ln in result.output.splitlines() if not re.match(r"\d+: ", ln)]
    assert len(table) > 3 and max(len(line) for line in table) <= 80


def test_explain_says_dry_run_actions_were_not_applied(
        cluster: tuple[FakeSlurm, Controller, Path]) -> None:
    _, ctl, toml = cluster
    job = ctl.store.jobs()[0]["job_id"]
    ctl.store.record_action(99, "release", [job], ok=True, dry_run=True)
    result = runner.invoke(app, ["explain", str(job), "-c", str(toml)])
    assert result.exit_code == 0, result.output
    assert "action release: not applied (dry-run)" in result.output


def test_the_read_commands_default_to_etc_and_say_how_to_point_elsewhere() -> None:
    if os.path.exists("/etc/blox-slurm/controller.toml"):
        pytest.fail("this test needs a machine without /etc/blox-slurm/controller.toml")
    for command in (["status"], ["report"], ["explain", "1"], ["calibrate"], ["handback"]):
        result = runner.invoke(app, command, env={"BLOX_SLURM_CONFIG": None})
        assert result.exit_code == 2, (command, result.output)
        assert "/etc/blox-slurm/controller.toml" in result.output
        assert "BLOX_SLURM_CONFIG" in result.output
