"""The AcmeTrace loader (``trace_seren.csv``, ``trace_kalos.csv``), on fixtures written from
the trace's README schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from blox_slurm.workloads import WorkloadError, load_workload
from blox_slurm.workloads.acme import load_acme

TRACES = Path(__file__).parent / "fixtures" / "traces"
SEREN = TRACES / "acme_trace_seren.csv"
KALOS = TRACES / "acme_trace_kalos.csv"
HEADER, *ROWS = SEREN.read_text().splitlines()


def jobs(w):
    return [(j.id, j.submit_time, j.num_gpus, j.duration, j.model, j.user, j.cpus) for j in w.jobs]


def test_seren_finished_gpu_jobs_become_jobs() -> None:
    w = load_workload(SEREN, format="acme")
    assert jobs(w) == [
        (5, 0.0, 4, 3600.0, "MLLM", "u02", 64),  # the earliest submission is time 0
        (0, 60.0, 8, 7200.0, "Pretrain", "u01", 128),
        (1, 120.0, 1, 45.0, "Debug", "u02", 16),
        (4, 360.0, 16, 1800.0, "Eval", "u04", 256),
        (9, 1260.0, 1, 60.0, "Eval", "u06", 8),
        (11, 1860.0, 64, 86400.0, "Pretrain", "u05", 1024),
        (8, 57060.0, 2, 1800.0, "SFT", "u04", 32),  # runs across midnight
    ]
    # CPU-only rows 2 and 10, never started 3, still running 6, zero run time 7.
    assert w.meta == {"format": "acme", "origin": "2023-03-01T07:59:00+08:00", "filtered": "5"}
    assert all(j.account == "" and j.memory_mb == 0 for j in w.jobs)


def test_kalos_extra_columns_string_ids_and_utc_times() -> None:
    w = load_acme(KALOS)
    assert jobs(w) == [
        (0, 0.0, 64, 8.0, "Pretrain", "u11", 960),
        (1, 1664.0, 8, 70.0, "Eval", "u12", 120),
        (3, 46682.0, 16, 7200.0, "SFT", "u13", 240),
    ]
    assert w.meta["filtered"] == "1" and w.meta["origin"] == "2023-05-17T11:00:58+00:00"


def test_offsets_are_honoured(tmp_path: Path) -> None:
    """The same instant written in UTC+8 and in UTC is the same instant."""
    p = tmp_path / "t.csv"
    p.write_text(
        HEADER + "\n"
        "1,u,1,1,1,SFT,COMPLETED,2023-03-01 08:00:00+08:00,2023-03-01 08:00:00+08:00,"
        "2023-03-01 01:00:00+00:00,3600,0,3600\n"
    )
    assert load_acme(p).jobs[0].duration == 3600.0


def test_states_keeps_only_the_listed_ones() -> None:
    w = load_acme(SEREN, states=("COMPLETED",))
    assert [j.id for j in w.jobs] == [0, 4, 11, 8] and w.meta["filtered"] == "8"


def write(tmp_path: Path, *rows: str) -> Path:
    p = tmp_path / "trace_seren.csv"
    p.write_text("\n".join([HEADER, *rows]) + "\n")
    return p


TIMES = "2023-03-01 08:00:00+08:00,2023-03-01 08:00:00+08:00,2023-03-01 09:00:00+08:00"


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ("7,u,1,1,8,SFT,COMPLETED,2023-03-01 08:00:00+08:00", "expected 13 fields"),
        (
            "7,u,1,1,8,SFT,COMPLETED,2023-03-01 08:00:00,2023-03-01 08:00:00+08:00,"
            "2023-03-01 09:00:00+08:00,3600,0,3600",
            "submit_time must be a time like %Y-%m-%d %H:%M:%S%z, got '2023-03-01 08:00:00'",
        ),
        (f"7,u,1,-8,8,SFT,COMPLETED,{TIMES},3600,0,3600", "gpu_num must be >= 0, got -8"),
        (f"7,u,1,8,many,SFT,COMPLETED,{TIMES},3600,0,3600", "cpu_num must be a number"),
    ],
)
def test_bad_row_names_file_and_line(tmp_path: Path, row: str, problem: str) -> None:
    p = write(tmp_path, ROWS[0], row, ROWS[1])
    with pytest.raises(WorkloadError) as e:
        load_acme(p)
    assert str(e.value).startswith(f"{p}:3: {problem}")
    w = load_acme(p, skip_bad_rows=True)
    # Ids are row positions, so the row after the skipped one keeps its id 2.
    assert w.skipped_rows == 1 and [j.id for j in w.jobs] == [0, 2]


def test_a_helios_file_is_not_an_acme_trace() -> None:
    problem = r":1: not a job table of format 'acme' \(header lacks type\)"
    with pytest.raises(WorkloadError, match=problem):
        load_acme(TRACES / "helios_cluster_log.csv")
