"""A tiny Prometheus registry (counters and gauges) rendered in the text exposition format.

Why not ``prometheus_client``: it is one more dependency for two metric types and a text
format of a few lines; the controller needs ``inc``, ``set`` and ``render`` only.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Mapping

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

LabelSet = tuple[tuple[str, str], ...]


def _labels(labels: Mapping[str, str] | None) -> LabelSet:
    items = tuple(sorted((labels or {}).items()))
    for key, _ in items:
        if not _LABEL.match(key) or key.startswith("__"):
            raise ValueError(f"invalid Prometheus label name {key!r}")
    return tuple((k, str(v)) for k, v in items)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if value != int(value) else str(int(value))


class MetricsRegistry:
    """Counters only go up (``inc``), gauges are set (``set``). A name is one kind for its
    lifetime; using it as the other kind is a programming error and raises."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kind: dict[str, str] = {}
        self._help: dict[str, str] = {}
        self._values: dict[str, dict[LabelSet, float]] = {}

    def _series(self, name: str, kind: str, help_text: str) -> dict[LabelSet, float]:
        if not _NAME.match(name):
            raise ValueError(f"invalid Prometheus metric name {name!r}")
        known = self._kind.setdefault(name, kind)
        if known != kind:
            raise ValueError(f"metric {name!r} is a {known}, not a {kind}")
        if help_text:
            self._help[name] = help_text
        return self._values.setdefault(name, {})

    def inc(
        self,
        name: str,
        labels: Mapping[str, str] | None = None,
        value: float = 1.0,
        help: str = "",
    ) -> None:
        if value < 0:
            raise ValueError(f"counter {name!r} cannot decrease (inc by {value})")
        key = _labels(labels)
        with self._lock:
            series = self._series(name, "counter", help)
            series[key] = series.get(key, 0.0) + value

    def set(
        self,
        name: str,
        value: float,
        labels: Mapping[str, str] | None = None,
        help: str = "",
    ) -> None:
        key = _labels(labels)
        with self._lock:
            self._series(name, "gauge", help)[key] = float(value)

    def value(self, name: str, labels: Mapping[str, str] | None = None) -> float | None:
        with self._lock:
            return self._values.get(name, {}).get(_labels(labels))

    def render(self) -> str:
        lines: list[str] = []
        with self._lock:
            for name in sorted(self._values):
                if name in self._help:
                    help_text = self._help[name].replace("\\", "\\\\").replace("\n", "\\n")
                    lines.append(f"# HELP {name} {help_text}")
                lines.append(f"# TYPE {name} {self._kind[name]}")
                for labels, value in sorted(self._values[name].items()):
                    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
                    lines.append(
                        f"{name}{{{inner}}} {_number(value)}"
                        if inner
                        else f"{name} {_number(value)}"
                    )
        return "\n".join(lines) + "\n" if lines else ""
