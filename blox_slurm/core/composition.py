"""A composition: one policy per extension point, built from a TOML file.

    name = "tiresias-consolidated"
    [scheduling]
    policy = "tiresias"
    thresholds = [3600, 36000]
    [placement]
    policy = "consolidated"
    [admission]
    policy = "load_based"
    k = 1.2

Sections other than ``scheduling`` are optional (defaults below). Every section's remaining
keys are the policy's parameters, validated by that policy's own pydantic model, so a typo is
an error naming the section, the key and the valid keys, never a silently ignored setting.
The same file drives the simulator and the controller; other top-level tables (e.g.
``[simulation]``, ``[controller]``) belong to those worlds and are ignored here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import ValidationError

from . import registry
from .abstractions import (
    AdmissionPolicy,
    ClusterManager,
    PlacementPolicy,
    PreemptionPolicy,
    SchedulingPolicy,
)
from .model import ClusterSnapshot
from .tomlfile import read_toml

DEFAULTS: dict[str, str] = {
    "admission": "accept_all",
    "placement": "first_fit",
    "preemption": "priority",
    "cluster": "static",
}
# Top-level keys that belong to other tools reading the same file.
OTHER_TABLES = {"name", "description", "simulation", "controller", "workload"}
BUNDLED_DIR = Path(__file__).parents[1] / "data" / "compositions"


class CompositionError(ValueError):
    """A composition config that cannot be built; the message says what to change."""


@dataclass(frozen=True)
class Composition:
    name: str
    admission: AdmissionPolicy
    scheduling: SchedulingPolicy
    placement: PlacementPolicy
    preemption: PreemptionPolicy
    cluster: ClusterManager
    # The validated config, so a composition can be rebuilt in another process.
    config: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def time_dependent(self) -> bool:
        return self.scheduling.time_dependent

    def for_round(self, snapshot: ClusterSnapshot) -> RoundChoice:
        """The composition that decides this round: itself, except for a meta-policy (the
        synthesizer) that delegates to one of its candidates and says, in the choice's
        ``state``, what the world must keep for it (``ClusterSnapshot.state`` next round)."""
        return RoundChoice(self)


class RoundChoice(NamedTuple):
    """Who decides this round, and the composition state the world is to keep."""

    composition: Composition
    state: tuple[tuple[str, float], ...] = ()


def _format_validation(section: str, policy: str, exc: ValidationError, valid: list[str]) -> str:
    lines = [f"[{section}] policy {policy!r}: invalid parameters"]
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(section)"
        if err["type"] == "extra_forbidden":
            lines.append(f"  unknown key {loc!r}; valid keys: {', '.join(valid) or '(none)'}")
        else:
            lines.append(f"  {loc}: {err['msg']} (got {err.get('input')!r})")
    return "\n".join(lines)


def build(config: dict[str, Any], name: str | None = None) -> Composition:
    """Build a plain composition from a parsed config mapping (a TOML document's tables).
    A ``[synthesizer]`` table is a meta-policy: :func:`blox_slurm.loading.build` builds
    both kinds."""
    if not isinstance(config, dict):
        raise CompositionError("a composition must be a table of sections")
    if "synthesizer" in config:
        raise CompositionError("a [synthesizer] composition is a meta-policy: build it with "
                               "blox_slurm.loading.build")
    unknown = set(config) - set(registry.KINDS) - OTHER_TABLES
    if unknown:
        raise CompositionError(
            f"unknown section(s) {', '.join(sorted(unknown))}; sections: "
            f"{', '.join(registry.KINDS)} (and {', '.join(sorted(OTHER_TABLES))})")
    if "scheduling" not in config:
        raise CompositionError("missing [scheduling] section (e.g. policy = \"fifo\")")
    parts: dict[str, Any] = {}
    normalized: dict[str, Any] = {"name": name or config.get("name") or ""}
    for kind in registry.KINDS:
        section = config.get(kind, {"policy": DEFAULTS.get(kind)})
        if isinstance(section, str):  # shorthand: scheduling = "fifo"
            section = {"policy": section}
        if not isinstance(section, dict):
            raise CompositionError(f"[{kind}] must be a table or a policy name")
        params = dict(section)
        policy = params.pop("policy", DEFAULTS.get(kind))
        if not isinstance(policy, str):
            raise CompositionError(f"[{kind}] needs policy = \"<name>\"")
        try:
            spec = registry.get(kind, policy)
            parts[kind] = spec.build(params)
        except registry.PolicyError as exc:
            raise CompositionError(str(exc)) from None
        except ValidationError as exc:
            valid = list(spec.params.model_fields)
            raise CompositionError(_format_validation(kind, policy, exc, valid)) from None
        normalized[kind] = {"policy": policy, **params}
    if not normalized["name"]:
        normalized["name"] = normalized["scheduling"]["policy"]
    return Composition(normalized["name"], config=normalized, **parts)


def read(source: str | Path) -> tuple[Path, dict[str, Any]]:
    """The parsed TOML of a composition path, or of a bundled one named ``source``."""
    path = Path(source)
    if not path.exists() and not path.suffix:
        bundled = BUNDLED_DIR / f"{source}.toml"
        if not bundled.exists():
            names = ", ".join(bundled_names())
            raise CompositionError(f"no composition file or bundled composition {str(source)!r};"
                                   f" bundled: {names}")
        path = bundled
    return path, read_toml(path, CompositionError, "composition file")


def bundled_names() -> list[str]:
    return sorted(p.stem for p in BUNDLED_DIR.glob("*.toml"))
