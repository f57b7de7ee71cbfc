"""How close a genetic algorithm shaped like the Pollux artifact's comes to the policy's exact
dynamic program, on the allocation problems of a real run.

    python benchmarks/pollux_search.py --data ../shared/data/pollux [--cold] [--every 5]

The Pollux policy (``policies/scheduling/pollux.py``) solves each round exactly: a knapsack
over GPU counts {0, 1, 2, 4, whole nodes}. The artifact (``osdi21-artifact`` branch of
petuum/adaptdl, ``simulator/pollux.py``) searches instead with pymoo's NSGA-II: 100
allocations, 100 generations, each allocation a jobs x nodes matrix of replicas, started from
the last round's final population (the current allocation at first); single-point crossover
over the jobs; mutations that reset a job to its current row, thin a job's row, or grow a job
on nodes with free GPUs; a repair that keeps at most one multi-node job per node, a job's
replicas within its cap and nodes within their GPUs. :func:`evolve` is a small
re-implementation of that shape with one objective: the artifact's second, cluster
utility, keeps a Pareto front in its population, but it picks the front's best on the first.

This benchmark runs the workload under the ``pollux`` composition and records, every
``--every``-th round, the problem the policy hands its knapsack (by wrapping ``allocate`` and
``Pollux._values``; the policy is unchanged and allocates as always) and each job's term at
*every* count 0..capacity. Per round it then scores, all on the policy's own terms (the sum
of ``-speedup ** p`` with the restart penalty; a count is scored by its packed speedup, so the
GA's placements are not charged for spreading over nodes): the DP, the GA on the same counts,
the GA on any count, and the DP on any count (exact there too, an upper bound that ignores
fragmentation). A benchmark, not a test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import numpy.typing as npt

from blox_slurm.loading import load
from blox_slurm.policies.scheduling import pollux as policy
from blox_slurm.sim.config import SimConfig
from blox_slurm.sim.experiment import Experiment, WorkloadSpec, run
from blox_slurm.sim.options import sim_table

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
NONE = policy._NONE  # a job's term without GPUs: how the policy counts a starved job


@dataclass(frozen=True)
class Problem:
    """One round's allocation: ``values[j, n]`` is job ``j``'s term on ``n`` GPUs (``-inf``
    where it may not run); ``counts`` are those the policy's DP allows; ``held`` what each job
    holds (the GA's starting allocation); ``ids`` the jobs' ids; ``chosen`` what the policy
    gave each job."""

    values: Floats
    counts: tuple[int, ...]
    held: tuple[int, ...]
    ids: tuple[int, ...] = ()
    chosen: tuple[int, ...] = ()

    @property
    def capacity(self) -> int:
        return self.values.shape[1] - 1

    def restricted(self) -> Floats:
        """The same terms, ``-inf`` outside the DP's counts."""
        out = np.full_like(self.values, -np.inf)
        out[:, list(self.counts)] = self.values[:, list(self.counts)]
        return out


@dataclass(frozen=True)
class GAConfig:
    """The artifact's settings: population and generations of its NSGA-II call, and the
    mutation rates of its operator."""

    population: int = 100
    generations: int = 100
    per_node: int = 4
    reset: float = 0.1  # per job: back to its current row
    thin: float = 0.1  # per job: its row thinned, each cell zeroed with `thin_cell`
    thin_cell: float = 0.1
    seed: int = 0


def solve_dp(values: Floats, counts: Sequence[int]) -> list[int]:
    """The policy's own knapsack on ``values`` restricted to ``counts``."""
    return policy.allocate([list(row[list(counts)]) for row in values], counts,
                           values.shape[1] - 1)


def node_caps(capacity: int, per_node: int) -> Ints:
    """GPUs per node: whole nodes, and a last partial one if the capacity is not a multiple."""
    caps = [per_node] * (capacity // per_node)
    return np.array(caps + ([capacity % per_node] if capacity % per_node else []),
                    dtype=np.int64)


def floors(values: Floats) -> Ints:
    """``floors[j, c]``: the most GPUs up to ``c`` job ``j`` may run on. The repair trims a
    job to it, so every allocation the GA scores is one the values allow."""
    allowed = np.isfinite(values)
    idx = np.where(allowed, np.arange(values.shape[1]), 0)
    return np.maximum.accumulate(idx, axis=1)


def packed(held: Sequence[int], caps: Ints) -> Ints:
    """The current allocation as a jobs x nodes matrix: largest jobs first, first fit, spilling
    over nodes (the simulator's consolidated placement, near enough for a starting point)."""
    state = np.zeros((len(held), len(caps)), dtype=np.int64)
    free = caps.copy()
    for j in sorted(range(len(held)), key=lambda j: -held[j]):
        need = held[j]
        for n in np.argsort(free < need, kind="stable"):
            take = min(need, int(free[n]))
            state[j, n], free[n], need = take, free[n] - take, need - take
    return state


def repair(states: Ints, caps: Ints, floor: Ints) -> Ints:
    """Make a population feasible, in place of the artifact's repair: on each node only the
    first multi-node job keeps its replicas; a node's GPUs go to jobs in order until full;
    each job is trimmed, from its last nodes, to the most GPUs its values allow."""
    spread = (states > 0).sum(axis=2, keepdims=True) > 1
    multi = (states > 0) & spread
    states = np.where(multi & (np.cumsum(multi, axis=1) > 1), 0, states)
    states = np.diff(np.minimum(np.cumsum(states, axis=1), caps), axis=1, prepend=0)
    jobs = np.arange(states.shape[1])
    target = floor[jobs, states.sum(axis=2)]
    return np.diff(np.minimum(np.cumsum(states, axis=2), target[..., None]), axis=2,
                   prepend=0)


def mutate(states: Ints, base: Ints, caps: Ints, cfg: GAConfig,
           rng: np.random.Generator) -> Ints:
    """The artifact's three mutations: a job back to its current row, a job's row thinned,
    and growth: each job takes, on about one node with free GPUs (more likely one it is
    already on), a random number of them."""
    pop, jobs, _ = states.shape
    states = np.where((rng.random((pop, jobs, 1)) < cfg.reset), base, states)
    thin = (rng.random((pop, jobs, 1)) < cfg.thin) & (rng.random(states.shape) < cfg.thin_cell)
    states = np.where(thin, 0, states)
    free = caps - states.sum(axis=1, keepdims=True)  # (pop, 1, nodes)
    room = np.broadcast_to(free > 0, states.shape)
    near = room & (states > 0)
    p_room = room / np.maximum(room.sum(axis=2, keepdims=True), 1)
    p_near = near / np.maximum(near.sum(axis=2, keepdims=True), 1)
    grow = rng.random(states.shape) < p_room + p_near - p_room * p_near
    extra = rng.integers(0, np.maximum(free, 0) + 1, size=states.shape)
    return np.where(grow, states + extra, states)


def crossover(parents: Ints, rng: np.random.Generator) -> Ints:
    """Single-point crossover over the jobs: consecutive parents swap the rows after a random
    job, two children per pair."""
    first, second = parents[0::2], parents[1::2]
    cut = rng.integers(0, parents.shape[1], size=(len(first), 1, 1))
    head = np.arange(parents.shape[1])[None, :, None] < cut
    return np.concatenate([np.where(head, first, second), np.where(head, second, first)])


def tournament(fitness: Floats, size: int, rng: np.random.Generator) -> Ints:
    """Indices of ``size`` parents, each the fitter of two drawn at random."""
    pairs = rng.integers(0, len(fitness), size=(size, 2))
    return np.where(fitness[pairs[:, 0]] >= fitness[pairs[:, 1]], pairs[:, 0], pairs[:, 1])


def scores(states: Ints, values: Floats) -> Floats:
    """Each allocation's objective: the sum of its jobs' terms at their GPU counts."""
    jobs = np.arange(states.shape[1])
    return values[jobs, states.sum(axis=2)].sum(axis=1)


def evolve(values: Floats, held: Sequence[int], cfg: GAConfig,
           seeds: Ints | None = None) -> Ints:
    """The GA's final population on ``values`` (jobs x counts 0..capacity, ``-inf`` where a
    job may not run), fittest first. It starts from the current allocation, the ``seeds``
    (the artifact starts from its last round's population) and mutations of the current
    allocation up to the population size; each generation breeds as many children and keeps
    the fittest of parents and children (NSGA-II's survival with one objective)."""
    rng = np.random.default_rng(cfg.seed)
    caps = node_caps(values.shape[1] - 1, cfg.per_node)
    floor = floors(values)
    base = repair(packed(held, caps)[None], caps, floor)
    start = base if seeds is None else np.concatenate([base, seeds])[:cfg.population]
    fill = np.repeat(base, cfg.population - len(start), axis=0)
    pop = repair(np.concatenate([start, mutate(fill, base, caps, cfg, rng)]), caps, floor)
    fit = scores(pop, values)
    for _ in range(cfg.generations):
        parents = pop[tournament(fit, cfg.population + cfg.population % 2, rng)]
        children = repair(mutate(crossover(parents, rng), base, caps, cfg, rng), caps, floor)
        pop = np.concatenate([pop, children])
        fit = np.concatenate([fit, scores(children, values)])
        keep = np.argsort(-fit, kind="stable")[:cfg.population]
        pop, fit = pop[keep], fit[keep]
    return pop


def genetic(values: Floats, held: Sequence[int], cfg: GAConfig) -> list[int]:
    """GPU counts per job found by the GA started from the current allocation alone."""
    return [int(n) for n in evolve(values, held, cfg)[0].sum(axis=1)]


def carried(pop: Ints, before: Sequence[int], now: Sequence[int]) -> Ints:
    """A population on the jobs ``before`` moved onto the jobs ``now`` (ids): the rows of
    jobs still there, nothing for new ones, as the artifact carries its states over."""
    out = np.zeros((len(pop), len(now), pop.shape[2]), dtype=np.int64)
    index = {job: i for i, job in enumerate(before)}
    for k, job in enumerate(now):
        if job in index:
            out[:, k] = pop[:, index[job]]
    return out


@dataclass
class WarmGA:
    """The GA run round after round as the artifact runs it: each round seeded with the
    previous one's final population (unless ``cold``), on the DP's counts if ``restrict``."""

    cfg: GAConfig
    restrict: bool
    cold: bool = False
    _last: tuple[Ints, tuple[int, ...]] | None = None

    def __call__(self, p: Problem) -> list[int]:
        values = p.restricted() if self.restrict else p.values
        nodes = len(node_caps(p.capacity, self.cfg.per_node))
        seeds = None
        if not self.cold and self._last is not None and self._last[0].shape[2] == nodes:
            seeds = carried(*self._last, p.ids)
        pop = evolve(values, p.held, self.cfg, seeds)
        self._last = (pop, p.ids)
        return [int(n) for n in pop[0].sum(axis=1)]


@dataclass
class Recorder:
    """Keeps every ``every``-th round's problem while the policy runs: wraps the policy's
    value rows (to also take each job's term at every count, on the same model and clock)
    and its knapsack (where a round's rows come together)."""

    every: int
    rounds: int = 0
    problems: list[Problem] = field(default_factory=list)
    _rows: list[list[float]] = field(default_factory=list)
    _held: list[int] = field(default_factory=list)
    _ids: list[int] = field(default_factory=list)

    def values(self, original: Callable[..., list[float]]) -> Callable[..., list[float]]:
        def wrapped(pol: Any, job: Any, counts: Sequence[int], *rest: Any) -> list[float]:
            if self.rounds % self.every == 0:
                every_count = list(range(max(counts) + 1))
                speedup, now, _, *more = rest  # the counts' shapes: here, every count
                self._rows.append(original(pol, job, every_count, speedup, now,
                                           frozenset(every_count), *more))
                self._held.append(len(job.gpus))
                self._ids.append(job.id)
            return original(pol, job, counts, *rest)
        return wrapped

    def allocate(self, original: Callable[..., list[int]]) -> Callable[..., list[int]]:
        def wrapped(values: Sequence[Sequence[float]], counts: Sequence[int],
                    capacity: int) -> list[int]:
            chosen = original(values, counts, capacity)
            if self._rows and capacity == len(self._rows[0]) - 1:
                self.problems.append(Problem(np.array(self._rows), tuple(counts),
                                             tuple(self._held), tuple(self._ids),
                                             tuple(chosen)))
            self.rounds += 1
            self._rows, self._held, self._ids = [], [], []
            return chosen
        return wrapped


def capture(path: Path, every: int, cluster: str = "gpu:4x16") -> list[Problem]:
    """Run ``path`` under the ``pollux`` composition on ``cluster`` (the published one: 16
    nodes of 4 GPUs), keeping every ``every``-th round's problem (those with jobs to size)."""
    rec = Recorder(every)
    exp = Experiment(composition=load("pollux").config, cluster=cluster,
                     sim=SimConfig.model_validate(sim_table("pollux")),
                     workload=WorkloadSpec(path=str(path), format="pollux"))
    with mock.patch.object(policy.Pollux, "_values", rec.values(policy.Pollux._values)), \
            mock.patch.object(policy, "allocate", rec.allocate(policy.allocate)):
        run(exp)
    return rec.problems


def methods(cfg: GAConfig, cold: bool) -> dict[str, Callable[[Problem], list[int]]]:
    """The searches compared, each from a problem to GPU counts per job (the GAs carry their
    population from one problem to the next: give them the rounds in order)."""
    return {
        "DP, policy's counts": lambda p: solve_dp(p.values, p.counts),
        "GA, policy's counts": WarmGA(cfg, restrict=True, cold=cold),
        "GA, any count": WarmGA(cfg, restrict=False, cold=cold),
        "DP, any count": lambda p: solve_dp(p.values, range(p.capacity + 1)),
    }


def standing(values: Floats, chosen: Sequence[int]) -> tuple[int, float]:
    """An allocation as the DP ranks it: jobs left without GPUs (each term ``NONE`` outweighs
    any speedup's), then the sum of the others' inverse (penalized) speedups, lower better."""
    terms = [values[j, n] for j, n in enumerate(chosen)]
    return sum(t <= NONE for t in terms), -sum(t for t in terms if t > NONE)


def gap(found: tuple[int, float], best: tuple[int, float]) -> float:
    """Relative excess of ``found``'s inverse-speedup sum over ``best``'s (0: as good; < 0:
    better); +-inf when it leaves more (fewer) jobs without GPUs."""
    if found[0] != best[0]:
        return float("inf") if found[0] > best[0] else float("-inf")
    return found[1] / best[1] - 1 if best[1] > 0 else 0.0


def contested(p: Problem) -> bool:
    """Whether the capacity binds: the jobs' best counts alone do not all fit."""
    return int(np.argmax(p.restricted(), axis=1).sum()) > p.capacity


Outcome = dict[str, tuple[tuple[int, float], float]]  # per search: its standing, its seconds
# (search, reference): the GA against the exact optimum on the same counts, what any count
# buys the GA and the exact search over the policy's DP.
PAIRS = (("GA, policy's counts", "DP, policy's counts"), ("GA, any count", "DP, any count"),
         ("GA, any count", "DP, policy's counts"), ("DP, any count", "DP, policy's counts"))


def solve_all(problems: Sequence[Problem], cfg: GAConfig, cold: bool) -> list[Outcome]:
    """Every search on every problem, in order: where its allocation stands, its seconds."""
    searches = methods(cfg, cold)
    outcomes = []
    for p in problems:
        found = {}
        for name, search in searches.items():
            start = time.perf_counter()
            chosen = search(p)
            found[name] = (standing(p.values, chosen), time.perf_counter() - start)
        outcomes.append(found)
    return outcomes


def report(title: str, outcomes: Sequence[Outcome]) -> None:
    """Per pair: rounds where the search matches its reference or beats it, the median, 90th
    percentile and worst gap among rounds with as many jobs running, and rounds where it
    leaves more jobs without GPUs; then each search's milliseconds per round."""
    print(f"\n{title}: {len(outcomes)} rounds")
    print(f"{'search':20} {'against':20} {'equal':>5} {'better':>6} {'median':>8} {'p90':>8}"
          f" {'worst':>8} {'starves':>7}")
    for name, ref in PAIRS:
        gaps = [gap(o[name][0], o[ref][0]) for o in outcomes]
        finite = [g for g in gaps if np.isfinite(g)] or [0.0]
        print(f"{name:20} {ref:20} {sum(abs(g) < 1e-9 for g in gaps):5d}"
              f" {sum(g < -1e-9 for g in gaps):6d} {statistics.median(finite):+8.2%}"
              f" {np.percentile(finite, 90):+8.2%} {max(finite):+8.2%}"
              f" {sum(g == float('inf') for g in gaps):7d}")
    print(f"{'search':20} {'median ms':>10} {'p90 ms':>8} {'max ms':>8}")
    for name in outcomes[0] if outcomes else ():
        ms = [1e3 * o[name][1] for o in outcomes]
        print(f"{name:20} {statistics.median(ms):10.2f} {np.percentile(ms, 90):8.2f}"
              f" {max(ms):8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True,
                        help="the artifact's simulator/ directory (workloads/, traces/)")
    parser.add_argument("--workload", default="workloads/workload-6.csv")
    parser.add_argument("--every", type=int, default=1,
                        help="keep every n-th round (default: all of them)")
    parser.add_argument("--population", type=int, default=GAConfig.population)
    parser.add_argument("--generations", type=int, default=GAConfig.generations)
    parser.add_argument("--cold", action="store_true",
                        help="start the GA each round from the current allocation alone")
    args = parser.parse_args()
    start = time.perf_counter()
    problems = capture(args.data / args.workload, args.every)
    jobs = [len(p.held) for p in problems]
    same = sum(tuple(solve_dp(p.values, p.counts)) == p.chosen for p in problems)
    print(f"{len(problems)} rounds kept in {time.perf_counter() - start:.1f} s; jobs per round"
          f" median {statistics.median(jobs):g}, most {max(jobs)}; the DP on the recorded"
          f" terms gives the policy's allocation in {same} of them")
    cfg = GAConfig(population=args.population, generations=args.generations)
    outcomes = solve_all(problems, cfg, args.cold)
    print("gap: the search's sum of inverse (penalized) speedups over its reference's, - 1;"
          " starves: rounds it leaves more jobs without GPUs (no gap counted there)")
    report("all kept rounds", outcomes)
    report("rounds where the capacity binds",
           [o for o, p in zip(outcomes, problems, strict=True) if contested(p)])


if __name__ == "__main__":
    main()
