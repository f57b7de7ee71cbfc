"""The policy synthesizer (Blox §5.2): a meta-policy that picks, every few rounds, the candidate
composition whose simulated future looks best.

Every ``every`` rounds it forks the snapshot it is given into the simulator -- running jobs keep
their GPUs and progress, waiting jobs keep their admission and marks -- plays each candidate
forward for ``horizon`` seconds with no new arrivals, and lets the winner decide until the next
evaluation. The objective is the candidates' predicted average JCT over the jobs in the
snapshot, censored at the horizon: a job still active at the end counts as finishing then. Over
a fixed job set that is the time-integral of the number of jobs in the system (Little's law),
so it rewards exactly what a shorter average JCT needs, and it stays comparable between
candidates however few jobs finish within the horizon. The fork starts from the state the
*current* choice produced, so the cost of switching (preempting what the new candidate ranks
lower, restart cost included) is part of every prediction: the synthesizer switches only when
a switch pays within the horizon.

Blox deep-copied its whole state for each candidate and ran it to completion; here a fork is a
snapshot (immutable, shared) and a bounded run of the event-driven simulator, so evaluating nine
candidates over 200 active jobs takes a fraction of a second (``benchmarks/bench_synthesizer.py``).

Durations: the simulator needs each job's isolated run time. Worlds that know it (the simulator,
a ``duration=`` hint) give it; for others the fork assumes a job needs as much again as it has
done so far (at least one round), the usual estimate for heavy-tailed job lengths.

Memory: the choice, when the next evaluation is due and the predicted scores are composition
state the world keeps (``Decisions.state`` -> ``ClusterSnapshot.state``: the simulator in its
world, the controller in its store), so the synthesizer itself holds nothing between rounds,
a restarted controller goes on with its choice, and a new simulation starts afresh.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..core.composition import Composition, CompositionError, RoundChoice, build, read
from ..core.model import ClusterSnapshot, Job
from ..workloads.schema import Workload
from .config import SimConfig
from .records import Choice, RunResult
from .simulator import Simulator

_NO_ARRIVALS = Workload(jobs=(), source="synthesizer fork")
log = logging.getLogger("blox_slurm.sim.synthesizer")


class SynthesizerParams(BaseModel):
    """``[synthesizer]`` in a composition file."""

    model_config = ConfigDict(extra="forbid")
    candidates: list[str | dict[str, Any]] = Field(min_length=2)
    every: int = Field(6, ge=1, description="rounds between evaluations")
    horizon: float = Field(4 * 3600.0, gt=0, description="seconds each candidate is played")
    round_duration: float = Field(300.0, gt=0, description="the world's round length")
    restart_cost: float = Field(30.0, ge=0, description="seconds to restore a checkpoint")
    objective: Literal["avg_jct", "avg_slowdown"] = "avg_jct"


@dataclass(frozen=True, slots=True)
class Prediction:
    """One candidate's simulated future: its score (lower is better) and what it did."""

    name: str
    score: float
    finished: int
    preemptions: int


#: Keys of the state the world keeps for a synthesizer (``ClusterSnapshot.state``).
CHOICE = "synthesizer.choice"  # index of the candidate that decides
DUE = "synthesizer.due"  # when the next evaluation falls due
PREDICTED = "synthesizer.predicted:"  # + candidate name: its score at the last evaluation


@dataclass(frozen=True, eq=False)
class Synthesizer(Composition):
    """A composition that delegates each round to one of ``candidates``.

    Its own policy parts are the first candidate's (what it runs before any evaluation); the
    round engine asks :meth:`for_round` which candidate decides.
    """

    candidates: tuple[Composition, ...] = ()
    params: SynthesizerParams | None = None

    @property
    def time_dependent(self) -> bool:
        return True  # evaluations fall due with time alone

    def for_round(self, snapshot: ClusterSnapshot) -> RoundChoice:
        """The candidate the world's kept state names until its evaluation falls due; then
        every candidate is played forward and the best one decides (the current one on a
        tie: a tie is no reason to switch), with the new state for the world to keep."""
        assert self.params is not None
        now, kept = snapshot.now, snapshot.state
        current = self._kept_choice(kept)
        if current is not None and now < kept.get(DUE, -math.inf):
            return RoundChoice(current)
        predictions = self.predict(snapshot)
        best = min(predictions, key=lambda p: p.score)
        choice = next(c for c in self.candidates if c.name == best.name)
        if current is not None:
            kept_score = next(p.score for p in predictions if p.name == current.name)
            if kept_score <= best.score * (1 + 1e-9):
                choice = current
        due = now + self.params.every * self.params.round_duration - 1e-6
        log.info("%s at t=%.0f: %s decides; predicted %s: %s", self.name, now, choice.name,
                 self.params.objective, ", ".join(f"{p.name} {p.score:.0f}" for p in predictions))
        state = ((CHOICE, float(self.candidates.index(choice))), (DUE, due),
                 *((PREDICTED + p.name, p.score) for p in predictions))
        return RoundChoice(choice, state)

    def _kept_choice(self, kept: Mapping[str, float]) -> Composition | None:
        """The candidate the world kept, if it names one of ours."""
        index = kept.get(CHOICE)
        if index is None or not float(index).is_integer():
            return None
        return self.candidates[int(index)] if 0 <= index < len(self.candidates) else None

    def predict(self, snapshot: ClusterSnapshot) -> list[Prediction]:
        """Every candidate played forward from ``snapshot`` for the horizon."""
        assert self.params is not None
        p = self.params
        now = snapshot.now
        jobs = tuple(_with_duration(j, now, p.round_duration) for j in snapshot.jobs)
        start = replace(snapshot, jobs=jobs, telemetry=(), free=None, pending=None,
                        by_service=None)
        end = now + p.horizon
        cfg = SimConfig(round_duration=p.round_duration, restart_cost=p.restart_cost,
                        max_time=end, stop_when_measured=False)
        cluster = (snapshot.nodes, snapshot.gpus)
        out = []
        for cand in self.candidates:
            result = Simulator(_NO_ARRIVALS, cand, cluster, cfg, snapshot.throughput,
                               start=start).run()
            out.append(Prediction(cand.name, _score(result, jobs, end, p.objective),
                                  len(result.jobs), sum(r.preemptions for r in result.jobs)))
        return out


