"""Exact logic of the Synergy-style placement (CPU/memory-aware packing vs proportional)."""

from __future__ import annotations

from dataclasses import replace

from _core_helpers import apply, cluster, free_of, pending, place, running, snapshot, started

from blox_slurm import loading
from blox_slurm.core import composition
from blox_slurm.core.model import Gpu, Node
from blox_slurm.core.round import decide
from blox_slurm.policies.placement.synergy import Synergy

TUNE = Synergy(Synergy.Params(mode="tune"))
PROPORTIONAL = Synergy(Synergy.Params(mode="proportional"))


def nodes(*spec: tuple[int, int, int], gpu_type: str = "gpu"
          ) -> tuple[tuple[Node, ...], tuple[Gpu, ...]]:
    """Nodes node1.. from ``(gpus, cpus, memory_mb)``, GPU ids numbered in node order."""
    ns, gpus = cluster(*(g for g, _, _ in spec), gpu_type=gpu_type)
    return tuple(replace(n, cpus=c, memory_mb=m)
                 for n, (_, c, m) in zip(ns, spec, strict=True)), gpus


def typed(shape, types: list[str]):
    ns, gpus = shape
    return (tuple(replace(n, gpu_type=t) for n, t in zip(ns, types, strict=True)),
            tuple(replace(g, type=types[int(g.node[4:]) - 1]) for g in gpus))


def choose(policy, shape, jobs, want: int, **demand):
    s = snapshot(shape, jobs)
    return place(policy, s, pending(99, want, **demand), want)


# --------------------------------------------------------------------------- stranding

def test_proportional_strands_gpus_that_tune_fills() -> None:
    shape = nodes((4, 16, 0))  # 4 CPUs per GPU
    # The CPU-light job (2 GPUs, 2 CPUs) lands first under either mode.
    assert choose(TUNE, shape, [], 2, cpus=2) == (0, 1)
    assert choose(PROPORTIONAL, shape, [], 2, cpus=2) == (0, 1)
    light = running(1, [0, 1], cpus=2)
    # The CPU-heavy job (2 GPUs, 12 CPUs = 6 per GPU): proportional caps it at 8 CPUs on this
    # node, so it never runs and GPUs 2-3 stay idle; tune sees 14 CPUs left and fills them.
    assert choose(PROPORTIONAL, shape, [light], 2, cpus=12) is None
    assert choose(TUNE, shape, [light], 2, cpus=12) == (2, 3)
    # Tune still refuses what the node does not have: 15 > 14 CPUs left.
    assert choose(TUNE, shape, [light], 2, cpus=15) is None


def test_tune_picks_the_node_it_strands_least() -> None:
    shape = nodes((2, 4, 0), (2, 16, 0))  # node1: GPUs 0,1; node2: GPUs 2,3
    # Light job on node1 leaves 2/4 CPUs unusable (score 0.5); on node2 14/16 (0.875).
    assert choose(TUNE, shape, [], 2, cpus=2) == (0, 1)
    # Then the heavy job has node2's 16 CPUs; had the light job taken node2, it could not run.
    assert choose(TUNE, shape, [running(1, [0, 1], cpus=2)], 2, cpus=12) == (2, 3)
    assert choose(TUNE, shape, [running(1, [2, 3], cpus=2)], 2, cpus=12) is None


def test_memory_bound_placement() -> None:
    shape = nodes((4, 0, 64_000), (4, 0, 64_000))  # CPUs untracked (0) on both nodes
    small = running(1, [0, 1], memory_mb=8_000)  # node1: 2 GPUs and 56,000 MB left
    # 48,000 MB fits both nodes; node1 is left with 0 GPUs and 8,000 MB (score 0.125), node2
    # with 2 GPUs and 16,000 MB (0.5 - 0.25 = 0.25): node1.
    assert choose(TUNE, shape, [small], 2, memory_mb=48_000) == (2, 3)
    # 60,000 MB: only node2 has it.
    assert choose(TUNE, shape, [small], 2, memory_mb=60_000) == (4, 5)
    # 64,001 MB fits no single node: it spans, 32,000.5 MB per GPU, one GPU on each node
    # (node2 first, most free GPUs); 120,001 MB exceeds even both nodes' 120,000 MB left.
    assert choose(TUNE, shape, [small], 2, memory_mb=64_001) == (2, 4)
    assert choose(TUNE, shape, [small], 2, memory_mb=120_001) is None
    # Proportional: 24,000 MB per GPU exceeds every node's 16,000 MB share.
    assert choose(PROPORTIONAL, shape, [small], 2, memory_mb=48_000) is None
    # An untracked resource never blocks: 1,000 CPUs on nodes reporting 0 CPUs.
    assert choose(TUNE, shape, [small], 2, cpus=1_000, memory_mb=48_000) == (2, 3)


# --------------------------------------------------------------------------- accounting

