"""What fits where: the filter the round engine applies before every placement, and the
node-count shape placements honour.

The engine hands a placement policy only GPUs on nodes the job can use (:func:`allowed`): of
its GPU types (:func:`required_types`: the type a heterogeneity-aware scheduler such as Gavel
chose for it this round, passed as ``gpu_type``, never written into the job's hints; else the
user's ``gpu_type`` hint, Slurm ``--gres=gpu:v100:2``; else the ``gpu_types`` set a simulated
trace gives a job that makes no progress on some type, ``--unrunnable restrict``), with its
CPUs and memory free where the world counts them. A placement policy then only ranks what
fits.

A job may also be bound to an exact number of nodes: the ``nodes`` hint, set by the Slurm
snapshot for a job that asked for GPUs *per node* (``--gres=gpu:N``; see
:func:`blox_slurm.slurm.snapshot._hints`). Slurm gives such a job its N GPUs on every node it
is pinned to, so it must get ``count / nodes`` GPUs on each of exactly ``nodes`` nodes, never a
spread over more. :func:`required_nodes` reads the hint, :func:`on_fixed_nodes` places such a
job in each policy's own node preference. Simulated jobs carry no such hint.

And a job's GPU count may or may not be the scheduler's to choose (:func:`gpu_range`): a
simulated job takes whatever count its scheduler gives it (Optimus' elastic model), a Slurm
job keeps the count it asked for unless its owner opted in with ``elastic=1`` and bounds;
the snapshot writes either as ``min_gpus``/``max_gpus`` hints and the engine clamps every
scheduler's count into them (:func:`gpu_count`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .abstractions import FreeGpus, FreeView
from .model import ClusterSnapshot, Gpu, GpuId, Job, Node

HINT = "gpu_type"
#: The GPU types a job may use, comma-separated: set only by the simulator for a trace job
#: restricted to the types it makes progress on (a Slurm user's hint is ``gpu_type``, one type).
TYPES = "gpu_types"
NODES = "nodes"
MIN_GPUS, MAX_GPUS = "min_gpus", "max_gpus"

#: Orders candidate nodes: (node position in ``free``, its free GPUs) -> sort key.
NodeKey = Callable[[int, tuple[GpuId, ...]], object]


class Booked:
    """CPUs and memory the round has handed out so far, per node (a round's working copy,
    like its free-GPU pool): the snapshot says what was free when the round began, so
    without this two jobs placed on one node in the same round could overbook it, and the
    second would wait for Slurm's refusal and the controller's start timeout."""

    __slots__ = ("cpus", "memory")

    def __init__(self) -> None:
        self.cpus: dict[str, int] = {}
        self.memory: dict[str, int] = {}

    def add(self, snapshot: ClusterSnapshot, job: Job, gpus: tuple[GpuId, ...]) -> None:
        """``job`` starts on ``gpus``: book its share of CPUs and memory on their nodes."""
        if snapshot.cpus_free is None and snapshot.memory_free is None or not gpus:
            return
        for node, (cpus, memory) in shares(snapshot, job, gpus).items():
            self.cpus[node] = self.cpus.get(node, 0) + cpus
            self.memory[node] = self.memory.get(node, 0) + memory


def shares(snapshot: ClusterSnapshot, job: Job, gpus: tuple[GpuId, ...]
           ) -> dict[str, tuple[int, int]]:
    """(CPUs, memory) ``job`` takes on each node of ``gpus``: an even split over the nodes a
    node-bound job asked for (what Slurm gives it and :func:`per_node_needs` checks); for a
    job that may spread, its CPUs (at least one per node) and memory in proportion to the
    GPUs it has there."""
    per_node: dict[str, int] = {}
    for g in gpus:
        node = snapshot.gpus[g].node
        per_node[node] = per_node.get(node, 0) + 1
    bound = required_nodes(job)
    if bound is not None:
        even = (-(-job.cpus // bound), -(-job.memory_mb // bound))
        return dict.fromkeys(per_node, even)
    n = len(gpus)
    return {node: (max(1, -(-job.cpus * k // n)) if job.cpus > 0 else 0,
                   -(-job.memory_mb * k // n))
            for node, k in per_node.items()}


def allowed(snapshot: ClusterSnapshot, job: Job, free: FreeView,
            gpu_type: str | None = None, booked: Booked | None = None) -> FreeView:
    """``free`` restricted to the nodes the job can use: of ``gpu_type`` (the scheduler's
    choice this round) or else its required GPU type (compared case-insensitively: Slurm
    gres names are lower case, node types may not be), and with its per-node CPUs and memory
    free where the world counts them (:func:`per_node_needs`, less what ``booked`` says this
    round has handed out); ``free`` itself when nothing narrows it. The result is a
    read-only view for placement."""
    want = required_types(job, gpu_type)
    needs = per_node_needs(snapshot, job, booked)
    if want is None and not needs:
        return free
    keep, in_order = (None, ()) if want is None else _of_types(snapshot.nodes, want)
    if not needs and keep is not None:  # the type alone narrows: every placement of Gavel's
        if isinstance(free, FreeGpus):  # the engine's pool: its view, kept in step with it
            view = free.only(in_order)
            return free if len(view.by_node) == len(free.by_node) else view
        pool = free.by_node
        by_node = {name: pool[name] for name in in_order if name in pool}
    else:
        # A node with more free GPUs than the world reported got a victim's GPUs back in
        # this round (a preemption trial): the victim's CPUs and memory come back with them.
        given_back = snapshot.free.by_node if snapshot.free is not None else {}
        by_node = {name: gpus for name, gpus in free.by_node.items()
                   if (keep is None or name in keep)
                   and (all(have.get(name, need) - used.get(name, 0) >= need
                            for have, used, need in needs)
                        or len(gpus) > len(given_back.get(name, gpus)))}
    if len(by_node) == len(free.by_node):
        return free  # nothing narrowed: no copy (this runs in every preemption trial)
    return FreeGpus(by_node, snapshot.gpus)


#: The last node list seen and, per set of types, its nodes of those types: a world keeps one
#: node tuple while its nodes do not change, and a Gavel run asks millions of times (one
#: placement trial each) for the same few answers. One tuple, replaced whole, so a reader
#: never pairs one node list with another's answers.
_TYPED: tuple[tuple[Node, ...], dict[frozenset[str], tuple[frozenset[str], tuple[str, ...]]]]
_TYPED = ((), {})


def nodes_of_types(nodes: tuple[Node, ...], want: frozenset[str]) -> frozenset[str]:
    """The names of ``nodes`` whose GPU type (case-folded) is in ``want``."""
    return _of_types(nodes, want)[0]


def _of_types(nodes: tuple[Node, ...], want: frozenset[str]
              ) -> tuple[frozenset[str], tuple[str, ...]]:
    """:func:`nodes_of_types`, as a set and in the order of ``nodes``."""
    global _TYPED
    seen, memo = _TYPED
    if seen is not nodes:
        memo = {}
        _TYPED = (nodes, memo)
    keep = memo.get(want)
    if keep is None:
        names = tuple(n.name for n in nodes if n.gpu_type.casefold() in want)
        keep = memo[want] = (frozenset(names), names)
    return keep


#: The last GPU list seen and its GPUs' types, case-folded (see ``_TYPED``).
_FOLDED: tuple[tuple[Gpu, ...], list[str]] = ((), [])


def folded_gpu_types(gpus: tuple[Gpu, ...]) -> list[str]:
    """Per GPU id, its type case-folded, as placement compares types: asked every round for
    every running job's GPUs, so kept while the world keeps its GPU tuple."""
    global _FOLDED
    seen, folded = _FOLDED
    if seen is not gpus:
        folded = [g.type.casefold() for g in gpus]
        _FOLDED = (gpus, folded)
    return folded


