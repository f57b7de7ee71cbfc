"""Exact logic of the fairness policies (Themis-style finish-time fairness, Slurm-style fair
share) on hand-built snapshots, and the simulator's decayed usage they read."""

from __future__ import annotations

from unittest import mock

import pytest
from _core_helpers import cluster, comp, pending, running, snapshot, started

from blox_slurm.core.accounting import DecayedUsage
from blox_slurm.core.composition import CompositionError
from blox_slurm.core.registry import PolicyError
from blox_slurm.core.round import decide
from blox_slurm.policies.scheduling.fair_share import FairShare
from blox_slurm.policies.scheduling.las import Las
from blox_slurm.policies.scheduling.themis import Themis, finish_time_fairness
from blox_slurm.sim import simulator as simulator_module
from blox_slurm.sim.config import SimConfig
from blox_slurm.sim.simulator import Simulator
from blox_slurm.workloads.schema import JobSpec, Workload


def ids(schedule) -> list[int]:
    return [j.id for j in schedule.order]


def themis(knob: float) -> Themis:
    return Themis(Themis.Params(fairness_knob=knob))


def fair_share(**params) -> FairShare:
    return FairShare(FairShare.Params(**params))


# --------------------------------------------------------------------------- Themis: ρ

def test_rho_is_time_in_cluster_plus_remaining_over_isolated_time() -> None:
    now = 1000.0
    # Never ran, 500 s alone: (1000 - 0 + 500) / 500.
    a = pending(1, submit=0.0, duration=500.0)
    # Running since 200 at rate 1 with 2000 s of work: 800 done, 1200 left; (900 + 1200) / 2000.
    b = running(2, [0], submit=100.0, since=200.0, duration=2000.0)
    # No duration, 1200 GPU-s on 2 GPUs = 600 s executed; remaining unknown: 600 / 600.
    c = pending(3, gpus=2, submit=400.0, attained_base=1200.0)
    # No duration, never ran: isolated time floored at 1 s, so ρ = its 100 s of age.
    d = pending(4, submit=900.0)
    assert finish_time_fairness(a, now) == pytest.approx(3.0)
    assert finish_time_fairness(b, now) == pytest.approx(1.05)
    assert finish_time_fairness(c, now) == pytest.approx(1.0)
    assert finish_time_fairness(d, now) == pytest.approx(100.0)
    s = snapshot(cluster(4), [a, b, c, d], now=now)
    assert ids(themis(1.0).order(s, s.jobs)) == [4, 1, 2, 3]  # highest ρ first


def test_rho_of_a_waiting_job_grows_and_overtakes_a_running_one() -> None:
    r = running(1, [0], submit=0.0, since=0.0, duration=1000.0)  # ρ stays 1 while it runs
    p = pending(2, submit=0.0, duration=4000.0)  # ρ = (now + 4000) / 4000
    early = snapshot(cluster(1), [r, p], now=100.0)
    late = snapshot(cluster(1), [r, p], now=900.0)
    assert finish_time_fairness(r, 100.0) == finish_time_fairness(r, 900.0) == 1.0
    assert ids(themis(1.0).order(early, early.jobs)) == [2, 1]  # 1.025 > 1
    assert ids(themis(1.0).order(late, late.jobs)) == [2, 1]
    assert Themis.time_dependent is True
    # In a round, the worst-treated job preempts the one that ran alone.
    d = decide(early, comp({"policy": "themis", "fairness_knob": 1.0}))
    assert d.preempt == (1,) and started(d) == {2: (0,)}


# --------------------------------------------------------------------------- Themis: knob

def _knob_jobs():
    # All submitted at 0, now = 1000: ρ = (1000 + d) / d.
    return [pending(1, submit=0.0, duration=100.0),             # ρ 11, bid key 100 GPU-s
            pending(2, submit=0.0, duration=200.0),             # ρ 6,  bid key 200
            pending(3, gpus=4, submit=0.0, duration=50.0),      # ρ 21, bid key 200
            pending(4, submit=0.0, duration=1000.0)]            # ρ 2,  bid key 1000


