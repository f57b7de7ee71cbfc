"""Record what this machine's Slurm prints for one fixed scene, for the parser tests.

    python3 tests/slurm/record_fixtures.py            # -> tests/slurm/fixtures/<major.minor>/

Run it once per supported Slurm (the host's, and inside each CI chroot): the parser tests
(``test_dialects.py``, ``test_squeue_plain.py``) read every version directory they find and
assert that all versions parse to the same records, and that the plain read gives what the
JSON gives. The scene, on 3 v100 + 1 k80 nodes x 4 GPUs:

1. ``--gres=gpu:v100:2`` running        5. ``-N2 --gres=gpu:4`` pending (Resources)
2. ``--gres=gpu:4`` running             6. ``--gres=gpu:1`` in the unmanaged ``plain`` partition
3. ``--gpus=3`` running                 7. ``--gres=gpu:1`` started, then ``requeuehold``
4. ``--gres=gpu:1 --hold`` (user hold)  8. ``--array=0-3%2 --hold``, tasks 0-1 split off
   named and commented with a newline, ``|``, commas and a tab, excluding node4;
and node4 (the k80 one) drained.

Jobs land where Slurm puts them; the tests assert what must hold whatever the placement. The
plain read's secret tokens are written as ``<F>`` (a field's end) and ``<R>`` (a record's).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from blox_slurm.emulator.cluster import Emulator
from blox_slurm.emulator.spec import EmulatorSpec, parse_gpus
from blox_slurm.slurm.cli_backend import CliBackend

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GROUPS = "v100:4x3,k80:4x1"
HOSTILE = "odd|name, with\ta tab\nand a newline"
SCENE = (  # (sbatch options, final state the recording waits for)
    (["--gres=gpu:v100:2"], "RUNNING"),
    (["--gres=gpu:4"], "RUNNING"),
    (["--gpus=3"], "RUNNING"),
    (["--gres=gpu:1", "--hold", f"--job-name={HOSTILE}", f"--comment={HOSTILE}",
      "--exclude=node4"], "PENDING"),
    (["-N2", "--gres=gpu:4"], "PENDING"),
    (["--partition=plain", "--gres=gpu:1"], "RUNNING"),
    (["--gres=gpu:1"], "RUNNING"),
    (["--array=0-3%2", "--hold", "--gres=gpu:1"], "PENDING"),
)
COMMANDS = {  # file name -> argv (``scontrol show nodes --json`` exists from 23.02 on)
    "squeue.json": ["squeue", "--json", "--states=all"],
    "sinfo.json": ["sinfo", "--json"],
    "scontrol_show_nodes.json": ["scontrol", "show", "nodes", "--json"],
    "scontrol_d_show_job.txt": ["scontrol", "-d", "show", "job", "-o"],
    "scontrol_show_node.txt": ["scontrol", "show", "node", "-o"],
}
DRAINED = "node4"  # the k80 node


def _wait(client: CliBackend, want: dict[int, str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        seen = {j.job_id: j.state for j in client.list_jobs()}
        if all(seen.get(i) == s for i, s in want.items()):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"the scene did not settle: want {want}, Slurm shows {seen}")
        time.sleep(0.3)


def play(client: CliBackend, workdir: Path) -> None:
    """Submit the scene, requeuehold job 7 once it runs, split two array tasks off, drain
    one node."""
    ids = []
    for options, _ in SCENE:
        partition = [] if any(o.startswith("--partition") for o in options) else [
            "--partition=blox"]
        ids.append(client.submit([*partition, *options, f"--chdir={workdir}",
                                  "--output=/dev/null", "--wrap", "sleep 600"]))
    _wait(client, {i: s for i, (_, s) in zip(ids, SCENE, strict=True)})
    client.requeue_hold([ids[-2]])
    client.split_array(ids[-1], [0, 1])
    client.update_nodes([DRAINED], "drain", "recorded for the parser tests")
    _wait(client, {ids[-2]: "PENDING"})


def plain_reads(client: CliBackend) -> dict[str, str]:
    """The plain queue read (and 22.05's excluded-nodes read), tokens as ``<F>``/``<R>``."""
    dialect = client.dialect()
    fmt = client._queue.plain_format(dialect)
    argv = dialect.plain_squeue
    reads = {"squeue_plain.txt": argv}
    if not fmt.exc_nodes:
        reads["squeue_exc_nodes.txt"] = [*argv, "-o", "%A %x"]
    return {name: client.runner.run(argv, idempotent=True)
            .replace(fmt.record_end, "<R>").replace(fmt.field_end, "<F>")
            for name, argv in reads.items()}


def record(out_root: Path) -> Path:
    with tempfile.TemporaryDirectory(prefix="blox-record-") as tmp:
        emu = Emulator(EmulatorSpec(run_dir=Path(tmp) / "emu", groups=parse_gpus(GROUPS)))
        emu.up()
        try:
            client = emu.client()
            play(client, Path(tmp))
            out = out_root / client.dialect().series
            out.mkdir(parents=True, exist_ok=True)
            for name, argv in COMMANDS.items():
                if name == "scontrol_show_nodes.json" and client.dialect().node_argv[0] != (
                        "scontrol"):
                    continue
                (out / name).write_text(client.runner.run(argv, idempotent=True))
            for name, text in plain_reads(client).items():
                (out / name).write_text(text)
            (out / "release.txt").write_text(client.version() + "\n")
        finally:
            emu.down()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=FIXTURES, help="fixtures root")
    out = record(ap.parse_args().out)
    print(f"recorded {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