def test_job_without_demand_takes_the_gpu_proportional_share() -> None:
    shape = nodes((4, 16, 0))
    heavy = running(1, [0, 1], cpus=12)  # 4 CPUs left for GPUs 2, 3
    assert choose(TUNE, shape, [heavy], 2) is None  # needs 2 x 4 CPUs
    assert choose(TUNE, shape, [heavy], 1) == (2,)
    assert choose(PROPORTIONAL, shape, [heavy], 2) == (2, 3)  # never checks what is left
    # A running job without a demand is charged its proportional share: 8 of 16 CPUs.
    assert choose(TUNE, shape, [running(1, [0, 1])], 2, cpus=8) == (2, 3)
    assert choose(TUNE, shape, [running(1, [0, 1])], 2, cpus=9) is None


def test_gpus_placed_earlier_this_round_are_charged_the_proportional_share() -> None:
    shape = nodes((4, 16, 0))
    s = snapshot(shape, [])
    free = free_of(s)
    free.take((0, 1))  # an earlier job of this round; its demand is not visible: 8 CPUs
    assert TUNE.choose(s, pending(9, 2, cpus=9), 2, free) is None
    assert TUNE.choose(s, pending(9, 2, cpus=8), 2, free) == (2, 3)


def test_a_preemption_victims_cpus_are_free_with_its_gpus() -> None:
    shape = nodes((4, 16, 0))
    s = snapshot(shape, [running(1, [0, 1], cpus=14)])
    free = free_of(s)
    assert TUNE.choose(s, pending(9, 4, cpus=16), 4, free) is None
    free.give((0, 1))
    assert TUNE.choose(s, pending(9, 4, cpus=16), 4, free) == (0, 1, 2, 3)


def test_a_running_multi_node_job_is_charged_per_node_by_its_gpus_there() -> None:
    shape = nodes((4, 16, 0), (4, 16, 0))
    # 12 CPUs over 4 GPUs: 3 on node1 (GPU 3), 9 on node2 (GPUs 4-6).
    wide = running(1, [3, 4, 5, 6], cpus=12)  # node1: 3 GPUs, 13 CPUs; node2: 1 GPU, 7 CPUs
    assert choose(TUNE, shape, [wide], 1, cpus=8) == (0,)
    # 7 CPUs fit both; node2 is left with nothing (score 0), node1 with 2/4 GPUs, 6/16 CPUs.
    assert choose(TUNE, shape, [wide], 1, cpus=7) == (7,)


# --------------------------------------------------------------------------- multi-node, types

def test_multi_node_job_splits_its_demand_by_gpus_per_node() -> None:
    shape = nodes((4, 16, 0), (4, 16, 0))
    busy = running(1, [0], cpus=12)  # node1: GPUs 1-3 free, 4 CPUs left; node2 empty
    # 6 GPUs x 2 CPUs: node2 (most free) takes 4 GPUs / 8 CPUs, node1 2 GPUs / 4 CPUs.
    assert choose(TUNE, shape, [busy], 6, cpus=12) == (1, 2, 4, 5, 6, 7)
    # 3 CPUs per GPU: node2 takes 4 (12 CPUs), node1's 4 CPUs allow only 1 more: 5 < 6.
    assert choose(TUNE, shape, [busy], 6, cpus=18) is None
    assert choose(PROPORTIONAL, shape, [busy], 6, cpus=12) == (1, 2, 4, 5, 6, 7)
    assert choose(PROPORTIONAL, shape, [busy], 6, cpus=30) is None  # 5 per GPU > 4


def test_gpu_type_hint_restricts_the_nodes() -> None:
    shape = typed(nodes((2, 4, 0), (2, 16, 0)), ["v100", "k80"])
    hint = {"hints": (("gpu_type", "V100"),)}
    # Untyped, the heavy job can only go to node2; required on v100, it fits nowhere.
    assert choose(TUNE, shape, [], 2, cpus=12) == (2, 3)
    assert choose(TUNE, shape, [], 2, cpus=12, **hint) is None
    assert choose(TUNE, shape, [], 2, cpus=4, **hint) == (0, 1)


def test_without_cpu_or_memory_data_it_is_best_fit() -> None:
    shape = cluster(4, 2)  # the simulator's nodes: 0 CPUs, 0 memory
    assert choose(TUNE, shape, [], 2) == (4, 5)  # exact fit on node2
    assert choose(TUNE, shape, [running(1, [4])], 2) == (0, 1)
    assert choose(TUNE, shape, [running(1, [0, 1, 2, 4])], 2) == (3, 5)  # spans when it must


# --------------------------------------------------------------------------- a round

def test_bundled_composition_round() -> None:
    comp = loading.load("synergy")
    shape = nodes((4, 16, 0))
    light, heavy = pending(1, 2, cpus=2), pending(2, 2, submit=1.0, cpus=12)
    s = snapshot(shape, [light, heavy])
    d = decide(s, comp)
    # LAS ties go by submit time: the light job starts; the heavy one is charged against the
    # light job's proportional estimate (8 CPUs) within the round, so it waits one round...
    assert started(d) == {1: (0, 1)}
    # ...and starts next round, when the light job's real demand (2 CPUs) is known.
    assert started(decide(apply(s, d), comp)) == {2: (2, 3)}
    proportional = composition.build({"scheduling": "las",
                                      "placement": {"policy": "synergy",
                                                    "mode": "proportional"}})
    s2 = apply(s, decide(s, proportional))
    assert started(decide(s2, proportional)) == {}
