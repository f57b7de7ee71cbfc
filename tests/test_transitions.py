"""The job record rebuild every state change goes through (``transitions._evolve``, slots
written by a generated function) against ``dataclasses.replace``: the same record for any
fields changed."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blox_slurm.core import transitions
from blox_slurm.core.model import Job, JobState

_FIELDS = [f.name for f in dataclasses.fields(Job)]


@given(st.dictionaries(st.sampled_from(_FIELDS), st.integers() | st.none() | st.text()),
       st.integers(0, 10**6))
def test_evolve_is_dataclasses_replace(changes: dict[str, object], jid: int) -> None:
    job = Job(jid, 1.5, 2, user="u", state=JobState.RUNNING, gpus=(3, 4), run_since=9.0,
              hints=(("k", "v"),), marks=(("m", 1.0),))
    got, want = transitions._evolve(job, **changes), dataclasses.replace(job, **changes)
    assert [getattr(got, f) for f in _FIELDS] == [getattr(want, f) for f in _FIELDS]
    assert type(got) is Job and got is not job


def test_evolve_refuses_a_field_job_does_not_have() -> None:
    with pytest.raises(TypeError, match="no field"):
        transitions._evolve(Job(1, 0.0, 1), rate=2.0, speed=2.0)
