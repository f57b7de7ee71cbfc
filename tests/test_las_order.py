"""LAS's sort, with the attained service written out, against the sort by
:meth:`Job.attained_service` it replaces: the same order for any jobs, ties included."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from blox_slurm.core.model import Job, JobState
from blox_slurm.policies.scheduling.las import by_service

_times = st.floats(0, 1e8, allow_nan=False)


@st.composite
def jobs(draw: st.DrawFn) -> list[Job]:
    out = []
    for jid in draw(st.lists(st.integers(0, 10**6), unique=True, max_size=80)):
        # Few distinct values, so equal services and equal submit times are common.
        base = draw(st.sampled_from([0.0, 300.0, 1e-9, 4e5]) | _times)
        submit = draw(st.sampled_from([0.0, 60.0]) | _times)
        if draw(st.booleans()):
            gpus = tuple(range(draw(st.integers(1, 8))))
            since = draw(st.sampled_from([0.0, 5e7, 1e8 + 1]) | _times)
            out.append(Job(jid, submit, len(gpus), state=JobState.RUNNING, gpus=gpus,
                           run_since=since, attained_base=base))
        else:
            out.append(Job(jid, submit, 1, attained_base=base))
    return out


@settings(max_examples=400, deadline=None)
@given(jobs(), st.sampled_from([0.0, 1e8]) | _times)
def test_the_sort_is_the_one_by_attained_service(js: list[Job], now: float) -> None:
    plain = sorted(js, key=lambda j: (j.attained_service(now), j.submit_time, j.id))
    assert [j.id for j in by_service(js, now)] == [j.id for j in plain]
