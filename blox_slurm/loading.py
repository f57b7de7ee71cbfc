"""Compositions from tables and files, meta-policies included: what every entry point that
takes a user's composition calls (the CLI, the controller's config, experiment workers).

:func:`blox_slurm.core.composition.build` builds a plain composition from its policy sections. A
``[synthesizer]`` table makes a meta-policy instead, which runs the simulator over candidate
compositions, and the simulator runs plain compositions; so the choice between the two lives
here, above both, and nothing below imports this module. (It used to be a lazy import inside
``composition.build``: composition -> synthesizer -> simulator -> round -> composition.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .core import composition
from .core.composition import Composition, read
from .sim.synthesizer import build_synthesizer


def build(config: dict[str, Any], name: str | None = None,
          base: Path | None = None) -> Composition:
    """A composition from a parsed config mapping (a TOML document's tables); ``base``
    resolves a synthesizer's candidate paths relative to its file."""
    if isinstance(config, dict) and "synthesizer" in config:
        return build_synthesizer(config, name, base)
    return composition.build(config, name)


def load(source: str | Path) -> Composition:
    """A composition from a TOML path, or the name of a bundled one (``blox-slurm policies``)."""
    path, data = read(source)
    return build(data, name=data.get("name") or path.stem, base=path.parent)
