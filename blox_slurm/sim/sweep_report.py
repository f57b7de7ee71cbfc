"""A sweep's results as a reader wants them: a table over seeds and figures that compare.

Every figure of a sweep gives a composition the same colour (its place in the sweep file),
says in its title which cluster, workload and seeds it shows, and puts hours on the axes the
table gives in hours. Over seeds, a point is the mean and its band the 95 % confidence
interval of the mean (Student's t; no band with one seed), because a difference between two
compositions that their bands cover is not a result.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .metrics import summary_row, write_csv
from .records import RunResult

#: Student's t at 97.5 % by degrees of freedom (n seeds - 1); beyond the table, 2.0 is close.
_T975 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26,
         10: 2.23, 15: 2.13, 20: 2.09, 30: 2.04}
#: Reported per cell, in the table's units: (column, metric, divisor, format).
COLUMNS = (("avg JCT h", "avg_jct", 3600.0, "{:.2f}"), ("p99 JCT h", "p99_jct", 3600.0, "{:.1f}"),
           ("resp. min", "avg_responsiveness", 60.0, "{:.1f}"),
           ("util %", "utilization", 0.01, "{:.1f}"),
           ("preempt/job", "preemptions_per_job", 1.0, "{:.2f}"))


@dataclass(frozen=True)
class Estimate:
    """A metric over seeds: mean and the half-width of its 95 % interval (0 for one seed)."""

    mean: float
    half_width: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Estimate:
        mean = statistics.fmean(values)
        if len(values) < 2:
            return cls(mean, 0.0, len(values))
        df = len(values) - 1
        t = _T975.get(df) or next((v for k, v in sorted(_T975.items()) if k >= df), 2.0)
        return cls(mean, t * statistics.stdev(values) / math.sqrt(len(values)), len(values))

    def text(self, fmt: str) -> str:
        body = fmt.format(self.mean)
        return body if self.n < 2 else f"{body} ± {fmt.format(self.half_width)}"


@dataclass(frozen=True)
class Group:
    """The runs one table row and one figure point stand for: a composition at one load (or
    on one trace) on one cluster, over seeds."""

    cluster: str
    workload: str  # "6 jobs/h" or a trace's file name
    load: float | None
    composition: str


def group_of(result: RunResult) -> Group:
    load = result.params.get("jobs_per_hour")
    loadf = float(load) if isinstance(load, int | float) else None
    workload = f"{loadf:g} jobs/h" if loadf is not None else str(result.params.get("trace"))
    return Group(str(result.params.get("cluster")), workload, loadf, result.name)


def estimates(results: Iterable[RunResult]) -> dict[Group, dict[str, Estimate]]:
    """Per group, each metric of :data:`COLUMNS` over its seeds (runs with a None left out)."""
    values: dict[Group, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        row = summary_row(r)
        for _, metric, scale, _ in COLUMNS:
            v = row.get(metric)
            if isinstance(v, int | float):
                values[group_of(r)][metric].append(float(v) / scale)
    order = {c: i for i, c in enumerate(dict.fromkeys(g.composition for g in values))}
    keys = sorted(values, key=lambda g: (g.cluster, g.load is None, g.load or 0.0, g.workload,
                                         order[g.composition]))
    return {g: {m: Estimate.of(vs) for m, vs in values[g].items()} for g in keys}


def table_markdown(est: Mapping[Group, Mapping[str, Estimate]]) -> str:
    head = ["cluster", "workload", "composition", *(c[0] for c in COLUMNS), "seeds"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for g, ms in est.items():
        cells = [ms[m].text(fmt) if m in ms else "-" for _, m, _, fmt in COLUMNS]
        n = max((e.n for e in ms.values()), default=0)
        lines.append("| " + " | ".join([g.cluster, g.workload, g.composition, *cells, str(n)])
                     + " |")
    return "\n".join(lines)


def pivot_markdown(est: Mapping[Group, Mapping[str, Estimate]], cluster: str, column: str
                   ) -> str:
    """One metric with a row per load (or trace) and a column per composition: the view a
    comparison is read from."""
    _, metric, _, fmt = next(c for c in COLUMNS if c[0] == column)
    mine = [g for g in est if g.cluster == cluster]
    comps = list(dict.fromkeys(g.composition for g in mine))
    rows = list(dict.fromkeys(g.workload for g in mine))
    cell = {(g.workload, g.composition): est[g].get(metric) for g in mine}
    lines = [f"| {column} | " + " | ".join(comps) + " |", "|" + "---|" * (len(comps) + 1)]
    for w in rows:
        values = [cell.get((w, c)) for c in comps]
        lines.append(f"| {w} | " + " | ".join("-" if v is None else v.text(fmt) for v in values)
                     + " |")
    return "\n".join(lines)


def write_tables(results: Sequence[RunResult], out: Path) -> None:
    """``results.csv`` (one row per cell, every metric) and ``summary.csv`` (over seeds)."""
    write_csv([summary_row(r) for r in results], out / "results.csv")
    rows = []
    for g, ms in estimates(results).items():
        row: dict[str, object] = {"cluster": g.cluster, "workload": g.workload,
                                  "composition": g.composition}
        for column, metric, _, _ in COLUMNS:
            if metric in ms:
                row[column] = ms[metric].mean
                row[f"{column} ±95%"] = ms[metric].half_width
        rows.append(row)
    write_csv(rows, out / "summary.csv")
