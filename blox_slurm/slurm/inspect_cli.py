"""``blox-slurm status | explain | report | queue | doctor``: the read-only commands.

``status``, ``explain`` and ``report`` read the controller's store (admins, on its host);
``queue`` reads the public file the controller publishes, so users can run it. Every cell is
plain text (``Text``): job fields such as a reason or a user name are never read as markup,
and a table fits an 80-column terminal (long reasons go under it, not into a column).
"""

from __future__ import annotations

import getpass
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .cli_common import (
    CONFIG_ENV,
    DEFAULT_CONFIG,
    ConfigOpt,
    JsonOpt,
    emit,
    errors,
    load_controller,
    store_of,
)
from .controller_config import ConfigError
from .queue_view import QueueEntry, QueueFile, entries, read, received

DEFAULT_QUEUE = Path("/var/lib/blox-slurm/queue.json")


def _table(title: str, columns: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> Table:
    t = Table(title=title or None, title_justify="left", box=box.SIMPLE_HEAD,
              show_edge=False)
    for col in columns:
        t.add_column(col, no_wrap=True)
    for row in rows:
        t.add_row(*(Text(cell) for cell in row))
    return t


def _state(e: QueueEntry) -> str:
    if e.state == "running":
        return "running"
    return "held" if e.held else "starting"


def _reasons(items: list[QueueEntry]) -> Text:
    out = Text()
    for e in items:
        if e.reason and e.state == "pending":
            out.append(f"{e.job_id}: ", style="bold").append(e.reason + "\n")
    return out


def status(config: ConfigOpt = DEFAULT_CONFIG,
           as_json: JsonOpt = False) -> None:
    """Managed jobs as the controller last saw them: rank, state, GPUs, service, why."""
    with errors():
        _, store = store_of(config)
        rows = store.jobs()
        last = store.last_round()
        items = entries(rows)
        title = (f"managed jobs, round {last['id']} ({last['composition']})" if last
                 else "managed jobs (no round yet)")
        t = _table(title, ("job", "user", "state", "place", "GPUs", "GPU-h", "preempted"),
                   [(str(e.job_id), e.user, _state(e),
                     "-" if e.position is None else str(e.position), str(e.gpus),
                     f"{e.gpu_hours:.2f}", str(e.preemptions)) for e in items])
        emit({"round": last, "jobs": rows}, as_json, Group(t, _reasons(items)))


def explain(
    job_id: Annotated[int, typer.Argument(help="The Slurm job id.")],
    config: ConfigOpt = DEFAULT_CONFIG,
    as_json: JsonOpt = False,
) -> None:
    """Why a job waits, was started or was preempted: its record, decisions and actions."""
    with errors():
        _, store = store_of(config)
        job = store.job(job_id)
        if job is None:
            raise ConfigError(f"job {job_id} is not known to the controller (not in a "
                              "managed partition, or not marked by the job-submit plugin)")
        history = store.history(job_id)
        actions = store.actions(job_id)
        emit({"job": job, "decisions": history, "actions": actions}, as_json,
             _explanation(job, history, actions))


def _explanation(job: dict[str, Any], history: list[dict[str, Any]],
                 actions: list[dict[str, Any]]) -> Text:
    out = Text(f"job {job['job_id']} ({job['user']}, {job['num_gpus']} GPU(s)): "
               f"{job['state']}, rank {job['rank']}, "
               f"{'held' if job['held'] else 'released'}, {job['preemptions']} "
               f"preemption(s), {received(job) / 3600:.2f} GPU-hours received\n")
    if job["reason"]:
        out.append(f"now: {job['reason']}\n")
    for h in history[:10]:
        when = time.strftime("%H:%M:%S", time.localtime(h["started"]))
        out.append(f"  round {h['round_id']} {when}: {h['kind']}"
                   f"{' (dry-run)' if h['dry_run'] else ''} {h['reason']}\n")
    for a in actions[:10]:
        outcome = ("not applied (dry-run)" if a["dry_run"] else
                   "ok" if a["ok"] else "FAILED " + a["error"])
        out.append(f"  action {a['verb']}: {outcome}\n")
    return out


def report(config: ConfigOpt = DEFAULT_CONFIG,
           as_json: JsonOpt = False) -> None:
    """Shadow-mode report: when the policy would have started jobs vs when Slurm did."""
    with errors():
        _, store = store_of(config)
        shadow = store.shadow()
        summary = shadow.summary()
        rows = []
        for key, label in SHADOW_LABELS.items():
            value = summary[key]
            rows.append((label, "-" if value is None else f"{value:+.1f} s"
                         if isinstance(value, float) else str(value)))
        t = _table("shadow mode: the policy vs Slurm, every managed job",
                   ("figure", "value"), rows)
        emit({"summary": summary, "jobs": [{**asdict(j), "case": j.case}
                                           for j in shadow.jobs]}, as_json, t)


SHADOW_LABELS = {
    "jobs": "managed jobs seen",
    "compared": "started by both",
    "policy_earlier": "  policy earlier (by 1 s or more)",
    "policy_later": "  policy later",
    "same_time": "  within a second",
    "median_slurm_minus_policy": "  median Slurm start - policy start",
    "policy_held": "started by Slurm, held by the policy",
    "median_held_seconds_when_slurm_started": "  median time held when Slurm started it",
    "policy_started": "started by the policy only (Slurm not yet)",
    "both_waiting": "waiting for both",
    "unseen": "started by Slurm between two rounds",
    "would_have_preempted": "preemptions the policy would have made",
}


def queue(
    user: Annotated[str | None, typer.Option(
        "--user", "-u", help="Whose jobs (default: yours).")] = None,
    all_users: Annotated[bool, typer.Option("--all", "-a", help="Every user's jobs.")] = False,
    queue_file: Annotated[Path, typer.Option(
        "--file", envvar="BLOX_SLURM_QUEUE", show_envvar=True,
        help="The file the controller publishes (its queue_file).")] = DEFAULT_QUEUE,
    as_json: JsonOpt = False,
) -> None:
    """Your managed jobs: place in the scheduler's order, why each waits, since when.

    Read-only, for any user. squeue shows a waiting job as JobHeldUser
    (JobHeldAdmin after a controller restart): the scheduler holds it until its turn.
    """
    with errors():
        q = read(queue_file)
        who = None if all_users else (user or getpass.getuser())
        mine = [e for e in q.jobs if who is None or e.user == who]
        emit({"written": q.written, "stale": q.stale(time.time()), "round": q.round,
              "composition": q.composition, "jobs": [asdict(e) for e in mine]},
             as_json, _queue_view(q, mine, who))


def _queue_view(q: QueueFile, mine: list[QueueEntry], who: str | None) -> RenderableType:
    now = time.time()
    waiting = mine[0].waiting if mine else sum(e.state == "pending" for e in q.jobs)
    whose = "all users" if who is None else who
    head = Text(f"managed jobs of {whose}; {waiting} job(s) waiting in all; scheduler "
                f"{q.composition or '-'}, as of {_ago(now - q.written)} ago\n")
    if q.stale(now):
        head.append("The scheduler has not run for a while: Slurm schedules the partition on "
                    "its own meanwhile (your jobs are not held by it).\n", style="bold")
    if not mine:
        return Group(head, Text("no managed jobs"))
    t = _table("", ("job", "user", "state", "place", "GPUs", "waiting for", "preempted"),
               [(str(e.job_id), e.user, _state(e),
                 "-" if e.position is None else f"{e.position} of {e.waiting}", str(e.gpus),
                 _ago(now - e.since) if e.state == "pending" else "-",
                 str(e.preemptions)) for e in mine])
    return Group(head, t, _reasons(mine))


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def doctor(
    conf: Annotated[str | None, typer.Option(help="slurm.conf (default: $SLURM_CONF).")] = None,
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", envvar=CONFIG_ENV, show_envvar=True,
        help=f"Also check this controller's deployment (default: {DEFAULT_CONFIG} if it "
        "exists).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check Slurm, the plugin, the controller's config, heartbeat and store; say what to fix."""
    from .checks import Check
    from .doctor import diagnose

    path = config or (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None)
    cfg, problem = None, None
    if path is not None:
        try:
            cfg, _ = load_controller(path)
        except ValueError as exc:
            problem = Check("config", False, " ".join(str(exc).split()))
    report = diagnose(conf, cfg)
    if path is not None:
        report.checks.insert(0, problem or Check("config", True, str(path)))
    text = Text("\n".join(f"{'ok ' if c.ok else 'NO '} {c.name:11} {c.detail}"
                          for c in report.checks))
    emit(report.as_dict(), as_json, text)
    if not report.ok:
        raise typer.Exit(1)
