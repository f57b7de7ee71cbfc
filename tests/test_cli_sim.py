"""The researcher's CLI (simulate, compare, policies, plot) through typer's CliRunner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from blox_slurm.cli import app
from blox_slurm.core import registry

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def err(result) -> str:
    """stderr with rich's line wrapping undone."""
    return " ".join(result.stderr.split())


def csv_workload(tmp_path: Path, bad: bool = False) -> Path:
    p = tmp_path / "w.csv"
    rows = ["job_id,submit_time,num_gpus,duration,model", "0,0,1,100,"]
    if bad:
        rows.append("1,abc,1,100,")  # line 3
    rows.append("2,10,1,50,")
    p.write_text("\n".join(rows) + "\n")
    return p


def test_compare_two_compositions_json_rows() -> None:
    r = invoke("compare", "-n", "300", "--rate", "8", "-c", "fifo", "-c", "las", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [row["composition"] for row in rows] == ["fifo", "las"]
    for row in rows:
        assert row["jobs_per_hour"] == 8.0
        assert row["count"] == 300 and row["unfinished"] == 0  # < 4000 jobs: all measured
        assert row["avg_jct"] > 0 and 0 < row["utilization"] <= 1
    # identical job stream: LAS (preemptive) can only start jobs sooner on average
    fifo, las = rows
    assert las["avg_responsiveness"] <= fifo["avg_responsiveness"]
    assert fifo["preemptions"] == 0


def test_simulate_csv_workload_json(tmp_path) -> None:
    r = invoke("simulate", "-w", csv_workload(tmp_path), "--cluster", "gpu:1x1", "--json")
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)
    # job 0: 0 -> 100; job 2 arrives at 10, starts at the round of 300 -> 350.
    # JCTs 100 and 340: mean 220; makespan 350.
    assert row["count"] == 2 and row["avg_jct"] == 220.0 and row["makespan"] == 350.0


@pytest.mark.parametrize("config", ["no-such-composition", "bad.toml"])
def test_simulate_bad_composition_exits_2_with_a_message(tmp_path, config) -> None:
    (tmp_path / "bad.toml").write_text('[scheduling]\npolicy = "fiffo"\n')
    path = config if config.startswith("no-") else tmp_path / config
    r = invoke("simulate", "-c", path, "-n", "10")
    assert r.exit_code == 2
    assert "error:" in err(r)
    if config == "bad.toml":
        assert "unknown scheduling policy 'fiffo'" in err(r) and "tiresias" in err(r)
    else:
        assert "no composition file or bundled composition" in err(r)
    assert "Traceback" not in r.output


def test_simulate_bad_option_values_exit_2(tmp_path) -> None:
    r = invoke("simulate", "--cluster", "gpu:4by2", "-n", "10")
    assert r.exit_code == 2 and "bad GPU group" in err(r)
    r = invoke("simulate", "--measure", "x", "-n", "10")
    assert r.exit_code == 2 and "--measure" in err(r)


def test_policies_json_lists_every_kind_and_the_bundled_compositions() -> None:
    r = invoke("policies", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    kinds = {p["kind"] for p in data["policies"]}
    assert kinds == set(registry.KINDS)
    names = {(p["kind"], p["name"]) for p in data["policies"]}
    for expected in [("scheduling", "tiresias"), ("scheduling", "optimus"),
                     ("placement", "scattered"), ("admission", "load_based"),
                     ("preemption", "none"), ("cluster", "static")]:
        assert expected in names
    tir = next(p for p in data["policies"] if p["name"] == "tiresias")
    assert set(tir["params"]) == {"thresholds", "promote_knob"} and tir["summary"]
    assert {"fifo", "blox-las", "optimus"} <= set(data["compositions"])


def test_simulate_out_writes_results_and_plot_rerenders(tmp_path) -> None:
    out = tmp_path / "run"
    r = invoke("simulate", "-c", "las", "-n", "120", "--rate", "10", "--cluster", "gpu:2x4",
               "--out", out)
    assert r.exit_code == 0, r.output
    for name in ("results.json", "results.csv", "jobs.csv", "runs.json"):
        assert (out / name).stat().st_size > 0, name
    pngs = sorted(out.glob("*.png"))
    assert pngs and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    runs = json.loads((out / "runs.json").read_text())
    assert len(runs) == 1 and runs[0]["name"] == "las" and len(runs[0]["jobs"]) == 120
    jobs_csv = (out / "jobs.csv").read_text().splitlines()
    assert len(jobs_csv) == 1 + 120

    again = tmp_path / "again"
    r = invoke("plot", out / "runs.json", "-o", again)
    assert r.exit_code == 0, r.output
    rendered = sorted(again.glob("*.png"))
    assert [p.name for p in rendered] == [p.name for p in pngs]
    assert set(r.stdout.split()) == {str(p) for p in rendered}


def test_plot_rejects_a_file_that_is_not_a_runs_file(tmp_path) -> None:
    p = tmp_path / "x.json"
    p.write_text('{"not": "runs"}')
    r = invoke("plot", p, "-o", tmp_path / "o")
    assert r.exit_code == 2 and "not a runs file" in err(r)


def test_csv_bad_row_exits_2_naming_file_and_line(tmp_path) -> None:
    w = csv_workload(tmp_path, bad=True)
    r = invoke("simulate", "-w", w, "--cluster", "gpu:1x1")
    assert r.exit_code == 2
    assert f"{w}:3" in err(r) and "submit_time" in err(r)


def test_csv_skip_bad_rows_succeeds_and_reports_the_count(tmp_path) -> None:
    w = csv_workload(tmp_path, bad=True)
    r = invoke("simulate", "-w", w, "--cluster", "gpu:1x1", "--skip-bad-rows", "--json")
    assert r.exit_code == 0, r.output
    assert f"skipped 1 bad row(s) in {w}" in err(r)
    (row,) = json.loads(r.stdout)
    assert row["count"] == 2 and row["avg_jct"] == 220.0  # the two good rows, as above


def test_simulate_gavel_json_stdout_is_only_json() -> None:
    # A fresh process: the LP solver's one-time banner must not land on stdout.
    r = subprocess.run([sys.executable, "-m", "blox_slurm", "simulate", "-c", "gavel", "-n", "30",
                        "--cluster", "v100:4x1,k80:4x1", "--json"],
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)
    assert row["composition"] == "gavel" and row["jobs"] == 30
