"""priority_search chooses exactly the victims priority chooses, for placements that fit at
least as well with more free GPUs (hypothesis), with fewer placement trials."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from blox_slurm.core.abstractions import FreeGpus, FreeView
from blox_slurm.core.model import Job, JobState, build_cluster
from blox_slurm.policies.preemption.priority import PriorityPreemption
from blox_slurm.policies.preemption.priority_search import PrioritySearchPreemption


@st.composite
def cases(draw):
    per_node = draw(st.lists(st.integers(1, 4), min_size=1, max_size=6))
    _, gpus = build_cluster([("gpu", n, 1) for n in per_node])
    owner = [draw(st.integers(-1, 7)) for _ in gpus]  # -1: free, else a running job's id
    by_node: dict[str, tuple[int, ...]] = {}
    for g in gpus:
        by_node.setdefault(g.node, ())
        if owner[g.id] < 0:
            by_node[g.node] += (g.id,)
    jobs = [Job(jid, 0.0, len(held), state=JobState.RUNNING, gpus=held)
            for jid in range(8) if (held := tuple(g for g in range(len(gpus)) if owner[g] == jid))]
    order = draw(st.permutations(jobs))
    count = draw(st.integers(1, len(gpus)))
    nodes = sorted(by_node)
    allowed = set(draw(st.lists(st.sampled_from(nodes), min_size=1, unique=True)))
    one_node = draw(st.booleans())
    return FreeGpus(by_node, gpus), list(order), count, allowed, one_node


@settings(max_examples=400, deadline=None)
@given(cases(), st.booleans())
def test_same_victims_as_priority_with_fewer_trials(case, minimize: bool) -> None:
    free, candidates, count, allowed, one_node = case
    calls = {"slow": 0, "fast": 0}

    def fits_for(key: str):
        def fits(trial: FreeView) -> bool:  # consolidated or spread, on the allowed nodes
            calls[key] += 1
            sizes = [len(g) for n, g in trial.by_node.items() if n in allowed]
            return max(sizes, default=0) >= count if one_node else sum(sizes) >= count
        return fits

    job = Job(99, 0.0, count)
    slow = PriorityPreemption(PriorityPreemption.Params(minimize=minimize))
    fast = PrioritySearchPreemption(PrioritySearchPreemption.Params(minimize=minimize))
    expected = slow.victims(job, candidates, free, count, fits_for("slow"))
    got = fast.victims(job, candidates, free, count, fits_for("fast"))
    assert [v.id for v in got] == [v.id for v in expected]
    if len(candidates) >= 8 and calls["slow"] >= 8:
        assert calls["fast"] <= calls["slow"]
