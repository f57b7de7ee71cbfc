"""The one way the live tests wait for the world: poll, and fail naming what never came.

A timeout here bounds a failure, it asserts no speed (nothing in tests/ does: speed belongs
in benchmarks/)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], timeout: float = 15.0,
             what: str | Callable[[], str] = "condition",
             step: Callable[[], object] | None = None, every: float = 0.5) -> T:
    """Run ``step`` (if any) and ``probe`` until the probe returns something truthy, waiting
    from 0.05 s up to ``every`` s between tries; fail after ``timeout`` with ``what`` (a
    callable is asked only then, so it can describe what the world looked like)."""
    deadline = time.monotonic() + timeout
    delay = min(0.05, every)
    while True:
        if step is not None:
            step()
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for "
                        f"{what() if callable(what) else what}")
        time.sleep(delay)
        delay = min(delay * 1.5, every)