def on_type(gpus: Sequence[GpuId], type_of: Sequence[str], want: str) -> bool:
    """Whether every GPU of ``gpus`` (not empty) is of type ``want`` in ``type_of`` (per GPU
    id, as :func:`folded_gpu_types` gives). The first GPU alone decides for most jobs (one
    GPU): a Gavel round asks this of every job it picks, and a generator per job cost three
    times that compare."""
    return type_of[gpus[0]] == want and (len(gpus) == 1 or all(type_of[g] == want
                                                                for g in gpus))


#: A single type's set, per type as given: a Gavel round asks for the type it chose at each
#: of its placements, and one set kept per type (its hash kept with it) cost less than a
#: new set each time. As many entries as type names seen.
_ONE_TYPE: dict[str, frozenset[str]] = {}


def required_types(job: Job, gpu_type: str | None = None) -> frozenset[str] | None:
    """The GPU types (case-folded) ``job`` may run on, ``None`` for any: the scheduler's
    choice this round, else the user's single ``gpu_type`` hint, else the simulator's
    ``gpu_types`` set. The one reading of a job's type constraint, for placement and for
    heterogeneity-aware schedulers alike."""
    if not (gpu_type or job.hints):
        return None  # most jobs: asked for every placement and every preemption search
    one = gpu_type or job.hint(HINT)
    if one:
        folded = _ONE_TYPE.get(one)
        if folded is None:
            folded = _ONE_TYPE[one] = frozenset((one.casefold(),))
        return folded
    many = job.hint(TYPES)
    return frozenset(t.casefold() for t in many.split(",")) if many else None


