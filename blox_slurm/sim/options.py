"""What the command line and a sweep file both say about a run, read one way for both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.composition import CompositionError, read


def measure_window(measure: str | None, jobs: int, what: str = "measure"
                   ) -> tuple[int, int] | None:
    """The measured job-id window: ``FIRST:END``, ``all`` (None: every job), or Blox's
    default (jobs 3000-4000 once there are that many, so warm-up and drain are left out);
    ``what`` names the setting in the error (``--measure``, or a sweep file's ``measure``)."""
    if measure is None:
        return (3000, 4000) if jobs >= 4000 else None
    if measure == "all":
        return None
    try:
        lo, hi = (int(x) for x in measure.split(":"))
    except ValueError:
        raise ValueError(f"{what} must be FIRST:END or 'all', got {measure!r}") from None
    return (lo, hi)


def sim_table(source: str | Path) -> dict[str, Any]:
    """The ``[simulation]`` table of a composition file (bundled or path), if any."""
    path, data = read(source)
    table = data.get("simulation", {})
    if not isinstance(table, dict):
        raise CompositionError(f"{path}: [simulation] must be a table")
    return table
