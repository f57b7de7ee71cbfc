"""What the admin-side commands share: where the controller's config is, how a store is
opened, how errors exit, how results print.

The config has a default path and an environment variable because every read command needs
it: an admin on the controller's host types ``blox-slurm status``, not ``--config`` each time.

Exit codes: 0 success; 1 Slurm unreachable or a runtime failure; 2 bad input (config, job id).
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Annotated, Any

import typer

from ..cli_errors import exit_codes
from ..logs import console
from .client import SlurmError
from .controller_config import ConfigError, ControllerConfig, load_config
from .store import Store, StoreGone

DEFAULT_CONFIG = Path("/etc/blox-slurm/controller.toml")
CONFIG_ENV = "BLOX_SLURM_CONFIG"
ConfigOpt = Annotated[Path, typer.Option(
    "--config", "-c", envvar=CONFIG_ENV, show_envvar=True, show_default=True,
    help="The controller's controller.toml.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def errors() -> AbstractContextManager[None]:
    return exit_codes((ConfigError, ValueError), (SlurmError, StoreGone))


def load_controller(path: Path) -> tuple[ControllerConfig, Any]:
    """``load_config``, saying how to point at another file when the default one is absent."""
    if path == DEFAULT_CONFIG and not path.exists():
        raise ConfigError(f"no controller config at {path}: pass --config FILE or set "
                          f"{CONFIG_ENV}")
    return load_config(path)


def store_of(path: Path) -> tuple[ControllerConfig, Store]:
    cfg, _ = load_controller(path)
    if not Path(cfg.store).exists():
        raise ConfigError(f"no store at {cfg.store}: has `blox-slurm run` been started?")
    return cfg, open_store(cfg.store)


def open_store(path: str) -> Store:
    try:
        return Store(path)
    except (OSError, sqlite3.Error) as exc:
        raise ConfigError(f"cannot open the store {path} ({exc}): set [controller] store to "
                          "a file in a writable directory") from None


def emit(data: Any, as_json: bool, render: Any) -> None:
    """JSON for scripts, else the Rich renderable (its text is never read as markup: callers
    pass Text or tables of Text; :func:`console` reads none as markup). Into a pipe, lines
    are not wrapped at 80 columns."""
    if as_json:
        typer.echo(json.dumps(data, indent=1, default=str))
        return
    console().print(render)
