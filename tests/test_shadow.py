"""The shadow-mode report covers every managed job: the cases of
:mod:`blox_slurm.slurm.shadow`, and a dry-run controller against the in-memory Slurm, which
schedules alone (the plugin fails open while no heartbeat is written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blox_slurm.cli import app
from blox_slurm.loading import load
from blox_slurm.slurm.controller import Controller
from blox_slurm.slurm.controller_config import ControllerConfig
from blox_slurm.slurm.shadow import ShadowJob, shadow_report
from blox_slurm.slurm.store import Store
from blox_slurm.testing.fake_slurm import FakeSlurm


def test_every_job_falls_in_one_case() -> None:
    report = shadow_report([
        ShadowJob(1, slurm_start=110.0, policy_start=100.0, policy_hold=None),  # policy earlier
        ShadowJob(2, slurm_start=100.4, policy_start=100.0, policy_hold=None),  # same second
        ShadowJob(3, slurm_start=130.0, policy_start=None, policy_hold=100.0),  # held 30 s
        ShadowJob(4, slurm_start=None, policy_start=120.0, policy_hold=100.0),
        ShadowJob(5, slurm_start=None, policy_start=None, policy_hold=100.0),
        ShadowJob(6, slurm_start=90.0, policy_start=None, policy_hold=None),
    ], would_have_preempted=2)
    s = report.summary()
    assert [j.case for j in report.jobs] == ["compared", "compared", "policy_held",
                                             "policy_started", "both_waiting", "unseen"]
    assert (s["jobs"], s["compared"], s["policy_earlier"], s["same_time"]) == (6, 2, 1, 1)
    assert s["policy_later"] == 0 and s["median_slurm_minus_policy"] == pytest.approx(5.2)
    assert s["median_held_seconds_when_slurm_started"] == 30.0
    assert (s["policy_started"], s["both_waiting"], s["unseen"]) == (1, 1, 1)
    assert s["would_have_preempted"] == 2


def test_a_dry_run_controller_reports_on_every_job(tmp_path: Path) -> None:
    """LAS in shadow mode on one 4-GPU node: Slurm runs the 4-GPU jobs first come first
    served; LAS would have preempted the long one for the newcomers. Every job submitted is
    in the report, in the case its history puts it."""
    fake = FakeSlurm([(1, 4)])
    cfg = ControllerConfig(store=str(tmp_path / "state.db"), heartbeat=str(tmp_path / "hb"),
                           plugin_config="", round_seconds=10.0, dry_run=True)
    ctl = Controller(cfg, load("las"), fake, Store(cfg.store), clock=lambda: fake.now)
    first = fake.submit_job(4, runtime=100.0, failopen=True)
    ctl.round()  # the policy would start it; Slurm does at the next tick
    fake.advance(10.0)
    later = [fake.submit_job(4, runtime=20.0, failopen=True) for _ in range(2)]
    for _ in range(20):
        ctl.round()
        fake.advance(10.0)
    report = ctl.store.shadow()
    cases = {j.job_id: j.case for j in report.jobs}
    assert set(cases) == {first, *later}  # no job left out
    assert cases[first] == "compared"
    assert report.jobs[0].slurm_minus_policy == 10.0
    assert report.would_have_preempted >= 1  # LAS: the newcomers had no service
    # Slurm ran the newcomers one after the other once the first ended; LAS would have
    # started each while Slurm still had it pending: the second as soon as the first of them
    # ran (it had received no service), a round before Slurm's FIFO order let it run
    assert [cases[j] for j in later] == ["compared", "compared"]
    assert report.jobs[2].slurm_minus_policy == 10.0
    out = CliRunner().invoke(app, ["report", "--config", _config(tmp_path, cfg), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["summary"]["jobs"] == 3


def _config(tmp: Path, cfg: ControllerConfig) -> str:
    path = tmp / "controller.toml"
    path.write_text(f'[controller]\nstore = "{cfg.store}"\nheartbeat = "{cfg.heartbeat}"\n'
                    'plugin_config = ""\ndry_run = true\n[scheduling]\npolicy = "las"\n')
    return str(path)
