"""Whole-simulation invariants under every bundled composition (hypothesis).

For random small clusters (1-4 nodes x 1-8 GPUs, mixed types) and random finite job sets:
no GPU is ever held by two jobs (checked independently of the simulator's own referee, from
every start/preemption it applied), no job is lost or duplicated, every job finishes, total
attained service fits in GPU capacity x makespan, and no job beats its fastest possible run.
"""

from __future__ import annotations

from collections import defaultdict
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import blox_slurm.sim.simulator as simulator_module
from blox_slurm import loading
from blox_slurm.core import composition
from blox_slurm.core.model import build_cluster
from blox_slurm.core.throughput import DEFAULT_THROUGHPUT
from blox_slurm.sim.config import SimConfig
from blox_slurm.sim.options import sim_table
from blox_slurm.sim.simulator import Simulator
from blox_slurm.workloads.schema import JobSpec, Workload

BUNDLED = composition.bundled_names()


@st.composite
def cases(draw):
    groups = draw(st.lists(st.tuples(st.sampled_from(["v100", "k80"]), st.integers(1, 8)),
                           min_size=1, max_size=4))
    shape = build_cluster([(t, 1, n) for t, n in groups])
    total = len(shape[1])
    n_jobs = draw(st.integers(1, 30))
    specs = []
    for jid in range(n_jobs):
        specs.append(JobSpec(
            jid,
            draw(st.floats(0, 20_000, allow_nan=False).map(lambda x: round(x, 2))),
            draw(st.integers(1, min(8, total))),
            draw(st.floats(1.0, 6_000, allow_nan=False)),
        ))
    specs.sort(key=lambda s: (s.submit_time, s.id))
    return shape, Workload(tuple(specs))


def max_rate(c: composition.Composition, spec: JobSpec, total: int) -> float:
    """Fastest rate a job can get: 1.0 at its request, more only if Optimus grows it, or
    Pollux (to any count)."""
    sched = c.scheduling
    kind = type(sched).__name__
    if kind not in ("Optimus", "Pollux"):
        return 1.0
    cap = total if kind == "Pollux" else min(sched.max_gpus, int(spec.num_gpus * sched.max_scale),
                                             total)
    return max(1.0, (cap / spec.num_gpus) ** DEFAULT_THROUGHPUT.scaling)


def least_gpu_seconds(c: composition.Composition, spec: JobSpec, total: int) -> float:
    """The fewest GPU-seconds a job can run for: at its request, more when grown, except
    under Pollux, which may shrink it (on one GPU, at ``(1 / request) ** scaling``)."""
    if type(c.scheduling).__name__ == "Pollux":
        return spec.duration * spec.num_gpus ** DEFAULT_THROUGHPUT.scaling
    return spec.num_gpus * spec.duration / max_rate(c, spec, total)


def simulate_recording(c, shape, wl, cfg):
    """Run, recording every start (t, job, gpus) and preemption (t, job) the simulator got."""
    events: list[tuple[float, str, int, tuple[int, ...]]] = []
    real = simulator_module.decide

    def spy(snapshot, comp, **kw):
        d = real(snapshot, comp, **kw)
        if comp is not c:
            return d  # a synthesizer's forks run simulators too: only the real world counts
        for jid in d.preempt:
            events.append((snapshot.now, "preempt", jid, ()))
        for s in d.placed:  # started and moved jobs
            events.append((snapshot.now, "start", s.job_id, s.gpus))
        return d

    with mock.patch.object(simulator_module, "decide", spy):
        result = Simulator(wl, c, shape, cfg).run()
    return result, events


def check_gpu_intervals(events, result, n_gpus: int) -> None:
    """Rebuild who held which GPU when; intervals on one GPU must not overlap."""
    finish = {r.id: r.finish for r in result.jobs}
    holding: dict[int, tuple[float, tuple[int, ...]]] = {}
    intervals: dict[int, list[tuple[float, float, int]]] = defaultdict(list)
    for t, kind, jid, gpus in events:  # preemptions of a round come before its starts
        if kind == "preempt":
            since, held = holding.pop(jid)
            for g in held:
                intervals[g].append((since, t, jid))
        else:
            assert jid not in holding, f"job {jid} started twice without a preemption"
            assert all(0 <= g < n_gpus for g in gpus)
            assert len(set(gpus)) == len(gpus)
            holding[jid] = (t, gpus)
    for jid, (since, held) in holding.items():
        end = finish[jid]  # still holding at the end: it must have finished
        assert end >= since
        for g in held:
            intervals[g].append((since, end, jid))
    for g, spans in intervals.items():
        spans.sort()
        for (s1, e1, j1), (s2, e2, j2) in zip(spans, spans[1:], strict=False):
            assert s2 >= e1 - 1e-6, f"GPU {g}: job {j1} [{s1}, {e1}) overlaps {j2} [{s2}, {e2})"


@pytest.mark.parametrize("name", BUNDLED)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_simulation_invariants(name, case) -> None:
    shape, wl = case
    c = loading.load(name)
    cfg = SimConfig.model_validate({**sim_table(name), "max_time": 1e8})  # a hang fails
    total = len(shape[1])
    result, events = simulate_recording(c, shape, wl, cfg)

    # no job lost or duplicated; all of a finite workload finishes
    ids = [r.id for r in result.jobs]
    assert len(ids) == len(set(ids))
    assert sorted(ids + list(result.unfinished)) == sorted(s.id for s in wl.jobs)
    assert result.unfinished == ()

    check_gpu_intervals(events, result, total)

    specs = {s.id: s for s in wl.jobs}
    start = min(s.submit_time for s in wl.jobs)
    makespan = max(r.finish for r in result.jobs) - start
    assert sum(r.gpu_seconds for r in result.jobs) <= total * makespan * (1 + 1e-9) + 1e-6
    for r in result.jobs:
        spec = specs[r.id]
        assert r.submit_time == spec.submit_time and r.num_gpus == spec.num_gpus
        assert spec.submit_time <= r.first_start <= r.finish
        fastest = spec.duration / max_rate(c, spec, total)
        assert r.finish - r.first_start >= fastest * (1 - 1e-9) - 1e-6
        assert r.jct >= fastest * (1 - 1e-9) - 1e-6
        assert r.gpu_seconds >= least_gpu_seconds(c, spec, total) * (1 - 1e-9) - 1e-6
        if cfg.quantize_to_rounds:
            assert r.finish % cfg.round_duration == pytest.approx(0.0, abs=1e-6) or \
                r.finish % cfg.round_duration == pytest.approx(cfg.round_duration, abs=1e-6)
    # utilization is a step function within [0, total GPUs], ending idle
    times = [t for t, _ in result.utilization]
    assert times == sorted(times)
    assert all(0 <= busy <= total for _, busy in result.utilization)
    assert result.utilization[-1][1] == 0
