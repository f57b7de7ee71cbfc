"""Named policies: the built-ins, the ``blox_slurm.policies`` entry-point group, and files.

A policy is a class with a ``Params`` pydantic model (its TOML parameters) and an
``__init__(self, params)``; it registers itself with :func:`register`. The registry is what
turns ``policy = "tiresias"`` in a config into an object, and what produces the error listing
valid names when a config is wrong.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import pkgutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

KINDS = ("admission", "scheduling", "placement", "preemption", "cluster")
ENTRY_POINT_GROUP = "blox_slurm.policies"


class PolicyError(ValueError):
    """A policy name or policy file that cannot be resolved."""


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class PolicySpec:
    kind: str
    name: str
    factory: type
    params: type[BaseModel]

    @property
    def summary(self) -> str:
        """The docstring's first paragraph, on one line."""
        doc = (self.factory.__doc__ or "").strip()
        return " ".join(doc.split("\n\n")[0].split())

    def build(self, params: dict[str, Any]) -> Any:
        return self.factory(self.params.model_validate(params))


_REGISTRY: dict[str, dict[str, PolicySpec]] = {k: {} for k in KINDS}
#: Capabilities a policy of a kind must declare (see blox_slurm.core.abstractions): the engine
#: reads them, never guesses a default for an attribute that is not there.
DECLARED = {"scheduling": ("time_dependent", "keyed"),
            "preemption": ("backfill", "spares_victims")}
_loaded = False

C = TypeVar("C", bound=type)


def register(kind: str, name: str) -> Callable[[C], C]:
    """Class decorator: make a policy available under ``name`` for extension point ``kind``."""
    if kind not in KINDS:
        raise PolicyError(f"unknown policy kind {kind!r}; kinds are: {', '.join(KINDS)}")

    def wrap(cls: C) -> C:
        missing = [a for a in DECLARED.get(kind, ()) if not hasattr(cls, a)]
        if missing:
            base = "SchedulingBase" if kind == "scheduling" else "PreemptionBase"
            raise PolicyError(f"{kind} policy {name!r} ({cls.__qualname__}) does not declare "
                              f"{', '.join(missing)}: subclass blox_slurm.core.abstractions.{base} "
                              "for the defaults, or set them as class attributes")
        params = getattr(cls, "Params", NoParams)
        existing = _REGISTRY[kind].get(name)
        if existing is not None and existing.factory is not cls:
            # Re-loading the same file (e.g. --policy-path twice: same module name, same
            # class) is harmless; a clash is not, even between classes of the same name.
            same = (existing.factory.__module__, existing.factory.__qualname__) == (
                cls.__module__, cls.__qualname__)
            if not same:
                raise PolicyError(f"{kind} policy {name!r} is already registered by "
                                  f"{existing.factory.__module__}.{existing.factory.__qualname__}")
        _REGISTRY[kind][name] = PolicySpec(kind, name, cls, params)
        cls.policy_name = name  # type: ignore[attr-defined]
        return cls

    return wrap


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    import blox_slurm.policies as policies

    for info in pkgutil.walk_packages(policies.__path__, prefix="blox_slurm.policies."):
        importlib.import_module(info.name)
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as exc:  # a broken third-party plugin must not hide the built-ins
            print(f"warning: policy entry point {ep.name!r} failed to load: {exc}",
                  file=sys.stderr)


def load_policy_file(path: str | Path) -> None:
    """Import a researcher's policy file (``--policy-path``); its ``@register`` calls run."""
    p = Path(path)
    if not p.is_file():
        raise PolicyError(f"policy file not found: {p}")
    mod_name = f"blox_slurm_user_policy_{abs(hash(p.resolve()))}"
    spec = importlib.util.spec_from_file_location(mod_name, p)
    if spec is None or spec.loader is None:
        raise PolicyError(f"cannot import policy file {p}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[mod_name]
        raise PolicyError(f"policy file {p} failed to import: {exc}") from exc


def _load_builtin(kind: str, name: str) -> None:
    """Import the one built-in module that would register ``name``: a built-in policy lives
    in ``blox_slurm/policies/<kind>/<name>.py``. A run then imports the handful of policies
    its composition names, not all 21 (30-50 ms, a tenth of a Figure-6 run as a whole
    process); any other name falls back to loading everything."""
    if not name.isidentifier():
        return
    module = f"blox_slurm.policies.{kind}.{name}"
    if module not in sys.modules and importlib.util.find_spec(module) is not None:
        importlib.import_module(module)


def get(kind: str, name: str) -> PolicySpec:
    if kind not in KINDS:
        raise PolicyError(f"unknown policy kind {kind!r}; kinds are: {', '.join(KINDS)}")
    _load_builtin(kind, name)
    if name not in _REGISTRY[kind]:
        _load_builtins()  # an entry point's policy, or the list of valid names for the error
    try:
        return _REGISTRY[kind][name]
    except KeyError:
        valid = ", ".join(sorted(_REGISTRY[kind])) or "(none)"
        raise PolicyError(f"unknown {kind} policy {name!r}; valid {kind} policies: {valid}") \
            from None


def available(kind: str | None = None) -> list[PolicySpec]:
    _load_builtins()
    kinds = KINDS if kind is None else (kind,)
    return [spec for k in kinds for _, spec in sorted(_REGISTRY[k].items())]