def evaluations(choices: Sequence[Choice]) -> list[dict[str, Any]]:
    """A run's synthesizer evaluations as records a person reads (``results.json``,
    ``choices.csv``): when, which candidate decides from then on, and every candidate's
    predicted score (lower is better); choices of other compositions are left out."""
    out = []
    for c in choices:
        predicted = {k[len(PREDICTED):]: v for k, v in c.state if k.startswith(PREDICTED)}
        if predicted:
            out.append({"t": c.t, "decides": c.composition, "predicted": predicted})
    return out


def choice_rows(results: Sequence[RunResult]) -> list[dict[str, Any]]:
    """One row per evaluation of every run (``choices.csv``): the run, the time in hours,
    the candidate that decides from then on and each candidate's predicted score."""
    return [{"composition": r.name, "hours": e["t"] / 3600.0, "decides": e["decides"],
             **{f"predicted {name}": score for name, score in e["predicted"].items()}}
            for r in results for e in evaluations(r.choices)]


def choice_summary(result: RunResult) -> str | None:
    """One line on what a synthesizer run chose: how often each candidate decided and when
    it switched; ``None`` for a run without evaluations."""
    evs = evaluations(result.choices)
    if not evs:
        return None
    share = Counter(e["decides"] for e in evs)
    switches = [e for before, e in zip(evs, evs[1:], strict=False)
                if e["decides"] != before["decides"]]
    parts = ", ".join(f"{name} {_percent(n / len(evs))}" for name, n in share.most_common())
    moves = "; ".join(f"{e['t'] / 3600:.1f} h -> {e['decides']}" for e in switches[:5])
    more = f" (+{len(switches) - 5} more)" if len(switches) > 5 else ""
    return (f"{result.name}: {len(evs)} evaluations; decided by {parts}; "
            f"{len(switches)} switches" + (f": {moves}{more}" if switches else ""))


def _percent(x: float) -> str:
    return "<1%" if 0 < x < 0.005 else f"{x:.0%}"


def _with_duration(job: Job, now: float, floor: float) -> Job:
    if job.duration is not None:
        return job
    return replace(job, duration=job.work_done(now) + max(job.work_done(now), floor))


def _score(result: RunResult, jobs: tuple[Job, ...], end: float, objective: str) -> float:
    """Mean JCT (or slowdown) over ``jobs``, a job unfinished at ``end`` counting as done then."""
    if not jobs:
        return 0.0
    finish = {r.id: r.finish for r in result.jobs}
    total = 0.0
    for j in jobs:
        jct = finish.get(j.id, end) - j.submit_time
        total += jct / (j.duration or 1.0) if objective == "avg_slowdown" else jct
    return total / len(jobs)


def build_synthesizer(config: dict[str, Any], name: str | None, base: Path | None) -> Synthesizer:
    """A :class:`Synthesizer` from a composition config with a ``[synthesizer]`` table.

    Candidates are bundled composition names, paths (relative to the file's directory) or
    inline tables; the normalized config inlines them so another process can rebuild it.
    """
    extra = set(config) - {"name", "description", "synthesizer", "simulation", "controller",
                           "workload"}
    if extra:
        raise CompositionError(f"a synthesizer composition has no [{sorted(extra)[0]}] section: "
                               "its candidates carry the policies")
    params = _params(config["synthesizer"])
    candidates = [_candidate(entry, base) for entry in params.candidates]
    names = [c.name for c in candidates]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise CompositionError(f"[synthesizer] candidates must have distinct names; repeated: "
                               f"{', '.join(dup)}")
    first = candidates[0]
    params.candidates = [c.config for c in candidates]
    own_name = str(name or config.get("name") or "synthesizer")
    normalized = {"name": own_name, "synthesizer": params.model_dump()}
    return Synthesizer(
        own_name, first.admission, first.scheduling, first.placement,
        first.preemption, first.cluster, config=normalized,
        candidates=tuple(candidates), params=params)


def _params(table: Any) -> SynthesizerParams:
    try:
        return SynthesizerParams.model_validate(table)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(section)'}: {e['msg']}"
                             for e in exc.errors())
        raise CompositionError(f"[synthesizer]: {problems}") from None


def _candidate(entry: str | dict[str, Any], base: Path | None) -> Composition:
    """One candidate: a bundled name, a file (relative to ``base``) or an inline table."""
    if isinstance(entry, str):
        source = Path(entry)
        if base is not None and source.suffix and not source.is_absolute():
            source = base / source
        path, data = read(source)
        cand_name = data.get("name") or path.stem
    else:
        data, cand_name = entry, entry.get("name")
    if "synthesizer" in data:
        raise CompositionError(f"candidate {cand_name!r} is itself a synthesizer")
    try:
        return build(data, name=cand_name)
    except CompositionError as exc:
        raise CompositionError(f"[synthesizer] candidate {cand_name!r}: {exc}") from None
