"""The controller's memory and audit log: one SQLite file (sqlite-utils, WAL mode).

Tables:

* ``jobs``       one row per managed job: what Slurm cannot remember for the policies (service
                 received in earlier runs, admitted, policy marks, hints, rank, why it waits)
* ``composition_state``  what the composition asked the world to keep between rounds
                 (``Decisions.state``: the synthesizer's choice and when it is due)
* ``runs``       every ended run (user, account, GPUs, start, end, GPU-seconds): the history
                 fair share decays (:mod:`blox_slurm.core.accounting`, as in the simulator)
* ``rounds``     one row per round: when, dry-run or not, counts, Slurm calls, errors
* ``decisions``  what each round's policies decided (start/preempt/hold/admit/flag/drain)
* ``actions``    every Slurm verb applied, its job ids, and whether it worked
* ``telemetry``  GPU samples, pruned to a retention window

A round reads and writes only the jobs that changed: the store object keeps what it folded
and wrote (each job's last observation, its extras, rank and reason), so a 20,000-job queue in
which nothing happened costs one statement (the "last seen" stamp), not 20,000 reads and
writes. A new store object (a restarted controller) starts with one full pass.

Job history is folded from *observations*, never from the controller's own intentions: a run
ends when Slurm shows the job pending again or gone. So a controller killed between an action
and its record loses nothing: the next round re-observes and the store catches up
(re-observation wins). A job that leaves the queue takes its last run's end from Slurm's
record of the ended job; a run that began and ended unseen (no controller was up) is taken
from that record whole.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

import sqlite_utils

from ..core.accounting import EndedRun, run_service, usage_at
from ..core.model import Decisions, GpuSample
from .calibrate import Timings
from .shadow import ShadowJob, ShadowReport, shadow_report
from .snapshot import JobExtras, make_extras

SCHEMA_VERSION = 3  # 2: jobs.account (fair share by account); 3: the runs table


@dataclass(frozen=True, slots=True)
class Observed:
    """What a round saw of one managed job (the store's input; see :meth:`Store.observe`)."""

    job_id: int
    user: str
    partition: str
    num_gpus: int
    submit_time: float
    running: bool
    run_start: float | None  # Slurm's start time of the current run
    held: bool
    hints: Mapping[str, str]
    account: str = ""
    restarts: int = 0  # Slurm's restart count: 0 for a job that was never requeued


JOB_COLUMNS: dict[str, type] = {
    "job_id": int, "user": str, "account": str, "partition": str, "num_gpus": int,
    "submit_time": float, "state": str, "held": int, "admitted": int,
    "rank": int, "attained_base": float, "run_start": float, "run_gpus": int,
    "run_last_seen": float, "first_start": float, "last_event": float,
    "preemptions": int, "hints": str, "marks": str, "reason": str,
    "last_seen": float, "finished_at": float,
}

#: The columns of a new waiting job's row that its observation sets, and its ``last_seen``
#: stamp (:meth:`Store.observe`): every other one holds the table's default (see
#: :func:`_new_row`), so SQLite fills them in. A first round writes 20,000 such rows, and
#: binding 11 values a row instead of 22 halves that INSERT (0.12 -> 0.06 s).
WAITING_COLUMNS: dict[str, type] = {k: JOB_COLUMNS[k] for k in (
    "job_id", "user", "account", "partition", "num_gpus", "submit_time", "state", "held",
    "last_event", "hints", "last_seen")}


RUN_COLUMNS: dict[str, type] = {
    "job_id": int, "user": str, "account": str, "gpus": int, "start": float, "end": float,
    "gpu_seconds": float,
}
DECISION_COLUMNS: dict[str, type] = {"round_id": int, "job_id": int, "kind": str,
                                     "detail": str, "reason": str}


class StoreGone(RuntimeError):
    """The store's file was deleted or replaced under a running controller."""


class Store:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection, usable from the thread that runs the loop as well as the one that
        # built the controller (the daemon's loop may run in a worker thread); callers do not
        # use it from two threads at once.
        self.db = sqlite_utils.Database(sqlite3.connect(self.path, check_same_thread=False))
        self.db.enable_wal()
        self.db.execute("PRAGMA busy_timeout = 5000")
        self._create()
        self._identity = self._file_identity()
        # Kept between rounds so that a round reads and writes only the jobs that changed
        # (see observe, extras, update_policy_state). Every write to a job row goes through
        # this object, which keeps these in step with what it wrote.
        self._folded: dict[int, tuple[Observed, int]] | None = None  # None: fold them all
        self._extras: dict[int, JobExtras] | None = None  # None: read every active row
        self._stale: set[int] = set()  # rows written since and not kept in _extras
        self._ranked: dict[int, tuple[int | None, str]] = {}  # rank and reason last written

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino

    def check_present(self) -> None:
        """Raise :class:`StoreGone` if the file is no longer the one opened: SQLite would go
        on writing into the unlinked inode, and the history would vanish at the next start
        while ``status`` and ``explain`` already see no store."""
        if self._file_identity() != self._identity:
            raise StoreGone(f"the store {self.path} was deleted or replaced while the "
                            "controller ran: restart it (a new store starts empty)")

    def _create(self) -> None:
        db = self.db
        if "jobs" not in db.table_names():
            db.table("jobs").create(
                JOB_COLUMNS, pk="job_id", not_null={"user", "partition", "state"},
                defaults={"held": 0, "admitted": 0, "attained_base": 0.0, "preemptions": 0,
                          "hints": "{}", "marks": "{}", "reason": ""})
            db.table("jobs").create_index(["state"])
        elif "account" not in db.table("jobs").columns_dict:  # a version-1 store: upgrade
            db.table("jobs").add_column("account", str, not_null_default="")
        if "retired_jobs" not in db.table_names():  # rows of jobs whose id Slurm reused
            db.table("retired_jobs").create(JOB_COLUMNS)
        if "runs" not in db.table_names():
            self._create_runs()
        if "composition_state" not in db.table_names():
            db.table("composition_state").create({"key": str, "value": float}, pk="key")
        if "rounds" not in db.table_names():
            db.table("rounds").create({
                "id": int, "started": float, "finished": float, "dry_run": int,
                "composition": str, "jobs": int, "pending": int, "running": int,
                "starts": int, "preempts": int, "holds": int, "slurm_calls": int,
                "seconds": float, "error": str,
            }, pk="id")
        if "decisions" not in db.table_names():
            db.table("decisions").create(DECISION_COLUMNS)
            db.table("decisions").create_index(["job_id"])
            db.table("decisions").create_index(["round_id"])
        if "actions" not in db.table_names():
            db.table("actions").create({"round_id": int, "at": float, "verb": str, "ids": str,
                                  "ok": int, "error": str, "dry_run": int})
            db.table("actions").create_index(["round_id"])
        if "telemetry" not in db.table_names():
            db.table("telemetry").create({"time": float, "node": str, "gpu": int,
                                    "utilization": float, "memory_used_mb": float,
                                    "memory_total_mb": float, "job_ids": str, "errors": int})
            db.table("telemetry").create_index(["time"])
        db.table("meta").upsert({"key": "schema_version", "value": str(SCHEMA_VERSION)},
                                pk="key")

    def _create_runs(self) -> None:
        """The runs table; a store from before it gets one run per job that has service,
        ending at the job's latest known end (the only end that store kept)."""
        with self.db.conn:
            self.db.table("runs").create(RUN_COLUMNS)
            self.db.table("runs").create_index(["end"])
            self.db.execute(
                "INSERT INTO runs (job_id, user, account, gpus, start, end, gpu_seconds) "
                "SELECT job_id, user, account, num_gpus, NULL, "
                "CASE WHEN state = 'done' THEN finished_at ELSE last_event END, attained_base "
                "FROM (SELECT * FROM jobs UNION ALL SELECT * FROM retired_jobs) "
                "WHERE attained_base > 0")

    # ------------------------------------------------------------------ rounds

    def begin_round(self, started: float, dry_run: bool, composition: str) -> int:
        row = self.db.table("rounds").insert({"started": started, "dry_run": int(dry_run),
                                        "composition": composition, "error": ""})
        return int(row.last_pk)  # type: ignore[arg-type]

    def finish_round(self, round_id: int, **fields: Any) -> None:
        self.db.table("rounds").update(round_id, fields)

    def record_action(self, round_id: int, verb: str, ids: Sequence[int], ok: bool,
                      error: str = "", dry_run: bool = False) -> None:
        self.db.table("actions").insert({"round_id": round_id, "at": time.time(), "verb": verb,
                                   "ids": json.dumps(list(ids)), "ok": int(ok),
                                   "error": error[:2000], "dry_run": int(dry_run)})

    def record_decisions(self, round_id: int, d: Decisions, holds: Iterable[int],
                         gpu_nodes: Mapping[int, Sequence[str]],
                         in_flight: Collection[int] = ()) -> None:
        """The round's decisions, one row each. A stop or move of a start ``in_flight`` (shown
        running, not yet run by Slurm) is marked ``never_ran``: it stopped nothing, and
        :meth:`timings` must not count the start it made room for as one after a stop."""
        rows: list[tuple[int, int, str, str, str]] = []  # in DECISION_COLUMNS' order
        reasons = d.reasons

        def add(job_id: int, kind: str, detail: Any = None, reason: str = "") -> None:
            rows.append((round_id, job_id, kind,
                         json.dumps(detail) if detail is not None else "",
                         reason or reasons.get(job_id, "")))

        for s in d.start:
            add(s.job_id, "start", {"gpus": list(s.gpus), "nodes": list(gpu_nodes[s.job_id])})
        never = {"never_ran": True}
        for m in d.move:
            add(m.job_id, "move", {"gpus": list(m.gpus), "nodes": list(gpu_nodes[m.job_id]),
                                   "for": m.for_job, **(never if m.job_id in in_flight else {})})
        for st in d.stop:
            add(st.job_id, "preempt", {"for": st.for_job,
                                       **(never if st.job_id in in_flight else {})})
        # A first round admits every waiting job, 20,000 rows: built as tuples, no call each
        rows.extend((round_id, j, "admit", "", reasons.get(j, "")) for j in d.admit)
        for j in holds:
            add(j, "hold")
        for j, why in d.flag:
            add(j, "flag", why, reason=why)
        for dr in d.drain:
            rows.append((round_id, -1, "drain", json.dumps({"node": dr.node}), dr.reason))
        with self.db.conn:
            self.db.conn.executemany(_insert("decisions", DECISION_COLUMNS), rows)

    # ------------------------------------------------------------------ jobs

    def observe(self, now: float, seen: Sequence[Observed], gpus_of: Mapping[int, int],
                ended: Mapping[int, tuple[float, float]] | None = None) -> None:
        """Fold one round's observations into job history (see the module docstring).
        ``ended``: Slurm's ``(start, end)`` of the last run of jobs that left the queue.

        Only what can change a row is folded (:meth:`_to_fold`): a waiting job seen exactly
        as last round keeps its row. Between two rounds of a 20,000-job queue that is nearly
        every job, and reading and rewriting them all was most of the round's time."""
        ended = ended or {}
        gpus = {o.job_id: gpus_of.get(o.job_id, o.num_gpus) for o in seen}
        todo, gone = self._to_fold(seen, gpus)
        known = self._active([o.job_id for o in todo], gone)
        known.update(self._resurrected(todo, known))
        self._retire_reused(todo, known)
        upserts: list[dict[str, Any]] = []
        waiting: list[dict[str, Any]] = []  # new waiting jobs' rows (see WAITING_COLUMNS)
        runs: list[dict[str, Any]] = []
        for o in todo:
            old = known.get(o.job_id)
            row = _seen(old, o, now, gpus[o.job_id], runs)
            if old is None and row["state"] == "pending":
                waiting.append(row)
            elif row != old:
                upserts.append(row)
        seen_ids = {o.job_id for o in seen}
        upserts.extend(_left(row, ended.get(job_id), now, runs)
                       for job_id, row in known.items() if job_id not in seen_ids)
        # Every job still active was seen this round: new waiting rows are written stamped,
        # and one statement stamps all others (a first round's 20,000 new rows are then not
        # rewritten for it: 7 ms).
        for row in waiting:
            row["last_seen"] = now
        with self.db.conn:
            self._write("jobs", JOB_COLUMNS, upserts, replace=True)
            self._write("jobs", WAITING_COLUMNS, waiting, replace=True)
            self._write("runs", RUN_COLUMNS, runs)
            self.db.execute("UPDATE jobs SET last_seen = ? WHERE state != 'done' "
                            "AND last_seen IS NOT ?", [now, now])
        self._folded = {o.job_id: (o, gpus[o.job_id]) for o in seen}
        if gone is None:  # a restarted controller: the rows hold the ranks it last wrote
            self._ranked = {j: (r["rank"], r["reason"]) for j, r in known.items()}
        written = {r["job_id"]: r for r in (*upserts, *waiting)}
        self._remember(written if gone is not None else {**known, **written}, gone is None)
        for job_id in written:
            self._ranked.pop(job_id, None)  # a replaced row has the rank it was read with

    def _remember(self, rows: Mapping[int, Mapping[str, Any]], every: bool) -> None:
        """Keep the extras of rows just written, so extras() need not read them back;
        ``every``: these are all the active rows (after a first fold)."""
        if every:
            self._extras = {}
        elif self._extras is None:
            return
        for job_id, row in rows.items():
            if row["state"] == "done":
                self._extras.pop(job_id, None)
            else:
                self._extras[job_id] = _extras(row)

    def _to_fold(self, seen: Sequence[Observed], gpus: Mapping[int, int]
                 ) -> tuple[list[Observed], list[int] | None]:
        """The observations that may change a row, and the jobs seen last round and gone
        since. The first fold of this store object takes every observation and checks every
        active row (``gone`` None): a job that left while no controller ran still ends. Then
        only observations unlike last round's, and running jobs (their run's last look moves
        every round): every row still active was seen last round, so nothing else can have
        left."""
        last = self._folded
        if last is None:
            return list(seen), None
        todo = [o for o in seen if o.running or last.get(o.job_id) != (o, gpus[o.job_id])]
        seen_ids = {o.job_id for o in seen}
        return todo, [i for i in last if i not in seen_ids]

    def _active(self, ids: Sequence[int], gone: Sequence[int] | None
                ) -> dict[int, dict[str, Any]]:
        """The active rows of ``ids`` and ``gone``, or every active row when ``gone`` is
        None."""
        if gone is None:
            return {r["job_id"]: r for r in self.db.table("jobs").rows_where("state != 'done'")}
        return self._rows([*ids, *gone], "state != 'done'")

    def _rows(self, ids: Sequence[int], where: str = "1") -> dict[int, dict[str, Any]]:
        """The ``jobs`` rows of ``ids`` that match ``where``, by id."""
        out: dict[int, dict[str, Any]] = {}
        for i in range(0, len(ids), 500):  # SQLite before 3.32 takes 999 parameters at most
            chunk = ids[i:i + 500]
            out.update((r["job_id"], r) for r in self.db.table("jobs").rows_where(
                f"job_id IN ({','.join('?' * len(chunk))}) AND ({where})", chunk))
        return out

    def _write(self, table: str, columns: Mapping[str, type], rows: Sequence[dict[str, Any]],
               replace: bool = False) -> None:
        """Rows into ``table`` in one statement (the caller holds the transaction); a row
        replaces the one with its key when ``replace``. Every row has every column. Plain
        ``executemany``: sqlite-utils' ``upsert_all`` spent 45 us a row checking types."""
        if not rows:
            return
        self.db.conn.executemany(_insert(table, columns, replace),
                                 map(itemgetter(*columns), rows))

    def _resurrected(self, seen: Sequence[Observed],
                     known: Mapping[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """Rows marked done whose ids Slurm shows again: a reused id, or (after slurmctld lost
        its state) the same job back."""
        return self._rows([o.job_id for o in seen if o.job_id not in known])

    def _retire_reused(self, seen: Sequence[Observed], known: dict[int, dict[str, Any]]) -> None:
        """A job id Slurm gave to a new job (it reuses ids after losing its state): the old
        job's row moves to ``retired_jobs`` (its usage still counts for fair share) and the
        new job starts with a row of its own, inheriting no service, marks or preemptions. A
        new job is told from a requeued one by Slurm's restart count (a requeue raises it and
        resets SubmitTime; a fresh job's submit time is its own)."""
        old = [known.pop(o.job_id) for o in seen if o.job_id in known and o.restarts == 0
               and o.submit_time  # 0: Slurm gave none, nothing to compare
               and abs(o.submit_time - (known[o.job_id]["submit_time"] or o.submit_time)) > 1]
        if old:
            with self.db.conn:
                self.db.table("retired_jobs").insert_all(old)
                self.db.table("jobs").delete_where(
                    f"job_id IN ({','.join('?' * len(old))})", [r["job_id"] for r in old])

    def note_preempted(self, ids: Iterable[int], now: float) -> None:
        """The run of a job we stopped ended now (not at the next observation)."""
        for job_id in ids:
            self.db.execute("UPDATE jobs SET run_last_seen = ? WHERE job_id = ?", [now, job_id])

    def update_policy_state(self, admitted: Iterable[int], marks: Iterable[tuple[int, str, float]],
                            ranks: Mapping[int, int], reasons: Mapping[int, str],
                            state: Iterable[tuple[str, float]] = ()) -> None:
        """What the round's decisions leave with the jobs. Only what changed is written: a
        20,000-job queue keeps most ranks and reasons from one round to the next."""
        by_job: dict[int, dict[str, float]] = {}
        for job_id, key, value in marks:
            by_job.setdefault(job_id, {})[key] = value
        admit = {j for j in admitted if not self._admitted(j)}
        ranked = {j: (ranks.get(j), reasons.get(j, "")) for j in set(ranks) | set(reasons)}
        # A job whose rank or reason changed gets its admission in the same statement: a
        # first round admits and ranks every waiting job, and one UPDATE a job instead of
        # two saves 0.03 s at 20,000 of them.
        changed = [(*v, int(j in admit), j) for j, v in ranked.items()
                   if self._ranked.get(j) != v]
        rewritten = {c[-1] for c in changed}
        with self.db.conn:
            self.db.conn.executemany(
                "INSERT OR REPLACE INTO composition_state (key, value) VALUES (?, ?)", state)
            self.db.conn.executemany("UPDATE jobs SET admitted = 1 WHERE job_id = ?",
                                     [(j,) for j in admit if j not in rewritten])
            for job_id, updates in by_job.items():
                row = self.db.execute("SELECT marks FROM jobs WHERE job_id = ?",
                                      [job_id]).fetchone()
                if row is not None:
                    merged = {**json.loads(row[0] or "{}"), **updates}
                    self.db.execute("UPDATE jobs SET marks = ? WHERE job_id = ?",
                                    [json.dumps(merged, sort_keys=True), job_id])
            self.db.conn.executemany("UPDATE jobs SET rank = ?, reason = ?, "
                                     "admitted = (admitted OR ?) WHERE job_id = ?", changed)
        if self._extras is not None:  # what was just written, without reading it back
            self._extras.update((j, self._extras[j].admitted_copy())
                                for j in admit if j in self._extras and j not in self._stale)
        self._stale.update(by_job)
        self._ranked = ranked

    def _admitted(self, job_id: int) -> bool:
        """Whether the row says so already, as far as the last extras() read it."""
        extras = self._extras.get(job_id) if self._extras is not None else None
        return job_id not in self._stale and extras is not None and bool(extras.admitted)

    def composition_state(self) -> dict[str, float]:
        """What the composition asked to keep (``ClusterSnapshot.state``)."""
        return {r["key"]: r["value"] for r in self.db.table("composition_state").rows}

    def extras(self, now: float) -> dict[int, JobExtras]:
        """What the snapshot builder needs for every active job: built from every active
        row the first time, then only from the rows written since."""
        if self._extras is None:
            self._extras = {r["job_id"]: _extras(r)
                            for r in self.db.table("jobs").rows_where("state != 'done'")}
        elif self._stale:
            fresh = self._rows(sorted(self._stale), "state != 'done'")
            for job_id in self._stale:
                self._extras.pop(job_id, None)
            self._extras.update((job_id, _extras(r)) for job_id, r in fresh.items())
        self._stale = set()
        return dict(self._extras)

    def usage(self, now: float, half_life: float) -> dict[str, float]:
        """Decayed GPU-seconds of ended runs per user and per account (``usage_key``), for
        fair share: each run decays from its own end, as in the simulator. Runs more than 64
        half-lives old weigh under 2^-64 of their service and are not read."""
        rows = self.db.query("SELECT user, account, gpu_seconds, end FROM runs WHERE end >= ?",
                             [now - 64 * half_life])
        return usage_at((EndedRun(r["user"], r["account"] or "", r["gpu_seconds"], r["end"])
                         for r in rows), now, half_life)

    def timings(self) -> Timings:
        """What ``calibrate`` measures from: the rounds that applied verbs, the round each
        job was released in, and every run's start as Slurm gave it (StartTime)."""
        rounds = [(r["started"], r["seconds"] or 0.0) for r in self.db.query(
            "SELECT started, seconds FROM rounds WHERE dry_run = 0 AND (error IS NULL OR "
            "error = '') AND finished IS NOT NULL ORDER BY id")]
        releases = [(job_id, r["started"]) for r in self.db.query(
            "SELECT a.ids, r.started FROM actions a JOIN rounds r ON r.id = a.round_id "
            "WHERE a.verb = 'release' AND a.ok = 1 AND a.dry_run = 0")
            for job_id in json.loads(r["ids"])]
        runs: dict[int, list[float]] = {}
        ended: dict[int, list[tuple[float, float]]] = {}
        for r in self.db.query("SELECT job_id, start, end FROM runs"):
            ended.setdefault(r["job_id"], []).append((r["start"], r["end"]))
            runs.setdefault(r["job_id"], []).append(r["start"])
        for r in self.db.query("SELECT job_id, run_start FROM jobs WHERE run_start IS NOT NULL"):
            runs.setdefault(r["job_id"], []).append(r["run_start"])
        stopped = [(r, json.loads(r["detail"] or "{}")) for r in self.db.query(
            "SELECT d.job_id, d.kind, d.detail, r.started FROM decisions d JOIN rounds r "
            "ON r.id = d.round_id WHERE d.kind IN ('preempt', 'move') AND r.dry_run = 0")]
        stopped_for = [(r["kind"] == "move", r["job_id"] if r["kind"] == "move"
                        else detail.get("for"), r["started"])
                       for r, detail in stopped if not detail.get("never_ran")]
        after_stop = frozenset((j, at) for _, j, at in stopped_for if j is not None)
        handovers = frozenset((j, at) for move, j, at in stopped_for
                              if j is not None and not move)
        stops = [(r["job_id"], r["started"]) for r, detail in stopped
                 if not detail.get("never_ran")]
        return Timings(rounds, releases, {j: sorted(v) for j, v in runs.items()}, after_stop,
                       handovers, stops, ended)

    def shadow(self) -> ShadowReport:
        """Every managed job against what the dry-run rounds would have done with it."""
        rows = self.db.query(
            "SELECT j.job_id, j.first_start, "
            "MIN(CASE WHEN d.kind = 'start' THEN r.started END) AS policy_start, "
            "MIN(CASE WHEN d.kind = 'hold' THEN r.started END) AS policy_hold "
            "FROM jobs j LEFT JOIN decisions d ON d.job_id = j.job_id "
            "LEFT JOIN rounds r ON r.id = d.round_id AND r.dry_run = 1 "
            "WHERE j.job_id IN (SELECT d2.job_id FROM decisions d2 JOIN rounds r2 "
            "ON r2.id = d2.round_id WHERE r2.dry_run = 1) OR j.job_id NOT IN "
            "(SELECT job_id FROM decisions) GROUP BY j.job_id")
        preempts = self.db.execute(
            "SELECT COUNT(*) FROM decisions d JOIN rounds r ON r.id = d.round_id "
            "WHERE d.kind IN ('preempt', 'move') AND r.dry_run = 1").fetchone()[0]
        return shadow_report((ShadowJob(r["job_id"], r["first_start"], r["policy_start"],
                                        r["policy_hold"]) for r in rows), preempts)

    def job(self, job_id: int) -> dict[str, Any] | None:
        rows = list(self.db.table("jobs").rows_where("job_id = ?", [job_id]))
        return rows[0] if rows else None

    def jobs(self, active_only: bool = True) -> list[dict[str, Any]]:
        where = "state != 'done'" if active_only else None
        return list(self.db.table("jobs").rows_where(where, order_by="rank is null, rank, job_id"))

    def history(self, job_id: int, limit: int = 50) -> list[dict[str, Any]]:
        return list(self.db.query(
            "SELECT d.round_id, r.started, d.kind, d.detail, d.reason, r.dry_run "
            "FROM decisions d JOIN rounds r ON r.id = d.round_id WHERE d.job_id = ? "
            "ORDER BY d.round_id DESC LIMIT ?", [job_id, limit]))

    def actions(self, job_id: int | None = None, limit: int = 100) -> list[dict[str, Any]]:
        rows = self.db.query("SELECT * FROM actions ORDER BY rowid DESC LIMIT ?",
                             [limit if job_id is None else 100000])
        out = []
        for r in rows:
            if job_id is None or job_id in json.loads(r["ids"]):
                out.append(r)
                if len(out) >= limit:
                    break
        return out

    def last_round(self) -> dict[str, Any] | None:
        rows = list(self.db.query("SELECT * FROM rounds ORDER BY id DESC LIMIT 1"))
        return rows[0] if rows else None

    # ------------------------------------------------------------------ telemetry

    def record_telemetry(self, node_samples: Iterable[tuple[str, int, GpuSample]],
                         keep_seconds: float, now: float) -> None:
        rows = [{"time": s.time, "node": node, "gpu": idx, "utilization": s.utilization,
                 "memory_used_mb": s.memory_used_mb, "memory_total_mb": s.memory_total_mb,
                 "job_ids": json.dumps(list(s.job_ids)), "errors": s.errors}
                for node, idx, s in node_samples]
        with self.db.conn:
            if rows:
                self.db.table("telemetry").insert_all(rows)
            self.db.execute("DELETE FROM telemetry WHERE time < ?", [now - keep_seconds])


def _insert(table: str, columns: Mapping[str, type], replace: bool = False) -> str:
    """The statement that inserts one row of ``columns`` (by position, in their order) into
    ``table``, replacing the row with its key when ``replace``."""
    verb = "INSERT OR REPLACE" if replace else "INSERT"
    return (f"{verb} INTO {table} ({', '.join(f'[{n}]' for n in columns)}) "
            f"VALUES ({', '.join('?' * len(columns))})")


def _json(text: str | None) -> dict[str, Any]:
    """A JSON object column; most are empty, and ``json.loads`` of ``{}`` costs 2 us."""
    return json.loads(text) if text and text != "{}" else {}


def _json_text(obj: Mapping[str, Any]) -> str:
    """A JSON object column's text, keys sorted. Most are empty, and ``json.dumps`` of ``{}``
    costs 2 us per job folded: 20,000 of them on a first round."""
    return json.dumps(dict(obj), sort_keys=True) if obj else "{}"


def _extras(r: Mapping[str, Any]) -> JobExtras:
    """A job's :class:`JobExtras` from its row, through :func:`make_extras`: a first fold
    builds one for every active row (20,000 on a first round)."""
    hints = _json(r["hints"])
    attained = r["attained_base"] or 0.0
    duration = _duration(hints)
    gpus = max(1, r["num_gpus"] or 1)
    run = attained / gpus  # wall seconds of earlier runs: Slurm's measure of work
    if duration is not None and run > duration * 1.1 + 60:
        duration = None  # the hint was wrong: do not let it rank the job forever
    return make_extras(attained_base=attained, work_base=run, duration=duration,
                       admitted=bool(r["admitted"]), model=hints.get("model", ""), hints=hints,
                       preemptions=r["preemptions"], first_start=r["first_start"],
                       last_event=r["last_event"], submit_time=r["submit_time"],
                       marks=tuple(sorted(_json(r["marks"]).items())))


def _new_row(o: Observed) -> dict[str, Any]:
    """A job's first row, before :func:`_seen` sets what the observation gives: every other
    column holds the table's default (:data:`WAITING_COLUMNS` leaves them to SQLite)."""
    return {"job_id": o.job_id, "attained_base": 0.0, "preemptions": 0, "admitted": 0,
            "marks": "{}", "reason": "", "first_start": None, "run_start": None,
            "run_gpus": None, "run_last_seen": None, "last_event": o.submit_time, "rank": None,
            "finished_at": None, "submit_time": o.submit_time, "last_seen": None}


def _seen(known: dict[str, Any] | None, o: Observed, now: float, gpus: int,
          runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The row of a job Slurm shows this round (``gpus``: what its run holds)."""
    row = dict(known) if known is not None else _new_row(o)
    # The same job shown again after it was counted done (slurmctld restored an older state):
    # its service up to then is already in attained_base.
    counted_until = row["finished_at"] if row.get("state") == "done" else None
    # Slurm resets SubmitTime on a requeue: the first one seen is the job's place.
    row.update(user=o.user, account=o.account, partition=o.partition, num_gpus=o.num_gpus,
               submit_time=row["submit_time"] or o.submit_time, held=int(o.held),
               finished_at=None if counted_until is not None else row["finished_at"],
               hints=_json_text(o.hints))
    if o.running:
        _running(row, o, now, counted_until or 0.0, gpus, runs)
    else:
        if row["run_start"] is not None:  # requeued since we last saw it running
            row["last_event"] = _fold(row, runs)
            row["preemptions"] += 1
        row["state"] = "pending"
    return row


def _running(row: dict[str, Any], o: Observed, now: float, floor: float, gpus: int,
             runs: list[dict[str, Any]]) -> None:
    """A job seen running: a new run (or the same one seen again) since the last look.
    ``floor``: a run cannot begin before the service already counted for the job ended."""
    if row["run_start"] is not None and row["run_start"] != o.run_start:
        _fold(row, runs)  # a new run began since we last looked: the old one ended
        row["preemptions"] += 1
    if row["run_start"] is None:
        row["run_start"] = max(o.run_start if o.run_start is not None else now, floor)
        row["run_gpus"] = gpus
        row["last_event"] = row["run_start"]
        if row["first_start"] is None:
            row["first_start"] = row["run_start"]
    row.update(run_last_seen=now, admitted=1, state="running")


def _left(known: dict[str, Any], run: tuple[float, float] | None, now: float,
          runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The row of a job that left the queue (finished, cancelled or failed); ``run``: Slurm's
    ``(start, end)`` of its last run, when its record said."""
    row = dict(known)
    if run is not None:
        if row["run_start"] is not None and run[0] > row["run_start"]:
            # A later run than the one seen (stopped or moved, then restarted and ended
            # between two looks): the seen run ended at its last look.
            _fold(row, runs)
            row["preemptions"] += 1
        if row["run_start"] is None:  # that run began and ended between two looks
            row.update(run_start=run[0], run_gpus=row["num_gpus"])
            if row["first_start"] is None:
                row["first_start"] = run[0]
        # Slurm's end of that run (whose start may be floored), not our last look
        if run[0] <= row["run_start"] <= run[1]:
            row["run_last_seen"] = run[1]
    end = row["run_last_seen"] or now
    if row["run_start"] is not None:
        _fold(row, runs)
    row.update(state="done", finished_at=end)
    return row


def _fold(row: dict[str, Any], runs: list[dict[str, Any]]) -> float:
    """End the current run: its GPU-seconds join the job's attained service and ``runs``.
    Returns when it ended (the last time it was seen running, or when we stopped it)."""
    start: float = row["run_start"]
    end: float = row.get("run_last_seen") or start
    gpus = row.get("run_gpus") or 0
    service = run_service(gpus, start, end)
    row["attained_base"] = (row.get("attained_base") or 0.0) + service
    runs.append({"job_id": row["job_id"], "user": row.get("user", ""),
                 "account": row.get("account") or "", "gpus": gpus, "start": start, "end": end,
                 "gpu_seconds": service})
    row.update(run_start=None, run_gpus=None)
    return end


def _duration(hints: Mapping[str, str]) -> float | None:
    try:
        return float(hints["duration"]) if "duration" in hints else None
    except ValueError:
        return None
