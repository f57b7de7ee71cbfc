"""The agreement campaign's repeat figures (``benchmarks/agreement.py --repeats``), on
hand-built rows whose every difference is worked out in the comments: the emulator against
itself is the floor the simulator is judged by, so its arithmetic must be right."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.agreement import against_mean, repeat_groups, repeatability_lines, self_agreement


def run(seed: int, jcts: dict[int, tuple[float, float | None]]) -> dict[str, Any]:
    """A campaign row: job -> (emulator JCT, simulated JCT or None)."""
    return {"scale": "compressed", "composition": "fifo", "seed": seed,
            "rows": [{"job": j, "emulator": e, "after": s} for j, (e, s) in jcts.items()]}


def test_only_seeds_run_more_than_once_are_groups() -> None:
    a, b, c = run(0, {1: (10.0, 10.0)}), run(0, {1: (12.0, 10.0)}), run(1, {1: (5.0, 5.0)})
    assert repeat_groups([a, c, b]) == [[a, b]]
    assert repeatability_lines([a, c]) == []


def test_every_ordered_pair_each_run_the_reference_once() -> None:
    a = run(0, {1: (10.0, 10.0), 2: (20.0, 20.0)})
    b = run(0, {1: (12.0, 10.0), 2: (20.0, 20.0)})
    # job 1: |10 - 12| / 12 with b the reference, |12 - 10| / 10 with a; job 2 equal.
    assert sorted(self_agreement([[a, b]])) == pytest.approx([0.0, 0.0, 2 / 12, 2 / 10])
    assert self_agreement([[a, a]]) == [0.0, 0.0, 0.0, 0.0]


def test_a_job_one_run_lacks_is_left_out_of_its_pairs() -> None:
    a = run(0, {1: (10.0, 10.0), 2: (20.0, 20.0)})
    b = run(0, {1: (10.0, 10.0)})
    assert self_agreement([[a, b]]) == [0.0, 0.0]


def test_the_simulator_against_the_runs_mean() -> None:
    a = run(0, {1: (10.0, 11.0), 2: (20.0, None)})
    b = run(0, {1: (14.0, 13.0), 2: (20.0, 20.0)})
    # job 1: emulator mean 12, simulated mean 12: no difference, though each run alone
    # differs by 10 % and 7 %; job 2 is left out, unfinished in one simulation.
    assert against_mean([[a, b]]) == [0.0]
    c = run(0, {1: (12.0, 15.0)})
    assert against_mean([[c, c]]) == pytest.approx([0.25])


def test_the_lines_name_their_pairs_and_workloads() -> None:
    runs = [run(0, {1: (10.0, 10.0)}), run(0, {1: (10.0, 10.0)}), run(0, {1: (10.0, 10.0)}),
            run(1, {1: (5.0, 5.0)}), run(1, {1: (5.0, 6.0)})]
    own, mean = repeatability_lines(runs)
    assert "8 ordered pairs of runs of 2 workloads" in own
    assert "0.0%" in own and "mean JCT" in mean
