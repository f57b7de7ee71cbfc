"""docs/policy-author-guide.md, executed: its policy file and composition are extracted from the
document, simulated through the CLI, then run by the controller against a real slurmctld."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
from _live import wait_for
from typer.testing import CliRunner

from blox_slurm.cli import app
from blox_slurm.demo.world import FakeJob, ManagedWorld
from blox_slurm.slurm.controller import Controller
from blox_slurm.slurm.controller_config import load_config
from blox_slurm.slurm.store import Store

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "policy-author-guide.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", GUIDE.read_text(), re.S)


@pytest.fixture(scope="module")
def policy_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One copy for the whole module: registering the same name from two files is an error."""
    (code,) = [b for b in blocks("python") if "@register" in b]
    (comp,) = [b for b in blocks("toml") if "[scheduling]" in b]
    base = tmp_path_factory.mktemp("guide")
    policy, composition = base / "smallest_first.py", base / "smallest.toml"
    policy.write_text(code)
    composition.write_text(comp)
    return policy, composition


def test_the_guide_policy_simulates(policy_files: tuple[Path, Path]) -> None:
    policy, composition = policy_files
    result = CliRunner().invoke(app, [
        "simulate", "--policy-path", str(policy), "-c", str(composition), "-n", "300",
        "--rate", "8", "--gpu-demand", "blox-multi-gpu", "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout[result.stdout.index("["):])
    assert row["composition"] == "smallest-first" and row["count"] == 300


@pytest.mark.slurm
def test_the_guide_policy_drives_slurm_unchanged(policy_files: tuple[Path, Path],
                                                  tmp_path: Path) -> None:
    policy, composition = policy_files
    with ManagedWorld(shape="gpu:2x1") as world:  # one node, 2 GPUs
        config = tmp_path / "controller.toml"
        config.write_text(
            "[controller]\npartitions = [\"blox\"]\nround_seconds = 0.5\n"
            f"store = \"{tmp_path / 'state.db'}\"\nheartbeat = \"{world.heartbeat}\"\n"
            f"slurm_conf = \"{world.emu.conf}\"\n"
            f"policy_paths = [\"{policy}\"]\ncomposition = \"{composition}\"\n")
        cfg, comp = load_config(config)
        assert comp.scheduling.policy_name == "smallest_first"  # type: ignore[attr-defined]
        big = world.submit_fake(FakeJob("daemon", 2, 20, 0.0), iters_per_sec=10)
        small = world.submit_fake(FakeJob("bin", 1, 20, 0.0), iters_per_sec=10)
        ctl = Controller(cfg, comp, world.client(), Store(cfg.store))
        stop = threading.Event()
        thread = threading.Thread(target=ctl.run, args=(stop,), daemon=True)
        thread.start()
        try:
            wait_for(lambda: not {big, small} & {j.job_id for j in world.client().list_jobs()},
                     90, "both jobs to finish")
        finally:
            stop.set()
            thread.join(30)
        first_start = {r["job_id"]: r["round_id"] for r in ctl.store.db.query(
            "SELECT job_id, MIN(round_id) AS round_id FROM decisions WHERE kind = 'start' "
            "GROUP BY job_id")}
        # FIFO would start the earlier 2-GPU job first; smallest-first starts the 1-GPU one.
        assert first_start[small] < first_start[big]
        for job_id, user in ((big, "daemon"), (small, "bin")):
            assert (world.progress(job_id, user) or {}).get("iteration") == 20
