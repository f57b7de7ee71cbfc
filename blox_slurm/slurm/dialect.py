"""What differs between the Slurm versions blox-slurm supports, in one place.

A :class:`Dialect` is read from the ``meta`` block every ``--json`` output carries, so the
backend reads each version by what its own output says (its release and its data_parser), never
by guessing from a missing key. Everything version-specific the CLI backend does is a property
here; the parsers accept every supported shape of a record.

Supported and tested in CI: 22.05 (Debian 12), 24.11 (Debian 13), 26.05 (Debian sid).

==========================  =====================  ===================================
                            22.05 (openapi v0.0.38) 23.02+ (data_parser v0.0.39 and later)
==========================  =====================  ===================================
version in ``meta``         ``meta.Slurm.release``  ``meta.slurm.release``
the node list               ``sinfo --json`` has    ``sinfo --json`` has a ``sinfo`` list
                            ``nodes``               (alike nodes grouped, per partition);
                                                    ``scontrol show nodes --json`` has
                                                    ``nodes``: that is what we read
node ``state``              base state, lower case, list of upper-case words, base state
                            flags in ``state_flags`` and flags together (``["IDLE","DRAIN"]``)
node ``features``           comma-separated string  list
numbers                     plain                   sometimes ``{"set","infinite","number"}``
``squeue --json``           all jobs, ``--states``  the queued jobs unless ``--states=all``
                            ignored                 (which we pass: ended jobs matter)
job fields                  the same on every supported version (numbers as above)
==========================  =====================  ===================================

Verbs (``hold``, ``release``, ``requeue``, ``requeuehold``, ``update ... StartTime=now+2``,
``ReqNodeList``) behave alike on all three for what the controller relies on; what differs is
documented in ``docs/admin-guide.md`` ("Supported Slurm versions").
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .client import SlurmError

#: The Slurm release series CI runs every live test on (keep in step with `.ci/run`).
TESTED_SERIES = ("22.05", "24.11", "26.05")

#: The oldest release whose ``scontrol show nodes`` speaks JSON (data_parser v0.0.39).
_SCONTROL_JSON = (23, 2)

#: The first release whose ``squeue --json`` applies squeue's filters (data_parser).
_JSON_FILTERS = (23, 2)
#: The oldest supported release without ``squeue --array-unique``.
_NO_ARRAY_UNIQUE = (24, 11)
#: The oldest supported release whose ``squeue -O`` has ``ExcNodes``.
_EXC_NODES = (24, 11)

_PARSER = re.compile(r"v(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True, slots=True)
class Dialect:
    """The Slurm a ``--json`` output came from: ``release`` (``24.11.5``) and ``data_parser``
    (``v0.0.42``; 22.05's openapi plugin ``v0.0.38``)."""

    release: str
    data_parser: str

    @property
    def major_minor(self) -> tuple[int, int]:
        major, minor, *_ = (int(p) for p in self.release.split("."))
        return major, minor

    @property
    def series(self) -> str:
        """``24.11`` (as the release spells it: 22.05, not 22.5)."""
        return ".".join(self.release.split(".")[:2])

    @property
    def node_argv(self) -> list[str]:
        """The one call that lists every node once, with its GPUs in use. From 23.02 on
        ``sinfo --json`` groups alike nodes per partition (64 idle nodes: 2 entries on
        26.05), so it is no per-node list; ``scontrol show nodes --json`` is (17.5 ms for 64
        nodes on 26.05 vs 11.3 ms for the grouped sinfo; ``benchmarks/bench_node_read.py``)."""
        if self.major_minor >= _SCONTROL_JSON:
            return ["scontrol", "show", "nodes", "--json"]
        return ["sinfo", "--json"]

    @property
    def json_filters(self) -> bool:
        """Whether ``squeue --json`` honours ``--partition``, ``--states`` and ``--jobs``
        (22.05 prints every job whatever it is given; checked live on every version by
        tests/slurm/test_queue_read_live.py)."""
        return self.major_minor >= _JSON_FILTERS

    @property
    def plain_exc_nodes(self) -> bool:
        """Whether ``squeue -O`` can print excluded nodes (``ExcNodes``: not in 22.05's,
        which only ``-o %x`` prints; present in 24.11's and 26.05's)."""
        return self.major_minor >= _EXC_NODES

    @property
    def plain_squeue(self) -> list[str]:
        """The plain queue read (its format comes from the environment: see
        :mod:`~.squeue_plain`), one line per job record: plain squeue folds an array's
        waiting tasks into one line, split ones too. 22.05's ``--array-unique`` prints each
        record once; later releases dropped it, and their ``-r`` prints an array's own
        record once per waiting task (:mod:`~.queue_read` puts it back together)."""
        lines = ["-r"] if self.major_minor >= _NO_ARRAY_UNIQUE else ["--array-unique"]
        return ["squeue", "-h", "--noconvert", *lines, "--states=all"]

    @property
    def steady_reads(self) -> int:
        """Slurm calls of a controller round in which nothing new started: the node list and
        the queue, plus 22.05's excluded-nodes read (:mod:`~.queue_read`)."""
        return 2 if self.plain_exc_nodes else 3

    def json_argv(self, ids: Sequence[int] | None = None) -> list[str]:
        """The ``--json`` read that lists every job, or at least ``ids``: only those where
        Slurm honours ``--jobs``, else the whole queue."""
        where = [f"--jobs={','.join(str(i) for i in ids)}"] if (
            ids is not None and self.json_filters) else []
        return ["squeue", "--json", "--states=all", *where]

    def __str__(self) -> str:
        return f"Slurm {self.release} (data_parser {self.data_parser})"


def dialect_of(data: Mapping[str, Any], argv: Sequence[str]) -> Dialect:
    """The dialect named in a ``--json`` output's ``meta``; a :class:`SlurmError` naming the
    command when ``meta`` does not say (an output we cannot read by what it says)."""
    meta = data.get("meta")
    if not isinstance(meta, Mapping):
        raise SlurmError(f"`{' '.join(argv)}` printed JSON without a `meta` block", argv)
    slurm = meta.get("slurm") or meta.get("Slurm")  # 22.05 capitalises it
    plugin = meta.get("plugin")
    release = slurm.get("release") if isinstance(slurm, Mapping) else None
    parser = ""
    if isinstance(plugin, Mapping):
        parser = str(plugin.get("data_parser") or plugin.get("type") or "")
    found = _PARSER.search(parser)
    if not isinstance(release, str) or not re.match(r"^\d+\.\d+", release) or found is None:
        raise SlurmError(
            f"`{' '.join(argv)}`: `meta` names no Slurm release and data_parser "
            f"(meta.slurm.release={release!r}, meta.plugin={plugin!r})", argv)
    return Dialect(release, found.group(0))
