"""Start, inspect and stop an emulated Slurm cluster made of real Slurm daemons.

One ``slurmctld`` and one ``slurmd -N nodeK`` per node, all in the foreground (``-D``) as our
own children in a new session, so we know their pids without trusting daemon pid files. The
pids go into ``emulator.json`` in the run directory; ``down`` signals exactly those (after
checking each still runs *our* command line, so a recycled pid is never hit), all slurmds at
once because each takes ~2 s to stop.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..slurm.cli_backend import CliBackend
from ..slurm.client import SlurmError
from ..slurm.runner import RetryPolicy
from .conf import (
    Layout,
    Ports,
    check_path,
    device_names,
    render_cgroup_conf,
    render_gres_conf,
    render_slurm_conf,
)
from .errors import DaemonDied, EmulatorError, MissingPackage, NotRunning, PortInUse
from .spec import EmulatorSpec, spec_from_dict, spec_to_dict

#: binary -> the Debian package that provides it
REQUIRED = {
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sinfo": "slurm-client",
    "squeue": "slurm-client",
    "scontrol": "slurm-client",
    "sbatch": "slurm-client",
    "scancel": "slurm-client",
}
MUNGE = {"munged": "munge", "mungekey": "munge"}
# Set in every daemon's environment: marks its descendants as ours, for `down` to stop. A name
# of its own: BLOX_EMULATOR_DIR (users export it) once made `down` kill the calling shell.
TAG = "BLOX_EMULATOR_OWNED_BY"

_NO_RETRY = RetryPolicy(attempts=1)


def check_packages(auth: str = "none") -> dict[str, str]:
    """Path of every binary the emulator needs; :class:`MissingPackage` names the apt package."""
    found = {}
    for binary, package in {**REQUIRED, **(MUNGE if auth == "munge" else {})}.items():
        path = shutil.which(binary) or shutil.which(binary, path="/usr/sbin:/sbin")
        if path is None:
            raise MissingPackage(binary, package)
        found[binary] = path
    for daemon in ("slurmctld", "slurmd"):
        if "emulator" in os.path.realpath(found[daemon]):
            raise EmulatorError(
                f"{found[daemon]} points at slurm-wlm-emulator's front-end build, which cannot "
                f"start: `update-alternatives --set {daemon} /usr/sbin/{daemon}-wlm`"
            )
    return found


def daemon_release(slurmd: str) -> tuple[int, int]:
    """(major, minor) of the installed slurmd: the files it accepts differ by version."""
    out = subprocess.run([slurmd, "-V"], capture_output=True, text=True, timeout=30)  # noqa: S603
    found = re.search(r"(\d+)\.(\d+)", out.stdout)
    if out.returncode != 0 or found is None:
        printed = (out.stdout + out.stderr).strip()
        raise EmulatorError(f"`{slurmd} -V` printed no version: {printed}")
    return int(found[1]), int(found[2])


def pick_ports(count: int, base: int | None) -> list[int]:
    """``count`` ports: consecutive from ``base`` (each checked free), else chosen by the
    kernel. All probe sockets stay open until every port is chosen, so no two coincide."""
    with contextlib.ExitStack() as stack:
        ports = []
        for i in range(count):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            port = 0 if base is None else base + i
            try:
                s.bind(("", port))
            except OSError:
                raise PortInUse(port) from None
            ports.append(s.getsockname()[1])
        return ports


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    """Running and not a zombie (works for processes that are not our children)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@dataclass
class Daemon:
    """One process we started: what it is, its pid, its log."""

    name: str  # "slurmctld", "slurmd node3", "munged"
    pid: int
    log: str
    marker: str  # a string its command line must contain for us to signal it

    def ours(self) -> bool:
        return _alive(self.pid) and self.marker in _cmdline(self.pid)


@dataclass
class NodeStatus:
    name: str
    state: str
    gpus: int
    gpu_type: str


@dataclass
class EmulatorStatus:
    run_dir: str
    slurm_conf: str
    controller_port: int
    daemons_alive: dict[str, bool]
    controller_responds: bool
    nodes: list[NodeStatus] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """Every daemon alive, slurmctld answering, every node up (possibly drained)."""
        up = ("idle", "mixed", "allocated")
        return (
            self.controller_responds
            and all(self.daemons_alive.values())
            and all(n.state.split("+")[0] in up and "not_responding" not in n.state
                    for n in self.nodes)
        )


