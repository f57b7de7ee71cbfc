"""The policy synthesizer: its config, the simulator fork it predicts with, and its choices."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from unittest import mock

import pytest
from _core_helpers import cluster, pending, running, snapshot

from blox_slurm.core import composition, transitions
from blox_slurm.core.composition import CompositionError
from blox_slurm.core.model import ClusterSnapshot, Job
from blox_slurm.core.round import decide
from blox_slurm.loading import build, load
from blox_slurm.sim import simulator as simulator_module
from blox_slurm.sim.config import SimConfig
from blox_slurm.sim.simulator import SimulationError, Simulator
from blox_slurm.sim.synthesizer import (
    CHOICE,
    DUE,
    PREDICTED,
    Synthesizer,
    choice_rows,
    choice_summary,
    evaluations,
)
from blox_slurm.workloads.schema import JobSpec, Workload


def synth(*candidates: str | dict, **params) -> Synthesizer:
    comp = build({"name": "synth", "synthesizer": {"candidates": list(candidates), **params}})
    assert isinstance(comp, Synthesizer)
    return comp


def short_jobs_behind_a_long_one(now: float = 0.0) -> ClusterSnapshot:
    """1 GPU; a 10 h job arrived first, five 10-minute jobs just after: SRTF's case."""
    jobs = [pending(0, 1, submit=0.0, duration=36_000.0)]
    jobs += [pending(i, 1, submit=float(i), duration=600.0) for i in range(1, 6)]
    return snapshot(cluster(1), jobs, now=now)


# --------------------------------------------------------------------------- config

def test_candidates_by_name_inline_and_path_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text('name = "mine"\n[scheduling]\npolicy = "srtf"\n')
    (tmp_path / "synth.toml").write_text(
        'name = "adaptive"\n[synthesizer]\nevery = 3\n'
        'candidates = ["fifo", "mine.toml", { name = "las-c", scheduling = "las", '
        'placement = "consolidated" }]\n')
    comp = load(tmp_path / "synth.toml")
    assert isinstance(comp, Synthesizer) and comp.name == "adaptive"
    assert [c.name for c in comp.candidates] == ["fifo", "mine", "las-c"]
    assert type(comp.candidates[2].placement).__name__ == "Consolidated"
    assert comp.params is not None and comp.params.every == 3
    assert comp.time_dependent


def test_the_normalized_config_rebuilds_the_same_synthesizer(tmp_path: Path) -> None:
    """What another process (compare's pool) rebuilds must not depend on the file's place."""
    (tmp_path / "mine.toml").write_text('name = "mine"\n[scheduling]\npolicy = "srtf"\n')
    (tmp_path / "synth.toml").write_text('[synthesizer]\ncandidates = ["fifo", "mine.toml"]\n')
    comp = load(tmp_path / "synth.toml")
    again = build(comp.config)
    assert isinstance(again, Synthesizer) and again.config == comp.config
    assert [c.config for c in again.candidates] == [c.config for c in comp.candidates]


@pytest.mark.parametrize(("table", "problem"), [
    ({"candidates": ["fifo"]}, "candidates: List should have at least 2 items"),
    ({"candidates": ["fifo", "nope"]}, "no composition file or bundled composition 'nope'"),
    ({"candidates": ["fifo", {"name": "x", "scheduling": "fifoo"}]},
     "candidate 'x': unknown scheduling policy 'fifoo'"),
    ({"candidates": ["fifo", "fifo"]}, "distinct names; repeated: fifo"),
    ({"candidates": ["fifo", {"name": "s", "synthesizer": {"candidates": ["fifo", "las"]}}]},
     "candidate 's' is itself a synthesizer"),
    ({"candidates": ["fifo", "las"], "every": 0}, "every: Input should be greater than or equal"),
    ({"candidates": ["fifo", "las"], "objective": "p99"}, "objective: Input should be"),
    ({"candidates": ["fifo", "las"], "horizn": 60}, "horizn: Extra inputs are not permitted"),
])
def test_bad_synthesizer_configs_are_clear_errors(table: dict, problem: str) -> None:
    with pytest.raises(CompositionError) as e:
        build({"synthesizer": table})
    assert problem in str(e.value)


def test_a_synthesizer_has_no_policy_sections_of_its_own() -> None:
    with pytest.raises(CompositionError, match=r"no \[scheduling\] section"):
        build({"synthesizer": {"candidates": ["fifo", "las"]}, "scheduling": "las"})


# --------------------------------------------------------------------------- the fork

