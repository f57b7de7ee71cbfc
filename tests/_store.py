"""Reading a controller's store from a live test while the controller may still be creating it.

The controller opens (and so creates) the file before it creates the tables, so a probe can
find the file with no ``rounds`` table yet: that is "nothing recorded yet", not an error (a
trixie CI run failed on exactly this race)."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any


def store_rows(store: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The rows ``sql`` selects, or none while the file or the table it reads does not exist
    yet; any other SQLite error still fails the test."""
    if not store.exists():
        return []
    with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True,
                                            timeout=5)) as db:
        try:
            return db.execute(sql, args).fetchall()
        except sqlite3.OperationalError as err:
            if "no such table" in str(err):
                return []
            raise