def sim_hints(types: tuple[str, ...], nodes: int | None) -> tuple[tuple[str, str], ...]:
    """A simulated job's hints, sorted as hints are: the GPU types it is restricted to
    (none: any type) and the exact node count it is bound to (``None``: any number, as the
    simulator's jobs were before a trace could say; a Slurm job asking ``--gres=gpu:N`` is
    bound to one node, and the controller's snapshot says so with the same hint)."""
    if not types and nodes is None:
        return ()  # most trace jobs, one per arrival: no list to build and sort
    hints = [(TYPES, ",".join(types))] if types else []
    if nodes is not None:
        hints.append((NODES, str(nodes)))
    return tuple(sorted(hints))


def per_node_needs(snapshot: ClusterSnapshot, job: Job, booked: Booked | None = None
                   ) -> list[tuple[Mapping[str, int], Mapping[str, int], int]]:
    """(free per node, booked per node this round, what the job needs on each node it gets)
    for every resource the world counts and the job asks for: CPUs and memory split evenly
    over its bound node count. A job that may spread needs at least one CPU per node and an
    unknown share of its memory (Slurm's choice), so memory is not checked for it."""
    if snapshot.cpus_free is None and snapshot.memory_free is None:
        return []  # a world that counts neither (the simulator's traces): once per trial
    nodes = required_nodes(job)
    cpus_used = booked.cpus if booked is not None else {}
    memory_used = booked.memory if booked is not None else {}
    out: list[tuple[Mapping[str, int], Mapping[str, int], int]] = []
    if snapshot.cpus_free is not None and job.cpus > 0:
        out.append((snapshot.cpus_free, cpus_used, 1 if nodes is None else -(-job.cpus // nodes)))
    if snapshot.memory_free is not None and job.memory_mb > 0 and nodes is not None:
        out.append((snapshot.memory_free, memory_used, -(-job.memory_mb // nodes)))
    return out


def required_nodes(job: Job) -> int | None:
    """The exact node count the job is bound to (``nodes`` hint), ``None`` when it may span
    any number of nodes. A malformed value (only a world, never a user, sets it) counts as 1:
    the safe reading, which never hands out GPUs on nodes the job did not ask for."""
    value = job.hint(NODES)
    return None if value is None else _positive(value) or 1


def on_fixed_nodes(free: FreeView, nodes: int, count: int,
                   key: NodeKey | None = None) -> tuple[GpuId, ...] | None:
    """``count`` GPUs as ``count / nodes`` on each of ``nodes`` nodes: the first ``nodes``
    nodes with that many free GPUs in ``key`` order (node order when ``None``), the first
    free GPUs of each; ``None`` when fewer nodes have room or ``count`` does not split
    evenly (Slurm's per-node request cannot express an uneven split)."""
    if nodes < 1 or count % nodes:
        return None
    per = count // nodes
    fits = [(i, gpus) for i, gpus in enumerate(free.by_node.values()) if len(gpus) >= per]
    if len(fits) < nodes:
        return None
    if key is not None:
        fits.sort(key=lambda ig: (key(*ig), ig[0]))
    out = [g for _, gpus in fits[:nodes] for g in gpus[:per]]
    return tuple(sorted(out)) if nodes > 1 else tuple(out)


def gpu_range(job: Job) -> tuple[int, int | None]:
    """The GPU counts ``job`` may be given: ``(min_gpus, max_gpus)`` from its hints, 1 and
    ``None`` (no bound) where a hint is absent. A malformed value (only a world sets these)
    reads as the job's request: the safe reading, which resizes nothing."""
    return _count_hint(job, MIN_GPUS) or 1, _count_hint(job, MAX_GPUS)


def _count_hint(job: Job, key: str) -> int | None:
    value = job.hint(key)
    return None if value is None else _positive(value) or job.num_gpus


def _positive(value: str) -> int | None:
    """A hint's whole number above 0, ``None`` for anything else."""
    return int(value) if value.isdigit() and int(value) > 0 else None


def gpu_count(job: Job, asked: int | None) -> int:
    """The GPUs ``job`` gets when its scheduler asks for ``asked`` (``None``: its request),
    within :func:`gpu_range`: a scheduler that does not know a Slurm job's count is fixed
    (Optimus grows any job) cannot resize it, and an elastic job stays within its bounds; a
    job Slurm gives GPUs per node on a fixed node count (``nodes``) gets a multiple of it,
    or it could never be placed."""
    want = job.num_gpus if asked is None else asked
    if not job.hints:  # a simulated job from most traces: nothing bounds it
        return want
    lo, hi = gpu_range(job)
    want = max(lo, want if hi is None else min(want, hi))
    nodes = required_nodes(job)  # the same count on each of its nodes: a multiple of them
    return want if nodes is None or want % nodes == 0 else max(nodes, want - want % nodes)