def full_run_and_fork(comp_name: str, fork_at: float):
    """All jobs arrive at 0 on 2 GPUs; the whole run, and a fork of its state at ``fork_at``
    (built by deciding at 0 and advancing the clock) run to the end."""
    specs = [JobSpec(0, 0.0, 1, 5000.0), JobSpec(1, 0.0, 2, 900.0), JobSpec(2, 0.0, 1, 2000.0),
             JobSpec(3, 0.0, 1, 400.0)]
    cfg = SimConfig(restart_cost=0.0)
    c = load(comp_name)
    full = Simulator(Workload(tuple(specs)), c, cluster(2), cfg).run()
    jobs = tuple(Job(s.id, s.submit_time, s.num_gpus, duration=s.duration) for s in specs)
    snap = ClusterSnapshot(0.0, *cluster(2), jobs)
    first = transitions.apply(snap, decide(snap, c))
    start = replace(first, now=fork_at)
    forked = Simulator(Workload(()), c, cluster(2), cfg, start=start).run()
    return full, forked


@pytest.mark.parametrize("comp_name", ["fifo", "srtf"])
def test_a_fork_continues_exactly_where_the_world_was(comp_name: str) -> None:
    full, forked = full_run_and_fork(comp_name, fork_at=0.0)
    assert sorted((r.id, r.first_start, r.finish) for r in forked.jobs) == \
        sorted((r.id, r.first_start, r.finish) for r in full.jobs)


def test_a_fork_after_time_has_passed_keeps_the_running_jobs_progress() -> None:
    # FIFO at 0: job 0 (5000 s) runs on GPU 0, job 1 (2 GPUs) waits. Forked at 600 s, job 0
    # still finishes at 5000 and job 1 starts then -- nothing is restarted or forgotten.
    full, forked = full_run_and_fork("fifo", fork_at=600.0)
    finish = {r.id: r.finish for r in forked.jobs}
    assert finish == {r.id: r.finish for r in full.jobs}
    assert finish[0] == 5000.0


def test_a_fork_needs_durations_and_stops_at_its_horizon() -> None:
    snap = short_jobs_behind_a_long_one()
    unknown = replace(snap, jobs=(replace(snap.jobs[0], duration=None), *snap.jobs[1:]))
    with pytest.raises(SimulationError, match=r"jobs \[0\] of the start state have no duration"):
        Simulator(Workload(()), load("fifo"), cluster(1), start=unknown)
    cut = Simulator(Workload(()), load("srtf"), cluster(1), SimConfig(max_time=2000.0),
                    start=snap).run()
    # SRTF runs the 10-minute jobs first; three end by 1800 s, and one exactly at 2400 > cut.
    assert sorted(r.finish for r in cut.jobs) == [600.0, 1200.0, 1800.0]
    assert sorted(cut.unfinished) == [0, 4, 5]


# --------------------------------------------------------------------------- choices

def test_it_picks_the_candidate_whose_future_is_best_and_that_one_decides() -> None:
    s = synth("fifo", "srtf", horizon=7200.0)
    snap = short_jobs_behind_a_long_one()
    d = decide(snap, s)
    scores = predicted(d.state)
    assert scores["srtf"] < scores["fifo"]
    assert d.composition == "srtf"
    assert d == replace(decide(snap, load("srtf")), composition="srtf", state=d.state)


def test_predictions_censor_unfinished_jobs_at_the_horizon() -> None:
    s = synth("fifo", "srtf", horizon=1000.0)
    snap = short_jobs_behind_a_long_one()
    scores = {p.name: p for p in s.predict(snap)}
    # FIFO: the long job runs through the horizon; all six jobs count as ending at 1000.
    assert scores["fifo"].finished == 0
    assert scores["fifo"].score == pytest.approx(sum(1000.0 - j.submit_time for j in snap.jobs)
                                                 / 6)
    # SRTF: job 1 finishes at 600 (JCT 599), the rest are censored.
    assert scores["srtf"].finished == 1
    assert scores["srtf"].score == pytest.approx(
        (599.0 + sum(1000.0 - j.submit_time for j in snap.jobs if j.id != 1)) / 6)


def kept(snap: ClusterSnapshot, d) -> ClusterSnapshot:
    """The next round's snapshot as a world shows it: with the state the round asked for."""
    return replace(snap, state={**snap.state, **dict(d.state)})


def predicted(state) -> dict[str, float]:
    return {k.removeprefix(PREDICTED): v for k, v in dict(state).items()
            if k.startswith(PREDICTED)}


