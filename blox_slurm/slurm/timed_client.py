"""Time every call the controller makes to Slurm, whatever the backend.

A proxy rather than timers inside each backend: the CLI, pyslurm and the in-memory fake all
answer the same :class:`~blox_slurm.slurm.client.SlurmClient` methods, so one wrapper times
them all, labelled by the method's name (a short, fixed set: the Prometheus label's values
cannot grow with job ids or arguments). A call that raises is timed too: a slurmctld that
times out is what the histogram must show.
"""

from __future__ import annotations

import functools
from typing import Any, cast

from prometheus_client import Histogram

from .client import SlurmClient

#: The protocol's methods; anything else (``calls``, a fake's helpers) passes through untimed.
VERBS = frozenset(name for name, value in vars(SlurmClient).items()
                  if not name.startswith("_") and callable(value))


class _Timed:
    def __init__(self, client: SlurmClient, seconds: Histogram) -> None:
        self._client = client
        self._seconds = seconds

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name not in VERBS:
            return attr
        timer = self._seconds.labels(name)

        @functools.wraps(attr)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with timer.time():
                return attr(*args, **kwargs)

        return timed


def timed(client: SlurmClient, seconds: Histogram) -> SlurmClient:
    """``client`` with each protocol call observed in ``seconds`` (labelled ``verb``)."""
    return cast(SlurmClient, _Timed(client, seconds))

