"""The Pollux scheduling policy: exact allocations of GPU counts by speedup, the restart
penalty, growth caps, and a whole run on the toy Pollux workload."""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from blox_slurm.core.model import Job
from blox_slurm.core.round import decide
from blox_slurm.core.throughput import ADAPTIVE
from blox_slurm.loading import load
from blox_slurm.policies.scheduling.pollux import MOST, Pollux, allocate, counts_for
from blox_slurm.sim.config import SimConfig
from blox_slurm.sim.experiment import Experiment, WorkloadSpec, run
from blox_slurm.sim.options import sim_table
from tests._core_helpers import cluster, comp, pending, running, snapshot

FIXTURES = Path(__file__).parent / "fixtures" / "pollux"


@dataclass(frozen=True)
class Linear:
    """Speedup ``1 + e (n - 1)`` per job id: ``e`` its scaling efficiency."""

    efficiency: dict[int, float]

    def rate(self, job: Job, gpus: int, nodes: int, gpu_type: str) -> float:
        return 1.0

    def speedup(self, job: Job, gpus: int, now: float) -> float:
        return 1.0 + self.efficiency[job.id] * (gpus - 1)


def test_counts_fill_nodes_without_fragments() -> None:
    assert counts_for(4, 16) == [0, 1, 2, 4, 8, 12, 16]
    assert counts_for(8, 16) == [0, 1, 2, 4, 8, 16]


def test_the_allocation_is_the_best_within_capacity() -> None:
    rng = random.Random(7)
    counts = [0, 1, 2, 4]
    for _ in range(40):
        jobs, capacity = rng.randint(1, 4), rng.randint(0, 9)
        values = [[-1e9] + [rng.uniform(-3, 0) if rng.random() > 0.2 else float("-inf")
                            for _ in counts[1:]] for _ in range(jobs)]
        chosen = allocate(values, counts, capacity)
        assert sum(chosen) <= capacity
        best = max(sum(v[counts.index(n)] for v, n in zip(values, combo, strict=True))
                   for combo in itertools.product(counts, repeat=jobs)
                   if sum(combo) <= capacity)
        got = sum(v[counts.index(n)] for v, n in zip(values, chosen, strict=True))
        assert got == pytest.approx(best)


def _order(jobs: list[Job], model: Linear, now: float = 600.0, **params: float):
    snap = snapshot(cluster(4, 4), jobs, now=now, throughput=model)
    return Pollux(Pollux.Params(**params)).order(snap, jobs)


def test_p_minus_one_minimizes_the_sum_of_inverse_speedups() -> None:
    """On 8 GPUs (counts 1, 2, 4): 2, 2, 4 sums 1/1.9 + 1/1.1 + 1/2.5 = 1.835; the job
    scaling best, given 4 (4, 2, 2), sums 1/3.7 + 1/1.1 + 1/1.5 = 1.846."""
    jobs = [pending(i, 1, marks=((MOST, 8.0),)) for i in range(3)]
    sched = _order(jobs, Linear({0: 0.9, 1: 0.1, 2: 0.5}))
    assert sched.gpus == {0: 2, 1: 2, 2: 4}
    assert {(j, ADAPTIVE) for j in range(3)} <= {(j, k) for j, k, _ in sched.marks}


def test_more_jobs_than_gpus_leaves_the_rest_last_without_gpus() -> None:
    jobs = [pending(i, 1, submit=float(i)) for i in range(10)]
    sched = _order(jobs, Linear({i: 1.0 for i in range(10)}))
    assert sorted(sched.gpus.values()) == [1] * 8
    assert [j.id for j in sched.order][-2:] == [8, 9]  # the latest arrivals wait


def test_a_job_grows_to_at_most_twice_what_it_ran_on() -> None:
    sched = _order([pending(0, 1, marks=((MOST, 2.0),))], Linear({0: 1.0}))
    assert sched.gpus == {0: 4}
    sched = _order([pending(0, 1)], Linear({0: 1.0}))
    assert sched.gpus == {0: 1}  # it never ran: one GPU, as the artifact starts jobs
    sched = _order([running(0, (0, 1, 2))], Linear({0: 1.0}))
    assert sched.gpus == {0: 4}
    assert (0, MOST, 3.0) in sched.marks


def test_the_restart_penalty_keeps_a_young_job_at_its_count() -> None:
    young = running(0, (0, 1), since=0.0, marks=((MOST, 2.0), (ADAPTIVE, 1.0)))
    model = Linear({0: 0.5})  # 4 GPUs: speedup 2.5 against 1.5 on its 2
    assert _order([young], model, now=20.0).gpus == {0: 2}  # 20/50 of 2.5 < 1.5
    assert _order([young], model, now=3600.0).gpus == {0: 4}


