"""Static checks of emulator/Dockerfile and emulator/compose.yaml (no Docker engine runs on
the CI machines): they must build the same cluster the native launcher builds."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from blox_slurm.emulator.cluster import MUNGE, REQUIRED

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "emulator" / "Dockerfile"
COMPOSE = ROOT / "emulator" / "compose.yaml"


def _yaml_subset(text: str) -> dict[str, Any]:
    """Block mappings, ``- item`` lists and flow (JSON) lists: all compose.yaml may use."""
    root: dict[str, Any] = {}
    stack: list[tuple[int, Any]] = [(-1, root)]
    pending: tuple[int, dict[str, Any], str] | None = None
    for raw in text.splitlines():
        line = re.sub(r"\s+#.*$", "", raw) if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        assert "\t" not in raw, "tabs are not YAML indentation"
        indent = len(line) - len(line.lstrip())
        body = line.strip()
        while stack[-1][0] >= indent:
            stack.pop()
        if pending is not None and indent > pending[0]:
            _, owner, key = pending
            owner[key] = [] if body.startswith("- ") else {}
            stack.append((indent - 1, owner[key]))
        pending = None
        parent = stack[-1][1]
        if body.startswith("- "):
            assert isinstance(parent, list), raw
            parent.append(body[2:].strip())
            continue
        key, sep, value = body.partition(":")
        assert sep and isinstance(parent, dict), raw
        value = value.strip()
        if not value:
            parent[key] = None
            pending = (indent, parent, key)
        elif value.startswith("["):
            parent[key] = json.loads(value)
        else:
            parent[key] = value
    return root


def test_dockerfile_uses_bookworm_and_the_launchers_packages() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^FROM debian:bookworm\s*$", text, re.M)
    install = re.search(r"apt-get install[^&]*", text, re.S)
    assert install is not None
    packages = set(install.group(0).replace("\\", " ").split())
    assert set(REQUIRED.values()) | set(MUNGE.values()) <= packages
    assert "slurm-wlm-emulator" not in packages
    entry = re.search(r"^ENTRYPOINT (\[.*\])$", text, re.M)
    assert entry is not None
    assert json.loads(entry.group(1)) == ["blox-slurm", "emulator", "up", "--foreground"]
    for copied in re.findall(r"^COPY (\S+)", text, re.M):
        assert (ROOT / copied).exists(), copied


def test_compose_builds_the_dockerfile_and_checks_health() -> None:
    doc = _yaml_subset(COMPOSE.read_text())
    svc = doc["services"]["emulator"]
    build = svc["build"]
    assert (COMPOSE.parent / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE
    assert svc["command"][:2] == ["--gpus", "v100:4x4,k80:4x2"]
    assert svc["healthcheck"]["test"] == ["CMD", "blox-slurm", "emulator", "status"]
    assert svc["init"] == "true" and svc["stop_signal"] == "SIGTERM"


def test_yaml_subset_parser_reads_nested_blocks() -> None:
    doc = _yaml_subset("a:\n  b: [1, 2]\n  c:\n    - x\n    - y\n")
    assert doc == {"a": {"b": [1, 2], "c": ["x", "y"]}}
