"""blox_slurm.core.records.maker: the same objects as the dataclass's own __init__, built on an
unfrozen twin of the class (one derived from another dataclass: through its slots' setters)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType

import pytest

from blox_slurm.core.model import Job, JobState, Move, Start, Stop, make_move, make_start, make_stop
from blox_slurm.core.records import maker, unfrozen
from blox_slurm.slurm.client import GresAlloc
from blox_slurm.slurm.parse import ParsedJob, make_parsed_job
from blox_slurm.slurm.snapshot import JobExtras, make_extras
from blox_slurm.slurm.store import Observed


@dataclass(frozen=True, slots=True)
class _Base:
    a: int
    b: str = "b"


@dataclass(frozen=True, slots=True)
class _Child(_Base):
    c: list[int] = field(default_factory=list)
    d: float | None = None


def _same(x: object, y: object) -> None:
    """Equal, of one class, and field by field the same values."""
    assert type(x) is type(y) and x == y and repr(x) == repr(y)
    for f in dataclasses.fields(x):  # type: ignore[arg-type]
        assert getattr(x, f.name) == getattr(y, f.name)


def test_a_made_object_is_the_one_init_builds_defaults_and_factories_included() -> None:
    make = maker(_Child)
    _same(make(a=1), _Child(1))
    _same(make(a=1, b="x", c=[2], d=0.5), _Child(1, "x", [2], 0.5))
    first, second = make(a=1), make(a=1)
    assert first.c is not second.c  # a new list per object, as the factory gives


def test_a_made_object_is_frozen() -> None:
    for made in (maker(_Child)(a=1), maker(_Base)(a=1)):  # through setters, and a twin
        with pytest.raises(dataclasses.FrozenInstanceError):
            made.a = 2  # type: ignore[misc]


def test_a_class_of_its_own_has_a_twin_a_derived_one_none() -> None:
    assert unfrozen(_Base) is unfrozen(_Base) is not None
    assert unfrozen(_Child) is None
    _same(maker(_Base)(a=1, b="x"), _Base(1, "x"))
    _same(maker(_Base)(a=1), _Base(1))


def test_the_rounds_starts_stops_and_moves_made_equal_those_init_builds() -> None:
    _same(make_start(job_id=1, gpus=(2, 3)), Start(1, (2, 3)))
    _same(make_stop(job_id=1), Stop(1))
    _same(make_stop(job_id=1, for_job=4), Stop(1, 4))
    _same(make_move(job_id=1, gpus=(2,)), Move(1, (2,)))
    _same(make_move(job_id=1, gpus=(2,), for_job=5), Move(1, (2,), 5))
    assert hash(make_move(job_id=1, gpus=(2,))) == hash(Move(1, (2,)))


def test_missing_and_unknown_fields_are_type_errors_as_with_init() -> None:
    make = maker(_Child)
    with pytest.raises(TypeError):
        make(b="x")  # a has no default
    with pytest.raises(TypeError):
        make(a=1, e=2)
    with pytest.raises(TypeError):
        make(1)  # by keyword only: a positional slip would shift every field


def test_classes_a_maker_would_build_wrongly_are_refused() -> None:
    @dataclass(frozen=True)
    class Unslotted:
        a: int

    @dataclass(slots=True)
    class Mutable:
        a: int

    @dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            if self.a < 0:
                raise ValueError(self.a)

    for cls in (Unslotted, Mutable, Checked):
        with pytest.raises(TypeError):
            maker(cls)


def test_the_controllers_records_made_equal_those_init_builds() -> None:
    """Every field of the four classes the controller builds in bulk, non-defaults too."""
    parsed = dict(
        job_id=7, name="train", user="alice", account="ml", partition="blox", state="RUNNING",
        reason="None", priority=5, num_gpus=2, gpu_type="v100", num_nodes=1, nodes=("n1",),
        gpu_alloc=MappingProxyType({"n1": GresAlloc("v100", 2, (0, 1))}), cpus=4,
        memory_mb=1024, submit_time=10.0, start_time=20.0, end_time=None, eligible_time=11.0,
        comment="c", admin_comment="blox:managed", restart_cnt=1, requeue=False,
        req_nodes=("n1",), exc_nodes=("n2",), work_dir="/w", exit_code=3, dependency="",
        array_job_id=5, array_task_id=2, array_tasks="", array_max_tasks=4, gpu_nodes=1)
    _same(make_parsed_job(**parsed), ParsedJob(**parsed))  # type: ignore[arg-type]
    _same(make_parsed_job(job_id=1, name="", user="u", account="", partition="p",
                          state="PENDING", reason="None", priority=0, num_gpus=1),
          ParsedJob(1, "", "u", "", "p", "PENDING", "None", 0, 1))
    extras = dict(attained_base=3.0, work_base=1.5, duration=60.0, admitted=True, model="m",
                  hints={"model": "m"}, preemptions=2, first_start=1.0, last_event=2.0,
                  submit_time=0.5, marks=(("tier", 1.0),))
    _same(make_extras(**extras), JobExtras(**extras))  # type: ignore[arg-type]
    _same(make_extras(), JobExtras())
    _same(JobExtras(**extras).admitted_copy(), JobExtras(**extras))  # type: ignore[arg-type]
    _same(JobExtras().admitted_copy(), dataclasses.replace(JobExtras(), admitted=True))
    job = dict(id=3, submit_time=1.0, num_gpus=2, user="u", account="a", model="m",
               duration=5.0, cpus=2, memory_mb=10, state=JobState.RUNNING, admitted=True,
               gpus=(0, 1), attained_base=1.0, work_base=0.5, run_since=2.0, work_since=2.0,
               rate=0.5, first_start=2.0, last_event=2.0, preemptions=1,
               hints=(("min_gpus", "2"),), marks=(("tier", 1.0),))
    _same(maker(Job)(**job), Job(**job))  # type: ignore[arg-type]
    observed = dict(job_id=1, user="u", partition="p", num_gpus=1, submit_time=1.0,
                    running=True, run_start=2.0, held=False, hints={}, account="a",
                    restarts=1)
    _same(maker(Observed)(**observed), Observed(**observed))  # type: ignore[arg-type]
