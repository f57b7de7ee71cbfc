"""Commands imported when they run, not when ``blox-slurm`` starts.

Each command lives in the module of the world it drives, and those modules pull in what their
world needs: the controller its SQLite store, the demo the emulator, ``report`` pandas. A
``blox-slurm simulate`` that imported all of them spent longer starting than simulating
(0.5 s of imports beside a 0.2 s Figure-6 run). So the top-level group knows each command by
name and by where it lives, and imports a module the first time one of its commands is looked
up: to run it, to print its help, or for ``blox-slurm --help``, which lists them all.

The group is Typer's own, with a mapping in place of its dict of commands: click reads
commands only through ``commands`` (``get_command``, ``list_commands``), so everything Typer
builds on it (rich help panels, completion, ``typer.testing``) works unchanged.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import typer
from typer.core import TyperGroup


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
