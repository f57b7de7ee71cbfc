"""Progress of many runs (``compare``, ``sweep``): a bar on a terminal, a line per run off it.

A run of several minutes that prints nothing looks hung; in a log or CI a bar is noise, so
off a terminal each finished run is one line on stderr, which also says what it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..logs import console
from .experiment import Experiment


def describe(exp: Experiment) -> str:
    """A run as a person names it: composition, cluster, and load and seed or trace."""
    label = exp.label
    if "jobs_per_hour" in label and label["jobs_per_hour"] is not None:
        where = f"{label['jobs_per_hour']:g} jobs/h" + (
            f" seed {label['seed']}" if "seed" in label else "")
    else:
        where = str(label.get("trace") or label.get("workload") or "")
    return f"{exp.composition.get('name')} on {exp.cluster}, {where}"


@contextmanager
def progress(total: int, done: int = 0, what: str = "runs") -> Iterator[Callable[[str], None]]:
    """Yields ``tick(text)``, to call once per finished run."""
    err = console(stderr=True)
    if not err.is_terminal:
        count = [done]

        def line(text: str) -> None:
            count[0] += 1
            err.print(f"[{count[0]}/{total}] {text}", markup=False, highlight=False)

        yield line
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(what, BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=err, transient=True) as bar:
        task = bar.add_task(what, total=total, completed=done)
        yield lambda text: bar.update(task, advance=1)