@pytest.mark.parametrize(("knob", "expected"), [
    (1.0, [3, 1, 2, 4]),  # one eligible job: pure highest-ρ order
    (0.8, [3, 1, 2, 4]),  # ceil(0.2 * 4) = 1 eligible
    (0.5, [1, 3, 2, 4]),  # 2 eligible (3, 1) ordered by isolated GPU-s; then 2, 4 by ρ
    (0.0, [1, 3, 2, 4]),  # all eligible by bid; 3 and 2 tie at 200 and keep ρ order
])
def test_fairness_knob_limits_the_bidders_to_the_worst_rho_jobs(knob, expected) -> None:
    s = snapshot(cluster(8), _knob_jobs(), now=1000.0)
    assert ids(themis(knob).order(s, s.jobs)) == expected


def test_fairness_knob_eligible_count_is_exact_for_float_products() -> None:
    # (1 - 0.8) * 10 is 2.0000000000000004 in floats; two jobs are eligible, not three.
    # ρ = (1000 + d) / d: job 10 (8 GPUs, 100 s) 11, job 9 (200 s) 6, job 8 (300 s) 4.33, ...
    jobs = [pending(10, gpus=8, submit=0.0, duration=100.0),
            *(pending(i, submit=0.0, duration=100.0 * (11 - i)) for i in range(1, 10))]
    s = snapshot(cluster(8), jobs, now=1000.0)
    # Eligible {10 (800 GPU-s), 9 (200)}: 9 first. With three, 8 (300 GPU-s) would pass 10.
    assert ids(themis(0.8).order(s, s.jobs))[:3] == [9, 10, 8]


# --------------------------------------------------------------------------- fair share

def test_fair_share_factor_two_users_equal_shares() -> None:
    jobs = [pending(1, submit=0.0, user="alice"), pending(2, submit=5.0, user="bob")]
    s = snapshot(cluster(2), jobs, now=100.0,
                 usage={"user:alice": 3000.0, "user:bob": 1000.0})
    f = fair_share().factors(s, s.jobs)
    # U = 0.75 / 0.25, S = 0.5 each: F = 2^-1.5, 2^-0.5.
    assert f == pytest.approx({"alice": 2 ** -1.5, "bob": 2 ** -0.5})
    assert ids(fair_share().order(s, s.jobs)) == [2, 1]  # bob used less, despite arriving later


def test_fair_share_weights_can_even_out_usage_then_the_tie_breaker_decides() -> None:
    jobs = [pending(1, submit=0.0, user="alice"), pending(2, submit=5.0, user="bob")]
    s = snapshot(cluster(2), jobs, now=100.0,
                 usage={"user:alice": 3000.0, "user:bob": 1000.0})
    p = fair_share(shares={"alice": 3.0})  # S = 0.75 / 0.25: both F = 2^-1
    assert p.factors(s, s.jobs) == pytest.approx({"alice": 0.5, "bob": 0.5})
    assert ids(p.order(s, s.jobs)) == [1, 2]  # equal factors: FIFO


def test_fair_share_counts_current_runs_unless_told_not_to() -> None:
    # alice holds 2 GPUs since 500: 1000 GPU-s at now = 1000, equal to bob's history.
    jobs = [running(1, [0, 1], submit=0.0, since=500.0, user="alice"),
            pending(2, submit=10.0, user="bob"), pending(3, submit=20.0, user="alice")]
    s = snapshot(cluster(3), jobs, now=1000.0, usage={"user:bob": 1000.0})
    assert fair_share().factors(s, s.jobs) == pytest.approx({"alice": 0.5, "bob": 0.5})
    assert ids(fair_share().order(s, s.jobs)) == [1, 2, 3]
    off = fair_share(include_running=False)
    assert off.factors(s, s.jobs) == pytest.approx({"alice": 1.0, "bob": 0.25})  # 2^-(1/0.5)
    assert ids(off.order(s, s.jobs)) == [1, 3, 2]


def test_fair_share_by_account_reads_account_keys_and_parties_without_jobs_count() -> None:
    jobs = [pending(1, submit=0.0, user="u", account="ml"),
            pending(2, submit=1.0, user="u", account="hpc")]
    usage = {"account:ml": 2000.0, "account:vision": 2000.0, "user:u": 1e9}
    s = snapshot(cluster(2), jobs, now=10.0, usage=usage)
    # Three accounts, S = 1/3; U: ml 0.5, vision 0.5, hpc 0 -> F = 2^-1.5, 2^-1.5, 1.
    f = fair_share(by="account").factors(s, s.jobs)
    assert f == pytest.approx({"ml": 2 ** -1.5, "vision": 2 ** -1.5, "hpc": 1.0})
    assert ids(fair_share(by="account").order(s, s.jobs)) == [2, 1]


