"""The emulated backend follows what Slurm allocated, deterministically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from blox_slurm.core.model import ClusterSnapshot, Job, JobState, build_cluster
from blox_slurm.telemetry.base import GpuTelemetry, TelemetryError
from blox_slurm.telemetry.emulated import (
    EmulatedTelemetry,
    allocations_from_file,
    allocations_from_snapshot,
    profile_utilization,
)


def snapshot() -> ClusterSnapshot:
    nodes, gpus = build_cluster([("v100", 2, 4)])  # node1: GPUs 0-3, node2: GPUs 4-7
    jobs = (
        Job(1, 0.0, 2, state=JobState.RUNNING, gpus=(0, 1)),
        Job(2, 0.0, 2, state=JobState.RUNNING, gpus=(3, 4)),  # spans both nodes
        Job(3, 0.0, 1, state=JobState.RUNNING, gpus=(6,), hints=(("idle", "1"),)),
        Job(4, 0.0, 1),  # pending: no GPUs
    )
    return ClusterSnapshot(now=10.0, nodes=nodes, gpus=gpus, jobs=jobs)


def test_allocations_from_snapshot_maps_to_local_indices() -> None:
    allocs = {(a.job_id, a.node): a.gpus for a in allocations_from_snapshot(snapshot())}
    assert allocs == {
        (1, "node1"): (0, 1),
        (2, "node1"): (3,),
        (2, "node2"): (0,),
        (3, "node2"): (2,),
    }


def test_samples_follow_the_snapshot() -> None:
    backend = EmulatedTelemetry("node1", 4, snapshot, clock=lambda: 77.0)
    assert isinstance(backend, GpuTelemetry)
    samples = backend.sample()
    assert [s.gpu for s in samples] == [0, 1, 2, 3]
    assert [s.job_ids for s in samples] == [(1,), (1,), (), (2,)]
    assert all(s.time == 77.0 for s in samples)
    busy = profile_utilization(1)
    assert samples[0].utilization == samples[1].utilization == busy
    assert 60 <= busy <= 95
    assert samples[2].utilization == 0 and samples[2].memory_used_mb == 0  # free GPU
    assert samples[3].utilization == profile_utilization(2)


def test_idle_hint_reads_zero() -> None:
    samples = EmulatedTelemetry("node2", 4, snapshot, utilization=80.0).sample()
    assert [s.job_ids for s in samples] == [(2,), (), (3,), ()]
    assert [s.utilization for s in samples] == [80.0, 0.0, 0.0, 0.0]


def test_profile_is_deterministic_and_spread() -> None:
    values = [profile_utilization(i) for i in range(200)]
    assert values == [profile_utilization(i) for i in range(200)]
    assert min(values) >= 60 and max(values) <= 95
    assert max(values) - min(values) > 25  # not all jobs look alike
    assert len(set(values)) > 100


def test_tuple_source_and_changing_allocation() -> None:
    current: list[tuple[object, ...]] = [(9, "n1", [1])]
    backend = EmulatedTelemetry("n1", 2, lambda: current, utilization=70.0)
    assert [s.job_ids for s in backend.sample()] == [(), (9,)]
    current[:] = [(9, "n1", (0,), {"idle": "1"}), (10, "other", (1,))]
    assert [(s.job_ids, s.utilization) for s in backend.sample()] == [((9,), 0.0), ((), 0.0)]


def test_injected_and_persistent_errors() -> None:
    backend = EmulatedTelemetry("node1", 4, snapshot, errors={2: 1})
    backend.inject_error(0, 3)
    assert [s.errors for s in backend.sample()] == [3, 0, 1, 0]
    assert [s.errors for s in backend.sample()] == [0, 0, 1, 0]  # one-shot gone, fault stays


def test_allocations_file(tmp_path: Path) -> None:
    path = tmp_path / "alloc.json"
    path.write_text(json.dumps([{"job_id": 5, "node": "n1", "gpus": [0], "hints": {"idle": "1"}}]))
    backend = EmulatedTelemetry("n1", 1, allocations_from_file(path))
    assert [(s.job_ids, s.utilization) for s in backend.sample()] == [((5,), 0.0)]
    path.write_text("{not json")
    with pytest.raises(TelemetryError, match="cannot read allocations"):
        backend.sample()
    path.unlink()
    with pytest.raises(TelemetryError, match="cannot read allocations"):
        backend.sample()
