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


_NAMES = [n.name for n in NODES]


@settings(deadline=None)
@given(st.lists(st.lists(st.sampled_from(_NAMES), unique=True), min_size=1, max_size=3),
       st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, len(GPUS) - 1),
                                                  min_size=1, max_size=3, unique=True))),
       st.integers(0, 20))
def test_a_view_stays_the_pool_restricted_to_its_nodes(subsets, steps, made_at) -> None:
    """``FreeGpus.only``: made before, between or after takes and gives (of a pool with a
    node excluded, as a round's pool may be), a view always equals the pool restricted to
    its nodes, in node order, with its count; a copy of the pool has no views to keep."""
    pool = FreeGpus({n.name: n.gpu_ids for n in NODES[:-1]}, GPUS)  # the last one excluded
    free = {g for n in NODES[:-1] for g in n.gpu_ids}
    views: list[tuple[tuple[str, ...], FreeGpus]] = []

    def make() -> None:
        for names in subsets:
            ordered = tuple(n for n in _NAMES if n in names)
            views.append((ordered, pool.only(ordered)))

    for k, (take, gpus) in enumerate(steps):
        if k == made_at:
            make()
        if take and free.issuperset(gpus):
            pool.take(tuple(gpus))
            free -= set(gpus)
        elif not take and free.isdisjoint(gpus) and all(GPUS[g].node != _NAMES[-1]
                                                        for g in gpus):
            pool.give(tuple(gpus))
            free |= set(gpus)
    if not views:
        make()
    twin = pool.copy()
    twin.take(tuple(sorted(free))[:1])
    for names, view in views:
        want = {name: pool.by_node[name] for name in names if name in pool.by_node}
        assert view.by_node == want and list(view.by_node) == list(want)
        assert view.count == sum(map(len, want.values()))
        assert pool.only(names) is view


@given(st.sets(st.integers(0, len(GPUS) - 1)), st.integers(0, len(GPUS) - 1))
def test_taking_one_gpu_that_is_not_free_leaves_the_nodes_gpus_as_they_were(taken, one) -> None:
    """The one-GPU take cuts the GPU out by its position: one that is not there (a caller's
    mistake the world refuses before) leaves the node's free GPUs unchanged, as a filter
    did."""
    pool = FreeGpus({n.name: tuple(g for g in n.gpu_ids if g not in taken | {one})
                     for n in NODES}, GPUS)
    before = dict(pool.by_node)
    pool.take((one,))
    assert pool.by_node == before


@settings(deadline=None)
@given(st.sets(st.integers(0, len(GPUS) - 1)), st.sampled_from(_NAMES), st.integers(1, 4))
def test_taking_a_nodes_first_free_gpus_leaves_the_rest(taken, name, k) -> None:
    """Placement's usual answer, the first free GPUs of one node (the take's prefix path),
    and then their give: the pool equals the free set recomputed each time."""
    pool = FreeGpus({n.name: tuple(g for g in n.gpu_ids if g not in taken) for n in NODES},
                    GPUS)
    first = pool.by_node[name][:k]
    pool.take(first)
    free = set(range(len(GPUS))) - taken - set(first)
    assert pool.by_node == {n.name: tuple(g for g in n.gpu_ids if g in free) for n in NODES}
    assert pool.count == len(free)
    pool.give(first)
    free |= set(first)
    assert pool.by_node == {n.name: tuple(g for g in n.gpu_ids if g in free) for n in NODES}
    assert pool.count == len(free)