def test_no_usage_at_all_is_the_tie_breaker_order() -> None:
    jobs = [pending(1, submit=0.0, user="a", attained_base=50.0),
            pending(2, submit=1.0, user="b")]
    s = snapshot(cluster(1), jobs, now=10.0)
    p = fair_share(then="las", include_running=False)
    assert p.factors(s, s.jobs) == {"a": 1.0, "b": 1.0}
    assert ids(p.order(s, s.jobs)) == ids(Las().order(s, s.jobs)) == [2, 1]


def test_tie_breaker_policy_orders_within_a_user_and_keeps_its_marks() -> None:
    # bob: two jobs with different service; LAS decides between them, fair share between users.
    jobs = [pending(1, submit=0.0, user="bob", attained_base=900.0),
            pending(2, submit=1.0, user="bob", attained_base=100.0),
            pending(3, submit=2.0, user="alice", attained_base=5000.0)]
    s = snapshot(cluster(1), jobs, now=100.0, usage={"user:alice": 10.0, "user:bob": 0.0})
    assert ids(fair_share(then="las").order(s, s.jobs)) == [2, 1, 3]
    assert ids(fair_share(then="fifo").order(s, s.jobs)) == [1, 2, 3]
    # A starved Tiresias job is promoted by the tie-breaker, and its reset mark survives.
    starved = [pending(4, submit=0.0, user="bob", attained_base=4000.0, last_event=0.0)]
    s = snapshot(cluster(1), starved, now=1e6)
    sched = fair_share(then="tiresias").order(s, s.jobs)
    assert sched.marks == ((4, "tiresias.reset", 4000.0),)


def test_fair_share_parameter_errors() -> None:
    with pytest.raises(PolicyError, match="its own ties"):
        fair_share(then="fair_share")
    with pytest.raises(CompositionError, match="unknown scheduling policy 'nope'"):
        comp({"policy": "fair_share", "then": "nope"})
    with pytest.raises(CompositionError, match="then_params"):
        comp({"policy": "fair_share", "then": "tiresias", "then_params": {"bogus": 1}})
    with pytest.raises(CompositionError, match="positive"):
        comp({"policy": "fair_share", "shares": {"alice": 0}})


def test_fair_share_in_a_round_starts_the_light_user_first() -> None:
    jobs = [pending(1, submit=0.0, user="heavy"), pending(2, submit=50.0, user="light")]
    s = snapshot(cluster(1), jobs, now=100.0, usage={"user:heavy": 7200.0})
    d = decide(s, comp({"policy": "fair_share"}))
    assert started(d) == {2: (0,)}


# --------------------------------------------------------------------------- simulator usage

def _usage_seen(wl: Workload, scheduling: str, cfg: SimConfig) -> dict[float, dict]:
    seen: dict[float, dict] = {}
    real = simulator_module.decide

    def spy(snap, c, **kw):
        seen[snap.now] = dict(snap.usage)
        return real(snap, c, **kw)

    with mock.patch.object(simulator_module, "decide", spy):
        Simulator(wl, comp(scheduling), cluster(1), cfg).run()
    return seen


def test_simulator_usage_of_a_finished_job_halves_after_one_half_life() -> None:
    wl = Workload((JobSpec(0, 0.0, 1, 1000.0, user="alice", account="ml"),
                   JobSpec(1, 4600.0, 1, 100.0, user="bob", account="cv")))
    seen = _usage_seen(wl, "fifo", SimConfig(round_duration=100.0, usage_half_life=3600.0))
    assert seen[0.0] == {}
    assert seen[1000.0] == pytest.approx({"user:alice": 1000.0, "account:ml": 1000.0})
    assert seen[4600.0] == pytest.approx({"user:alice": 500.0, "account:ml": 500.0})


