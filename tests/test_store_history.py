"""The store's job history when a job leaves the queue: Slurm's record of the ended job wins
over the controller's last look (pure: no Slurm, the observations are given)."""

from __future__ import annotations

from pathlib import Path

import pytest

from blox_slurm.slurm import store as store_module
from blox_slurm.slurm.client import SlurmJob
from blox_slurm.slurm.store import Observed, Store


def seen(jid: int, run_start: float | None = None) -> Observed:
    return Observed(jid, "alice", "blox", 2, 0.0, run_start is not None, run_start, False, {})


def rows(store: Store) -> dict[int, dict]:
    return {r["job_id"]: r for r in store.jobs(active_only=False)}


def test_a_run_nobody_saw_is_taken_whole_from_slurms_record(tmp_path) -> None:
    store = Store(tmp_path / "s.db")
    store.observe(100.0, [seen(1), seen(2, 100.0), seen(3)], {2: 2})
    store.observe(300.0, [seen(1), seen(2, 100.0), seen(3)], {2: 2})
    # Job 1 ran 200-450 and ended while no controller looked; job 2 ended at 520, between
    # two looks; job 3 was cancelled while pending (no run in the record).
    store.observe(600.0, [], {}, {1: (200.0, 450.0), 2: (100.0, 520.0)})
    got = rows(store)
    assert {j: got[j]["state"] for j in got} == {1: "done", 2: "done", 3: "done"}
    assert (got[1]["first_start"], got[1]["finished_at"]) == (200.0, 450.0)
    assert got[1]["attained_base"] == pytest.approx(2 * 250.0)
    assert (got[2]["first_start"], got[2]["finished_at"]) == (100.0, 520.0)
    assert got[2]["attained_base"] == pytest.approx(2 * 420.0)
    assert (got[3]["first_start"], got[3]["attained_base"]) == (None, 0.0)
    assert got[3]["finished_at"] == 600.0


def test_a_later_run_in_slurms_record_is_a_restart_nobody_saw(tmp_path) -> None:
    # Seen running from 100; Slurm's record says the job's last run began at 400 (requeued
    # and restarted unseen): the seen run ends at its last look, the record's run counts
    # whole, and the restart is a preemption (as the simulator counts a stop or a move).
    store = Store(tmp_path / "s.db")
    store.observe(300.0, [seen(1, 100.0)], {1: 2})
    store.observe(600.0, [], {}, {1: (400.0, 550.0)})
    got = rows(store)[1]
    assert (got["first_start"], got["finished_at"], got["preemptions"]) == (100.0, 550.0, 1)
    assert got["attained_base"] == pytest.approx(2 * 200.0 + 2 * 150.0)


def test_a_record_of_an_earlier_run_does_not_rewrite_the_one_seen(tmp_path) -> None:
    store = Store(tmp_path / "s.db")
    store.observe(300.0, [seen(1, 100.0)], {1: 2})
    store.observe(600.0, [], {}, {1: (20.0, 50.0)})
    got = rows(store)[1]
    assert (got["first_start"], got["finished_at"], got["preemptions"]) == (100.0, 300.0, 0)
    assert got["attained_base"] == pytest.approx(2 * 200.0)


def _job(state: str, start: float | None, end: float | None) -> SlurmJob:
    return SlurmJob(7, "j", "alice", "", "blox", state, "None", 1, 1, start_time=start,
                    end_time=end)


def test_ended_run_of_a_slurm_job() -> None:
    assert _job("COMPLETED", 10.0, 50.0).ended_run == (10.0, 50.0)
    assert _job("FAILED", 10.0, 10.0).ended_run == (10.0, 10.0)  # ran under a second
    assert _job("CANCELLED", 10.0, 50.0).ended_run == (10.0, 50.0)  # cancelled while running
    assert _job("CANCELLED", 50.0, 50.0).ended_run is None  # cancelled while pending
    assert _job("RUNNING", 10.0, 500.0).ended_run is None  # end is a projection
    assert _job("COMPLETING", 10.0, 50.0).ended_run is None
    assert _job("COMPLETED", None, 50.0).ended_run is None


