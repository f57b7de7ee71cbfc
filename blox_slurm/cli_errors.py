"""The CLI's one error convention: bad input exits 2, a runtime failure exits 1, each with one
clear line on stderr and no traceback (exit codes documented in :mod:`blox_slurm.cli`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer

from .logs import console

ErrorTypes = tuple[type[BaseException], ...]


@contextmanager
def exit_codes(bad_input: ErrorTypes, runtime: ErrorTypes = ()) -> Iterator[None]:
    try:
        yield
    except bad_input as exc:
        _say("error:", exc)
        raise typer.Exit(2) from None
    except runtime as exc:
        _say("failed:", exc)
        raise typer.Exit(1) from None


def _say(label: str, exc: BaseException) -> None:
    """``label`` in red and the message as one line, even on a terminal narrower than it; its
    text is printed as given ("[controller]" is kept: the console reads no markup)."""
    from rich.text import Text  # only on an error: a command that succeeds never loads it

    line = "; ".join(ln.strip() for ln in str(exc).splitlines() if ln.strip())
    console(stderr=True).print(Text.assemble((label, "red"), " ", line), soft_wrap=True)