def test_it_evaluates_every_k_rounds_from_the_state_the_world_keeps() -> None:
    s = synth("fifo", "srtf", every=3, horizon=7200.0)
    snap = short_jobs_behind_a_long_one()
    first = s.for_round(snap)
    assert first.composition.name == "srtf"
    assert dict(first.state)[CHOICE] == 1.0 and dict(first.state)[DUE] == pytest.approx(900.0)
    world = kept(snap, first)
    for k in (1, 2):  # rounds 2 and 3 of the period reuse the choice: nothing new to keep
        again = s.for_round(replace(world, now=300.0 * k))
        assert again.composition.name == "srtf" and again.state == ()
    assert s.for_round(replace(world, now=900.0)).state != ()  # round 4: a new evaluation
    # A world that kept nothing (a new simulation, a new store) evaluates afresh.
    assert s.for_round(replace(snap, now=300.0)).state != ()
    # The synthesizer holds nothing itself: a restarted controller (the same store, a new
    # Synthesizer object) goes on with the kept choice.
    restarted = synth("fifo", "srtf", every=3, horizon=7200.0).for_round(
        replace(world, now=300.0))
    assert restarted.composition.name == "srtf" and restarted.state == ()


def test_a_kept_choice_that_names_no_candidate_is_evaluated_afresh() -> None:
    s = synth("fifo", "srtf", every=3, horizon=7200.0)
    snap = short_jobs_behind_a_long_one()
    for bad in (7.0, -1.0, 0.5):
        got = s.for_round(replace(snap, now=300.0, state={CHOICE: bad, DUE: 1e9}))
        assert dict(got.state)[CHOICE] == 1.0, bad


def test_the_simulator_and_the_controllers_store_keep_the_state(tmp_path: Path) -> None:
    from blox_slurm.slurm.store import Store

    store = Store(tmp_path / "s.db")
    store.update_policy_state((), (), {}, {}, ((CHOICE, 2.0), (DUE, 600.0)))
    store.update_policy_state((), (), {}, {}, ((DUE, 900.0),))
    assert Store(tmp_path / "s.db").composition_state() == {CHOICE: 2.0, DUE: 900.0}
    seen: list[dict] = []
    real = simulator_module.decide

    def spy(snap, comp, **kw):
        if comp is s:  # not the candidates' forks
            seen.append(dict(snap.state))
        return real(snap, comp, **kw)

    specs = tuple(JobSpec(i, 300.0 * i, 1, 1200.0) for i in range(4))
    s = synth("fifo", "las", every=2, horizon=3600.0)
    with mock.patch.object(simulator_module, "decide", spy):
        Simulator(Workload(specs), s, cluster(1)).run()
    assert len(seen) > 2
    assert seen[0] == {} and all(CHOICE in st and DUE in st for st in seen[1:])


def test_a_tie_keeps_the_current_choice() -> None:
    # One job, one GPU: every candidate predicts the same future.
    snap = snapshot(cluster(1), [pending(0, 1, duration=600.0)])
    s = synth("las", "fifo", every=1)
    first = s.for_round(snap)
    assert first.composition.name == "las"
    assert len(set(predicted(first.state).values())) == 1
    again = s.for_round(kept(replace(snap, now=300.0), first))
    assert again.composition.name == "las"


def test_unknown_durations_are_estimated_so_the_controller_world_works() -> None:
    """Slurm may not know durations: a job is assumed to need as much again as it has done."""
    s = synth("fifo", "las", horizon=3600.0)
    jobs = [running(0, [0], submit=0.0, since=0.0), pending(1, 1, submit=10.0)]
    snap = snapshot(cluster(1), jobs, now=1200.0)
    predictions = {p.name: p for p in s.predict(snap)}
    # Job 0 has run 1200 s, so it is assumed to end at 2400 under FIFO; job 1 (no work yet)
    # needs one round (300 s) and ends at 2700.
    fifo = predictions["fifo"]
    assert fifo.finished == 2
    assert fifo.score == pytest.approx(((2400.0 - 0.0) + (2700.0 - 10.0)) / 2)
    assert decide(snap, s).composition in {"fifo", "las"}


def test_a_synthesizer_run_finishes_every_job_with_no_gpu_shared() -> None:
    specs = tuple(JobSpec(i, 400.0 * i, 1 + i % 2, 900.0 + 700.0 * (i % 5)) for i in range(30))
    s = synth("fifo", "las", "srtf", every=2, horizon=3600.0)
    result = Simulator(Workload(specs), s, cluster(2, 2)).run()
    assert sorted(r.id for r in result.jobs) == list(range(30)) and result.unfinished == ()
    best = min(statistics_mean(Simulator(Workload(specs), load(n), cluster(2, 2)).run())
               for n in ("fifo", "las", "srtf"))
    assert statistics_mean(result) <= best * 1.05


