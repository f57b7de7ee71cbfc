"""How a composition is drawn, the same in every figure of a run or a sweep.

Colour and line style both vary, so compositions that behave identically (any policy on an
underloaded cluster) show as overlapping dashes instead of one line hiding another; past ten
compositions the colours continue with tab20's light shades instead of repeating.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

LINES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P")


@dataclass(frozen=True)
class Style:
    colour: str
    line: str
    marker: str


def styles(compositions: Sequence[str]) -> dict[str, Style]:
    """One style per composition, in the order given (the user's order)."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    palette = [colormaps["tab10"](i) for i in range(10)]
    palette += [colormaps["tab20"](2 * i + 1) for i in range(10)]
    return {c: Style(to_hex(palette[i % len(palette)]), LINES[i % len(LINES)],
                     MARKERS[i % len(MARKERS)]) for i, c in enumerate(dict.fromkeys(compositions))}


#: A metric in seconds, as figures and tables show it: (divisor, axis label).
UNITS = {
    "avg_jct": (3600.0, "average JCT (hours)"),
    "p50_jct": (3600.0, "median JCT (hours)"),
    "p99_jct": (3600.0, "p99 JCT (hours)"),
    "avg_responsiveness": (60.0, "average responsiveness (minutes)"),
    "avg_queueing_delay": (60.0, "average queueing delay (minutes)"),
}
