"""One logging setup (blox_slurm.logs): a daemon's plain or journal lines, Rich only on a
terminal, nothing wrapped in a pipe, message text never read as markup. Terminals are real
pseudo-terminals; the journal is recognised the way systemd announces it."""

from __future__ import annotations

import io
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer
from rich.table import Table

from blox_slurm.cli_errors import exit_codes
from blox_slurm.logs import console, setup_logging, syslog_priority, writes_to_journal

TRICKY = "install blox-slurm[pyslurm] or [red]not red[/red] :smile:"
LONG = " ".join(f"word{i}" for i in range(60))  # ~400 characters
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@pytest.fixture(autouse=True)
def root_logger() -> Iterator[None]:
    """Each test leaves the root logger as it found it (pytest's own handlers included)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def pty_stream() -> Iterator[tuple[io.TextIOWrapper, int]]:
    """A real terminal: the stream writes to a pseudo-terminal, the int reads what it got."""
    master, slave = os.openpty()
    stream = open(slave, "w", buffering=1, encoding="utf-8")  # noqa: SIM115
    try:
        yield stream, master
    finally:
        stream.close()
        os.close(master)


def read_pty(master: int) -> str:
    chunks = []
    while True:
        data = os.read(master, 65536)
        chunks.append(data)
        if len(data) < 65536:
            break
    return ANSI.sub("", b"".join(chunks).decode()).replace("\r\n", "\n")


def test_a_daemon_writes_plain_timestamped_lines_without_wrapping() -> None:
    out = io.StringIO()
    setup_logging(daemon=True, level=logging.INFO, stream=out)
    logging.getLogger("blox_slurm.test").info("%s %s", TRICKY, LONG)
    logging.getLogger("blox_slurm.test").debug("below the level")
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO blox_slurm\.test: "
                        + re.escape(f"{TRICKY} {LONG}"), lines[0])


def test_under_systemd_each_line_carries_the_journal_priority(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """systemd names the journal's stream in JOURNAL_STREAM (device:inode); a traceback's
    every line keeps the record's priority."""
    with open(tmp_path / "journal", "w+") as stream:
        st = os.fstat(stream.fileno())
        monkeypatch.setenv("JOURNAL_STREAM", f"{st.st_dev}:{st.st_ino}")
        assert writes_to_journal(stream)
        setup_logging(daemon=True, stream=stream)
        log = logging.getLogger("blox_slurm.slurm.controller")
        log.warning("round 3 failed: %s", TRICKY)
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            log.exception("round crashed; continuing")
        stream.seek(0)
        lines = stream.read().splitlines()
    assert lines[0] == f"<4>blox_slurm.slurm.controller: round 3 failed: {TRICKY}"
    assert lines[1] == "<3>blox_slurm.slurm.controller: round crashed; continuing"
    assert lines[-1] == "<3>RuntimeError: boom" and len(lines) > 3
    assert all(line.startswith("<3>") for line in lines[1:])


def test_a_stderr_redirected_away_from_the_journal_gets_plain_lines(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOURNAL_STREAM", "8:12345")  # the journal, but not this file
    with open(tmp_path / "log", "w+") as stream:
        assert not writes_to_journal(stream)
        setup_logging(daemon=True, stream=stream)
        logging.getLogger("x").warning("hello")
        stream.seek(0)
        assert stream.read().endswith(" WARNING x: hello\n")
    assert not writes_to_journal(io.StringIO())  # no file descriptor at all


def test_an_interactive_command_in_a_pipe_logs_plain_lines() -> None:
    out = io.StringIO()
    handler = setup_logging(daemon=False, stream=out)
    assert type(handler) is logging.StreamHandler
    logging.getLogger("blox_slurm.demo").warning(TRICKY)
    assert out.getvalue().endswith(f" WARNING blox_slurm.demo: {TRICKY}\n")


def test_an_interactive_command_on_a_terminal_logs_through_rich_without_markup(
        pty_stream: tuple[io.TextIOWrapper, int]) -> None:
    stream, master = pty_stream
    handler = setup_logging(daemon=False, stream=stream)
    assert type(handler).__name__ == "RichHandler"
    logging.getLogger("blox_slurm.demo").warning(TRICKY)
    stream.flush()
    text = " ".join(read_pty(master).split())  # a terminal may wrap: compare the words
    assert "WARNING" in text and TRICKY in text


@pytest.mark.parametrize(("variable", "value", "rich"), [
    ("FORCE_COLOR", "1", True), ("TTY_COMPATIBLE", "1", True), ("TTY_COMPATIBLE", "0", False)])
def test_the_variables_that_force_a_terminal_still_reach_rich_in_a_pipe(
        monkeypatch: pytest.MonkeyPatch, variable: str, value: str, rich: bool) -> None:
    """A pipe is decided without Rich (start-up), except where Rich's own variables say
    otherwise: then Rich decides, as before."""
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.setenv(variable, value)
    handler = setup_logging(daemon=False, stream=io.StringIO())
    assert (type(handler).__name__ == "RichHandler") is rich


def test_calling_it_again_replaces_only_its_own_handler() -> None:
    root = logging.getLogger()
    other = logging.NullHandler()
    root.addHandler(other)
    first, second = io.StringIO(), io.StringIO()
    setup_logging(daemon=False, stream=first)
    setup_logging(daemon=True, level=logging.INFO, stream=second)
    logging.getLogger("y").info("once")
    assert first.getvalue() == "" and second.getvalue().endswith("INFO y: once\n")
    assert other in root.handlers and root.level == logging.INFO


@pytest.mark.parametrize(("level", "priority"), [
    (logging.CRITICAL, 2), (logging.ERROR, 3), (logging.WARNING, 4), (logging.INFO, 6),
    (logging.DEBUG, 7), (logging.WARNING + 5, 4), (logging.NOTSET, 7)])
def test_syslog_priorities(level: int, priority: int) -> None:
    assert syslog_priority(level) == priority


def test_the_console_in_a_pipe_neither_wraps_nor_reads_markup(
        capsys: pytest.CaptureFixture[str]) -> None:
    screen = console()
    assert not screen.is_terminal
    screen.print(f"{TRICKY} {LONG}")
    table = Table("composition", "note")
    table.add_row("las[x]", LONG)
    screen.print(table)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{TRICKY} {LONG}"
    assert any("las[x]" in line and LONG in line for line in out)  # one row, one line


def test_the_console_on_a_terminal_reads_no_markup(
        pty_stream: tuple[io.TextIOWrapper, int]) -> None:
    stream, master = pty_stream
    screen = console(stream)
    assert screen.is_terminal
    screen.print(TRICKY)
    stream.flush()
    assert TRICKY in read_pty(master)


def test_a_cli_error_is_one_line_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as exit_info, exit_codes((ValueError,)):
        raise ValueError(f"[controller] partitions: {TRICKY}\n  {LONG}")
    assert exit_info.value.exit_code == 2
    assert capsys.readouterr().err == f"error: [controller] partitions: {TRICKY}; {LONG}\n"
