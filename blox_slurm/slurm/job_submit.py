"""The Python side of the job-submit plugin (``slurm_conf/job_submit.lua``).

The plugin marks managed jobs in ``admin_comment`` (which users cannot set) as::

    blox:managed[,failopen][;key=value]...

``,failopen`` means the plugin did not hold the job because the controller's heartbeat was
stale: Slurm may already have started it. The hints are the user's ``--comment`` hints,
normalized (leading zeros dropped) with keys in sorted order.

Everything here must agree with the Lua script byte for byte: the user-hint grammar and its
messages (:func:`parse_user_hints`), the heartbeat file format and freshness rule
(:func:`read_heartbeat`, :func:`heartbeat_fresh`) and the config file (:func:`read_config`,
:func:`write_config`). ``tests/test_job_submit_grammar.py`` runs both on the same inputs.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

CONFIG_NAME = "blox_job_submit.conf"
MARK = "blox:managed"
FAILOPEN = ",failopen"
HINT_PREFIX = "blox:"
MAX_COMMENT = 512
MAX_ELASTIC_GPUS = 4096

Hints = dict[str, str | int]


class HintError(ValueError):
    """A ``blox:`` comment that breaks the grammar; the message is the one users see."""


# --------------------------------------------------------------------------- hint grammar


def _whole_number(text: str, maximum: int) -> int | None:
    if not re.fullmatch(r"[0-9]+", text):
        return None
    digits = text.lstrip("0")
    if not digits or len(digits) > 15 or int(digits) > maximum:
        return None
    return int(digits)


def _model(text: str) -> str | None:
    return text if re.fullmatch(r"[A-Za-z0-9_.+\-]{1,64}", text) else None


_HINTS: dict[str, tuple[Callable[[str], str | int | None], str]] = {
    "duration": (lambda v: _whole_number(v, 10**8), "a whole number of seconds, 1 to 100000000"),
    "iters": (lambda v: _whole_number(v, 10**12), "a whole number, 1 to 1000000000000"),
    "model": (_model, "1 to 64 letters, digits or _ . + -"),
    # Opt-in to resizing: the controller may start or restart the job with any GPU count in
    # [min_gpus, max_gpus] (Pollux, Optimus). Jobs without it keep the count they asked for.
    "elastic": (lambda v: _whole_number(v, 1), "1"),
    "min_gpus": (lambda v: _whole_number(v, MAX_ELASTIC_GPUS),
                 f"a whole number of GPUs, 1 to {MAX_ELASTIC_GPUS}"),
    "max_gpus": (lambda v: _whole_number(v, MAX_ELASTIC_GPUS),
                 f"a whole number of GPUs, 1 to {MAX_ELASTIC_GPUS}"),
}
_ALLOWED = "allowed: duration, elastic, iters, max_gpus, min_gpus, model"


def _check_elastic(hints: Hints) -> None:
    """The elastic hints only make sense together: bounds without the opt-in would be a
    silent no-op, an opt-in without an upper bound would let a policy grow the job to the
    whole cluster, and crossed bounds admit no count at all."""
    if ("min_gpus" in hints or "max_gpus" in hints) and "elastic" not in hints:
        raise HintError("blox-slurm: hints min_gpus and max_gpus need elastic=1 in --comment")
    if "elastic" in hints and "max_gpus" not in hints:
        raise HintError("blox-slurm: elastic=1 needs max_gpus=N in --comment")
    if int(hints.get("min_gpus", 1)) > int(hints.get("max_gpus", MAX_ELASTIC_GPUS)):
        raise HintError("blox-slurm: min_gpus is above max_gpus in --comment")


def parse_user_hints(comment: str | None) -> Hints | None:
    """The hints of a job's ``--comment``: ``None`` when it does not start with ``blox:`` (an
    ordinary comment, no hints), else a dict (``model`` as str, the others as int).
    Raises :class:`HintError` with the plugin's message for anything else."""
    if comment is None or not comment.startswith(HINT_PREFIX):
        return None
    # Slurm's Lua sees bytes: lengths are byte lengths.
    if len(comment.encode("utf-8", "surrogatepass")) > MAX_COMMENT:
        raise HintError(f"blox-slurm: --comment hints may be at most {MAX_COMMENT} characters")
    hints: Hints = {}
    for pair in comment[len(HINT_PREFIX):].split(","):
        if not pair:
            raise HintError(
                "blox-slurm: empty hint in --comment; expected blox:key=value[,key=value...]"
            )
        key, eq, value = pair.partition("=")
        if not eq:
            raise HintError("blox-slurm: hint without '=' in --comment; expected key=value")
        if key not in _HINTS:
            if re.fullmatch(r"[A-Za-z0-9_]{1,32}", key):
                raise HintError(f"blox-slurm: unknown hint '{key}' in --comment; {_ALLOWED}")
            raise HintError(f"blox-slurm: unknown hint in --comment; {_ALLOWED}")
        if key in hints:
            raise HintError(f"blox-slurm: hint '{key}' given twice in --comment")
        check, expect = _HINTS[key]
        normalized = check(value)
        if normalized is None:
            raise HintError(
                f"blox-slurm: bad value for hint '{key}' in --comment: expected {expect}"
            )
        hints[key] = normalized
    _check_elastic(hints)
    return hints


