"""What a simulation run produces: one record per finished job and a utilization timeline.

Metrics (:mod:`blox_slurm.sim.metrics`) and plots read only these, so any world that can
produce them (the simulator, or the controller's store after an emulator run) gets the same
figures computed the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class JobRecord:
    id: int
    submit_time: float
    num_gpus: int
    duration: float  # isolated run time (see JobSpec.duration)
    first_start: float
    finish: float
    preemptions: int = 0
    gpu_seconds: float = 0.0  # attained service, GPU x time, restart time included
    model: str = ""
    user: str = ""

    @property
    def jct(self) -> float:
        return self.finish - self.submit_time

    @property
    def responsiveness(self) -> float:
        """Time to first start (see ``RunResult.responsiveness_offset`` for Blox's own)."""
        return self.first_start - self.submit_time


@dataclass(frozen=True, slots=True)
class Choice:
    """A round in which the composition asked the world to keep new state: for the policy
    synthesizer, an evaluation (which candidate decides from then on, and every candidate's
    predicted score, ``Decisions.state``). Kept so a run says what a meta-policy chose when,
    not only how it ended."""

    t: float
    composition: str  # the composition that decided the round
    state: tuple[tuple[str, float], ...]


@dataclass(frozen=True, slots=True)
class RunResult:
    """A finished run. ``utilization`` is a step function: ``(time, busy_gpus)`` points, each
    value holding until the next point; ``measured`` is the set of job ids in the window."""

    name: str
    total_gpus: int
    jobs: tuple[JobRecord, ...]
    utilization: tuple[tuple[float, int], ...]
    measured: frozenset[int] | None = None
    unfinished: tuple[int, ...] = ()  # ids still active when the run was cut off
    rounds: int = 0
    decide_calls: int = 0
    wall_seconds: float = 0.0
    params: dict[str, object] = field(default_factory=dict)
    # Seconds added to every job's time to first start: a round under Blox's definition
    # (SimConfig.responsiveness), else 0.
    responsiveness_offset: float = 0.0
    choices: tuple[Choice, ...] = ()  # rounds that set composition state, in time order
