"""The plots are real PNG files with something drawn in them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from blox_slurm.sim.plot import (
    context,
    panels,
    plot_jct_cdf,
    plot_sweep,
    plot_utilization,
    sweep_lines,
    write_plots,
)
from blox_slurm.sim.records import JobRecord, RunResult

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def result(name: str, scale: float) -> RunResult:
    jobs = tuple(
        JobRecord(i, i * 600.0, 1, 3600.0 * scale, i * 600.0, i * 600.0 + 3600 * scale * (1 + i))
        for i in range(20)
    )
    busy = tuple((j.first_start, 1 + i % 4) for i, j in enumerate(jobs)) + ((jobs[-1].finish, 0),)
    return RunResult(name, 4, jobs, busy)


RESULTS = [result("fifo", 1.0), result("las", 0.5)]
ROWS = [
    {"name": policy, "load": load, "avg_jct": load * factor, "avg_responsiveness": None}
    for policy, factor in (("fifo", 2.0), ("las", 1.0))
    for load in (2.0, 4.0, 6.0)
]


def assert_png(path: Path, at_least: int = 5_000) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    # An empty 770x495 axes compresses to ~10 KB; lines and a legend add to it.
    assert len(data) > at_least


def blank_size(tmp_path: Path) -> int:
    return plot_jct_cdf([], tmp_path / "blank.png").stat().st_size


def test_jct_cdf_png(tmp_path: Path) -> None:
    out = plot_jct_cdf(RESULTS, tmp_path / "sub" / "cdf.png")
    assert out == tmp_path / "sub" / "cdf.png"
    assert_png(out, at_least=blank_size(tmp_path) + 2_000)


def test_utilization_png(tmp_path: Path) -> None:
    out = plot_utilization(RESULTS, tmp_path / "util.png", bins=50)
    assert_png(out, at_least=blank_size(tmp_path) + 2_000)


def test_sweep_png_with_reference_markers(tmp_path: Path) -> None:
    plain = plot_sweep(ROWS, "avg_jct", tmp_path / "plain.png")
    marked = plot_sweep(
        ROWS, "avg_jct", tmp_path / "marked.png", reference={"fifo": [(4.0, 9.0), (6.0, 13.0)]}
    )
    assert_png(plain)
    assert_png(marked)
    assert marked.stat().st_size > plain.stat().st_size  # markers and a legend entry drawn


def test_write_plots_writes_every_figure(tmp_path: Path) -> None:
    paths = write_plots(RESULTS, tmp_path, rows=ROWS, metrics=("avg_jct",))
    assert [p.name for p in paths] == ["jct_cdf.png", "utilization.png", "sweep_avg_jct.png"]
    for p in paths:
        assert_png(p)
    assert [p.name for p in write_plots(RESULTS, tmp_path / "x")] == [
        "jct_cdf.png",
        "utilization.png",
    ]


def test_plotting_does_not_touch_pyplot_state() -> None:
    # The Agg canvas is attached per figure: no pyplot import, no global backend switch.
    if "matplotlib.pyplot" in sys.modules:
        pytest.skip("another test imported pyplot")
    plot_jct_cdf(RESULTS, Path("/dev/null"))
    assert "matplotlib.pyplot" not in sys.modules


def test_runs_at_several_loads_get_a_panel_each_lowest_highest_and_two_between() -> None:
    runs = [RunResult(name, 4, (), (), params={"jobs_per_hour": load, "cluster": "gpu:4x2",
                                               "jobs": 20})
            for load in (9.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0) for name in ("fifo", "las")]
    shown = panels(runs)
    assert [name for name, _ in shown] == ["2 jobs/h", "4 jobs/h", "7 jobs/h", "9 jobs/h"]
    assert all(sorted(r.name for r in group) == ["fifo", "las"] for _, group in shown)
    assert context(runs) == "gpu:4x2, 20 jobs, 2, 3, 4, 5, 6, 7, 8, 9 jobs/h"


def test_a_sweep_plot_is_in_the_tables_units() -> None:
    """avg_jct rows are seconds, responsiveness too: the figure draws hours and minutes."""
    rows = [{"name": "fifo", "load": 4.0, "avg_jct": 10800.0, "avg_responsiveness": 90.0},
            {"name": "fifo", "load": 2.0, "avg_jct": 7200.0, "avg_responsiveness": None}]
    assert sweep_lines(rows, "avg_jct") == {"fifo": [(2.0, 2.0), (4.0, 3.0)]}
    assert sweep_lines(rows, "avg_responsiveness") == {"fifo": [(4.0, 1.5)]}
    assert sweep_lines(rows, "utilization") == {}