def format_hints(hints: Mapping[str, str | int]) -> str:
    """The ``;key=value`` suffix the plugin appends to the mark (sorted keys)."""
    return "".join(f";{k}={hints[k]}" for k in sorted(hints))


# --------------------------------------------------------------------------- admin_comment


@dataclass(frozen=True)
class ManagedMark:
    """What the plugin wrote into a managed job's ``admin_comment``."""

    failopen: bool  # not held at submission: Slurm may have started it on its own
    hints: Hints = field(default_factory=dict)


def parse_admin_comment(text: str | None) -> ManagedMark | None:
    """The mark in ``admin_comment``, or ``None`` for a job the plugin did not mark (never
    managed). A mark whose hint part is malformed (only an admin could have written it) still
    counts as managed, with no hints: the job stays scheduled and can be handed back."""
    if text is None or not text.startswith(MARK):
        return None
    rest = text[len(MARK):]
    failopen = rest.startswith(FAILOPEN)
    if failopen:
        rest = rest[len(FAILOPEN):]
    if rest and not rest.startswith(";"):
        return None  # "blox:managedX": not our mark
    return ManagedMark(failopen, _parse_mark_hints(rest))


def _parse_mark_hints(rest: str) -> Hints:
    if not rest:
        return {}
    try:
        hints = parse_user_hints(HINT_PREFIX + rest[1:].replace(";", ","))
    except HintError:
        return {}
    # Only the plugin's own normal form counts: sorted keys, no leading zeros.
    return hints if hints is not None and format_hints(hints) == rest else {}


# --------------------------------------------------------------------------- heartbeat

_HEARTBEAT = re.compile(rb"[ \t\r\n]*([0-9]{1,12})[ \t\r\n]*")


def write_heartbeat(path: Path | str, now: float | None = None) -> None:
    """Write ``now`` (integer Unix seconds) atomically: the plugin never reads a torn file."""
    path = Path(path)
    stamp = int(time.time() if now is None else now)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(f"{stamp}\n")
        os.chmod(tmp, 0o644)  # slurmctld runs as SlurmUser, not as the controller's user
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def clear_heartbeat(path: Path | str) -> None:
    """A clean stop: no heartbeat reads as stale at once, so the plugin fails open and the
    watchdog may hand back now, not a lease later (a stopped controller's last stamp would
    otherwise hold new jobs that nobody will release)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def read_heartbeat(path: Path | str) -> float | None:
    """The heartbeat's timestamp; ``None`` when missing, unreadable or not one integer."""
    try:
        with open(path, "rb") as f:
            data = f.read(65)
    except OSError:
        return None
    m = _HEARTBEAT.fullmatch(data) if len(data) <= 64 else None
    return float(int(m[1])) if m else None


def heartbeat_age(path: Path | str, now: float) -> float | None:
    """Seconds since the last heartbeat (negative if it lies in the future), ``None`` if none."""
    stamp = read_heartbeat(path)
    return None if stamp is None else now - stamp


def heartbeat_fresh(path: Path | str, max_age: float, now: float) -> bool:
    """The plugin's rule: fresh when at most ``max_age`` seconds from ``now`` either way."""
    age = heartbeat_age(path, now)
    return age is not None and abs(age) <= max_age


