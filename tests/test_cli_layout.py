"""The command line's layout: every command a module-level function (importable, testable on
its own) and ``blox-slurm --help`` grouped into panels, as an 80-column terminal shows it."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from blox_slurm.cli import app

# What a user reads in `blox-slurm --help`: panel -> its commands, top to bottom.
PANELS = {
    "Simulate and compare": ["simulate", "compare", "policies", "plot", "sweep"],
    "Controller": ["run", "status", "explain", "report", "handback", "calibrate", "doctor"],
    "For users": ["queue"],
    "Emulator and demo": ["demo", "fake-train", "emulator"],
    "Telemetry": ["agent"],
}

# Command line -> the function that runs it.
FUNCTIONS = {
    "simulate": "blox_slurm.sim.cli:simulate",
    "compare": "blox_slurm.sim.cli:compare",
    "policies": "blox_slurm.sim.cli:policies",
    "plot": "blox_slurm.sim.cli:plot",
    "sweep run": "blox_slurm.sim.sweep_cli:run",
    "sweep task": "blox_slurm.sim.sweep_cli:task",
    "sweep status": "blox_slurm.sim.sweep_cli:status",
    "sweep collect": "blox_slurm.sim.sweep_cli:collect",
    "run": "blox_slurm.slurm.controller_cli:run",
    "status": "blox_slurm.slurm.inspect_cli:status",
    "explain": "blox_slurm.slurm.inspect_cli:explain",
    "report": "blox_slurm.slurm.inspect_cli:report",
    "handback": "blox_slurm.slurm.controller_cli:handback",
    "calibrate": "blox_slurm.slurm.controller_cli:calibrate",
    "doctor": "blox_slurm.slurm.inspect_cli:doctor",
    "queue": "blox_slurm.slurm.inspect_cli:queue",
    "demo": "blox_slurm.demo.run:demo",
    "fake-train": "blox_slurm.emulator.cli:fake_train",
    "emulator up": "blox_slurm.emulator.cli:up",
    "emulator down": "blox_slurm.emulator.cli:down",
    "emulator status": "blox_slurm.emulator.cli:status",
    "agent": "blox_slurm.telemetry.cli:agent",
}

runner = CliRunner()


def command(line: str) -> Any:
    """The click command that ``blox-slurm LINE`` runs."""
    cmd: Any = typer.main.get_command(app)
    for name in line.split():
        cmd = cmd.commands[name]
    return cmd


def function(target: str) -> Callable[..., Any]:
    """``module:name`` imported as any user of the package would import it."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def panels(help_text: str) -> dict[str, list[str]]:
    """Panel title -> the first word of each of its rows (rich's boxed help, parsed)."""
    found: dict[str, list[str]] = {}
    rows: list[str] = []
    for line in help_text.splitlines():
        if title := re.match(r"╭─ (.+?) ─", line):
            rows = found.setdefault(title[1], [])
        elif row := re.match(r"│ (\S+) ", line):
            rows.append(row[1])
    return found


@pytest.mark.parametrize("line", FUNCTIONS)
def test_every_command_is_a_module_level_function(line: str) -> None:
    fn = function(FUNCTIONS[line])
    assert fn.__qualname__ == fn.__name__  # not a closure inside a register()
    callback = command(line).callback
    assert getattr(callback, "__wrapped__", callback) is fn


def test_every_command_is_in_a_panel_and_has_its_function() -> None:
    top = {line.split()[0] for line in FUNCTIONS}
    assert set(command("").commands) == top == {c for cs in PANELS.values() for c in cs}
    for group in ("emulator", "sweep"):
        assert set(command(group).commands) == {
            line.split()[1] for line in FUNCTIONS if line.startswith(f"{group} ")}


def test_help_lists_each_panel_with_its_commands() -> None:
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert max(map(len, result.stdout.splitlines())) <= 80
    shown = panels(result.stdout)
    assert list(shown) == ["Options", *PANELS]  # no catch-all "Commands" panel
    assert {title: rows for title, rows in shown.items() if title != "Options"} == PANELS


@pytest.mark.parametrize("line", [line for line in FUNCTIONS if line != "fake-train"])
def test_every_option_and_argument_says_what_it_is_for(line: str) -> None:
    """fake-train is left out: its arguments are the fake job's own (argparse's help)."""
    cmd = command(line)
    assert [p.name for p in cmd.params if not p.help] == []
    result = runner.invoke(app, [*line.split(), "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "…" not in result.stdout  # rich cut a word that did not fit its column


def test_a_command_imports_only_its_own_world() -> None:
    """``simulate`` must not pay for the controller's store, the emulator or pandas: they
    made up most of its start-up when every command was imported with the CLI."""
    script = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from blox_slurm.cli import app\n"
        "r = CliRunner().invoke(app, ['simulate', '-n', '40', '--json'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout.split()
    assert "blox_slurm.sim.simulator" in out  # it did simulate
    heavy = {"sqlite_utils", "pandas", "matplotlib", "blox_slurm.slurm.controller",
             "blox_slurm.emulator.cluster", "blox_slurm.demo.run",
             # trace loaders a synthetic run does not read (Pollux's brings its model)
             "blox_slurm.workloads.pollux", "blox_slurm.workloads.gavel", "scipy",
             # nothing printed through Rich off a terminal; policies the run does not use
             "rich", "blox_slurm.policies.scheduling.gavel_rounds"}
    assert heavy.isdisjoint(out)


def test_the_command_list_imports_no_command_and_shows_what_loading_them_shows() -> None:
    """``blox-slurm --help`` lists every command from its module's source, importing none
    (Typer's own listing imported every world: 2 s with SciPy); what it shows is what the
    loaded commands show."""
    script = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "import typer\n"
        "from blox_slurm.cli import app\n"
        "runner = CliRunner()\n"
        "cold = runner.invoke(app, ['--help'], env={'COLUMNS': '80'})\n"
        "assert cold.exit_code == 0, cold.output\n"
        "imported = sorted(m for m in sys.modules if m.startswith('blox_slurm'))\n"
        "group = typer.main.get_command(app)\n"
        "for name in list(group.commands):\n"
        "    group.commands[name]\n"
        "warm = runner.invoke(app, ['--help'], env={'COLUMNS': '80'})\n"
        "print(repr((imported, cold.output, warm.output)))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout
    imported, cold, warm = ast.literal_eval(out)
    assert {target.partition(":")[0] for target in FUNCTIONS.values()}.isdisjoint(imported)
    assert cold == warm
    for name in FUNCTIONS:
        assert f" {name.split()[0]} " in cold


def test_an_unknown_command_is_a_usage_error() -> None:
    group: Any = typer.main.get_command(app)
    assert "simulate" in group.commands and "simulat" not in group.commands
    result = runner.invoke(app, ["simulat"])
    assert result.exit_code == 2 and "No such command" in result.output


@pytest.mark.parametrize("line", [line for line in FUNCTIONS if line != "fake-train"])
def test_help_shows_bracketed_words_as_written(line: str) -> None:
    """Rich reads ``[word]`` as markup and drops it: an option's help naming a TOML table
    (``[simulation]``) lost it. Every bracketed word of the help must reach the screen."""
    words = {w for p in command(line).params if p.help
             for w in re.findall(r"\\?(\[[a-z_]+\])", p.help)}
    result = runner.invoke(app, [*line.split(), "--help"], env={"COLUMNS": "200"})
    assert [w for w in words if w not in result.stdout] == []
