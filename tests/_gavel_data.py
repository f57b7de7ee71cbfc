"""Where the shared Gavel data lives (never copied into the repo), and a skip when it is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

GAVEL = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "gavel"
THROUGHPUTS = GAVEL / "simulation_throughputs.json"

needs_gavel = pytest.mark.skipif(
    not THROUGHPUTS.exists(), reason=f"Gavel reference data not found at {GAVEL}"
)