# --------------------------------------------------------------------------- config

_PARTITION = re.compile(r"[A-Za-z0-9_\-]+")


@dataclass(frozen=True)
class JobSubmitConfig:
    managed_partitions: tuple[str, ...] = ("blox",)
    heartbeat: str = "/var/lib/blox-slurm/heartbeat"
    max_age: int = 90
    operator_uids: tuple[int, ...] = ()  # besides root: may release/reprioritize managed jobs


def _split(value: str) -> list[str]:
    return [item.strip(" \t\r") for item in value.split(",")]


def _conf_partitions(value: str) -> tuple[str, ...] | None:
    names = _split(value)
    return tuple(names) if all(_PARTITION.fullmatch(n) for n in names) else None


def _conf_heartbeat(value: str) -> str | None:
    return value if re.fullmatch(r"/[^ \t]*", value) else None


def _conf_max_age(value: str) -> int | None:
    return _whole_number(value, 10**6)


def _conf_uids(value: str) -> tuple[int, ...] | None:
    if value == "":
        return ()
    items = _split(value)
    if not all(re.fullmatch(r"[0-9]{1,10}", i) for i in items):
        return None
    return tuple(int(i) for i in items)


_CONFIG_KEYS: dict[str, Callable[[str], object | None]] = {
    "managed_partitions": _conf_partitions,
    "heartbeat": _conf_heartbeat,
    "max_age": _conf_max_age,
    "operator_uids": _conf_uids,
}


def read_config(path: Path | str) -> tuple[JobSubmitConfig, str | None]:
    """Parse the plugin's config exactly as the plugin does: ``(config, None)``, the defaults
    and ``None`` for a missing (or unreadable) file, or the defaults and the error for a bad one."""
    try:
        text = Path(path).read_bytes().decode("latin-1")  # bytes, like Lua
    except OSError:  # like the plugin: a file it cannot open is a missing file
        return JobSubmitConfig(), None
    values: dict[str, object] = {}
    for lineno, raw in enumerate(text.split("\n"), 1):
        line = raw.split("#", 1)[0].strip(" \t\r")
        if not line:
            continue
        m = re.fullmatch(r"([a-z_]+)[ \t]*=[ \t]*(.*)", line, re.DOTALL)
        parse = _CONFIG_KEYS.get(m[1]) if m else None
        parsed = parse(m[2]) if parse and m else None
        if m is None or parsed is None:
            return JobSubmitConfig(), (
                f"{path}:{lineno}: expected one of managed_partitions, heartbeat, max_age, "
                "operator_uids with a valid value"
            )
        if m[1] in values:
            return JobSubmitConfig(), f"{path}:{lineno}: {m[1]} given twice"
        values[m[1]] = parsed
    return JobSubmitConfig(**values), None  # type: ignore[arg-type]


def write_config(
    directory: Path | str,
    managed_partitions: Sequence[str],
    heartbeat_path: Path | str,
    max_age: int,
    operator_uids: Sequence[int] = (),
) -> Path:
    """Write ``blox_job_submit.conf`` into ``directory`` (the directory of slurm.conf).
    Refuses values the plugin would reject, so a typo never silently becomes the defaults."""
    heartbeat = str(heartbeat_path)
    if not managed_partitions or not all(_PARTITION.fullmatch(p) for p in managed_partitions):
        raise ValueError(f"bad partition names: {list(managed_partitions)!r}")
    if _conf_heartbeat(heartbeat) is None:
        raise ValueError(f"heartbeat path must be absolute, without blanks: {heartbeat!r}")
    if not 1 <= max_age <= 10**6:
        raise ValueError(f"max_age must be 1..1000000 seconds, not {max_age}")
    if not all(0 <= u < 10**10 for u in operator_uids):
        raise ValueError(f"bad uids: {list(operator_uids)!r}")
    path = Path(directory) / CONFIG_NAME
    path.write_text(
        "# blox-slurm job-submit plugin; read when Slurm (re)loads job_submit.lua\n"
        f"managed_partitions = {','.join(managed_partitions)}\n"
        f"heartbeat = {heartbeat}\n"
        f"max_age = {max_age}\n"
        f"operator_uids = {','.join(str(u) for u in operator_uids)}\n"
    )
    return path
