"""Workloads: trace loaders and the synthetic generator, all producing one schema.

:func:`load_workload` is the single entry point the CLI and the simulator use; it picks the
loader by ``format`` or by the file's extension. See ``docs/workloads.md`` for every format.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from .generator import GeneratorConfig, generate, load_config
from .loader_options import loader_options
from .schema import JobSpec, Workload, WorkloadError


def _synthetic(path: str | PathLike[str], skip_bad_rows: bool = False, **params: Any) -> Workload:
    """A generator config in TOML; ``params`` override its values (e.g. ``seed``)."""
    return generate(load_config(path), **params)


class _Loaders(Mapping[str, Callable[..., Workload]]):
    """Format name -> loader, each imported when first asked for: a run reads one format,
    and some loaders bring heavy modules (Pollux's model imports NumPy), which every
    ``blox-slurm simulate`` paid at start-up before."""

    def __init__(self, where: dict[str, str]) -> None:
        self._where = where  # name -> "module:function", module relative to this package

    def __getitem__(self, name: str) -> Callable[..., Workload]:
        module, _, attr = self._where[name].partition(":")
        loader: Callable[..., Workload] = getattr(
            importlib.import_module(module, __name__), attr)
        return loader

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


LOADERS = _Loaders({
    "gavel": ".gavel:load_gavel",
    "philly": ".philly:load_philly",
    "csv": ".csv_trace:load_csv",
    "sacct": ".sacct:load_sacct",
    "helios": ".helios:load_helios",
    "pai": ".pai:load_pai",
    "acme": ".acme:load_acme",
    "synthetic": f"{__name__}:_synthetic",
    "pollux": ".pollux:load_pollux",
})
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
    if name is None or name not in LOADERS:
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


def __getattr__(name: str) -> Callable[..., Workload]:
    """``load_gavel`` and the other loaders by name, imported on first use (see LOADERS)."""
    if name.startswith("load_") and name[5:] in LOADERS:
        return LOADERS[name[5:]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