def test_simulator_counts_a_preempted_run_when_it_ends() -> None:
    # LAS on one GPU: alice runs 0..100, bob (no service) preempts her at 100.
    wl = Workload((JobSpec(0, 0.0, 1, 1000.0, user="alice"),
                   JobSpec(1, 100.0, 1, 1000.0, user="bob")))
    cfg = SimConfig(round_duration=100.0, usage_half_life=100.0, restart_cost=0.0)
    seen = _usage_seen(wl, "las", cfg)
    assert "user:alice" not in seen[100.0]  # still running when that round decides
    assert seen[200.0]["user:alice"] == pytest.approx(50.0)  # 100 GPU-s, one half-life old


def test_decayed_usage_prescaled_additions_equal_direct_decay() -> None:
    u = DecayedUsage(half_life=10.0, t=0.0)
    u.add("a", "x", 10.0, at=5.0)  # 2 GPUs x 5 s ended at t=5
    u.add("a", "y", 1000.0, at=1000.0)  # past the prescale cap
    got = u.at(1010.0)
    assert got["user:a"] == pytest.approx(10.0 * 0.5 ** 100.5 + 1000.0 * 0.5)
    assert got["account:x"] == pytest.approx(10.0 * 0.5 ** 100.5)
    assert got["account:y"] == pytest.approx(500.0)


def test_controller_store_usage_decays_ended_runs_per_user_and_account(tmp_path) -> None:
    from blox_slurm.slurm.store import Observed, Store

    store = Store(tmp_path / "blox.db")

    def seen(jid: int, user: str, run_start: float | None, account: str = "ml") -> Observed:
        return Observed(jid, user, "gpu", 2, 0.0, run_start is not None, run_start, False, {},
                        account)

    store.observe(100.0, [seen(1, "alice", 100.0), seen(2, "bob", 100.0)], {1: 2, 2: 2})
    store.observe(600.0, [seen(1, "alice", 100.0), seen(2, "bob", 100.0)], {1: 2, 2: 2})
    store.observe(700.0, [seen(2, "bob", 100.0)], {2: 2})  # alice's job left: done at 600
    # alice: 2 GPUs x 500 s ended at 600; bob's run is still going (fair share adds it).
    assert store.usage(600.0, half_life=3600.0) == pytest.approx(
        {"user:alice": 1000.0, "account:ml": 1000.0})
    assert store.usage(4200.0, half_life=3600.0) == pytest.approx(
        {"user:alice": 500.0, "account:ml": 500.0})
    store.observe(800.0, [seen(3, "carol", 700.0, account="")], {3: 1})
    store.observe(900.0, [], {})  # carol's job, with no account, left at 800
    # Jobs without an account are one party, "", as in the simulator.
    assert store.usage(800.0, half_life=3600.0)["account:"] == pytest.approx(100.0)


def test_a_version_1_store_gains_the_account_column_and_runs_and_keeps_its_jobs(tmp_path) -> None:
    import sqlite_utils

    from blox_slurm.slurm.store import SCHEMA_VERSION, Observed, Store

    path = tmp_path / "old.db"
    Store(path).db.close()
    old = sqlite_utils.Database(path)  # version 1 = today's schema without jobs.account, runs
    old.execute("ALTER TABLE jobs DROP COLUMN account")
    old["runs"].drop()
    old["jobs"].insert({"job_id": 7, "user": "alice", "partition": "gpu", "num_gpus": 1,
                        "state": "done", "attained_base": 100.0, "finished_at": 0.0,
                        "last_event": 0.0})
    old["meta"].upsert({"key": "schema_version", "value": "1"}, pk="key")
    old.conn.commit()
    old.close()
    store = Store(path)
    assert store.job(7)["account"] == ""  # type: ignore[index]
    # Its service becomes one run ending at the job's end, for the user and the account "".
    assert store.usage(0.0, half_life=3600.0) == pytest.approx({"user:alice": 100.0,
                                                                "account:": 100.0})
    store.observe(10.0, [Observed(8, "bob", "gpu", 1, 0.0, True, 5.0, False, {}, "ml")], {8: 1})
    assert store.job(8)["account"] == "ml"  # type: ignore[index]
    assert store.db["meta"].get("schema_version")["value"] == str(SCHEMA_VERSION)
