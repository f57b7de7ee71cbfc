"""Shapes that must follow from the model itself (not from matching Blox's numbers).

A small Figure-6-like setup (8 nodes x 4 GPUs, 1-GPU jobs, Blox's duration mix) at loads from
light to overloaded. LAS ranks a new job (zero attained service) above every running job
(each has received at least one round of service) and every job needs one GPU, so a newcomer
always fits by preempting: its wait is bounded by the round it arrives in, at every load. FIFO
makes newcomers wait behind everyone, so its responsiveness can only be worse.
"""

from __future__ import annotations

import pytest

from blox_slurm.loading import load
from blox_slurm.sim.config import ClusterSpec, SimConfig
from blox_slurm.sim.metrics import summarize
from blox_slurm.sim.simulator import Simulator
from blox_slurm.workloads import generate

# 32 GPUs; mean job ~15.7 h, so 2.0 jobs/h is ~98% load and 2.4 jobs/h is overloaded.
RATES = [1.0, 1.6, 2.0, 2.4]


def run(name: str, rate: float):
    workload = generate(n_jobs=1200, jobs_per_hour=rate, measure=(400, 800), seed=3)
    return summarize(Simulator(workload, load(name), ClusterSpec.uniform(8, 4).build(),
                               SimConfig()).run())


@pytest.fixture(scope="module")
def sweep():
    return {(name, r): run(name, r) for name in ("fifo", "las") for r in RATES}


@pytest.mark.parametrize("rate", RATES)
def test_las_responsiveness_never_worse_than_fifo(sweep, rate):
    assert sweep[("las", rate)].avg_responsiveness <= sweep[("fifo", rate)].avg_responsiveness


@pytest.mark.parametrize("rate", RATES)
def test_las_newcomers_start_within_their_arrival_round(sweep, rate):
    # Arrivals wait for the next 300 s tick; a simultaneous burst can exceed that slightly.
    assert sweep[("las", rate)].p99_responsiveness <= 300.0 + 1e-6


def test_fifo_queueing_grows_with_load(sweep):
    delays = [sweep[("fifo", r)].avg_responsiveness for r in RATES]
    assert delays == sorted(delays)
    assert delays[-1] > 10 * delays[0]  # overload really queues