def statistics_mean(result) -> float:
    return sum(r.jct for r in result.jobs) / len(result.jobs)


def test_the_bundled_synthesizer_is_listed_and_builds() -> None:
    assert "synthesizer" in composition.bundled_names()
    comp = load("synthesizer")
    assert isinstance(comp, Synthesizer) and len(comp.candidates) >= 5


def test_each_evaluation_logs_the_choice_and_every_prediction(caplog) -> None:
    s = synth("fifo", "srtf", horizon=7200.0)
    with caplog.at_level("INFO", logger="blox_slurm.sim.synthesizer"):
        first = s.for_round(short_jobs_behind_a_long_one())
        s.for_round(kept(short_jobs_behind_a_long_one(now=300.0), first))  # no new line
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1
    assert lines[0].startswith("synth at t=0: srtf decides; predicted avg_jct: fifo ")
    assert ", srtf " in lines[0]


def test_a_run_records_every_evaluation_with_its_choice_and_predictions() -> None:
    """What the synthesizer chose when is part of the run's result (results.json,
    choices.csv), not only a log line: one record per evaluation, ``every`` rounds apart,
    naming the best-predicted candidate (or the current one on a tie)."""
    specs = tuple(JobSpec(i, 400.0 * i, 1 + i % 2, 900.0 + 700.0 * (i % 5)) for i in range(30))
    s = synth("fifo", "las", "srtf", every=2, horizon=3600.0)
    result = Simulator(Workload(specs), s, cluster(2, 2)).run()
    evs = evaluations(result.choices)
    assert len(evs) >= 3 and all(b["t"] - a["t"] >= 2 * 300.0 - 1e-6
                                 for a, b in zip(evs, evs[1:], strict=False))
    previous = None
    for e in evs:
        assert set(e["predicted"]) == {"fifo", "las", "srtf"}
        best = min(e["predicted"].values())
        assert e["predicted"][e["decides"]] <= best * (1 + 1e-9)
        if previous is not None and e["predicted"][previous] <= best * (1 + 1e-9):
            assert e["decides"] == previous  # a tie keeps the current choice
        previous = e["decides"]
    rows = choice_rows([result])
    assert [r["decides"] for r in rows] == [e["decides"] for e in evs]
    assert rows[0]["hours"] == evs[0]["t"] / 3600.0 and "predicted srtf" in rows[0]
    line = choice_summary(result)
    assert line is not None and line.startswith(f"synth: {len(evs)} evaluations; decided by ")
    assert choice_summary(Simulator(Workload(specs), load("fifo"), cluster(2, 2)).run()) is None


def test_simulate_reports_the_synthesizers_choices(tmp_path: Path) -> None:
    """``simulate --out`` keeps the evaluations: in results.json with the run's row, in
    choices.csv one row each, and a line on screen; a plain composition writes none."""
    from typer.testing import CliRunner

    from blox_slurm.cli import app

    path = tmp_path / "synth.toml"
    path.write_text('name = "synth"\n[synthesizer]\ncandidates = ["fifo", "las"]\nevery = 2\n'
                    'horizon = 3600.0\n')
    out = tmp_path / "out"
    args = ["simulate", "-n", "50", "-r", "8", "--gpu-demand", "blox-multi-gpu",
            "--measure", "all", "--cluster", "gpu:4x2", "-o"]
    result = CliRunner().invoke(app, [*args, str(out), "-c", str(path)])
    assert result.exit_code == 0, result.output
    row = json.loads((out / "results.json").read_text())[0]
    lines = (out / "choices.csv").read_text().splitlines()
    assert lines[0].startswith("composition,hours,decides,predicted fifo,predicted las")
    assert len(lines) - 1 == len(row["choices"]) > 1
    assert {c["decides"] for c in row["choices"]} <= {"fifo", "las"}
    assert f"synth: {len(row['choices'])} evaluations; decided by " in result.output
    plain = CliRunner().invoke(app, [*args, str(tmp_path / "plain"), "-c", "fifo"])
    assert plain.exit_code == 0 and not (tmp_path / "plain" / "choices.csv").exists()
    assert "choices" not in json.loads((tmp_path / "plain" / "results.json").read_text())[0]
