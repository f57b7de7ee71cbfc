"""What cluster to emulate: node groups, sizes, partitions, auth. Pure values, no processes."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .errors import SpecError

Auth = Literal["none", "munge"]

_GROUP = re.compile(r"^(?P<type>[A-Za-z][A-Za-z0-9_-]*):(?P<gpus>\d+)x(?P<nodes>\d+)$")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class NodeGroup:
    """``count`` nodes with ``gpus_per_node`` GPUs of ``gpu_type`` each."""

    gpu_type: str
    gpus_per_node: int
    count: int


def parse_gpus(text: str) -> tuple[NodeGroup, ...]:
    """Parse ``v100:4x4,k80:4x2`` (type:gpus_per_node x nodes, comma-separated)."""
    groups = []
    for part in text.split(","):
        m = _GROUP.match(part.strip())
        if m is None:
            raise SpecError(
                f"bad GPU group {part.strip()!r}: expected TYPE:GPUSxNODES, e.g. v100:4x4"
            )
        groups.append(NodeGroup(m["type"], int(m["gpus"]), int(m["nodes"])))
    return _validated(tuple(groups))


def _validated(groups: tuple[NodeGroup, ...]) -> tuple[NodeGroup, ...]:
    if not groups:
        raise SpecError("the emulated cluster needs at least one node group")
    for g in groups:
        if g.count < 1:
            raise SpecError(f"group {g.gpu_type}: needs at least one node")
        if not 0 <= g.gpus_per_node <= 64:
            raise SpecError(f"group {g.gpu_type}: GPUs per node must be 0..64")
    return groups


@dataclass(frozen=True)
class EmulatorSpec:
    """Everything ``emulator up`` needs. Both partitions span every node: the managed one is
    where the controller's policy decides, the plain one is the control group it must never
    touch (the same nodes, as on a real site where partitions overlap)."""

    run_dir: Path
    groups: tuple[NodeGroup, ...] = (NodeGroup("gpu", 4, 4),)
    cpus_per_node: int = 8
    memory_mb: int = 32768
    auth: Auth = "none"
    managed_partition: str = "blox"
    plain_partition: str = "plain"
    cluster_name: str = "bloxemu"
    node_prefix: str = "node"
    base_port: int | None = None  # None: pick free ports
    job_submit_lua: Path | None = None  # copied beside slurm.conf; enables JobSubmitPlugins=lua
    extra_conf: tuple[str, ...] = field(default=())  # raw slurm.conf lines, appended last

    def __post_init__(self) -> None:
        _validated(self.groups)
        if self.cpus_per_node < 1 or self.memory_mb < 1:
            raise SpecError("CPUs and memory per node must be positive")
        for name in (self.managed_partition, self.plain_partition, self.cluster_name):
            if not _NAME.match(name):
                raise SpecError(f"bad name {name!r}: letters, digits, '-' and '_' only")
        if self.managed_partition == self.plain_partition:
            raise SpecError("the managed and the plain partition need different names")
        if self.auth not in ("none", "munge"):
            raise SpecError(f"auth must be 'none' or 'munge', not {self.auth!r}")
        if self.base_port is not None and not 1024 <= self.base_port <= 65535 - self.num_nodes:
            raise SpecError(f"base port {self.base_port} out of range")
        if self.job_submit_lua is not None and not self.job_submit_lua.is_file():
            raise SpecError(f"job_submit.lua not found: {self.job_submit_lua}")

    @property
    def num_nodes(self) -> int:
        return sum(g.count for g in self.groups)

    def node_names(self) -> list[str]:
        return [f"{self.node_prefix}{i + 1}" for i in range(self.num_nodes)]

    def nodes_by_group(self) -> list[tuple[NodeGroup, list[str]]]:
        names = iter(self.node_names())
        return [(g, [next(names) for _ in range(g.count)]) for g in self.groups]


def spec_to_dict(spec: EmulatorSpec) -> dict[str, Any]:
    """A JSON-able form, stored in the run directory so ``status``/``down`` know the cluster."""
    return {
        "run_dir": str(spec.run_dir),
        "groups": [[g.gpu_type, g.gpus_per_node, g.count] for g in spec.groups],
        "cpus_per_node": spec.cpus_per_node,
        "memory_mb": spec.memory_mb,
        "auth": spec.auth,
        "managed_partition": spec.managed_partition,
        "plain_partition": spec.plain_partition,
        "cluster_name": spec.cluster_name,
        "node_prefix": spec.node_prefix,
        "base_port": spec.base_port,
        "job_submit_lua": str(spec.job_submit_lua) if spec.job_submit_lua else None,
        "extra_conf": list(spec.extra_conf),
    }


def spec_from_dict(data: Mapping[str, Any]) -> EmulatorSpec:
    lua = data.get("job_submit_lua")
    return EmulatorSpec(
        run_dir=Path(data["run_dir"]),
        groups=tuple(NodeGroup(str(t), int(g), int(n)) for t, g, n in data["groups"]),
        cpus_per_node=int(data["cpus_per_node"]),
        memory_mb=int(data["memory_mb"]),
        auth="munge" if data["auth"] == "munge" else "none",
        managed_partition=str(data["managed_partition"]),
        plain_partition=str(data["plain_partition"]),
        cluster_name=str(data["cluster_name"]),
        node_prefix=str(data["node_prefix"]),
        base_port=data.get("base_port"),
        # The copy beside slurm.conf outlives the original: point at that.
        job_submit_lua=Path(data["run_dir"]) / "job_submit.lua" if lua else None,
        extra_conf=tuple(str(x) for x in data.get("extra_conf") or ()),
    )
