"""Workloads: trace loaders and the synthetic generator, all producing one schema.

:func:`load_workload` is the single entry point the CLI and the simulator use; it picks the
loader by ``format`` or by the file's extension. See ``docs/workloads.md`` for every format.
"""

from __future__ import annotations

from collections.abc import Callable
from os import PathLike
from pathlib import Path
from typing import Any

from .acme import load_acme
from .csv_trace import load_csv
from .gavel import load_gavel
from .generator import GeneratorConfig, generate, load_config
from .helios import load_helios
from .loader_options import loader_options
from .pai import load_pai
from .philly import load_philly
from .pollux import load_pollux
from .sacct import load_sacct
from .schema import JobSpec, Workload, WorkloadError


def _synthetic(path: str | PathLike[str], skip_bad_rows: bool = False, **params: Any) -> Workload:
    """A generator config in TOML; ``params`` override its values (e.g. ``seed``)."""
    return generate(load_config(path), **params)


LOADERS: dict[str, Callable[..., Workload]] = {
    "gavel": load_gavel,
    "philly": load_philly,
    "csv": load_csv,
    "sacct": load_sacct,
    "helios": load_helios,
    "pai": load_pai,
    "acme": load_acme,
    "synthetic": _synthetic,
    "pollux": load_pollux,
}
EXTENSIONS = {
    ".trace": "gavel",
    ".json": "philly",
    ".csv": "csv",
    ".sacct": "sacct",
    ".psv": "sacct",
    ".toml": "synthetic",
}


def format_of(path: str | PathLike[str], format: str | None = None) -> str:
    """The loader name for ``path``: ``format``, else by extension (Philly's extension-less
    ``cluster_job_log`` by name)."""
    path = Path(path)
    name = format or EXTENSIONS.get(path.suffix.lower())
    if name is None and path.name.startswith("cluster_job_log"):
        name = "philly"
    if name not in LOADERS:
        exts = ", ".join(f"{e} ({f})" for e, f in EXTENSIONS.items())
        what = f"unknown format {format!r}" if format else f"cannot tell the format of {path}"
        raise WorkloadError(f"{what}; formats: {', '.join(LOADERS)}; extensions: {exts}")
    return name


def load_workload(
    path: str | PathLike[str],
    format: str | None = None,
    skip_bad_rows: bool = False,
    **opts: Any,
) -> Workload:
    """Load ``path`` as ``format`` (default: :func:`format_of`). ``opts`` go to the loader
    (a user's, checked by :func:`loader_options` first)."""
    path = Path(path)
    name = format_of(path, format)
    if not path.exists():
        raise WorkloadError(f"{path}: no such file")
    try:
        return LOADERS[name](path, skip_bad_rows=skip_bad_rows, **opts)
    except UnicodeDecodeError as exc:  # bytes that are not UTF-8 anywhere in the file
        raise WorkloadError(f"{path}: not UTF-8 text: {exc}") from None
    except IsADirectoryError:
        raise WorkloadError(f"{path}: is a directory") from None


__all__ = [
    "GeneratorConfig",
    "JobSpec",
    "LOADERS",
    "Workload",
    "WorkloadError",
    "format_of",
    "generate",
    "load_acme",
    "load_csv",
    "load_gavel",
    "load_helios",
    "load_pai",
    "load_philly",
    "load_pollux",
    "load_sacct",
    "load_workload",
    "loader_options",
]
