"""The emulator launcher: spec parsing and config rendering (pure), its error messages, the CLI,
and short-lived clusters of its own (marked slurm) for what needs real daemons."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from _live import wait_for
from typer.testing import CliRunner

from blox_slurm.cli import app
from blox_slurm.emulator import cluster
from blox_slurm.emulator.cluster import Emulator, check_packages, pick_ports
from blox_slurm.emulator.conf import Layout, Ports, render_gres_conf, render_slurm_conf
from blox_slurm.emulator.errors import DaemonDied, MissingPackage, PortInUse, SpecError
from blox_slurm.emulator.fake_train import EXIT_PREEMPTED, allocated_gpus, node_speeds
from blox_slurm.emulator.spec import EmulatorSpec, NodeGroup, parse_gpus
from blox_slurm.slurm.client import SlurmError

runner = CliRunner()


def test_parse_gpu_groups() -> None:
    assert parse_gpus("v100:4x4,k80:4x2") == (NodeGroup("v100", 4, 4), NodeGroup("k80", 4, 2))
    for bad in ("v100:4x", "4x4", "v100:4x0", "v 100:1x1", ""):
        with pytest.raises(SpecError):
            parse_gpus(bad)


def test_spec_validation(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="different names"):
        EmulatorSpec(tmp_path, managed_partition="x", plain_partition="x")
    with pytest.raises(SpecError, match="job_submit.lua not found"):
        EmulatorSpec(tmp_path, job_submit_lua=tmp_path / "missing.lua")
    with pytest.raises(SpecError, match="whitespace"):
        Emulator(EmulatorSpec(tmp_path / "a b"))


def test_rendered_config(tmp_path: Path) -> None:
    lua = tmp_path / "j.lua"
    lua.write_text("return 0\n")
    spec = EmulatorSpec(tmp_path / "run", groups=parse_gpus("v100:4x2,k80:2x1"),
                        job_submit_lua=lua)
    layout = Layout(spec.run_dir)
    conf = render_slurm_conf(spec, layout, Ports(7000, (7001, 7002, 7003)), "host", "me")
    lines = conf.splitlines()
    nodes = [x for x in lines if x.startswith("NodeName=")]
    assert [x.split()[2] for x in nodes] == ["Port=7001", "Port=7002", "Port=7003"]
    assert "Gres=gpu:k80:2 Feature=k80" in nodes[2]
    for want in ("PriorityType=priority/basic", "SlurmctldPort=7000", "JobSubmitPlugins=lua",
                 f"RequeueExitHold={EXIT_PREEMPTED}", "SlurmdParameters=config_overrides",
                 "AuthType=auth/none", "SlurmUser=me"):
        assert want in lines
    assert any(x.startswith("PartitionName=blox ") and "Default=YES" in x for x in lines)
    assert any(x.startswith("PartitionName=plain ") for x in lines)
    assert "/etc" not in conf  # nothing outside the run directory
    gres = render_gres_conf(spec, layout)
    assert f"NodeName=node1,node2 Name=gpu Type=v100 File={layout.dev_dir}/nvidia[0-3]" in gres
    assert f"NodeName=node3 Name=gpu Type=k80 File={layout.dev_dir}/nvidia[0-1]" in gres


def test_missing_package_names_the_apt_package(monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.which
    monkeypatch.setattr(cluster.shutil, "which",
                        lambda b, path=None: None if b == "slurmd" else real(b, path=path))
    with pytest.raises(MissingPackage) as err:
        check_packages()
    assert "apt-get install --no-install-recommends slurmd" in str(err.value)


def test_taken_port_is_reported() -> None:
    with socket.socket() as s:
        s.bind(("", 0))
        s.listen()
        taken = s.getsockname()[1]
        with pytest.raises(PortInUse) as err:
            pick_ports(1, taken)
        assert err.value.port == taken and str(taken) in str(err.value)
    ports = pick_ports(9, None)
    assert len(set(ports)) == 9


def test_cli_bad_input_exits_2_and_missing_emulator_exits_1(tmp_path: Path) -> None:
    r = runner.invoke(app, ["emulator", "up", "--gpus", "v100:4x", "--run-dir", str(tmp_path)])
    assert r.exit_code == 2 and "TYPE:GPUSxNODES" in r.output
    r = runner.invoke(app, ["emulator", "up", "--auth", "kerberos", "--run-dir", str(tmp_path)])
    assert r.exit_code == 2
    r = runner.invoke(app, ["emulator", "status", "--run-dir", str(tmp_path / "none")])
    assert r.exit_code == 1 and "no emulator" in r.output


def test_fake_train_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "blox_slurm.emulator.fake_train", "--iterations", "400",
            "--iters-per-sec", "100", "--progress-file", str(tmp_path / "p.json"),
            "--checkpoint-file", str(tmp_path / "c.json")]
    p = subprocess.Popen(argv)  # noqa: S603
    wait_for(lambda: (tmp_path / "p.json").exists()
             and json.loads((tmp_path / "p.json").read_text())["iteration"] >= 20, 20, "progress")
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) == EXIT_PREEMPTED
    cut = json.loads((tmp_path / "c.json").read_text())["iteration"]
    assert 20 <= cut < 400
    fast = [*argv, "--time-scale", "40"]
    assert subprocess.run(fast, check=False).returncode == 0  # noqa: S603
    done = json.loads((tmp_path / "p.json").read_text())
    assert done["history"] == [[0, cut], [cut, 400]] and done["iteration"] == 400


def test_fake_train_runs_at_its_nodes_speed(tmp_path: Path) -> None:
    """``--node-speed``: a quarter of its iterations/s on the node Slurm named, full speed
    elsewhere, and the rate it ran at in its progress (what the demo measures from)."""
    def rate(node: str) -> float:
        out = tmp_path / f"{node}.json"
        argv = [sys.executable, "-m", "blox_slurm.emulator.fake_train", "--iterations", "2",
                "--iters-per-sec", "100", "--node-speed", "node1=1,node2=0.25",
                "--progress-file", str(out), "--checkpoint-file", str(tmp_path / f"{node}.c")]
        subprocess.run(argv, check=True, env={**os.environ, "SLURMD_NODENAME": node})  # noqa: S603
        return float(json.loads(out.read_text())["rate"])
    assert (rate("node1"), rate("node2"), rate("node9")) == (100.0, 25.0, 100.0)
    assert node_speeds("a=1,b=0.5") == {"a": 1.0, "b": 0.5}
    for bad in ("a", "a=0", "a=-1", "=2"):
        with pytest.raises(ValueError, match="NODE=FACTOR"):
            node_speeds(bad)


def test_an_elastic_fake_train_runs_and_batches_by_the_gpus_slurm_gave_it(
        tmp_path: Path) -> None:
    """``--scaling 0.5``: on 3 GPUs (two nodes' CUDA_VISIBLE_DEVICES of 0,1 make 4) it runs
    1 + 0.5 (g - 1) times its one-GPU speed, with a global batch of g times its per-GPU
    one; without ``--scaling`` the GPU count changes nothing."""
    def progress(env: dict[str, str], *extra: str) -> dict[str, float]:
        out = tmp_path / "p.json"
        argv = [sys.executable, "-m", "blox_slurm.emulator.fake_train", "--iterations", "2",
                "--iters-per-sec", "100", "--batch-per-gpu", "32", *extra,
                "--progress-file", str(out), "--checkpoint-file", str(tmp_path / "c.json")]
        (tmp_path / "c.json").unlink(missing_ok=True)
        subprocess.run(argv, check=True, env={**os.environ, **env})  # noqa: S603
        p = json.loads(out.read_text())
        return {k: float(p[k]) for k in ("rate", "gpus", "batch_size")}
    three = {"CUDA_VISIBLE_DEVICES": "0,1,2", "SLURM_JOB_NUM_NODES": "1"}
    assert progress(three, "--scaling", "0.5") == {"rate": 200.0, "gpus": 3, "batch_size": 96}
    two_nodes = {"CUDA_VISIBLE_DEVICES": "0,1", "SLURM_JOB_NUM_NODES": "2"}
    assert progress(two_nodes, "--scaling", "0.5") == {"rate": 250.0, "gpus": 4,
                                                       "batch_size": 128}
    assert progress(three)["rate"] == 100.0
    assert allocated_gpus({}) == allocated_gpus({"CUDA_VISIBLE_DEVICES": ""}) == 1
    assert allocated_gpus({"CUDA_VISIBLE_DEVICES": "1,3", "SLURM_JOB_NUM_NODES": "x"}) == 2


# ---------------------------------------------------------------- with real daemons


@pytest.mark.slurm
def test_daemon_dying_at_start_shows_its_log(tmp_path: Path) -> None:
    emu = Emulator(EmulatorSpec(tmp_path / "run", groups=parse_gpus("gpu:1x1"),
                                extra_conf=("NoSuchOption=1",)))
    with pytest.raises(DaemonDied) as err:
        emu.up(timeout=20)
    assert err.value.daemon == "slurmctld" and "NoSuchOption" in str(err.value)
    assert not emu.daemons and not any(cluster._alive(p) for p in emu._children)


@pytest.mark.slurm
def test_job_submit_lua_is_installed_and_enforced(tmp_path: Path) -> None:
    lua = tmp_path / "job_submit.lua"
    lua.write_text(
        'function slurm_job_submit(job_desc, part_list, submit_uid)\n'
        '  if job_desc.comment == "reject-me" then\n'
        '    slurm.log_user("rejected by the test plugin")\n'
        '    return slurm.ERROR\n'
        '  end\n'
        '  return slurm.SUCCESS\n'
        'end\n'
        'function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)\n'
        '  return slurm.SUCCESS\n'
        'end\n'
        'return slurm.SUCCESS\n'
    )
    emu = Emulator(EmulatorSpec(tmp_path / "run", groups=parse_gpus("gpu:1x1"),
                                job_submit_lua=lua))
    emu.up()
    try:
        assert (emu.layout.root / "job_submit.lua").read_text() == lua.read_text()
        c = emu.client()
        with pytest.raises(SlurmError, match="rejected by the test plugin"):
            c.submit(["--comment=reject-me", "--output=/dev/null", "--wrap", "true"])
        assert c.submit(["--output=/dev/null", "--hold", "--wrap", "true"]) > 0
    finally:
        emu.down()


@pytest.mark.slurm
def test_item17_munge_auth_lets_ordinary_users_submit(tmp_path: Path) -> None:
    """Root and an ordinary user submit (red team item 17: the munge directory was 0700, so
    every non-root sbatch failed with "Failed to access munge.socket: Permission denied")."""
    tmp_path.chmod(0o755)  # pytest's own parents are 0700: the run dir must be reachable
    for parent in tmp_path.parents[:2]:
        parent.chmod(parent.stat().st_mode | 0o011)
    emu = Emulator(EmulatorSpec(tmp_path / "run", groups=parse_gpus("gpu:1x1"), auth="munge"))
    emu.up()
    try:
        assert "AuthType=auth/munge" in emu.conf.read_text()
        c = emu.client()
        jobs = [c.submit(["--output=/dev/null", "--chdir=/tmp", "--gres=gpu:1", "--wrap",
                          "true"], as_user=user) for user in (None, "nobody")]
        wait_for(lambda: all((j := c.get_job(i)) is not None and j.state == "COMPLETED"
                             for i in jobs), 20, "the munge-authenticated jobs")
        assert c.get_job(jobs[1]).user == "nobody"  # type: ignore[union-attr]
        assert (emu.layout.munge_dir / "munge.key").stat().st_mode & 0o077 == 0
    finally:
        emu.down()
    assert not any(cluster._alive(d.pid) for d in emu.daemons)


@pytest.mark.slurm
def test_cli_up_8x4_status_down_leaves_nothing(tmp_path: Path) -> None:
    run_dir = tmp_path / "cli"
    cli = [sys.executable, "-c", "from blox_slurm.cli import app; app()", "emulator"]

    def blox(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, *args, "--run-dir", str(run_dir), "--json"],  # noqa: S603
                              capture_output=True, text=True, timeout=60, check=False)

    # A shell of the user's that exported BLOX_EMULATOR_DIR (as docs/emulator.md suggests)
    # is not the emulator's: `down` once killed it.
    bystander = subprocess.Popen(["sleep", "300"],  # noqa: S603, S607
                                 env={**os.environ, "BLOX_EMULATOR_DIR": str(run_dir.resolve())})
    up = blox("up", "--nodes", "8", "--gpus-per-node", "4")
    assert up.returncode == 0, up.stderr
    assert json.loads(up.stdout)["seconds"] > 0  # how long it took: benchmarks/, not here
    pids = [d["pid"] for d in json.loads((run_dir / "emulator.json").read_text())["daemons"]]
    assert len(pids) == 9
    st = blox("status")
    assert st.returncode == 0 and json.loads(st.stdout)["healthy"]
    assert [n["state"] for n in json.loads(st.stdout)["nodes"]] == ["idle"] * 8
    again = blox("up")
    assert again.returncode == 1 and "already runs" in again.stderr
    down = blox("down")
    assert down.returncode == 0, down.stderr
    assert not any(cluster._alive(p) for p in pids)
    assert bystander.poll() is None, "down killed a process that was not the emulator's"
    bystander.kill()
    bystander.wait()
    assert not run_dir.exists()
    tag = f"{cluster.TAG}={run_dir.resolve()}".encode()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                assert tag not in (proc / "environ").read_bytes().split(b"\0"), proc
            except OSError:
                continue


@pytest.mark.slurm
def test_foreground_mode_stops_the_cluster_on_sigterm(tmp_path: Path) -> None:
    """What the container's entrypoint does on `docker stop`."""
    run_dir = tmp_path / "fg"
    p = subprocess.Popen(  # noqa: S603
        [sys.executable, "-c", "from blox_slurm.cli import app; app()", "emulator", "up",
         "--foreground", "--nodes", "2", "--run-dir", str(run_dir)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert p.stdout is not None
        assert "idle in" in p.stdout.readline()
        pids = [d["pid"] for d in json.loads((run_dir / "emulator.json").read_text())["daemons"]]
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 0
        assert not any(cluster._alive(pid) for pid in pids) and not run_dir.exists()
    finally:  # a failed run must not leave a cluster behind
        if p.poll() is None:
            p.kill()
        if (run_dir / "emulator.json").exists():
            Emulator.attach(run_dir).down()