def test_a_completing_job_is_still_in_its_run_not_requeued(tmp_path) -> None:
    from blox_slurm.slurm.controller import _observed

    store = Store(tmp_path / "s.db")
    run = _job("RUNNING", 100.0, 900.0)
    done = _job("COMPLETING", 100.0, 300.0)
    store.observe(200.0, [_observed(run)], {7: 1})
    store.observe(300.0, [_observed(done)], {})  # finishing: same run, not a preemption
    store.observe(400.0, [], {}, {7: (100.0, 300.0)})
    got = rows(store)[7]
    assert (got["state"], got["preemptions"], got["finished_at"]) == ("done", 0, 300.0)
    assert got["attained_base"] == pytest.approx(200.0)


def test_an_unchanged_job_is_stamped_seen_and_a_changed_one_rewritten(tmp_path) -> None:
    # The store writes only rows whose history changed, and stamps every active job seen in
    # one statement: both halves must hold, or "last seen" or the history would go stale.
    store = Store(tmp_path / "s.db")
    store.observe(100.0, [seen(1), seen(2), seen(3, 90.0)], {3: 2})
    before = rows(store)
    store.observe(200.0, [seen(1), seen(2, 150.0), seen(3, 90.0)], {2: 2, 3: 2})
    after = rows(store)
    assert {j: after[j]["last_seen"] for j in after} == {1: 200.0, 2: 200.0, 3: 200.0}
    assert {k: v for k, v in after[1].items() if k != "last_seen"} == {
        k: v for k, v in before[1].items() if k != "last_seen"}
    assert (after[2]["state"], after[2]["run_start"], after[2]["first_start"]) == (
        "running", 150.0, 150.0)
    assert after[3]["run_last_seen"] == 200.0
    store.observe(300.0, [seen(1)], {}, {2: (150.0, 250.0)})
    done = rows(store)
    assert done[1]["last_seen"] == 300.0 and done[2]["last_seen"] == 200.0  # ended: not seen
    assert done[2]["state"] == done[3]["state"] == "done"


def test_a_first_fold_stamps_new_waiting_rows_with_their_insert_and_every_other_row(
        tmp_path) -> None:
    """New waiting rows are written stamped and skipped by the statement that stamps the
    rest: after a restart (a new store object's first fold), rows it already had, rows it
    writes anew and new waiting rows all read as seen now; ended rows keep their stamp."""
    path = tmp_path / "s.db"
    first = Store(path)
    first.observe(100.0, [seen(1), seen(2, 90.0), seen(3)], {2: 2})
    first.observe(150.0, [seen(1), seen(2, 90.0)], {2: 2})  # 3 ended
    restarted = Store(path)
    restarted.observe(200.0, [seen(1), seen(2, 90.0), seen(4), seen(5, 180.0)], {2: 2, 5: 2})
    got = rows(restarted)
    assert {j: got[j]["last_seen"] for j in got} == {1: 200.0, 2: 200.0, 3: 100.0, 4: 200.0,
                                                     5: 200.0}
    assert got[4]["state"] == "pending" and got[3]["state"] == "done"
    restarted.observe(250.0, [seen(1), seen(2, 90.0), seen(4), seen(6)], {2: 2})
    assert {j: r["last_seen"] for j, r in rows(restarted).items()} == {
        1: 250.0, 2: 250.0, 3: 100.0, 4: 250.0, 5: 200.0, 6: 250.0}


def obs(jid: int, user: str, submit: float, restarts: int,
        run_start: float | None = None) -> Observed:
    return Observed(jid, user, "blox", 2, submit, run_start is not None, run_start, False, {},
                    "", restarts)


