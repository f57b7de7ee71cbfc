"""What ``pip install .`` puts in site-packages, and which layer may import which.

The repository keeps the layout it was specified with (a top-level ``policies/`` folder), but
installs it as ``blox_slurm.policies`` (``blox_slurm/policies`` is a symlink to it): a
distribution shipping a top-level package named ``policies`` would clash with any other that
has one.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What a policy may import from the package: the core (the model, the abstractions it
#: implements, the registry it registers in) and its own package. Never a world (simulator,
#: Slurm, controller), so the same policy object runs unchanged in all of them.
POLICY_MAY_IMPORT = ("blox_slurm.core", "blox_slurm.policies")


def test_the_wheel_installs_one_top_level_package_with_the_policies_inside(
        tmp_path: Path) -> None:
    """Built from a copy of the tracked files (pip builds in the source tree, and a stale
    ``build/`` there would ship files the checkout no longer has)."""
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True,
                           check=True).stdout.decode().split("\0")
    src = tmp_path / "src"
    for name in filter(None, files):
        target, origin = src / name, ROOT / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if origin.is_symlink():
            target.symlink_to(os.readlink(origin))
        else:
            shutil.copy2(origin, target)
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                          str(tmp_path), str(src)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = tmp_path.glob("blox_slurm-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert "policies" not in tops and "blox_slurm" in tops
    assert all(t == "blox_slurm" or t.endswith(".dist-info") for t in tops), tops
    shipped = {n.removeprefix("blox_slurm/policies/") for n in names
               if n.startswith("blox_slurm/policies/") and n.endswith(".py")}
    assert shipped == {p.relative_to(ROOT / "policies").as_posix()
                       for p in (ROOT / "policies").rglob("*.py")}
    assert "blox_slurm/data/job_submit.lua" in names


def _imports(path: Path, package: str) -> set[str]:
    """The absolute ``blox_slurm`` modules a file imports when it runs, lazy imports inside
    functions included (relative imports resolved; ``if TYPE_CHECKING:`` blocks left out)."""
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and ast.unparse(block.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
                   for stmt in block.body for n in ast.walk(stmt)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = ".".join(parts[:len(parts) - node.level + 1]) if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            # `from blox_slurm import registry` imports that module; a name that is not a
            # module falls out when the caller keeps only known modules
            out.add(module)
            out.update(f"{module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m.startswith("blox_slurm")}


def _modules() -> dict[str, set[str]]:
    """Every module of the package (policies by their installed name) -> what it imports."""
    out = {}
    for path in [*(ROOT / "blox_slurm").rglob("*.py"), *(ROOT / "policies").rglob("*.py")]:
        if (ROOT / "blox_slurm" / "policies") in path.parents:
            continue  # the symlink: read through policies/
        rel = path.relative_to(ROOT).with_suffix("").parts
        parts = ["blox_slurm", *rel] if rel[0] == "policies" else list(rel)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        out[name] = _imports(path, package)
    return out


def test_no_import_cycle_lazy_imports_included() -> None:
    """A cycle, even through an import inside a function, means two layers that cannot be
    read (or loaded) one after the other; ``composition -> synthesizer -> simulator -> round
    -> composition`` was one."""
    graph = _modules()
    edges = {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            raise AssertionError(" -> ".join([*path[path.index(module):], module]))
        if module in done:
            return
        for dep in sorted(edges[module]):
            visit(dep, [*path, module])
        done.add(module)

    for module in sorted(edges):
        visit(module, [])
    assert "blox_slurm.loading" in graph and "blox_slurm.policies.scheduling.las" in graph


def test_policies_import_only_the_core() -> None:
    known = set(_modules())
    offenders = {}
    for path in (ROOT / "policies").rglob("*.py"):
        rel = path.relative_to(ROOT / "policies").with_suffix("")
        parts = ["blox_slurm", "policies", *rel.parts]
        package = ".".join(parts if rel.name == "__init__" else parts[:-1])
        bad = {m for m in _imports(path, package) & known
               if m != "blox_slurm" and not m.startswith(POLICY_MAY_IMPORT)}
        if bad:
            offenders[str(rel)] = sorted(bad)
    assert offenders == {}


def test_the_core_imports_nothing_above_it() -> None:
    """``blox_slurm.core`` (model, abstractions, registry, the round, accounting) is what every
    world and policy builds on: it reads no world, no workload format and no config file
    format but its own TOML reader. The registry finds the bundled policies by importing
    their package (not a module of it: that would import the core back)."""
    graph = _modules()
    core = {m: deps for m, deps in graph.items() if m.startswith("blox_slurm.core")}
    assert "blox_slurm.core.round" in core and "blox_slurm.core.model" in core
    offenders = {m: sorted(d for d in deps if d in graph and d != "blox_slurm"
                           and not d.startswith("blox_slurm.core")
                           and d != "blox_slurm.policies")
                 for m, deps in core.items()}
    assert {m: d for m, d in offenders.items() if d} == {}
