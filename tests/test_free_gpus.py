"""The free-GPU pool (``FreeGpus``) after any takes and gives, of one GPU (its fast path) or
several, against the free set recomputed from scratch: same GPUs per node, in order, and the
same count."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from blox_slurm.core.abstractions import FreeGpus
from blox_slurm.core.model import build_cluster

NODES, GPUS = build_cluster([("gpu", 3, 4), ("gpu", 1, 2)])


@settings(deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, len(GPUS) - 1),
                                                  min_size=1, max_size=3, unique=True))))
def test_takes_and_gives_keep_the_pool_equal_to_the_free_set(steps) -> None:
    pool = FreeGpus({n.name: n.gpu_ids for n in NODES}, GPUS)
    free = set(range(len(GPUS)))
    for take, gpus in steps:
        if take and free.issuperset(gpus):
            pool.take(tuple(gpus))
            free -= set(gpus)
        elif not take and free.isdisjoint(gpus):
            pool.give(tuple(gpus))
            free |= set(gpus)
    assert pool.by_node == {n.name: tuple(g for g in n.gpu_ids if g in free) for n in NODES}
    assert pool.count == len(free)
