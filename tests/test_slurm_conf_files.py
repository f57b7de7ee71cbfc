"""Static checks of the files admins copy from slurm_conf/: systemd units, slurm.conf and
gres.conf fragments, the job-submit plugin's config example. No systemd, no Slurm needed.

The units start these `blox-slurm` sub-commands, which must exist in the CLI: `run --config`,
`agent --controller --token-file`, `handback --if-stale --config`.
"""

from __future__ import annotations

import configparser
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from blox_slurm.slurm.job_submit import JobSubmitConfig, read_config

CONF = Path(__file__).resolve().parents[1] / "slurm_conf"
BIN = "/usr/local/bin/blox-slurm"
CONTROLLER_TOML = "/etc/blox-slurm/controller.toml"


def unit(name: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # systemd keys are cased
    parser.read_string((CONF / name).read_text())
    return parser


def exec_start(name: str) -> list[str]:
    argv = shlex.split(unit(name)["Service"]["ExecStart"])
    assert argv[0] == BIN, f"{name}: ExecStart must run {BIN}"
    return argv[1:]


def test_controller_unit() -> None:
    u = unit("blox-slurm-controller.service")
    s = u["Service"]
    assert exec_start("blox-slurm-controller.service") == ["run", "--config", CONTROLLER_TOML]
    assert s["KillSignal"] == "SIGTERM" and s["Restart"] == "on-failure"
    assert int(s["TimeoutStopSec"]) >= 60  # a 30 s round and its scontrol calls fit
    assert s["User"] == "blox" and s["Type"] == "notify" and s["NotifyAccess"] == "main"
    assert int(s["WatchdogSec"]) >= 30  # the controller pings at a third of it
    assert s["RestartPreventExitStatus"] == "2"  # a config error: no restart loop
    assert s["StateDirectory"] == "blox-slurm"  # /var/lib/blox-slurm: the heartbeat's home
    assert s["StateDirectoryMode"] == "0755"  # slurmctld must be able to read the heartbeat
    assert "slurmctld.service" in u["Unit"]["After"]
    assert u["Install"]["WantedBy"] == "multi-user.target"


def test_agent_unit() -> None:
    u = unit("blox-slurm-agent.service")
    argv = exec_start("blox-slurm-agent.service")
    assert argv[0] == "agent" and "--controller" in argv and "--token-file" in argv
    assert argv[argv.index("--controller") + 1].endswith(":9300")  # telemetry_listen's port
    assert u["Service"]["Type"] == "notify" and int(u["Service"]["WatchdogSec"]) >= 30
    assert u["Service"]["Restart"] == "on-failure" and u["Service"]["KillSignal"] == "SIGTERM"
    assert u["Install"]["WantedBy"] == "multi-user.target"


def test_handback_watchdog_runs_every_minute() -> None:
    service = unit("blox-slurm-handback.service")
    s = service["Service"]
    assert exec_start("blox-slurm-handback.service") == [
        "handback", "--if-stale", "--config", CONTROLLER_TOML
    ]
    assert s["Type"] == "oneshot" and s["User"] == "blox"
    assert "Install" not in service  # started by its timer only
    timer = unit("blox-slurm-handback.timer")
    t = timer["Timer"]
    assert t["Unit"] == "blox-slurm-handback.service"
    assert t["OnUnitActiveSec"] == "60" and int(t["AccuracySec"]) <= 10
    assert timer["Install"]["WantedBy"] == "timers.target"


@pytest.mark.parametrize("name", ["blox-slurm-controller.service", "blox-slurm-handback.service"])
def test_units_that_drive_slurm_point_at_its_config(name: str) -> None:
    assert unit(name)["Service"]["Environment"] == "SLURM_CONF=/etc/slurm/slurm.conf"


def _slurm_conf() -> dict[str, str]:
    lines = [ln.split("#", 1)[0].strip() for ln in (CONF / "slurm.conf.example").read_text()
             .splitlines()]
    return dict(ln.split("=", 1) for ln in lines if ln and not ln.startswith(
        ("NodeName=", "PartitionName=")))


def test_slurm_conf_fragment() -> None:
    conf = _slurm_conf()
    assert conf["PriorityType"] == "priority/basic"
    assert conf["JobSubmitPlugins"] == "lua"
    assert conf["JobRequeue"] == "1"
    assert conf["GresTypes"] == "gpu"
    assert conf["JobFileAppend"] == "1"


def test_examples_agree_with_each_other() -> None:
    """The managed partition exists in slurm.conf with GPU nodes that gres.conf describes,
    and the plugin's example config is valid and uses the controller's state directory."""
    text = (CONF / "slurm.conf.example").read_text()
    partitions = dict(re.findall(r"^PartitionName=(\S+) Nodes=(\S+)", text, re.M))
    config, err = read_config(CONF / "blox_job_submit.conf.example")
    assert err is None and config == JobSubmitConfig()  # the example documents the defaults
    for name in config.managed_partitions:
        assert name in partitions
    gpu_nodes = re.findall(r"^NodeName=(\S+) .*Gres=gpu:", text, re.M)
    gres = (CONF / "gres.conf.example").read_text()
    for nodes in gpu_nodes:
        assert re.search(rf"^NodeName={re.escape(nodes)} Name=gpu ", gres, re.M)
    assert config.heartbeat.startswith("/var/lib/blox-slurm/")


def test_systemd_accepts_every_unit(tmp_path: Path) -> None:
    """``systemd-analyze verify`` on each unit as an admin installs it (ExecStart pointing at
    the installed ``blox-slurm``, which must exist and be executable): no unknown keys, no
    bad values, nothing it warns about."""
    installed = shutil.which("blox-slurm")
    assert installed, "blox-slurm is not on PATH: install the package first"
    names = sorted(p.name for p in CONF.iterdir() if p.suffix in (".service", ".timer"))
    for name in names:
        (tmp_path / name).write_text((CONF / name).read_text().replace(BIN, installed))
    p = subprocess.run(["systemd-analyze", "verify", "--man=no",  # noqa: S603, S607
                        *(str(tmp_path / n) for n in names)],
                       capture_output=True, text=True, check=False)
    assert p.returncode == 0 and p.stderr == "", p.stderr


def test_the_service_user_and_config_directory_are_created_as_documented(
        tmp_path: Path) -> None:
    """systemd-sysusers and systemd-tmpfiles, run on an empty root, make the ``blox`` user
    the units run as and /etc/blox-slurm readable by it and by nobody but root."""
    (tmp_path / "etc").mkdir()
    for tool, name in (("systemd-sysusers", "blox-slurm.sysusers"),
                       ("systemd-tmpfiles", "blox-slurm.tmpfiles")):
        argv = [tool, f"--root={tmp_path}", *(["--create"] if "tmpfiles" in tool else []),
                str(CONF / name)]
        p = subprocess.run(argv, capture_output=True, text=True, check=False)  # noqa: S603
        assert p.returncode == 0, (tool, p.stderr)
    users = {ln.split(":")[0]: ln.split(":") for ln in
             (tmp_path / "etc/passwd").read_text().splitlines()}
    assert "blox" in users and users["blox"][-1].endswith("nologin")
    assert users["blox"][5] == "/var/lib/blox-slurm"
    gid = next(int(ln.split(":")[2]) for ln in (tmp_path / "etc/group").read_text()
               .splitlines() if ln.startswith("blox:"))
    st = (tmp_path / "etc/blox-slurm").stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (0, gid, 0o750)
    assert unit("blox-slurm-controller.service")["Service"]["Group"] == "blox"
