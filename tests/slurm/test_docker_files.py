"""Checks of emulator/Dockerfile, emulator/compose.yaml and .dockerignore without a container
engine (CI builds and runs the image with podman in .ci/container.sh): they must build the
cluster the native launcher builds, from a context that holds what the image installs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
import typer
from packaging.requirements import Requirement
from typer.main import get_command

from blox_slurm.emulator.cli import emulator_app
from blox_slurm.emulator.cluster import MUNGE, REQUIRED
from blox_slurm.emulator.errors import SpecError
from blox_slurm.emulator.spec import parse_gpus

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "emulator" / "Dockerfile"
COMPOSE = ROOT / "emulator" / "compose.yaml"
CONSTRAINTS = ROOT / "emulator" / "constraints.txt"
STATUS = ["blox-slurm", "emulator", "status"]


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


def _instruction(name: str) -> list[str]:
    """A Dockerfile instruction's exec-form command (``NAME [json]``, or for HEALTHCHECK
    ``NAME [--option...] CMD [json]``)."""
    found = re.search(rf"^{name} (?:.*CMD )?(\[.*\])$", DOCKERFILE.read_text(), re.M)
    assert found is not None, name
    return list(json.loads(found.group(1)))


def _copies() -> list[tuple[list[str], str]]:
    """Each ``COPY SRC... DEST``: its sources and its destination."""
    lines = re.findall(r"^COPY (.+)$", DOCKERFILE.read_text(), re.M)
    return [(words[:-1], words[-1]) for words in (line.split() for line in lines)]


def _launch(args: list[str]) -> dict[str, Any]:
    """What ``blox-slurm emulator up`` makes of ``args`` (parsed, not run): unknown options
    and bad values fail here as they would in the container, and so do malformed --gpus."""
    up = get_command(emulator_app).commands["up"]
    params = dict(up.make_context("up", list(args)).params)
    if params["gpus"]:
        parse_gpus(params["gpus"])
    return params


def test_dockerfile_pins_a_dated_bookworm_and_installs_the_launchers_packages() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^FROM docker\.io/library/debian:bookworm-20\d{6}$", text, re.M)
    install = re.search(r"apt-get install[^&]*", text, re.S)
    assert install is not None
    packages = set(install.group(0).replace("\\", " ").split())
    # python3: the demo's jobs run Debian's /usr/bin/python3 as other users
    assert set(REQUIRED.values()) | set(MUNGE.values()) | {"python3"} <= packages
    assert "slurm-wlm-emulator" not in packages
    assert _instruction("ENTRYPOINT") == ["blox-slurm", "emulator", "up", "--foreground"]
    assert _instruction("HEALTHCHECK") == STATUS
    assert _launch(["--foreground", *_instruction("CMD")])["nodes"] == 4


def test_dockerignore_admits_exactly_what_the_dockerfile_copies() -> None:
    """``*`` first, then one ``!path`` per COPY source: the context holds nothing else (no
    .git, venv or run directory), and a new COPY without its line fails the build."""
    rules = [line for line in (ROOT / ".dockerignore").read_text().splitlines()
             if line and not line.startswith("#")]
    assert rules[0] == "*"
    admitted = {r[1:] for r in rules if r.startswith("!")}
    sources = {s for srcs, _ in _copies() for s in srcs}
    assert sources == admitted
    assert {"slurm_conf", "blox_slurm", "policies"} <= sources
    assert all((ROOT / s).exists() for s in sources)


def _build_context_copy(dest: Path) -> None:
    """The image's /opt/blox-slurm, as the COPY lines make it: symlinks kept as links, caches
    left out (.dockerignore)."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for sources, target in _copies():
        for source in sources:
            origin = ROOT / source
            into = dest / target / (origin.name if target.endswith("/") and origin.is_file()
                                    else "")
            if origin.is_dir():
                shutil.copytree(origin, into, symlinks=True, ignore=skip, dirs_exist_ok=True)
            else:
                into.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(origin, into)


def test_the_images_sources_build_a_wheel_with_the_plugin(tmp_path: Path) -> None:
    """blox_slurm/data/job_submit.lua links into slurm_conf/: without slurm_conf/ in the
    image the wheel silently lacked the plugin and ``blox-slurm demo`` failed in it."""
    src = tmp_path / "opt-blox-slurm"
    _build_context_copy(src)
    assert (src / "blox_slurm" / "data" / "job_submit.lua").is_symlink()
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                          str(tmp_path), str(src)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = tmp_path.glob("blox_slurm-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    lua = zipfile.ZipFile(wheel).read("blox_slurm/data/job_submit.lua")
    assert lua == (ROOT / "slurm_conf" / "job_submit.lua").read_bytes()
    assert "blox_slurm/policies/__init__.py" in names


def test_constraints_pin_every_dependency_to_a_version_it_accepts() -> None:
    """The image installs with emulator/constraints.txt: a dependency added to pyproject.toml
    without a pin here would make the image's versions drift again."""
    pins = {}
    for line in CONSTRAINTS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and version, f"not an exact pin: {line}"
            pins[name.lower().replace("_", "-")] = version
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    needed = [*meta["project"]["dependencies"], *meta["build-system"]["requires"]]
    for text in needed:
        req = Requirement(text)
        name = req.name.lower().replace("_", "-")
        assert name in pins, f"{name} is not pinned in {CONSTRAINTS.name}"
        assert req.specifier.contains(pins[name]), f"{name}=={pins[name]} breaks {text}"


def test_compose_builds_the_dockerfile_with_options_the_launcher_takes() -> None:
    doc = _yaml_subset(COMPOSE.read_text())
    svc = doc["services"]["emulator"]
    build = svc["build"]
    context = (COMPOSE.parent / build["context"]).resolve()
    assert context == ROOT and (context / ".dockerignore").is_file()
    assert (context / build["dockerfile"]).resolve() == DOCKERFILE
    params = _launch(["--foreground", *svc["command"]])
    assert [g.gpu_type for g in parse_gpus(params["gpus"])] == ["v100", "k80"]
    assert svc["healthcheck"]["test"] == ["CMD", *_instruction("HEALTHCHECK")]
    assert svc["init"] == "true" and svc["stop_signal"] == "SIGTERM"


def test_launch_check_refuses_what_the_container_would() -> None:
    with pytest.raises(typer.BadParameter):
        _launch(["--cpus", "many"])
    with pytest.raises(SpecError, match="TYPE:GPUSxNODES"):
        _launch(["--gpus", "v100:4"])


def test_yaml_subset_parser_reads_nested_blocks() -> None:
    doc = _yaml_subset("a:\n  b: [1, 2]\n  c:\n    - x\n    - y\n")
    assert doc == {"a": {"b": [1, 2], "c": ["x", "y"]}}
