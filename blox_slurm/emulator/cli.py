"""``blox-slurm emulator up|down|status``, ``blox-slurm fake-train``, ``blox-slurm doctor``.

Exit codes as in :mod:`blox_slurm.cli`: 1 runtime failure (a daemon died, a port is taken,
Slurm is missing), 2 bad input (a malformed ``--gpus``, an unknown auth).
"""

from __future__ import annotations

import json
import os
from contextlib import AbstractContextManager
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from ..cli_errors import exit_codes
from .errors import EmulatorError, SpecError
from .spec import Auth, EmulatorSpec, NodeGroup, parse_gpus


def default_run_dir() -> Path:
    """``$BLOX_EMULATOR_DIR``, else a per-user directory under /tmp (no spaces, short: the
    paths end up in slurm.conf and in unix socket names)."""
    return Path(os.environ.get("BLOX_EMULATOR_DIR") or f"/tmp/blox-slurm-emulator-{os.getuid()}")


RunDirOpt = Annotated[
    Path | None,
    typer.Option("--run-dir", help="Emulator state directory (default: $BLOX_EMULATOR_DIR, "
                                   "else blox-slurm-emulator-UID in /tmp)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def _errors() -> AbstractContextManager[None]:
    return exit_codes((SpecError, ValueError), (EmulatorError,))


def _emit(data: dict[str, object], as_json: bool, text: str) -> None:
    typer.echo(json.dumps(data, indent=1) if as_json else text)


# A group of commands in its own module, as Typer documents it: blox_slurm.cli adds it to the app.
emulator_app = typer.Typer(
    help="A local Slurm cluster with emulated GPU nodes (real slurmctld/slurmd).",
    no_args_is_help=True,
)


@emulator_app.command()
def up(
    run_dir: RunDirOpt = None,
    nodes: Annotated[int, typer.Option(help="Number of nodes (ignored with --gpus).")] = 4,
    gpus_per_node: Annotated[int, typer.Option(help="GPUs per node (ignored with --gpus).")] = 4,
    gpu_type: Annotated[str, typer.Option(help="GPU type (ignored with --gpus).")] = "gpu",
    gpus: Annotated[str | None, typer.Option(
        help="Node groups TYPE:GPUSxNODES, comma-separated, e.g. v100:4x4,k80:4x2.")] = None,
    cpus: Annotated[int, typer.Option(help="CPUs per node.")] = 8,
    memory_mb: Annotated[int, typer.Option(help="Memory per node in MB.")] = 32768,
    auth: Annotated[str, typer.Option(help="none, or munge (runs a private munged).")] = "none",
    partition: Annotated[str, typer.Option(help="The managed partition.")] = "blox",
    plain_partition: Annotated[str, typer.Option(help="The unmanaged partition.")] = "plain",
    base_port: Annotated[int | None, typer.Option(
        help="First of N+1 consecutive ports (default: free ports chosen by the kernel).")]
    = None,
    job_submit_lua: Annotated[Path | None, typer.Option(
        help="A job_submit.lua to copy beside slurm.conf (enables JobSubmitPlugins=lua).")]
    = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for all nodes idle.")] = 30.0,
    foreground: Annotated[bool, typer.Option(
        help="Stay in the foreground; stop the cluster on SIGTERM/Ctrl-C (containers).")]
    = False,
    as_json: JsonOpt = False,
) -> None:
    """Start the emulator and wait until every node is idle."""
    from .cluster import Emulator

    with _errors():
        groups = parse_gpus(gpus) if gpus else (NodeGroup(gpu_type, gpus_per_node, nodes),)
        if auth not in ("none", "munge"):
            raise SpecError(f"--auth must be none or munge, not {auth!r}")
        auth_kind: Auth = "munge" if auth == "munge" else "none"
        spec = EmulatorSpec(
            run_dir=run_dir or default_run_dir(), groups=groups, cpus_per_node=cpus,
            memory_mb=memory_mb, auth=auth_kind, managed_partition=partition,
            plain_partition=plain_partition, base_port=base_port,
            job_submit_lua=job_submit_lua,
        )
        emu = Emulator(spec)
        if foreground:
            emu.catch_stop_signals()
        seconds = emu.up(timeout=timeout)
        total = sum(g.gpus_per_node * g.count for g in groups)
        _emit(
            {"run_dir": str(emu.layout.root), "slurm_conf": str(emu.conf),
             "nodes": spec.num_nodes, "gpus": total, "seconds": round(seconds, 3)},
            as_json,
            f"{spec.num_nodes} nodes, {total} GPUs idle in {seconds:.2f} s\n"
            f"export SLURM_CONF={emu.conf}",
        )
        if foreground:
            rc = emu.wait()
            emu.down()
            raise typer.Exit(rc)


@emulator_app.command()
def down(
    run_dir: RunDirOpt = None,
    keep_logs: Annotated[bool, typer.Option(help="Keep the run directory (logs).")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Cancel the jobs, stop exactly the daemons `up` started, remove the run directory."""
    from .cluster import Emulator

    with _errors():
        emu = Emulator.attach(run_dir or default_run_dir())
        seconds = emu.down(keep_files=keep_logs)
        _emit({"seconds": round(seconds, 3)}, as_json, f"stopped in {seconds:.2f} s")


@emulator_app.command()
def status(run_dir: RunDirOpt = None, as_json: JsonOpt = False) -> None:
    """Daemons, controller and node states; exit code 1 unless all is well."""
    from .cluster import Emulator

    with _errors():
        st = Emulator.attach(run_dir or default_run_dir()).status()
        lines = [
            f"run dir {st.run_dir}  (export SLURM_CONF={st.slurm_conf})",
            f"slurmctld port {st.controller_port}: "
            + ("answers" if st.controller_responds else "DOES NOT ANSWER"),
            *(f"  {name}: {'running' if ok else 'DEAD'}"
              for name, ok in st.daemons_alive.items()),
            *(f"  {n.name}: {n.state}, {n.gpus} x {n.gpu_type}" for n in st.nodes),
        ]
        _emit({**asdict(st), "healthy": st.healthy}, as_json, "\n".join(lines))
        if not st.healthy:
            raise typer.Exit(1)


def fake_train(ctx: typer.Context) -> None:
    """The fake training job run inside emulated Slurm jobs (see --help)."""
    from .fake_train import main

    raise typer.Exit(main(list(ctx.args)))
