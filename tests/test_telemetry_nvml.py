"""The NVML backend: the real driverless failure, and the pure logic that maps NVML's raw
values to samples (processes to Slurm jobs, cumulative error counters to deltas)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pynvml
import pytest

from blox_slurm.telemetry.base import GpuTelemetry, TelemetryError
from blox_slurm.telemetry.nvml import (
    ErrorDeltas,
    NvmlTelemetry,
    assemble_sample,
    job_id_from_cgroup,
    job_id_from_environ,
    job_id_of_pid,
)


def test_real_nvml_without_driver_gives_one_clear_error() -> None:
    # This machine has no NVIDIA driver: the real pynvml raises NVMLError_LibraryNotFound.
    with pytest.raises(TelemetryError) as info:
        NvmlTelemetry()
    assert str(info.value) == "no NVIDIA driver on this node (NVML library not found)"
    assert isinstance(info.value.__cause__, pynvml.NVMLError_LibraryNotFound)


@pytest.mark.parametrize(
    ("text", "job"),
    [
        ("4:devices:/slurm/uid_1000/job_42/step_0/task_0\n1:cpu:/\n", 42),  # cgroup v1
        ("0::/system.slice/slurmstepd.scope/job_1234/step_batch/user/task_0\n", 1234),  # v2
        ("0::/system.slice/slurmstepd.scope/job_77\n", 77),
        ("9:name=systemd:/\n0::/user.slice/user-1000.slice/session-3.scope\n", None),
        ("0::/system.slice/slurmstepd.scope/job_x/step_0\n", None),
        ("0::/home/job_12abc/step_0\n", None),  # not a job_<digits> directory
        ("0::/a/myjob_5/b\n", None),
        ("", None),
    ],
)
def test_job_id_from_cgroup(text: str, job: int | None) -> None:
    assert job_id_from_cgroup(text) == job


@pytest.mark.parametrize(
    ("data", "job"),
    [
        (b"HOME=/home/a\0SLURM_JOB_ID=981\0SLURM_JOBID=981\0", 981),
        (b"SLURM_JOB_ID=7", 7),
        (b"HOME=/\0SLURM_JOB_IDX=5\0", None),
        (b"SLURM_JOB_ID=\0", None),
        (b"SLURM_JOB_ID=12;rm -rf /\0", None),
        (b"SLURM_JOB_ID=" + b"9" * 40 + b"\0", None),  # absurd length: refused, not parsed
        (b"", None),
    ],
)
def test_job_id_from_environ(data: bytes, job: int | None) -> None:
    assert job_id_from_environ(data) == job


def fake_proc(tmp_path: Path, pid: int, cgroup: str | None, environ: bytes | None) -> Path:
    d = tmp_path / str(pid)
    d.mkdir()
    if cgroup is not None:
        (d / "cgroup").write_text(cgroup)
    if environ is not None:
        (d / "environ").write_bytes(environ)
    return tmp_path


def test_job_id_of_pid_trusts_cgroup_over_environment(tmp_path: Path) -> None:
    # A user exporting someone else's job id must not be attributed to that job.
    proc = fake_proc(tmp_path, 10, "0::/slurmstepd.scope/job_5/step_0\n", b"SLURM_JOB_ID=6\0")
    assert job_id_of_pid(10, proc) == 5


def test_job_id_of_pid_falls_back_to_environment(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, 11, "0::/user.slice\n", b"SLURM_JOB_ID=6\0")
    assert job_id_of_pid(11, proc) == 6
    proc = fake_proc(tmp_path, 12, None, b"SLURM_JOB_ID=8\0")
    assert job_id_of_pid(12, proc) == 8


def test_job_id_of_vanished_pid_is_none(tmp_path: Path) -> None:
    assert job_id_of_pid(99, tmp_path) is None


def test_job_id_of_real_process_from_its_environment() -> None:
    child = subprocess.Popen(  # noqa: S603 -- our own interpreter, fixed argv
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"],
        env={**os.environ, "SLURM_JOB_ID": "4242"}, stdout=subprocess.PIPE, text=True,
    )
    try:
        # Until it has exec'd, /proc shows the forked parent's environment: wait for it.
        assert child.stdout is not None and child.stdout.readline() == "up\n"
        assert job_id_of_pid(child.pid) == 4242
    finally:
        child.kill()
        child.wait()


def test_assemble_sample() -> None:
    jobs = {100: 7, 101: 7, 102: 3, 103: None}
    s = assemble_sample(2, 50.0, 130, 3 * 2**20, 80 * 2**30, [100, 101, 102, 103], jobs.get, 1)
    assert (s.gpu, s.time, s.utilization, s.errors) == (2, 50.0, 100.0, 1)
    assert s.memory_used_mb == 3.0 and s.memory_total_mb == 80 * 1024
    assert s.job_ids == (3, 7)  # distinct, sorted, the job-less process dropped


def test_error_deltas() -> None:
    d = ErrorDeltas()
    assert d.delta(0, 2) == 2  # first reading: all errors since the driver loaded
    assert d.delta(0, 2) == 0
    assert d.delta(0, 5) == 3
    assert d.delta(1, 0) == 0
    assert d.delta(0, 1) == 1  # counter reset (driver reload): restart from the new value


@dataclass
class FakeGpu:
    util: int = 50
    lost: bool = False
    ecc: int | None = 0  # None: ECC not supported
    pids: tuple[int, ...] = ()


def stand_in_nvml(gpus: list[FakeGpu], xid: list[int]) -> SimpleNamespace:
    """Just enough of pynvml's surface, raising pynvml's real exception classes."""

    def err(code: int) -> pynvml.NVMLError:
        return pynvml.NVMLError(code)

    def utilization(h: int) -> SimpleNamespace:
        if gpus[h].lost:
            raise err(pynvml.NVML_ERROR_GPU_IS_LOST)
        return SimpleNamespace(gpu=gpus[h].util)

    def ecc(h: int, kind: int, counter: int) -> int:
        assert (kind, counter) == (pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, 0)
        value = gpus[h].ecc
        if value is None:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return value

    def wait(events: object, timeout_ms: int) -> SimpleNamespace:
        assert timeout_ms == 0  # never blocks the sampling loop
        if not xid:
            raise err(pynvml.NVML_ERROR_TIMEOUT)
        return SimpleNamespace(eventType=pynvml.nvmlEventTypeXidCriticalError, device=xid.pop())

    calls: list[str] = []
    return SimpleNamespace(
        calls=calls,
        NVMLError=pynvml.NVMLError,
        NVMLError_LibraryNotFound=pynvml.NVMLError_LibraryNotFound,
        NVMLError_DriverNotLoaded=pynvml.NVMLError_DriverNotLoaded,
        NVMLError_NoPermission=pynvml.NVMLError_NoPermission,
        NVMLError_NotSupported=pynvml.NVMLError_NotSupported,
        NVML_MEMORY_ERROR_TYPE_UNCORRECTED=pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
        NVML_VOLATILE_ECC=pynvml.NVML_VOLATILE_ECC,
        nvmlEventTypeXidCriticalError=pynvml.nvmlEventTypeXidCriticalError,
        nvmlInit=lambda: calls.append("init"),
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetCount=lambda: len(gpus),
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetIndex=lambda h: h,
        nvmlDeviceGetUtilizationRates=utilization,
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=2**30, total=16 * 2**30),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [
            SimpleNamespace(pid=p) for p in gpus[h].pids
        ],
        nvmlDeviceGetTotalEccErrors=ecc,
        nvmlEventSetCreate=lambda: "events",
        nvmlDeviceRegisterEvents=lambda h, kind, events: None,
        nvmlEventSetWait=wait,
        nvmlEventSetFree=lambda events: calls.append("free"),
    )


def test_nvml_sampling_path_with_stand_in_library(tmp_path: Path) -> None:
    fake_proc(tmp_path, 500, "0::/slurmstepd.scope/job_31/step_0\n", None)
    gpus = [FakeGpu(util=88, ecc=1, pids=(500,)), FakeGpu(ecc=None), FakeGpu(lost=True)]
    xid = [0, 0]
    nvml = stand_in_nvml(gpus, xid)
    backend = NvmlTelemetry(nvml, proc=tmp_path, clock=lambda: 1000.0)  # type: ignore[arg-type]
    assert isinstance(backend, GpuTelemetry)

    first = backend.sample()
    assert [s.gpu for s in first] == [0, 1, 2]
    assert first[0].utilization == 88 and first[0].job_ids == (31,)
    assert first[0].memory_used_mb == 1024 and first[0].memory_total_mb == 16 * 1024
    assert first[0].errors == 2 + 1  # two XID events + one uncorrected ECC error
    assert first[1].errors == 0  # ECC not supported: not an error
    assert (first[2].utilization, first[2].errors) == (0.0, 1)  # a lost GPU looks broken

    gpus[0].ecc = 1
    second = backend.sample()
    assert [s.errors for s in second] == [0, 0, 1]  # only new errors are reported

    backend.close()
    backend.close()
    assert nvml.calls == ["init", "free", "shutdown"]
    with pytest.raises(TelemetryError, match="after close"):
        backend.sample()


def test_nvml_init_failures_are_translated() -> None:
    nvml = stand_in_nvml([], [])

    def not_loaded() -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    nvml.nvmlInit = not_loaded
    with pytest.raises(TelemetryError, match="not loaded"):
        NvmlTelemetry(nvml)  # type: ignore[arg-type]
