"""The job record rebuild every state change goes through (``transitions._evolve``, slots
written by a generated function on an unfrozen twin made a ``Job``) against
``dataclasses.replace``: the same record, as frozen, for any fields changed."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blox_slurm.core import transitions
from blox_slurm.core.model import Job, JobState

_FIELDS = [f.name for f in dataclasses.fields(Job)]


# No deadline: the first example compiles the rebuild functions, slow on a loaded machine
# (it failed once so); the assertion is about records, not time.
@settings(deadline=None)
@given(st.dictionaries(st.sampled_from(_FIELDS), st.integers() | st.none() | st.text()),
       st.integers(0, 10**6))
def test_evolve_is_dataclasses_replace(changes: dict[str, object], jid: int) -> None:
    job = Job(jid, 1.5, 2, user="u", state=JobState.RUNNING, gpus=(3, 4), run_since=9.0,
              hints=(("k", "v"),), marks=(("m", 1.0),))
    got, want = transitions._evolve(job, **changes), dataclasses.replace(job, **changes)
    assert [getattr(got, f) for f in _FIELDS] == [getattr(want, f) for f in _FIELDS]
    assert type(got) is Job and got is not job
    assert got == want and hash(got) == hash(want)
    with pytest.raises(dataclasses.FrozenInstanceError):  # built unfrozen, frozen once made
        got.rate = 3.0  # type: ignore[misc]


def test_evolve_refuses_a_field_job_does_not_have() -> None:
    with pytest.raises(TypeError, match="no field"):
        transitions._evolve(Job(1, 0.0, 1), rate=2.0, speed=2.0)


_TIMES = st.floats(0, 1e6, allow_nan=False)


@settings(deadline=None)
@given(st.integers(0, 3), st.none() | _TIMES, _TIMES, _TIMES, _TIMES, _TIMES)
def test_start_and_preempt_set_the_fields_replace_would(
        preemptions: int, first: float | None, t: float, latency: float, launch: float,
        cost: float) -> None:
    # start and preempt write their fields positionally (compiled once): the same records
    # as dataclasses.replace with the fields by name.
    job = Job(7, 1.5, 2, user="u", preemptions=preemptions, first_start=first,
              attained_base=3.0, work_base=4.0, hints=(("k", "v"),), marks=(("m", 1.0),))
    begun = t + latency
    started = transitions.start(job, (3, 4), t, 2.5, cost, latency, launch)
    assert started == dataclasses.replace(
        job, state=JobState.RUNNING, admitted=True, gpus=(3, 4), run_since=begun,
        work_since=begun + launch + (cost if preemptions else 0.0), rate=2.5, last_event=t,
        first_start=begun if first is None else first)
    later = begun + launch
    assert transitions.preempt(started, later, 1.0) == dataclasses.replace(
        started, state=JobState.PENDING, gpus=(), attained_base=started.attained_service(
            later + 1.0), work_base=started.work_done(later), run_since=None,
        work_since=None, rate=1.0, preemptions=preemptions + 1, last_event=later)
