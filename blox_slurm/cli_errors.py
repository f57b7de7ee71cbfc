"""The CLI's one error convention: bad input exits 2, a runtime failure exits 1, each with one
clear line on stderr and no traceback (exit codes documented in :mod:`blox_slurm.cli`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer
from rich.console import Console
from rich.markup import escape

_err = Console(stderr=True)

ErrorTypes = tuple[type[BaseException], ...]


@contextmanager
def exit_codes(bad_input: ErrorTypes, runtime: ErrorTypes = ()) -> Iterator[None]:
    try:
        yield
    except bad_input as exc:
        _err.print(f"[red]error:[/red] {_one_line(exc)}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except runtime as exc:
        _err.print(f"[red]failed:[/red] {_one_line(exc)}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


def _one_line(exc: BaseException) -> str:
    """The message as one line, its text never read as Rich markup ("[controller]" is kept)."""
    return escape("; ".join(ln.strip() for ln in str(exc).splitlines() if ln.strip()))
