"""A ``subprocess.run`` stand-in answering a :class:`CliBackend` from one Slurm version's
recorded output (``fixtures/<major.minor>/``, written by ``record_fixtures.py``): the
``--json`` reads, the plain queue read with the backend's own secret tokens put in, and the
per-job ``scontrol show job -o`` reads (on the command line, or as ``show job`` commands on
an ``scontrol``'s stdin), cut from the recorded listing of every job."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from blox_slurm.slurm.cli_backend import CliBackend
from blox_slurm.slurm.runner import RetryPolicy, Runner
from blox_slurm.slurm.squeue_plain import FIELDS

SQUEUE_NAME = dict(FIELDS)  # our field name -> squeue -O name

FILES = {
    ("squeue", "--json", "--states=all"): "squeue.json",
    ("sinfo", "--json"): "sinfo.json",
    ("scontrol", "show", "nodes", "--json"): "scontrol_show_nodes.json",
}
_RECORD = re.compile(r"(?:^|\n)(?=JobId=\d+ )")


def tokens(env: Mapping[str, str]) -> tuple[str, str]:
    """(field end, record end) of the format in ``env`` (``jobid:TOKEN,...,workdir:END``)."""
    spec = env["SQUEUE_FORMAT2"].split(",")
    return spec[0].partition(":")[2], spec[-1].partition(":")[2]


def position(env: Mapping[str, str], field: str) -> int:
    """Where ``field`` (our name) sits in a record of the format in ``env``."""
    names = [p.partition(":")[0] for p in env["SQUEUE_FORMAT2"].split(",")]
    return names.index(SQUEUE_NAME[field])


def scontrol_records(text: str) -> list[str]:
    """``scontrol show job -o``'s records; a job name may hold a newline, so a record starts
    where a line starts with ``JobId=``."""
    return [r for r in _RECORD.split(text) if r.strip()]


class Recorded:
    """Answers from ``root``; ``edit`` may change a JSON file's data before it is printed,
    ``plain`` the plain read's text (with the tokens in), ``listing`` that of
    ``scontrol show job`` of every job and of an ``scontrol`` reading ``show job`` commands.
    Every argv is kept in ``argvs``."""

    def __init__(self, root: Path, files: Mapping[tuple[str, ...], str] = FILES,
                 edit: Callable[[str, dict[str, Any]], None] | None = None,
                 plain: Callable[[str], str] | None = None,
                 listing: Callable[[str], str] | None = None) -> None:
        self.root, self.files, self.edit, self.plain = root, files, edit, plain
        self.listing = listing
        self.argvs: list[tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        self.argvs.append(tuple(argv))
        if list(argv) == ["scontrol"]:
            return self._commands(argv, kw.get("input") or "")
        text = self._answer(list(argv), kw.get("env") or {})
        if text is None:
            return subprocess.CompletedProcess(argv, 1, "", f"{argv[0]}: unrecognized option")
        return subprocess.CompletedProcess(argv, 0, text, "")

    def _answer(self, argv: list[str], env: Mapping[str, str]) -> str | None:
        name = self.files.get(tuple(a for a in argv if not a.startswith("--jobs=")))
        if name is not None:
            return self._json(name)
        if argv[:3] == ["squeue", "--json", "--states=RUNNING"]:
            return self._running(argv)
        if argv[:2] == ["scontrol", "-d"] or argv[:3] == ["scontrol", "show", "job"]:
            return self._job(argv[-1])
        if argv[:2] == ["squeue", "-h"]:
            return self._plain(argv, env)
        return None

    def _json(self, name: str) -> str | None:
        if not (self.root / name).exists():
            return None
        text = (self.root / name).read_text()
        if self.edit is None:
            return text
        data = json.loads(text)
        self.edit(name, data)
        return json.dumps(data)

    def _running(self, argv: list[str]) -> str | None:
        """``squeue --json --states=RUNNING [--partition=P,..]``: the recorded JSON's running
        jobs (of those partitions), as Slurm from 24.11 filters them."""
        text = self._json("squeue.json")
        if text is None:
            return None
        parts = next((a.partition("=")[2].split(",") for a in argv
                      if a.startswith("--partition=")), None)
        data = json.loads(text)
        data["jobs"] = [j for j in data["jobs"] if "RUNNING" in j["job_state"]
                        and (parts is None or j["partition"] in parts)]
        return json.dumps(data)

    def _job(self, ref: str) -> str:
        text = (self.root / "scontrol_d_show_job.txt").read_text()
        if ref == "-o":  # every job
            return self.listing(text) if self.listing is not None else text
        array, _, task = ref.partition("_")
        want = (f"ArrayJobId={array} ArrayTaskId={task} " if task else f"JobId={ref} ")
        return "".join(r + "\n" for r in scontrol_records(text) if want in r.split(
            " JobName=")[0] + " ")

    def _commands(self, argv: Sequence[str], script: str) -> subprocess.CompletedProcess[str]:
        """``scontrol`` reading commands from stdin, as it answers without a terminal: each
        command echoed after the prompt, a ``show job`` of a job not in the recording an
        error on stderr and exit 1 (the other records printed all the same)."""
        out, err = [], []
        for line in script.splitlines():
            out.append(f"scontrol: {line}\n")
            verb, _, ref = line.rpartition(" ")
            if verb == "show job":
                record = self._job(ref)
                out.append(record)
                err += [] if record else ["slurm_load_jobs error: Invalid job id specified\n"]
        text = "".join(out) + "scontrol: "
        text = self.listing(text) if self.listing is not None else text
        return subprocess.CompletedProcess(argv, 1 if err else 0, text, "".join(err))

    def _plain(self, argv: list[str], env: Mapping[str, str]) -> str:
        field_end, record_end = tokens(env)
        parts = next((a.partition("=")[2].split(",") for a in argv
                      if a.startswith("--partition=")), None)
        if "-o" in argv:
            return (self.root / "squeue_exc_nodes.txt").read_text()
        text = (self.root / "squeue_plain.txt").read_text()
        records = [r for r in text.split("<R>\n") if r]
        if parts is not None:
            at = position(env, "partition")
            records = [r for r in records if r.split("<F>")[at] in parts]
        out = "".join(r + "<R>\n" for r in records)
        out = out.replace("<F>", field_end).replace("<R>", record_end)
        return self.plain(out) if self.plain is not None else out


def backend(root: Path, **kw: Any) -> tuple[CliBackend, Recorded]:
    fake = Recorded(root, **kw)
    return CliBackend(runner=Runner(retry=RetryPolicy(attempts=1), execute=fake)), fake