def test_a_slurm_job_that_did_not_opt_in_gets_its_own_count_or_none() -> None:
    """The Slurm snapshot holds such a job to its request (min_gpus = max_gpus), even a
    count no packed shape has (3): the program must count its GPUs as the engine will give
    them, else it sizes the others around GPUs that job never takes."""
    fixed = (("max_gpus", "3"), ("min_gpus", "3"))
    jobs = [pending(0, 3, hints=fixed), running(1, (4,), hints=fixed[:0])]
    sched = _order(jobs, Linear({0: 1.0, 1: 1.0}), growth=16.0)
    assert sched.gpus[0] == 3 and sched.gpus[1] + 3 <= 16


def test_an_elastic_job_stays_within_its_bounds() -> None:
    elastic = (("elastic", "1"), ("max_gpus", "4"), ("min_gpus", "2"))
    jobs = [pending(0, 1, hints=elastic, marks=((MOST, 16.0),))]
    assert _order(jobs, Linear({0: 1.0})).gpus == {0: 4}  # not 16: its max
    new = [pending(0, 1, hints=elastic)]  # never ran: it starts on its minimum, not 1
    assert _order(new, Linear({0: 1.0})).gpus == {0: 2}


def test_an_elastic_job_whose_minimum_no_shape_has_starts_on_it() -> None:
    """min_gpus 3: 1 and 2 are below it, 4 above a new job's cap, and no packed shape is 3;
    it must still be offered its minimum, beside jobs that could take every GPU."""
    odd = (("elastic", "1"), ("max_gpus", "8"), ("min_gpus", "3"))
    big = [pending(i, 1, submit=float(i), marks=((MOST, 8.0),)) for i in (1, 2)]
    sched = _order([pending(0, 1, hints=odd), *big], Linear({0: 1.0, 1: 1.0, 2: 1.0}))
    assert sched.gpus[0] == 3 and sum(sched.gpus.values()) <= 8


def test_a_fixed_job_bigger_than_a_node_it_is_bound_to_gets_none() -> None:
    """--gres=gpu:8 on one node, where nodes hold 4: the program must not keep 8 GPUs for
    a job no placement can honour."""
    fixed = (("max_gpus", "8"), ("min_gpus", "8"), ("nodes", "1"))
    sched = _order([pending(0, 8, hints=fixed), pending(1, 1, marks=((MOST, 8.0),))],
                   Linear({0: 1.0, 1: 1.0}))
    assert 0 not in sched.gpus and sched.gpus[1] == 8  # all 8 GPUs of the two nodes


def test_a_job_asking_per_node_grows_only_within_its_nodes() -> None:
    """``--gres=gpu:1`` binds a Slurm job to one node: 8 GPUs could never be placed."""
    per_node = (("elastic", "1"), ("max_gpus", "16"), ("min_gpus", "1"), ("nodes", "1"))
    jobs = [running(0, (0, 1, 2, 3), hints=per_node, marks=((MOST, 4.0),))]
    assert _order(jobs, Linear({0: 1.0})).gpus == {0: 4}
    two = (*per_node[:3], ("nodes", "2"))
    jobs = [running(0, (0, 1, 4, 5), hints=two, marks=((MOST, 4.0),))]
    assert _order(jobs, Linear({0: 1.0})).gpus == {0: 8}


def test_decide_resizes_running_jobs_and_starts_waiting_ones() -> None:
    jobs = [running(0, (0, 1, 2, 3, 4, 5, 6, 7), marks=((MOST, 8.0),)),
            pending(1, 1, marks=((MOST, 2.0),))]
    snap = snapshot(cluster(4, 4), jobs, now=3600.0, throughput=Linear({0: 0.9, 1: 0.9}))
    d = decide(snap, comp({"policy": "pollux"}, placement={"policy": "consolidated"}))
    placed = {s.job_id: len(s.gpus) for s in d.placed}
    assert placed == {0: 4, 1: 4}


@pytest.mark.parametrize("name", ["pollux", "tiresias-tuned", "optimus-tuned"])
def test_the_compositions_run_the_toy_workload(name: str) -> None:
    exp = Experiment(composition=load(name).config, cluster="gpu:4x2",
                     sim=SimConfig.model_validate(sim_table(name)),
                     workload=WorkloadSpec(path=str(FIXTURES / "workloads" / "workload.csv"),
                                           format="pollux"))
    result = run(exp)
    assert sorted(r.id for r in result.jobs) == [0, 1, 2]
    assert not result.unfinished
