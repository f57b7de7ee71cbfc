"""The Alibaba PAI 2020 loader (pai_job_table + pai_task_table), on fixtures written from the
trace's README and ``.header`` files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from blox_slurm.workloads import WorkloadError, load_workload
from blox_slurm.workloads.pai import JOB_COLUMNS, TASK_COLUMNS, load_pai

PAI = Path(__file__).parent / "fixtures" / "traces" / "pai"
JOBS = PAI / "pai_job_table.csv"
JOB_ROWS = JOBS.read_text().splitlines()
TASK_ROWS = (PAI / "pai_task_table.csv").read_text().splitlines()


def jobs(w):
    return [
        (j.id, j.submit_time, j.num_gpus, j.duration, j.user, j.cpus, j.memory_mb) for j in w.jobs
    ]


def test_finished_gpu_jobs_become_jobs() -> None:
    w = load_workload(JOBS, format="pai")
    assert jobs(w) == [
        (2, 0.0, 8, 900.0, "usrC", 12, 65536),  # Failed jobs are kept; earliest submission
        (0, 100.0, 1, 3000.0, "usrA", 6, 30000),  # run = task launch to end, not the wait
        (1, 200.0, 2, 600.0, "usrB", 14, 20480),  # 2 x 50% -> 2 GPUs; the ps adds CPUs and memory
        (7, 700.0, 5, 7200.0, "usrC", 36, 73728),  # 4 workers + a 25% evaluator; their span
        (10, 1100.0, 2, 500.0, "usrF", 4, 10752),  # 350% CPU -> 4 cores
    ]
    # Running j04, Waiting j05, CPU-only j06, no tasks j07, never launched j09, zero run j10,
    # unknown submission j12; j99's task has no job and is ignored.
    assert w.meta == {
        "format": "pai",
        "origin": "900",
        "tasks": str(PAI / "pai_task_table.csv"),
        "filtered": "7",
    }
    assert w.skipped_rows == 0


def test_fractional_filter_keeps_only_whole_gpu_jobs() -> None:
    w = load_pai(JOBS, fractional="filter")
    assert [(j.id, j.num_gpus) for j in w.jobs] == [(2, 8), (0, 1), (10, 2)]
    assert w.meta["filtered"] == "9"
    with pytest.raises(WorkloadError, match="fractional must be one of"):
        load_pai(JOBS, fractional="round")


def test_statuses_option() -> None:
    w = load_pai(JOBS, statuses=("Terminated",))
    assert [j.id for j in w.jobs] == [0, 1, 7, 10] and w.meta["filtered"] == "8"


def copy(tmp_path: Path, jobs: list[str], tasks: list[str]) -> Path:
    (tmp_path / "pai_job_table.csv").write_text("\n".join(jobs) + "\n")
    (tmp_path / "pai_task_table.csv").write_text("\n".join(tasks) + "\n")
    return tmp_path / "pai_job_table.csv"


def test_header_lines_copied_from_the_header_files_are_skipped(tmp_path: Path) -> None:
    p = copy(tmp_path, [",".join(JOB_COLUMNS), *JOB_ROWS], [",".join(TASK_COLUMNS), *TASK_ROWS])
    assert jobs(load_pai(p)) == jobs(load_pai(JOBS))


def test_task_table_elsewhere(tmp_path: Path) -> None:
    shutil.copy(JOBS, tmp_path / "jobs.csv")
    with pytest.raises(WorkloadError) as e:
        load_pai(tmp_path / "jobs.csv")
    assert str(e.value) == (
        f"{tmp_path / 'pai_task_table.csv'}: no such file; PAI jobs need their tasks: "
        "put pai_task_table.csv beside jobs.csv or pass task_table="
    )
    w = load_pai(tmp_path / "jobs.csv", task_table=PAI / "pai_task_table.csv")
    assert len(w.jobs) == 5


def test_the_task_table_given_as_the_trace_says_which_file_to_give() -> None:
    with pytest.raises(WorkloadError, match="this is the task table; give pai_job_table.csv"):
        load_workload(PAI / "pai_task_table.csv", format="pai")


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ("j20,i20,usrA,Terminated", "expected 6 fields (job_name,inst_id,user,status,start_time"),
        ("j20,i20,usrA,Terminated,noon,2000.0", "start_time must be a number, got 'noon'"),
        ("j20,i20,usrA,Terminated,-5.0,2000.0", "start_time must be >= 0, got -5"),
    ],
)
def test_bad_job_row_names_the_job_table_and_line(tmp_path: Path, row: str, problem: str) -> None:
    p = copy(tmp_path, [JOB_ROWS[0], row, JOB_ROWS[1]], TASK_ROWS)
    with pytest.raises(WorkloadError) as e:
        load_pai(p)
    assert str(e.value).startswith(f"{p}:2: {problem}")
    w = load_pai(p, skip_bad_rows=True)
    assert w.skipped_rows == 1 and [j.id for j in w.jobs] == [0, 2]


@pytest.mark.parametrize(
    ("row", "problem", "skipped"),
    [
        # Too few fields to trust: the row alone is skipped (j02 keeps only its CPU-only ps).
        ("j02,worker,2.0,Terminated,1120.0", "expected 10 fields (job_name,task_name,inst_num", 1),
        # A bad value in a row of j02: j02 is skipped too, not replayed without that task.
        ("j02,worker,2.0,Terminated,1120.0,1720.0,400.0,8.0,-50.0,T4", "plan_gpu must be >= 0", 2),
        ("j02,worker,-2.0,Terminated,1120.0,1720.0,400.0,8.0,50.0,T4", "inst_num must be >= 0", 2),
        ("j02,worker,2.0,Terminated,1120.0,7:00,400.0,8.0,50.0,T4", "end_time must be a number", 2),
        (
            "j02,worker,2.0,Terminated,1720.0,1120.0,400.0,8.0,50.0,T4",
            "task 'worker': end_time 1120.0 is before start_time 1720.0",
            2,
        ),
    ],
)
def test_bad_task_row_names_the_task_table_and_line(
    tmp_path: Path, row: str, problem: str, skipped: int
) -> None:
    p = copy(tmp_path, JOB_ROWS[:3], [TASK_ROWS[0], row, TASK_ROWS[2], TASK_ROWS[3]])
    with pytest.raises(WorkloadError) as e:
        load_pai(p)
    assert str(e.value).startswith(f"{tmp_path / 'pai_task_table.csv'}:2: {problem}")
    w = load_pai(p, skip_bad_rows=True)
    assert w.skipped_rows == skipped and [j.id for j in w.jobs] == [2, 0]
    assert w.meta.get("filtered") == (None if skipped == 2 else "1")
