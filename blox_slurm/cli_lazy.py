"""Commands imported when they run, not when ``blox-slurm`` starts.

Each command lives in the module of the world it drives, and those modules pull in what their
world needs: the controller its SQLite store, the demo the emulator, ``report`` pandas. A
``blox-slurm simulate`` that imported all of them spent longer starting than simulating
(0.5 s of imports beside a 0.2 s Figure-6 run). So the top-level group knows each command by
name and by where it lives, and imports a module the first time one of its commands is looked
up: to run it or to print its help. ``blox-slurm --help`` lists every command with the first
lines of its docstring; importing every world for that took 2 s once the Pollux model brought
SciPy in, so the listing reads the docstrings from the modules' source instead (``ast``, no
import) and shows them exactly as Typer would.

The group is Typer's own, with a mapping in place of its dict of commands: click reads
commands only through ``commands`` (``get_command``, ``list_commands``), so everything Typer
builds on it (rich help panels, completion, ``typer.testing``) works unchanged.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import typer
from typer.core import TyperCommand, TyperGroup


@dataclass(frozen=True)
class LazyCommand:
    """Where a command lives (``package.module:attribute``) and how it is shown.

    The attribute is a function (made a command like ``app.command()`` would) or a
    ``typer.Typer`` (a group of commands, such as ``emulator``).
    """

    target: str
    panel: str
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """A function's name with dashes (``fake_train`` is ``fake-train``), or a group's own."""
        attribute = self.target.rpartition(":")[2]
        return attribute.removesuffix("_app").replace("_", "-")

    def load(self) -> typer.core.TyperCommand | TyperGroup:
        module, _, attribute = self.target.partition(":")
        obj = getattr(importlib.import_module(module), attribute)
        if isinstance(obj, typer.Typer):
            group = typer.main.get_group(obj)
            group.name, group.rich_help_panel = self.name, self.panel
            return group
        single = typer.Typer(rich_markup_mode="rich", add_completion=False)
        single.command(name=self.name, rich_help_panel=self.panel, **self.settings)(obj)
        command = typer.main.get_command(single)
        assert isinstance(command, typer.core.TyperCommand)
        return command


    def listing(self) -> TyperCommand:
        """What ``--help`` lists for this command, from its module's source (not imported):
        the function's docstring, or the ``help=`` of a group's ``typer.Typer(...)``."""
        module, _, attribute = self.target.partition(":")
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None, f"no module {module}"
        tree = ast.parse(Path(spec.origin).read_text())
        return TyperCommand(self.name, help=_documented(tree, attribute), hidden=False,
                            rich_help_panel=self.panel)


def _documented(tree: ast.Module, attribute: str) -> str:
    """The docstring of function ``attribute``, or the literal ``help=`` of the call assigned
    to it, at the top level of ``tree``."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == attribute:
            return ast.get_docstring(node) or ""
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Call):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == attribute for t in targets):
                return next((str(ast.literal_eval(k.value)) for k in node.value.keywords
                             if k.arg == "help"), "")
    raise LookupError(f"{attribute} is not defined at the top level of its module")


class LazyCommands(MutableMapping[str, Any]):
    """Command name -> click command, loading each on first access; keys in listing order."""

    def __init__(self, loaded: MutableMapping[str, Any], lazy: dict[str, LazyCommand]) -> None:
        self._loaded = dict(loaded)
        self._lazy = lazy

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            self._loaded[name] = self._lazy[name].load()  # KeyError: no such command
        return self._loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self._loaded.pop(name, None)
        self._lazy.pop(name, None)

    def listing(self, name: str) -> Any:
        """The command if it is loaded, else its stand-in for a help listing."""
        return self._loaded[name] if name in self._loaded else self._lazy[name].listing()

    def __contains__(self, name: object) -> bool:
        return name in self._lazy or name in self._loaded  # without importing anything

    def __iter__(self) -> Iterator[str]:
        yield from self._lazy
        yield from (name for name in self._loaded if name not in self._lazy)

    def __len__(self) -> int:
        return len(set(self._lazy) | set(self._loaded))


class LazyGroup(TyperGroup):
    """Typer's group with commands loaded on demand; a subclass sets ``lazy`` (name -> where)."""

    lazy: ClassVar[dict[str, LazyCommand]] = {}

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = LazyCommands(self.commands, dict(self.lazy))
        self._listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)  # names only: Typer's own reads every command

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if self._listing and isinstance(self.commands, LazyCommands) and cmd_name in self.commands:
            return self.commands.listing(cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """The group's help, listing its commands from their stand-ins."""
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False