def test_a_requeued_job_keeps_its_first_submit_time(tmp_path) -> None:
    """Red team item 18: Slurm resets SubmitTime on a requeue, and a preempted job lost its
    place behind jobs submitted after it (the simulator keeps the original)."""
    store = Store(tmp_path / "s.db")
    store.observe(100.0, [obs(1, "alice", 50.0, 0, 60.0)], {1: 2})
    store.observe(200.0, [obs(1, "alice", 190.0, 1)], {})  # requeued: Slurm says 190
    assert rows(store)[1]["submit_time"] == 50.0
    assert store.extras(200.0)[1].submit_time == 50.0
    assert rows(store)[1]["preemptions"] == 1


def test_a_reused_job_id_is_a_new_job_and_the_old_usage_still_counts(tmp_path) -> None:
    """Red team item 16: after slurmctld lost its state it gave a new job an old id; the new
    job inherited the old one's service and preemptions. A job never requeued (restart count
    0) with another submit time is another job."""
    store = Store(tmp_path / "s.db")
    store.observe(100.0, [obs(7, "mallory", 10.0, 0, 20.0)], {7: 2})
    store.observe(200.0, [obs(7, "mallory", 10.0, 0)], {})  # ran 20..100 (last seen) on 2 GPUs
    store.observe(300.0, [obs(7, "alice", 290.0, 0)], {})  # .. then id 7 is alice's new job
    row = rows(store)[7]
    assert (row["user"], row["submit_time"], row["attained_base"], row["preemptions"]) == \
        ("alice", 290.0, 0.0, 0)
    retired = list(store.db.table("retired_jobs").rows)
    assert [(r["job_id"], r["user"]) for r in retired] == [(7, "mallory")]
    assert store.usage(300.0, 1e9)["user:mallory"] == pytest.approx(2 * 80.0, rel=1e-6)


def test_a_finished_job_seen_again_with_its_own_submit_time_is_the_same_job(tmp_path) -> None:
    """slurmctld restored from an older state can show a finished job again: same job."""
    store = Store(tmp_path / "s.db")
    store.observe(100.0, [obs(3, "bob", 10.0, 0, 20.0)], {3: 2})
    store.observe(200.0, [], {}, {3: (20.0, 150.0)})
    store.observe(300.0, [obs(3, "bob", 10.0, 0, 20.0)], {3: 2})
    assert rows(store)[3]["state"] == "running" and rows(store)[3]["finished_at"] is None
    assert list(store.db.table("retired_jobs").rows) == []
    store.observe(400.0, [], {}, {3: (20.0, 400.0)})
    # 20..150 was counted when it was done; only 150..400 is new: 2 x 380, not 2 x 510
    assert rows(store)[3]["attained_base"] == pytest.approx(2 * 380.0)


def test_many_new_jobs_in_one_round(tmp_path) -> None:
    """Old SQLite takes 999 parameters per statement: a first look at a long queue."""
    store = Store(tmp_path / "s.db")
    store.observe(100.0, [obs(i, "alice", 10.0, 0) for i in range(1, 2501)], {})
    assert len(rows(store)) == 2500


def test_a_round_rewrites_only_the_jobs_whose_history_changed(tmp_path) -> None:
    """A 20,000-job queue changes little between rounds: the store rewrites the rows that
    changed and stamps the rest with one statement, nothing more."""
    store = Store(tmp_path / "s.db")
    waiting = [obs(i, "alice", 10.0, 0) for i in range(1, 2001)]
    store.observe(100.0, waiting, {})
    changes = store.db.conn.total_changes
    store.observe(200.0, [*waiting[:-1], obs(2000, "alice", 10.0, 0, 150.0)], {2000: 2})
    assert store.db.conn.total_changes - changes == 2000 + 1  # the stamp, and job 2000
    assert rows(store)[2000]["state"] == "running"


