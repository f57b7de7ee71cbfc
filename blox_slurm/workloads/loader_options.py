"""The options a user may give a trace loader (``--trace-option KEY=VALUE``, a sweep file's
``[trace] options``), checked against what each loader takes.

Declared here, per format, rather than read off the loaders' signatures: a loader also takes
arguments the simulator fills in itself (Gavel's ``throughputs``), which are not the user's to
set, and a list option must be told from a text one to read ``a,b`` from the command line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .schema import WorkloadError

#: Per format: option -> ("list" or "text", what it does). A list is comma-separated text
#: on the command line, a list or such text in a sweep file.
OPTIONS: dict[str, dict[str, tuple[str, str]]] = {
    "gavel": {"reference_type": ("text", "GPU type the durations are measured on (v100)")},
    "philly": {"statuses": ("list", "job statuses kept (Pass,Killed,Failed)")},
    "sacct": {"partition": ("text", "keep only jobs of this partition")},
    "helios": {"states": ("list", "job states kept (default: every state)")},
    "acme": {"states": ("list", "job states kept (default: every state)")},
    "pai": {"statuses": ("list", "job statuses kept (Terminated,Failed)"),
            "fractional": ("text", "ceil (whole GPUs per instance) or filter"),
            "task_table": ("text", "the task table (default: pai_task_table.csv beside it)")},
}


def loader_options(format: str, options: Mapping[str, Any], what: str = "--trace-option"
                   ) -> dict[str, Any]:
    """``options`` as the ``format`` loader's keyword arguments, lists split on commas; an
    option the loader does not take is an error naming those it does (``what`` names the
    setting: ``--trace-option``, or a sweep file's ``[trace] options``)."""
    known = OPTIONS.get(format, {})
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key not in known:
            takes = f"takes {', '.join(known)}" if known else "takes no options"
            raise WorkloadError(f"{what}: format {format} {takes}; got {key!r}")
        kind = known[key][0]
        out[key] = _as_list(value, key, what) if kind == "list" else _as_text(value, key, what)
    return out


def _as_list(value: Any, key: str, what: str) -> list[str]:
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) and v.strip() for v in items):
        raise WorkloadError(f"{what}: {key} must be a comma-separated list of names, "
                            f"got {value!r}")
    return [v.strip() for v in items]


def _as_text(value: Any, key: str, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise WorkloadError(f"{what}: {key} must be a non-empty text, got {value!r}")
    return value


def parse_pairs(pairs: list[str], what: str = "--trace-option") -> dict[str, str]:
    """``KEY=VALUE`` texts from the command line as a mapping; a repeated key is an error."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise WorkloadError(f"{what}: expected KEY=VALUE, got {pair!r}")
        if key.strip() in out:
            raise WorkloadError(f"{what}: {key.strip()} given twice")
        out[key.strip()] = value.strip()
    return out