class Emulator:
    """One emulated cluster in one run directory."""

    def __init__(self, spec: EmulatorSpec) -> None:
        check_path(spec.run_dir)
        self.spec = spec
        self.layout = Layout(spec.run_dir.resolve())
        self.daemons: list[Daemon] = []
        self.ports: Ports | None = None
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._stop_requested = False

    # ------------------------------------------------------------------ public

    @classmethod
    def attach(cls, run_dir: Path) -> Emulator:
        """The emulator whose state file is in ``run_dir`` (for ``status``/``down``)."""
        state_file = Layout(run_dir.resolve()).state_file
        try:
            data = json.loads(state_file.read_text())
        except FileNotFoundError:
            raise NotRunning(f"no emulator in {run_dir} (no {state_file.name})") from None
        emu = cls(spec_from_dict(data["spec"]))
        emu.ports = Ports(data["ports"]["controller"], tuple(data["ports"]["nodes"]))
        emu.daemons = [Daemon(**d) for d in data["daemons"]]
        return emu

    @property
    def conf(self) -> Path:
        return self.layout.slurm_conf

    def env(self) -> dict[str, str]:
        """What a client needs to talk to this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def client(self, timeout: float = 10.0) -> CliBackend:
        return CliBackend(str(self.conf), timeout=timeout)

    def up(self, timeout: float = 30.0) -> float:
        """Start the cluster and wait until every node is idle; returns the seconds it took.
        On any failure everything already started is stopped again."""
        t0 = time.monotonic()
        binaries = check_packages(self.spec.auth)
        if self.layout.state_file.exists():
            old = Emulator.attach(self.layout.root)
            if any(d.ours() for d in old.daemons):
                raise EmulatorError(
                    f"an emulator already runs in {self.layout.root}: `blox-slurm emulator "
                    f"down --run-dir {self.layout.root}` first"
                )
        ports = pick_ports(self.spec.num_nodes + 1, self.spec.base_port)
        self.ports = Ports(ports[0], tuple(ports[1:]))
        self._write_files(daemon_release(binaries["slurmd"]))
        deadline = t0 + timeout
        try:
            if self.spec.auth == "munge":
                self._start_munge(binaries)
            self._start_controller(binaries["slurmctld"], deadline)
            for node in self.spec.node_names():
                self._start(
                    f"slurmd {node}",
                    [binaries["slurmd"], "-D", "-f", str(self.conf), "-N", node],
                    self.layout.node_log(node),
                    marker=str(self.conf),
                )
            self._wait_idle(deadline)
        except BaseException:
            self.down(keep_files=True)
            raise
        return time.monotonic() - t0

    def down(self, keep_files: bool = False, timeout: float = 15.0) -> float:
        """Cancel the jobs, stop every daemon we started, remove the run directory (unless
        ``keep_files``: logs for a post-mortem). Returns the seconds it took."""
        t0 = time.monotonic()
        ctld = next((d for d in self.daemons if d.name == "slurmctld"), None)
        if ctld is not None and ctld.ours():
            self._cancel_all_jobs(deadline=t0 + min(timeout / 2, 8.0))
        slurm = [d for d in self.daemons if d.name != "munged" and d.ours()]
        self._stop(slurm, t0 + timeout)
        self._stop(self._descendants(), t0 + timeout)  # job steps a dead slurmd left behind
        self._stop([d for d in self.daemons if d.name == "munged" and d.ours()], t0 + timeout)
        for child in self._children.values():  # reap children that died before `down`
            child.poll()
        self._children.clear()
        self.daemons = []
        if keep_files:
            self.layout.state_file.unlink(missing_ok=True)
        else:
            shutil.rmtree(self.layout.root, ignore_errors=True)
        return time.monotonic() - t0

    def status(self) -> EmulatorStatus:
        client = CliBackend(str(self.conf), timeout=5.0, retry=_NO_RETRY)
        responds = client.ping()
        nodes = []
        if responds:
            with contextlib.suppress(SlurmError):
                nodes = [
                    NodeStatus(
                        n.name,
                        n.state + "".join(f"+{f.lower()}" for f in sorted(n.flags)),
                        n.gpus_total,
                        n.gpu_type,
                    )
                    for n in client.list_nodes()
                ]
        assert self.ports is not None
        return EmulatorStatus(
            run_dir=str(self.layout.root),
            slurm_conf=str(self.conf),
            controller_port=self.ports.controller,
            daemons_alive={d.name: d.ours() for d in self.daemons},
            controller_responds=responds,
            nodes=nodes,
        )

    def restart_controller(self, timeout: float = 20.0, lose_state: bool = False) -> float:
        """Stop slurmctld and start it again on the same StateSaveLocation (no ``-c``):
        jobs keep running, held jobs stay held. ``lose_state`` empties the StateSaveLocation
        in between, as a lost disk would: the queue is gone and job ids start again at 1.
        Returns the seconds it took."""
        t0 = time.monotonic()
        ctld = next(d for d in self.daemons if d.name == "slurmctld")
        self._stop([ctld], t0 + timeout)
        self.daemons.remove(ctld)
        if lose_state:
            for saved in self.layout.state_dir.iterdir():
                if saved.is_dir():
                    shutil.rmtree(saved)
                else:
                    saved.unlink()
        self._start_controller(check_packages(self.spec.auth)["slurmctld"], t0 + timeout)
        return time.monotonic() - t0

    def catch_stop_signals(self) -> None:
        """Make SIGTERM/SIGINT end :meth:`wait` instead of the process. Installed *before*
        ``up`` so that a ``docker stop`` during start-up still stops the cluster cleanly."""

        def _stop(signum: int, frame: object) -> None:
            self._stop_requested = True

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, _stop)

    def wait(self) -> int:
        """Block until a stop signal (returns 0) or until a daemon dies (returns its exit
        status, or 1): the foreground mode of the Docker entrypoint."""
        while not self._stop_requested:
            for d in self.daemons:
                if not self._running(d.pid):
                    child = self._children.get(d.pid)
                    return child.returncode if child and child.returncode else 1
            time.sleep(0.2)
        return 0

    # ------------------------------------------------------------------ start

    def _write_files(self, release: tuple[int, int]) -> None:
        L = self.layout
        for d in L.directories():
            d.mkdir(parents=True, exist_ok=True)
        for node in self.spec.node_names():
            (L.spool_dir / node).mkdir(exist_ok=True)
        assert self.ports is not None
        host = socket.gethostname().split(".")[0]
        L.slurm_conf.write_text(
            render_slurm_conf(self.spec, L, self.ports, host, getpass.getuser())
        )
        L.gres_conf.write_text(render_gres_conf(self.spec, L))
        L.cgroup_conf.write_text(render_cgroup_conf(release))
        L.plugstack_conf.write_text("")  # isolate from the host's /etc/slurm/plugstack.conf
        for name in device_names(self.spec):
            dev = L.dev_dir / name
            if not dev.is_symlink():
                dev.symlink_to("/dev/null")
        if self.spec.job_submit_lua is not None and (
            self.spec.job_submit_lua.resolve() != L.job_submit_lua.resolve()
        ):
            shutil.copyfile(self.spec.job_submit_lua, L.job_submit_lua)
        self._save()

    def _save(self) -> None:
        assert self.ports is not None
        data = {
            "spec": spec_to_dict(self.spec),
            "ports": {"controller": self.ports.controller, "nodes": list(self.ports.nodes)},
            "daemons": [d.__dict__ for d in self.daemons],
        }
        tmp = self.layout.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(self.layout.state_file)

    def _start(self, name: str, argv: list[str], log: Path, marker: str) -> Daemon:
        env = {**os.environ, "SLURM_CONF": str(self.conf), TAG: str(self.layout.root)}
        out = open(log.with_suffix(".out"), "ab")  # noqa: SIM115 - the child owns it
        try:
            child = subprocess.Popen(  # noqa: S603 - argv list of our own binaries
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        finally:
            out.close()
        self._children[child.pid] = child
        daemon = Daemon(name, child.pid, str(log), marker)
        self.daemons.append(daemon)
        self._save()
        return daemon

    def _running(self, pid: int) -> bool:
        """Alive; for our own children this also reaps them once they exit."""
        child = self._children.get(pid)
        if child is not None:
            return child.poll() is None
        return _alive(pid)

    def _check_started(self) -> None:
        for d in self.daemons:
            if not self._running(d.pid):
                child = self._children.get(d.pid)
                rc = child.returncode if child else None
                log = Path(d.log)
                tail = _tail(log) if log.exists() else _tail(log.with_suffix(".out"))
                raise DaemonDied(d.name, rc, tail)

    def _start_controller(self, binary: str, deadline: float) -> None:
        self._start(
            "slurmctld",
            [binary, "-D", "-f", str(self.conf)],
            self.layout.controller_log(),
            marker=str(self.conf),
        )
        client = CliBackend(str(self.conf), timeout=2.0, retry=_NO_RETRY)
        for _ in self._poll(deadline, "slurmctld to answer `scontrol ping`"):
            if client.ping():
                return

    def _start_munge(self, binaries: dict[str, str]) -> None:
        m = self.layout.munge_dir
        m.mkdir(exist_ok=True)
        # Searchable, not listable: every user's sbatch must reach the socket; the key stays
        # private by its own mode (mungekey writes it 0600).
        m.chmod(0o711)
        key = m / "munge.key"
        if not key.exists():
            subprocess.run(  # noqa: S603
                [binaries["mungekey"], "--create", f"--keyfile={key}"],
                check=True,
                capture_output=True,
            )
        self._start(
            "munged",
            [
                binaries["munged"], "--foreground", "--force",
                f"--socket={self.layout.munge_socket}", f"--key-file={key}",
                f"--pid-file={m / 'munged.pid'}", f"--log-file={m / 'munged.log'}",
                f"--seed-file={m / 'munged.seed'}",
            ],
            m / "munged.log",
            marker=str(self.layout.munge_socket),
        )
        for _ in self._poll(time.monotonic() + 10, "munged to create its socket"):
            if self.layout.munge_socket.exists():
                return

    def _wait_idle(self, deadline: float) -> None:
        client = CliBackend(str(self.conf), timeout=5.0, retry=_NO_RETRY)
        want = set(self.spec.node_names())
        for _ in self._poll(deadline, f"{len(want)} nodes to become idle"):
            with contextlib.suppress(SlurmError):
                idle = {n.name for n in client.list_nodes() if n.state == "idle" and not n.flags}
                if want <= idle:
                    return

    def _poll(self, deadline: float, what: str, interval: float = 0.05) -> Iterator[None]:
        """Yield until the caller returns; raise if a daemon died or time ran out."""
        while True:
            self._check_started()
            yield
            if time.monotonic() > deadline:
                tail = _tail(self.layout.controller_log())
                raise EmulatorError(f"timed out waiting for {what}; slurmctld log:\n{tail}")
            time.sleep(interval)
            interval = min(interval * 1.5, 0.5)

    # ------------------------------------------------------------------ stop

    def _cancel_all_jobs(self, deadline: float) -> None:
        """Jobs first: a slurmstepd outlives its slurmd by design, so stopping daemons alone
        would leave the jobs' processes behind."""
        client = CliBackend(str(self.conf), timeout=5.0, retry=_NO_RETRY)
        with contextlib.suppress(SlurmError):
            live = [j.job_id for j in client.list_jobs() if j.active or j.pending]
            if live:
                client.cancel(live)
            while time.monotonic() < deadline:
                if not any(j.in_run for j in client.list_jobs()):
                    return
                time.sleep(0.2)

    def _descendants(self) -> list[Daemon]:
        """Processes carrying our tag in their environment (slurmstepd and what it runs)."""
        tag = f"{TAG}={self.layout.root}".encode()
        found = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            try:
                environ = (proc / "environ").read_bytes()
            except OSError:
                continue
            if tag in environ.split(b"\0"):
                found.append(Daemon("job process", int(proc.name), "", ""))
        return found

    def _stop(self, daemons: list[Daemon], deadline: float) -> None:
        """SIGTERM all at once, wait, SIGKILL whatever is left at the deadline."""
        for d in daemons:
            with contextlib.suppress(ProcessLookupError):
                os.kill(d.pid, signal.SIGTERM)
        while any(self._running(d.pid) for d in daemons):
            if time.monotonic() > deadline:
                for d in daemons:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(d.pid, signal.SIGKILL)
                deadline = time.monotonic() + 5
                while any(self._running(d.pid) for d in daemons) and time.monotonic() < deadline:
                    time.sleep(0.05)
                return
            time.sleep(0.05)
        for d in daemons:
            self._children.pop(d.pid, None)
