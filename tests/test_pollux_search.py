"""The search benchmark's genetic algorithm against the Pollux policy's exact DP: the DP is
never beaten on its own objective, the GA's allocations are feasible, and the problems the
benchmark records from a run are the ones the policy solved. How fast each is, and how far
apart on real rounds, belongs to benchmarks/pollux_search.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.pollux_search import (
    NONE,
    PAIRS,
    GAConfig,
    Problem,
    capture,
    carried,
    genetic,
    solve_all,
    solve_dp,
    standing,
)

FIXTURES = Path(__file__).parent / "fixtures" / "pollux"
SMALL = GAConfig(population=20, generations=15)


def _problem(rng: np.random.Generator) -> Problem:
    """A random round: concave speedups, growth caps, some jobs holding GPUs."""
    jobs, capacity = int(rng.integers(1, 7)), int(rng.integers(1, 4)) * 4
    n = np.arange(1, capacity + 1)
    rows = []
    for _ in range(jobs):
        speedup = n ** rng.uniform(0.2, 1.0) * rng.uniform(0.5, 1.0)
        row = np.r_[NONE, -1 / speedup]
        row[int(rng.integers(1, capacity + 1)) + 1:] = -np.inf  # its growth cap
        rows.append(row)
    held = rng.integers(0, 3, size=jobs)
    while held.sum() > capacity:
        held[np.argmax(held)] -= 1
    counts = tuple(c for c in (0, 1, 2, 4, 8, 12) if c <= capacity)
    return Problem(np.array(rows), counts, tuple(int(h) for h in held))


def _feasible(p: Problem, values: np.ndarray, chosen: list[int]) -> bool:
    return sum(chosen) <= p.capacity and all(
        np.isfinite(values[j, c]) for j, c in enumerate(chosen))


def test_the_dp_is_never_beaten_by_the_ga() -> None:
    rng = np.random.default_rng(15)
    for seed in range(30):
        p = _problem(rng)
        cfg = GAConfig(population=SMALL.population, generations=SMALL.generations, seed=seed)
        dp, ga = solve_dp(p.values, p.counts), genetic(p.restricted(), p.held, cfg)
        assert _feasible(p, p.restricted(), ga)
        assert standing(p.values, dp) <= standing(p.values, ga)
        dp_any, ga_any = solve_dp(p.values, range(p.capacity + 1)), genetic(p.values, p.held, cfg)
        assert _feasible(p, p.values, ga_any)
        assert standing(p.values, dp_any) <= standing(p.values, ga_any)
        assert standing(p.values, dp_any) <= standing(p.values, dp)


def test_the_ga_finds_the_optimum_when_every_job_fits() -> None:
    # Two jobs each best on 4 GPUs, capped there, on 8 GPUs: the optimum is (4, 4), and
    # growth mutations reach it within a few generations.
    row = np.r_[NONE, -1.0, -0.6, -0.5, -0.3, [-np.inf] * 4]
    p = Problem(np.array([row, row]), (0, 1, 2, 4, 8), (1, 0))
    assert genetic(p.restricted(), p.held, SMALL) == [4, 4] == solve_dp(p.values, p.counts)


def test_a_population_moves_to_the_next_rounds_jobs_by_id() -> None:
    pop = np.arange(2 * 2 * 3).reshape(2, 2, 3)  # 2 allocations, jobs 7 and 9, 3 nodes
    moved = carried(pop, (7, 9), (9, 4))
    assert (moved[:, 0] == pop[:, 1]).all() and not moved[:, 1].any()


def test_on_a_runs_rounds_the_recorded_problems_are_the_policys_and_the_dp_wins() -> None:
    problems = capture(FIXTURES / "workloads" / "workload.csv", every=1, cluster="gpu:4x2")
    assert problems
    for p in problems:
        assert p.values.shape == (len(p.held), 9) and len(p.ids) == len(p.held)
        assert tuple(solve_dp(p.values, p.counts)) == p.chosen
    for outcome in solve_all(problems, SMALL, cold=False):  # the GAs seeded round to round
        for search, best in PAIRS[:2]:
            assert outcome[best][0] <= outcome[search][0]
