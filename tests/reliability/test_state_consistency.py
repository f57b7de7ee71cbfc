"""Invariants under random compositions (issue 5, item 5), against a real slurmctld.

For a few seeds (printed; ``BLOX_CONSISTENCY_SEEDS=1,2,3`` reruns given ones) on the shared
4 nodes x 4 GPUs world of this folder (job-submit plugin, lease :data:`conftest.LEASE`): a
random bundled composition (the synthesizer excepted: it plays every candidate forward in the
simulator each evaluation, which is its own live test), a random set of managed fake training
jobs (1/2/4 GPUs, 2-6 s of work, checkpoint on SIGTERM, arriving over the first rounds) and one
or two UNMANAGED ``sleep`` jobs in the ``plain`` partition (same nodes; the plugin leaves them
alone). Every job is submitted with plain ``sbatch`` by its Unix user (daemon/bin/nobody, via
``runuser``). An in-process controller runs rounds every :data:`ROUND_S` seconds until every
job has left the queue, then one more round.

After every round, against what Slurm shows (``squeue --json`` through the CLI backend, which
keeps finished jobs for ``MinJobAge`` = 600 s in the emulator, so a finished job is *seen*
finished, not inferred from its absence):

a. held/released state matches the round's decisions: a managed job the round started is not
   held; one it left waiting is held (a job that was released earlier and that Slurm started
   before the hold landed is counted as a race, not hidden); one it preempted ends up pending
   and held (or finished, if it completed first); a running job it did not preempt was not
   requeued; every audit action matches a decision of its round (release <- start,
   hold <- not started, requeuehold <- preempt);
b. no GPU double-allocated: per node, the GPUs of running jobs of *both* partitions sum to at
   most the node's GPUs and no GPU index is in two jobs; and the decision itself only hands
   out GPUs that were free at the snapshot (Slurm's own view, unmanaged jobs included) or
   freed by its own preemptions, no GPU twice;
c. no job lost or duplicated: every submitted id is in Slurm's job list exactly once, and when
   it is no longer queued it is COMPLETED with exit code 0 (never FAILED, CANCELLED, or gone);
   the store has exactly one row per managed job it has seen and none for anything else, its
   state agreeing with Slurm's;
d. unmanaged jobs are never touched: never held, requeued or re-prioritized, never marked, and
   no store row, decision or action names them.

At the end: every fake job's progress history tiles ``[0, iterations)`` (finished exactly once,
nothing repeated), the store's preemption count and Slurm's restart count both equal the
number of ``requeuehold`` actions the audit recorded for the job, every store row is ``done``.

Checked apart, over the same runs: a job runs on exactly the GPUs it asked for. This was a bug
(see :data:`SPREAD_BUG`): every job here asks ``--gres=gpu:N`` (GPUs per node), the snapshot
now binds such a job to one node (the ``nodes`` hint) and every placement honours it.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import pytest
from conftest import LEASE

from blox_slurm import loading
from blox_slurm.core import composition, registry
from blox_slurm.core.model import ClusterSnapshot
from blox_slurm.demo.world import PARTITION, PYTHON, TRAINER, USERS, ManagedWorld
from blox_slurm.slurm.client import SlurmJob
from blox_slurm.slurm.controller import Controller
from blox_slurm.slurm.controller_config import ControllerConfig
from blox_slurm.slurm.job_submit import write_heartbeat
from blox_slurm.slurm.store import Store

pytestmark = [pytest.mark.slurm, pytest.mark.reliability]

PLAIN = "plain"  # the emulator's unmanaged partition (same nodes as the managed one)
N_SEEDS = 3
ROUND_S = 0.8
IPS = 10.0  # fake-job iterations per second
SEED_BUDGET_S = 45.0  # per seed; 3 seeds + world start-up within 3 minutes on 2 cores
SETTLE_S = 4.0  # how long a preempted job may take to be requeued held
SKIP = {"synthesizer"}
COMPOSITIONS = [n for n in composition.bundled_names() if n not in SKIP]
GAVEL_ROUND_S = 360.0  # Gavel's round, the time unit of gavel_rounds' own parameters
FINISHED_OK = "COMPLETED"
SPREAD_BUG = (
    "a --gres=gpu:N job spread over k nodes by placement was pinned with ReqNodeList=<k nodes>, "
    "and Slurm ran it with its per-node N on EACH node (k x N GPUs), or, when that could not "
    "fit, kept it pending (Resources/ReqNodeNotAvail) round after round")
RUNS: list[SeedRun] = []  # the main test's runs, for the GPU-count check below


@dataclass
class Submitted:
    job_id: int
    user: str
    gpus: int
    managed: bool
    iterations: int = 0  # managed (fake training) jobs
    seconds: int = 0  # unmanaged sleep jobs
    priority: int | None = None  # unmanaged: as Slurm first showed it


class Recording(Controller):
    """The real controller, keeping what its latest round saw (managed jobs, snapshot)."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.last_managed: dict[int, SlurmJob] = {}
        self.last_snapshot: ClusterSnapshot | None = None

    def managed_jobs(self, jobs):  # type: ignore[no-untyped-def]
        out = super().managed_jobs(jobs)
        self.last_managed = dict(out)
        return out

    def snapshot(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        snap = super().snapshot(*args, **kwargs)
        self.last_snapshot = snap
        return snap


@dataclass
class SeedRun:
    seed: int
    name: str
    jobs: dict[int, Submitted] = field(default_factory=dict)
    rounds: int = 0
    starts: int = 0
    preempts: int = 0
    holds: int = 0
    overallocated: dict[int, str] = field(default_factory=dict)  # see SPREAD_BUG
    restarts: int = 0  # start decisions for jobs already released and still pending
    in_flight: int = 0  # released, still pending jobs the round kept (shown running)
    races: list[str] = field(default_factory=list)
    ended_badly: set[int] = field(default_factory=set)
    violations: list[str] = field(default_factory=list)

    def bad(self, rnd: int, what: str) -> None:
        self.violations.append(f"seed {self.seed} ({self.name}) round {rnd}: {what}")


def sbatch(world: ManagedWorld, user: str, *argv: str) -> int:
    """Plain ``sbatch`` run by ``user`` (auth/none takes the caller's uid)."""
    out = world.run("sbatch", "--parsable", *argv, user=user)
    assert out.returncode == 0, (user, argv, out.stderr)
    return int(out.stdout.strip().split(";")[0])


def submit_managed(world: ManagedWorld, user: str, gpus: int, iterations: int) -> int:
    wd = world.work / user
    cmd = (f"{PYTHON} {world.work / TRAINER.name} --iterations {iterations} "
           f"--iters-per-sec {IPS:g}")
    return sbatch(world, user, f"--partition={PARTITION}", f"--gres=gpu:{gpus}",
                  f"--chdir={wd}", f"--output={wd}/%j.out", "--open-mode=append", "--wrap", cmd)


def submit_unmanaged(world: ManagedWorld, user: str, gpus: int, seconds: int) -> int:
    wd = world.work / user
    return sbatch(world, user, f"--partition={PLAIN}", f"--gres=gpu:{gpus}", f"--chdir={wd}",
                  "--output=/dev/null", "--wrap", f"sleep {seconds}")


def all_jobs(world: ManagedWorld) -> tuple[list[SlurmJob], dict[int, SlurmJob]]:
    """Every job slurmctld still knows (finished ones included), as a list and by id."""
    jobs = world.client().list_jobs(None, finished=True)
    return jobs, {j.job_id: j for j in jobs}


def check_gpus(run: SeedRun, rnd: int, jobs: list[SlurmJob], node_gpus: dict[str, int]) -> int:
    """(b) in Slurm: per node, GPUs of running jobs (any partition) fit and never overlap."""
    used: dict[str, Counter[int]] = defaultdict(Counter)
    count: Counter[str] = Counter()
    for j in jobs:
        if not j.active:
            continue
        for node, a in j.gpu_alloc.items():
            count[node] += a.count
            used[node].update(a.indices)
    for node, n in count.items():
        if n > node_gpus.get(node, 0):
            run.bad(rnd, f"node {node}: {n} GPUs allocated of {node_gpus.get(node, 0)}")
        twice = sorted(i for i, c in used[node].items() if c > 1)
        if twice:
            run.bad(rnd, f"node {node}: GPU indices {twice} allocated to two running jobs")
        if any(i >= node_gpus.get(node, 0) for i in used[node]):
            run.bad(rnd, f"node {node}: GPU index out of range {sorted(used[node])}")
    return sum(count.values())


def check_decision_gpus(run: SeedRun, rnd: int, ctl: Recording, report) -> None:  # type: ignore[no-untyped-def]
    """(b) in the decision: starts and moves use free (or just-stopped) GPUs, each GPU once; a
    running job is placed only as a move (the controller requeues it and, once Slurm shows it
    pending, pins it to its new nodes)."""
    snap, d = ctl.last_snapshot, report.decisions
    assert snap is not None and d is not None
    free = {g for gs in (snap.free.by_node if snap.free else {}).values() for g in gs}
    freed = {g for j in snap.jobs if j.id in set(d.preempt) for g in j.gpus}
    jobs = {j.id: j for j in snap.jobs}
    given: Counter[int] = Counter()
    for s in d.placed:
        given.update(s.gpus)
        job = jobs.get(s.job_id)
        if job is None:
            run.bad(rnd, f"start of job {s.job_id}, which the snapshot does not have")
        elif job.gpus and s.job_id not in d.preempt:
            run.bad(rnd, f"start of job {s.job_id}, which is running and not moved (preempted)")
        elif len(s.gpus) < job.num_gpus:
            run.bad(rnd, f"job {s.job_id} started on {len(s.gpus)} GPUs, asked {job.num_gpus}")
        busy = set(s.gpus) - free - freed
        if busy:
            run.bad(rnd, f"job {s.job_id} given GPUs {sorted(busy)} that were not free")
    twice = sorted(g for g, c in given.items() if c > 1)
    if twice:
        run.bad(rnd, f"GPUs {twice} given to two jobs in one round")


def check_round(run: SeedRun, rnd: int, world: ManagedWorld, ctl: Recording, report,  # type: ignore[no-untyped-def]
                node_gpus: dict[str, int]) -> None:
    d, plan = report.decisions, report.plan
    seen = ctl.last_managed  # what the round observed (managed jobs only)
    started = {s.job_id for s in d.placed}
    moved = {m.job_id for m in d.move}  # stopped and, unless deferred, released elsewhere
    preempted = set(plan.preempt)
    run.starts += len(started)
    run.preempts += len(preempted)
    run.holds += len(plan.hold)
    check_decision_gpus(run, rnd, ctl, report)

    # -------------------------------------------------------- (a) held state vs decisions
    jobs, by_id = all_jobs(world)
    for jid in preempted - moved:  # requeuehold: wait (bounded) for Slurm to requeue it held
        deadline = time.monotonic() + SETTLE_S
        while (jid in by_id and not (by_id[jid].pending and by_id[jid].held)
               and by_id[jid].queued and time.monotonic() < deadline):
            time.sleep(0.2)
            jobs, by_id = all_jobs(world)
    shown = ctl.last_snapshot.jobs if ctl.last_snapshot else ()
    kept = {j.id for j in shown if j.gpus} - set(d.preempt) - moved
    for jid, before in seen.items():
        now = by_id.get(jid)
        if now is None:
            run.bad(rnd, f"managed job {jid} vanished from Slurm")
            continue
        if before.pending and jid in started and not before.held:
            run.restarts += 1  # released in an earlier round, Slurm has not started it yet
        if before.pending and jid in kept:  # shown running while its start is in flight
            run.in_flight += 1
            if now.pending and now.held:
                run.bad(rnd, f"job {jid}, kept while its start was in flight, held ({now.reason})")
            continue
        if before.pending and jid in started:
            if now.pending and now.held:
                run.bad(rnd, f"job {jid} started by the round but held ({now.reason})")
        elif before.pending:  # left waiting: must be held
            if not (now.pending and now.held):
                if not before.held and not now.pending:  # released earlier; Slurm won the race
                    run.races.append(f"round {rnd}: job {jid} started before its hold landed")
                else:
                    run.bad(rnd, f"job {jid} left waiting but not held: {now.state} "
                                 f"{now.reason} priority {now.priority}")
        elif jid in moved:
            if now.restart_cnt == before.restart_cnt and now.state != FINISHED_OK:
                run.bad(rnd, f"moved job {jid} not requeued: {now.state} {now.reason}")
        elif jid in preempted:
            if not (now.pending and now.held) and now.state != FINISHED_OK:
                run.bad(rnd, f"preempted job {jid} not requeued held: {now.state} {now.reason}")
        elif before.active and now.restart_cnt != before.restart_cnt:
            run.bad(rnd, f"running job {jid} requeued without a preempt decision")
    # every audit action of this round follows from one of its decisions; a nudge ("start
    # now") may also reach a job released in an earlier round, kept while Slurm starts it
    waiting = {jid for jid, b in seen.items() if b.pending and not b.held} & kept
    for a in ctl.store.db.query("SELECT verb, ids, ok, error FROM actions WHERE round_id = ?",
                                [report.round_id]):
        ids = set(json.loads(a["ids"]))
        verb = a["verb"]
        allowed = (started if verb == "release" or verb.startswith("pin ") else
                   preempted if verb in ("requeuehold",) or verb.startswith("signal ") else
                   set(seen) - started if verb == "hold" else
                   (started | waiting) - preempted if verb == "start now" else set())
        if not ids <= allowed:
            run.bad(rnd, f"action {verb} on {sorted(ids - allowed)} without a matching decision")
        if not a["ok"]:  # only a race with Slurm may excuse it: the job stopped pending or
            # running meanwhile (Slurm refuses ReqNodeList on a running job, "Invalid node
            # name specified", and hold on one; requeuehold on a finished one)
            moved = {i for i in ids if i in seen and i in by_id and (
                by_id[i].state != seen[i].state or by_id[i].start_time != seen[i].start_time)}
            what = (f"{verb} {sorted(ids)} failed ({a['error']}); observed " + "; ".join(
                f"{i}: {seen[i].state} held={seen[i].held} reason={seen[i].reason} "
                f"req={seen[i].req_nodes}, now {by_id[i].state if i in by_id else 'gone'}"
                for i in sorted(ids) if i in seen))
            if ids and ids <= moved:
                run.races.append(f"round {rnd}: {what}")
            else:
                run.bad(rnd, what)

    # -------------------------------------------------------- (b) no GPU overcommit in Slurm
    check_gpus(run, rnd, jobs, node_gpus)
    for jid, sub in run.jobs.items():  # ... and each job holds what it asked, on one node
        j = by_id.get(jid)
        got = sum(a.count for a in j.gpu_alloc.values()) if j is not None and j.active else 0
        if got and (got != sub.gpus or len(j.gpu_alloc) > 1) and jid not in run.overallocated:
            run.overallocated[jid] = (f"seed {run.seed} ({run.name}) round {rnd}: job {jid} "
                                      f"asked {sub.gpus} GPUs, runs on {got}: "
                                      f"{dict(j.gpu_alloc)} (pinned {j.req_nodes})")

    # -------------------------------------------------------- (c) nothing lost or duplicated
    ids = Counter(j.job_id for j in jobs)
    for jid in run.jobs:
        if ids[jid] != 1:
            run.bad(rnd, f"job {jid} listed {ids[jid]} times by Slurm")
            continue
        j = by_id[jid]
        if not j.queued and (j.state != FINISHED_OK or j.exit_code != 0) \
                and jid not in run.ended_badly:
            run.ended_badly.add(jid)
            out = world.work / run.jobs[jid].user / f"{jid}.out"
            run.bad(rnd, f"job {jid} ended {j.state} exit {j.exit_code} reason {j.reason}, "
                         f"not completed; output: "
                         f"{out.read_text()[-600:] if out.exists() else '(none)'}")
    managed_ids = {j for j, s in run.jobs.items() if s.managed}
    rows = list(ctl.store.db.query("SELECT job_id, state, COUNT(*) AS n FROM jobs "
                                   "GROUP BY job_id"))
    store_ids = {r["job_id"] for r in rows}
    if any(r["n"] != 1 for r in rows):
        run.bad(rnd, f"store rows duplicated: {[r for r in rows if r['n'] != 1]}")
    if not store_ids <= managed_ids:
        run.bad(rnd, f"store rows for jobs that are not ours/managed: "
                     f"{sorted(store_ids - managed_ids)}")
    if not set(seen) <= store_ids:
        run.bad(rnd, f"jobs observed but not in the store: {sorted(set(seen) - store_ids)}")
    if not set(seen) <= managed_ids:
        run.bad(rnd, f"the controller took jobs that are not ours/managed for managed: "
                     f"{sorted(set(seen) - managed_ids)}")
    # all were submitted before the round, and a job queued now was queued when it observed
    unseen = {j for j in managed_ids if j in by_id and by_id[j].queued} - set(seen)
    if unseen:
        run.bad(rnd, f"managed jobs in the queue the controller did not see: {sorted(unseen)}")
    state = {r["job_id"]: r["state"] for r in rows}
    for jid, before in seen.items():  # the store folded exactly what the round observed
        # (a COMPLETING job is still in its run: the store folds it as running, see
        # controller._observed)
        want = "running" if before.in_run else "pending"
        if state.get(jid) != want:
            run.bad(rnd, f"store says job {jid} is {state.get(jid)}, Slurm showed {want}")
    for jid in managed_ids & store_ids - set(seen):
        if state[jid] != "done":
            run.bad(rnd, f"job {jid} left the queue but the store says {state[jid]}")

    # -------------------------------------------------------- (d) unmanaged jobs untouched
    for jid, sub in run.jobs.items():
        if sub.managed:
            continue
        j = by_id[jid]
        if sub.priority is None and j.queued:
            sub.priority = j.priority
        if j.held or j.restart_cnt or j.admin_comment or (
                j.queued and sub.priority is not None and j.priority != sub.priority):
            run.bad(rnd, f"unmanaged job {jid} touched: held={j.held} restarts={j.restart_cnt}"
                         f" admin_comment={j.admin_comment!r} priority {sub.priority}->"
                         f"{j.priority}")
        if jid in seen:
            run.bad(rnd, f"the controller treated unmanaged job {jid} as managed")


def check_audit_never_names(run: SeedRun, store: Store, ids: set[int]) -> None:
    named = {r["job_id"] for r in store.db.query("SELECT job_id FROM decisions")} & ids
    for a in store.db.query("SELECT verb, ids FROM actions"):
        named |= set(json.loads(a["ids"])) & ids
    named |= {r["job_id"] for r in store.db.query("SELECT job_id FROM jobs")} & ids
    if named:
        run.bad(-1, f"audit names unmanaged jobs {sorted(named)}")


def at_test_scale(name: str) -> composition.Composition:
    """A bundled composition with its policies' times in this test's rounds. Gavel's rounds
    keep an allocation for ``reset_interval`` seconds (1,920: five of Gavel's 360 s rounds)
    and a job that arrives meanwhile waits for the next reset under FIFO: at 0.8 s rounds
    that is 32 minutes of held jobs, by design, so the test scales those seconds as Gavel's
    rounds scale to its own."""
    path, data = composition.read(name)
    section = data.get("scheduling", {})
    if isinstance(section, dict) and section.get("policy") == "gavel_rounds":
        scale = ROUND_S / GAVEL_ROUND_S
        default = registry.get("scheduling", "gavel_rounds").params()
        section["reset_interval"] = section.get("reset_interval", default.reset_interval) * scale
        section["initial_time"] = section.get("initial_time", default.initial_time) * scale
    return loading.build(data, name=name, base=path.parent)


def run_seed(world: ManagedWorld, seed: int) -> SeedRun:
    rng = random.Random(seed)
    name = rng.choice(COMPOSITIONS)
    run = SeedRun(seed, name)
    client = world.client()
    node_gpus = {n.name: n.gpus_total for n in client.list_nodes()}
    biggest = max(node_gpus.values())
    cfg = ControllerConfig(partitions=[PARTITION], round_seconds=ROUND_S,
                           store=str(world.base / f"consistency-{seed}.db"),
                           heartbeat=str(world.heartbeat), lease_seconds=float(LEASE),
                           grace_seconds=3.0, slurm_conf=str(world.emu.conf))
    ctl = Recording(cfg, at_test_scale(name), client, Store(cfg.store))
    # the plan: (arrival round, user, gpus, iterations or seconds, managed)
    plan = [(rng.randrange(0, 4), USERS[i % 3], rng.choice([g for g in (1, 1, 2, 2, 4)
                                                           if g <= biggest]),
             rng.randrange(20, 61), True) for i in range(rng.randint(5, 8))]
    plan += [(rng.randrange(0, 3), rng.choice(USERS), rng.choice((1, 2)), rng.randint(3, 8),
              False) for _ in range(rng.randint(1, 2))]
    plan.sort(key=lambda p: p[0])
    print(f"  seed {seed}: {name}; jobs " + ", ".join(
        f"{'M' if m else 'U'}{g}g/{n}{'it' if m else 's'}@r{r}" for r, _, g, n, m in plan))
    write_heartbeat(world.heartbeat)  # fresh: the plugin holds managed jobs for the policy
    deadline = time.monotonic() + SEED_BUDGET_S
    rnd = 0
    try:
        while True:
            t0 = time.monotonic()
            for arrival, user, gpus, n, managed in plan:
                if arrival != rnd:
                    continue
                if managed:
                    jid = submit_managed(world, user, gpus, n)
                    run.jobs[jid] = Submitted(jid, user, gpus, True, iterations=n)
                else:
                    jid = submit_unmanaged(world, user, gpus, n)
                    run.jobs[jid] = Submitted(jid, user, gpus, False, seconds=n)
                j = client.get_job(jid)
                assert j is not None, f"job {jid} not in Slurm right after sbatch"
                if managed:  # the setup must be what the test claims: marked and held
                    assert j.admin_comment == "blox:managed" and j.held, (jid, j)
                else:
                    assert j.admin_comment == "" and not j.held, (jid, j)
            report = ctl.round()
            run.rounds += 1
            assert report.error == "", f"seed {seed} round {rnd}: {report.error}"
            check_round(run, rnd, world, ctl, report, node_gpus)
            rnd += 1
            _, by_id = all_jobs(world)
            if len(run.jobs) == len(plan) and not any(
                    by_id[j].queued for j in run.jobs if j in by_id):
                break
            assert time.monotonic() < deadline, (
                f"seed {seed} ({name}): jobs still queued after {SEED_BUDGET_S:g} s: "
                f"{[(j, by_id[j].state, by_id[j].reason) for j in run.jobs if by_id[j].queued]}"
                f"; violations so far {run.violations}")
            time.sleep(max(0.0, ROUND_S - (time.monotonic() - t0)))
        # observe the last jobs gone, then check the store as a whole
        report = ctl.round()
        run.rounds += 1
        assert report.error == "", report.error
        check_round(run, rnd, world, ctl, report, node_gpus)
    finally:
        live = [j.job_id for j in client.list_jobs() if j.job_id in run.jobs]
        if live:
            client.cancel(live)
    final_checks(run, world, ctl.store)
    return run


def final_checks(run: SeedRun, world: ManagedWorld, store: Store) -> None:
    _, by_id = all_jobs(world)
    managed = {j: s for j, s in run.jobs.items() if s.managed}
    unmanaged = set(run.jobs) - set(managed)
    rows = {r["job_id"]: r for r in store.jobs(active_only=False)}
    if set(rows) != set(managed):
        run.bad(-1, f"store rows {sorted(rows)} != managed jobs {sorted(managed)}")
    requeued: Counter[int] = Counter()
    for a in store.db.query("SELECT verb, ids FROM actions WHERE ok = 1 AND "
                            "verb = 'requeuehold'"):
        requeued.update(json.loads(a["ids"]))
    for jid, sub in managed.items():
        j, row = by_id.get(jid), rows.get(jid)
        if j is None or j.state != FINISHED_OK:
            run.bad(-1, f"job {jid} did not complete: {j and j.state}")
        progress = world.progress(jid, sub.user) or {}
        history = progress.get("history") or []
        tiles = bool(history) and history[0][0] == 0 and history[-1][1] == sub.iterations \
            and all(a[1] == b[0] for a, b in zip(history, history[1:], strict=False))
        if progress.get("iteration") != sub.iterations or not tiles:
            run.bad(-1, f"job {jid}: progress {progress.get('iteration')}/{sub.iterations}, "
                        f"history {history}")
        if row is None:
            continue
        if row["state"] != "done" or row["first_start"] is None:
            run.bad(-1, f"store row of job {jid}: state {row['state']}, "
                        f"first_start {row['first_start']}")
        if j is not None and not (row["preemptions"] == j.restart_cnt == requeued[jid]):
            run.bad(-1, f"job {jid}: store preemptions {row['preemptions']}, Slurm restarts "
                        f"{j.restart_cnt}, requeuehold actions {requeued[jid]}")
    for jid in unmanaged:
        j = by_id.get(jid)
        if j is None or j.state != FINISHED_OK or j.restart_cnt:
            run.bad(-1, f"unmanaged job {jid}: {j and j.state}, restarts {j and j.restart_cnt}")
    check_audit_never_names(run, store, unmanaged)


def seeds() -> list[int]:
    env = os.environ.get("BLOX_CONSISTENCY_SEEDS")
    if env:
        return [int(s) for s in env.split(",") if s.strip()]
    base = time.time_ns() % 1_000_000
    return [base + i for i in range(N_SEEDS)]


def test_state_stays_consistent_under_random_compositions(clean_queue: ManagedWorld) -> None:
    world = clean_queue
    chosen = seeds()
    print(f"\nstate consistency seeds {chosen} "
          f"(rerun with BLOX_CONSISTENCY_SEEDS={','.join(map(str, chosen))})")
    t0 = time.monotonic()
    runs = [run_seed(world, s) for s in chosen]
    RUNS[:] = runs
    violations = [v for r in runs for v in r.violations]
    races = [x for r in runs for x in r.races]
    n_jobs = sum(len(r.jobs) for r in runs)
    n_unmanaged = sum(not s.managed for r in runs for s in r.jobs.values())
    print(f"state consistency: seeds {chosen}, compositions {[r.name for r in runs]}, "
          f"jobs {n_jobs} ({n_unmanaged} unmanaged), rounds {sum(r.rounds for r in runs)}, "
          f"starts {sum(r.starts for r in runs)} (of released, still pending jobs: "
          f"{sum(r.restarts for r in runs)}; kept in flight: {sum(r.in_flight for r in runs)}), "
          f"preemptions {sum(r.preempts for r in runs)}, "
          f"holds {sum(r.holds for r in runs)}, races {len(races)}, "
          f"over-allocated {sum(len(r.overallocated) for r in runs)}, "
          f"violations={len(violations)} ({time.monotonic() - t0:.0f} s)")
    for x in races:
        print(f"  race: {x}")
    for r in runs:
        for x in r.overallocated.values():
            print(f"  over-allocated: {x}")
    assert violations == [], "\n".join(violations)


def test_every_job_runs_on_the_gpus_it_asked_for() -> None:
    """Of the runs above: a job released for N GPUs holds exactly N in Slurm, on one node (each
    asked ``--gres=gpu:N``; regression test of :data:`SPREAD_BUG`)."""
    assert RUNS, "the state-consistency test did not run (or failed before its runs ended)"
    over = [v for r in RUNS for v in r.overallocated.values()]
    assert over == [], f"{SPREAD_BUG}:\n" + "\n".join(over)
