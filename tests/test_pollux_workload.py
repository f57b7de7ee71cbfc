"""``--format pollux``: the artifact's workload CSV as simulator jobs, on fixtures (and on
the artifact's workload-6 when ../shared/data is present)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from blox_slurm.pollux.application import Application
from blox_slurm.pollux.goodput import tuned_config
from blox_slurm.pollux.measured import MeasuredSteps, step_seconds
from blox_slurm.pollux.progress import isolated_seconds, rate_at
from blox_slurm.pollux.traces import load_application
from blox_slurm.workloads import WorkloadError, load_workload
from blox_slurm.workloads.pollux import load_pollux, tuned_batch_sizes

FIXTURES = Path(__file__).parent / "fixtures" / "pollux"
WORKLOAD = FIXTURES / "workloads" / "workload.csv"
HEADER = "name,time,application,num_replicas,batch_size\n"
ARTIFACT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "pollux"


def test_rows_become_jobs_timed_at_their_tuned_request() -> None:
    workload = load_workload(WORKLOAD, format="pollux")
    assert [(j.id, j.submit_time, j.num_gpus, j.model) for j in workload.jobs] == [
        (0, 0.0, 1, "toy"), (2, 10.0, 6, "toy"), (1, 30.0, 4, "toy")]  # by arrival
    app = Application.of(load_application(FIXTURES / "traces" / "toy"))
    steps = MeasuredSteps(app.trace)
    by_id = {j.id: j for j in workload.jobs}
    requests = {0: (1, 16, (1,)), 1: (4, 64, (4,)), 2: (6, 256, (4, 2))}
    for job_id, (gpus, batch, placement) in requests.items():
        config = tuned_config(app, gpus, batch)
        step = step_seconds(steps, placement, config.atomic_bsz, config.accum_steps)
        expected = isolated_seconds(app, rate_at(app, config, step))
        assert by_id[job_id].duration == pytest.approx(expected)
    assert tuned_batch_sizes(workload) == {0: 16, 1: 64, 2: 256}
    assert json.loads(workload.meta["names"]) == {"0": "toy-0", "1": "toy-1", "2": "toy-2"}
    assert workload.meta["traces"] == str(FIXTURES / "traces")


def test_the_traces_directory_may_be_given(tmp_path: Path) -> None:
    (tmp_path / "w.csv").write_text(HEADER + "a,5,toy,2,32\n")
    workload = load_pollux(tmp_path / "w.csv", traces=FIXTURES / "traces")
    assert [(j.num_gpus, j.model) for j in workload.jobs] == [(2, "toy")]
    with pytest.raises(WorkloadError, match=r"w\.csv: the Pollux traces directory .*traces "
                                            r"does not exist \(pass traces=DIR"):
        load_pollux(tmp_path / "w.csv")


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("a,0,resnet,1,16", "unknown application 'resnet'; .* has toy"),
        ("a,0,toy,1,512", "batch_size 512 is outside toy's validated 16..256"),
        ("a,0,toy,0,16", "num_replicas must be >= 1, got 0"),
        ("a,-3,toy,1,16", "time must be >= 0"),
        ("a,0,toy,1", "expected 5 fields"),
    ],
)
def test_a_bad_row_names_file_line_and_problem(tmp_path: Path, row: str, message: str) -> None:
    path = tmp_path / "w.csv"
    path.write_text(HEADER + "ok,0,toy,1,16\n" + row + "\n")
    with pytest.raises(WorkloadError, match=rf"^{path}:3: {message}"):
        load_pollux(path, traces=FIXTURES / "traces")
    skipped = load_pollux(path, traces=FIXTURES / "traces", skip_bad_rows=True)
    assert (len(skipped.jobs), skipped.skipped_rows) == (1, 1)


def test_a_wrong_header_is_named(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_text("job,time,app,gpus,batch\n")
    with pytest.raises(WorkloadError, match=r":1: expected the header name,time,application"):
        load_pollux(path, traces=FIXTURES / "traces")


def test_a_workload_of_another_format_has_no_tuned_batch_sizes(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_text("job_id,submit_time,num_gpus,duration\n0,0,1,60\n")
    with pytest.raises(WorkloadError, match="not a Pollux workload"):
        tuned_batch_sizes(load_workload(path))


@pytest.mark.skipif(not ARTIFACT.is_dir(), reason=f"artifact data not at {ARTIFACT}")
def test_the_artifacts_workload_6_loads_with_its_default_traces() -> None:
    workload = load_pollux(ARTIFACT / "workloads" / "workload-6.csv")
    assert len(workload.jobs) == 160
    assert {j.model for j in workload.jobs} == {
        "bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}
    assert sum(j.model == "ncf" and j.num_gpus == 1 for j in workload.jobs) == 54
