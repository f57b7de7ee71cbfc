"""Where log records and console output go: one setup for daemons, one for people.

* A daemon (``run``, ``agent``) writes plain lines, ``TIME LEVEL LOGGER: message``, to
  stderr. Under systemd, when stderr *is* the journal (``JOURNAL_STREAM`` names it), each
  line carries the ``<N>`` syslog priority prefix journald reads, and no time: the journal
  stamps every line itself, and ``journalctl -p warning`` then works.
* A command a person runs logs through Rich on a terminal, and writes the same plain lines
  when its stderr is a pipe or a file.
* Nothing wraps off a terminal: a log line or a message stays one line for grep and the
  journal, a table keeps its columns.
* Message text is never read as Rich markup: ``pip install blox-slurm[pyslurm]`` keeps its
  ``[pyslurm]``. Code that wants colour builds a :class:`rich.text.Text` with a style.
"""

from __future__ import annotations

import logging
import os
import sys
from functools import partial
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console

PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
JOURNAL_FORMAT = "%(name)s: %(message)s"
#: Off a terminal, as wide as the content: lines are never broken, tables never squeezed.
UNWRAPPED_WIDTH = 10_000
_HANDLER_NAME = "blox_slurm"


def console(file: TextIO | None = None, *, stderr: bool = False) -> Console:
    """A Rich console that prints text as given (no markup, emoji codes or highlighting);
    off a terminal it does not wrap. Make one where it prints, not at import: whether the
    stream is a terminal is decided here. Rich is imported here, not with the module: a
    command whose output is a pipe or JSON then never pays for it at start-up."""
    from rich.console import Console

    make = partial(Console, file=file, stderr=stderr, markup=False, emoji=False,
                   highlight=False)
    tty = make()
    return tty if tty.is_terminal else make(soft_wrap=True, width=UNWRAPPED_WIDTH)


def setup_logging(*, daemon: bool, level: int = logging.WARNING,
                  stream: TextIO | None = None) -> logging.Handler:
    """Send every logger's records at ``level`` and above to ``stream`` (stderr), as a
    daemon's plain lines or an interactive command's; returns the handler. Calling it again
    replaces the handler it installed (a command may switch modes), and leaves any other
    handler on the root logger alone."""
    handler = _handler(daemon, stream)
    handler.set_name(_HANDLER_NAME)
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    return handler


def _handler(daemon: bool, stream: TextIO | None) -> logging.Handler:
    if not daemon and _may_be_terminal(stream if stream is not None else sys.stderr):
        # stderr looked up at each write (file=None): a Rich Live display that redirects
        # sys.stderr then prints log records above itself instead of through it.
        screen = console(stream, stderr=stream is None)
        if screen.is_terminal:
            from rich.logging import RichHandler

            return RichHandler(console=screen, show_path=False, markup=False)
    stream = stream if stream is not None else sys.stderr
    handler = logging.StreamHandler(stream)
    journal = daemon and writes_to_journal(stream)
    handler.setFormatter(JournalFormatter() if journal else logging.Formatter(PLAIN_FORMAT))
    return handler


def _may_be_terminal(stream: TextIO) -> bool:
    """False where Rich would surely say "not a terminal" (no tty, and neither of the
    variables that force one): a command piped or run from a script then logs plain lines
    without importing Rich at start-up. Rich decides in every other case."""
    if os.environ.get("TTY_COMPATIBLE") or os.environ.get("FORCE_COLOR") is not None:
        return True
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except ValueError:  # a closed stream
        return False


def writes_to_journal(stream: TextIO) -> bool:
    """systemd sets ``JOURNAL_STREAM=DEVICE:INODE`` for the stream it connected to the
    journal; a stderr since redirected to a pipe or a file no longer matches it."""
    expected = os.environ.get("JOURNAL_STREAM")
    if not expected:
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError):  # no file descriptor (io.UnsupportedOperation is both)
        return False
    return expected == f"{st.st_dev}:{st.st_ino}"


class JournalFormatter(logging.Formatter):
    """``<N>LOGGER: message`` with N the syslog priority; every line of a multi-line record
    (a traceback) carries the prefix, so the whole record keeps its level in the journal."""

    def __init__(self) -> None:
        super().__init__(JOURNAL_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        prefix = f"<{syslog_priority(record.levelno)}>"
        return "\n".join(prefix + line for line in super().format(record).splitlines())


def syslog_priority(levelno: int) -> int:
    """crit 2, err 3, warning 4, info 6, debug 7; a custom level takes the one below it."""
    for floor, priority in ((logging.CRITICAL, 2), (logging.ERROR, 3), (logging.WARNING, 4),
                            (logging.INFO, 6)):
        if levelno >= floor:
            return priority
    return 7
