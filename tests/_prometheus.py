"""A strict reader of the Prometheus text format (0.0.4) for the tests: every family must open
with its HELP then its TYPE line, and every sample must belong to the family before it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

SAMPLE = re.compile(
    r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{((?:[a-zA-Z_]\w*="(?:[^"\\\n]|\\.)*",?)*)\})? (\S+)$'
)
#: The sample names a family of each type may have, as suffixes of the family's name.
SUFFIXES = {"counter": ("",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count")}

Key = tuple[str, tuple[tuple[str, str], ...]]


@dataclass
class Family:
    help: str
    type: str = ""
    samples: dict[Key, float] = field(default_factory=dict)


def parse(text: str) -> dict[str, Family]:
    """Families by name; an AssertionError on any line out of place."""
    families: dict[str, Family] = {}
    current = ""
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            current, _, help_text = line[len("# HELP "):].partition(" ")
            assert current not in families and help_text.strip(), line
            families[current] = Family(help_text)
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert name == current, f"TYPE {name} without its HELP just before"
            assert not families[name].type and kind in SUFFIXES, line
            families[name].type = kind
            continue
        m = SAMPLE.match(line)
        assert m, f"not exposition format: {line!r}"
        name, labels, value = m.groups()
        family = families.get(current)
        assert family is not None and family.type, f"{name} before any HELP and TYPE"
        assert any(name == current + s for s in SUFFIXES[family.type]), (name, current)
        pairs = tuple(re.findall(r'([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"', labels or ""))
        family.samples[(name, pairs)] = float(value)
    assert all(f.type for f in families.values()), "a HELP without a TYPE"
    return families


def values(families: dict[str, Family]) -> dict[Key, float]:
    """Every sample of every family, by (sample name, labels)."""
    return {k: v for f in families.values() for k, v in f.samples.items()}