def test_what_the_store_keeps_between_rounds_is_what_its_file_says(tmp_path) -> None:
    """Each round reads back only what changed; a store opened afresh on the same file (as
    after a restart) must see the same extras, ranks and history at every step."""
    path = tmp_path / "s.db"
    store = Store(path)

    def same(now: float) -> None:
        fresh = Store(path)
        assert store.extras(now) == fresh.extras(now)
        assert [(r["job_id"], r["rank"], r["reason"], r["state"]) for r in store.jobs()] == [
            (r["job_id"], r["rank"], r["reason"], r["state"]) for r in fresh.jobs()]

    store.observe(100.0, [obs(1, "alice", 10.0, 0), obs(2, "bob", 11.0, 0)], {})
    store.update_policy_state([1], [(2, "tier", 1.0)], {1: 0, 2: 1}, {2: "waits"})
    same(100.0)
    store.observe(200.0, [obs(1, "alice", 10.0, 0, 150.0), obs(2, "bob", 11.0, 0),
                          obs(3, "carol", 190.0, 0)], {1: 2})
    store.update_policy_state([2], [(2, "tier", 2.0)], {2: 0, 3: 1}, {3: "waits"})
    same(200.0)
    store.observe(300.0, [obs(2, "bob", 11.0, 0), obs(3, "carol", 190.0, 0)], {},
                  {1: (150.0, 280.0)})  # 1 ended
    store.update_policy_state([], [], {2: 0, 3: 1}, {3: "waits"})
    same(300.0)
    assert 1 not in store.extras(300.0)
    later = Store(path)  # a restarted controller: job 3 left while it was down
    later.observe(400.0, [obs(2, "bob", 11.0, 0)], {})
    assert rows(later)[3]["state"] == "done" and set(later.extras(400.0)) == {2}


def test_a_restarted_store_rewrites_no_rank_that_stands(tmp_path) -> None:
    """A store opened afresh on the file (a restarted controller) knows the ranks and
    reasons its rows hold: the first round writes only the ones that changed."""
    path = tmp_path / "s.db"
    store = Store(path)
    waiting = [obs(i, "alice", 10.0, 0) for i in range(1, 101)]
    store.observe(100.0, waiting, {})
    ranks, reasons = {i: i - 1 for i in range(1, 101)}, {i: "Priority" for i in range(2, 101)}
    store.update_policy_state(range(1, 101), [], ranks, reasons)
    later = Store(path)
    later.observe(200.0, waiting, {})
    changes = later.db.conn.total_changes
    later.update_policy_state(range(1, 101), [], {**ranks, 7: 0, 1: 6}, {**reasons, 1: "x"})
    assert later.db.conn.total_changes - changes == 2  # jobs 1 and 7
    assert {r["job_id"]: (r["rank"], r["reason"]) for r in later.jobs()} == {
        **{i: (i - 1, "Priority") for i in range(2, 101)}, 1: (6, "x"), 7: (0, "Priority")}


def test_a_new_waiting_jobs_row_is_the_row_every_column_written_gives(tmp_path,
                                                                        monkeypatch) -> None:
    """New waiting jobs' rows are written with only the columns their observation sets, the
    table's defaults filling the rest: the rows are the same as written whole."""
    def history(path: Path) -> list[dict]:
        store = Store(path)
        hinted = Observed(3, "bob", "blox", 1, 20.0, False, None, True, {"model": "m"}, "ml")
        waiting = [obs(1, "alice", 10.0, 0), hinted, obs(4, "carol", 30.0, 0)]  # 4: as new
        store.observe(100.0, [*waiting, obs(2, "alice", 11.0, 0, 90.0)], {2: 2})
        store.update_policy_state([1], [(1, "tier", 1.0)], {1: 0, 3: 1}, {3: "waits"})
        store.observe(200.0, [obs(1, "alice", 10.0, 0, 150.0), *waiting[1:]], {1: 2})
        return list(store.jobs(active_only=False))

    narrow = history(tmp_path / "narrow.db")
    monkeypatch.setattr(store_module, "WAITING_COLUMNS", store_module.JOB_COLUMNS)
    assert narrow == history(tmp_path / "whole.db")
