"""systemd's service protocol for the daemons: readiness, status and the watchdog.

Why: with ``Type=simple`` systemd calls a controller "started" before it has read its config
or reached Slurm, and never notices one hung inside a call (its heartbeat goes stale, so the
plugin fails open and the watchdog timer hands jobs back: safe, but the partition is then
unscheduled until someone looks). With ``Type=notify`` and ``WatchdogSec=`` the daemon says
READY=1 once its start-up checks passed, and pings WATCHDOG=1 only while it makes progress, so
systemd restarts a hung daemon by itself. Outside systemd (``NOTIFY_SOCKET`` unset) every call
does nothing. The protocol is one datagram per message on a Unix socket (sd_notify(3)); it is
a few lines, so no dependency.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)

# A round longer than this is hung, not slow: each Slurm call has a 30 s timeout and at most
# four attempts, and a round makes a handful of calls.
HUNG_ROUND_SECONDS = 600.0


class Notifier:
    """Sends sd_notify messages to the socket systemd named in the environment."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        path = env.get("NOTIFY_SOCKET", "")
        # "@name" is Linux's abstract namespace: a leading NUL byte on the wire.
        self.address = "\0" + path[1:] if path.startswith("@") else path
        self.watchdog_interval = _watchdog_interval(env)

    @property
    def enabled(self) -> bool:
        return bool(self.address)

    def send(self, *lines: str) -> bool:
        """One message of ``KEY=value`` lines; ``False`` (logged once per call) when it could
        not be sent. Never raises: a lost status line must not stop the scheduler."""
        if not self.enabled:
            return False
        payload = "\n".join(line.replace("\n", " ") for line in lines).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.sendto(payload, self.address)
        except OSError as exc:
            log.warning("cannot notify systemd at %s: %s", self.address.lstrip("\0"), exc)
            return False
        return True

    def ready(self, status: str) -> bool:
        return self.send("READY=1", f"STATUS={status}")

    def status(self, status: str) -> bool:
        return self.send(f"STATUS={status}")

    def stopping(self) -> bool:
        return self.send("STOPPING=1")


def _watchdog_interval(env: Mapping[str, str]) -> float | None:
    """``WatchdogSec=`` in seconds, when it is set for this process (``WATCHDOG_PID`` names
    another process when a wrapper started us: then the watchdog is not ours to feed)."""
    usec, pid = env.get("WATCHDOG_USEC", ""), env.get("WATCHDOG_PID", "")
    if not usec.isdigit() or int(usec) == 0 or (pid and pid != str(os.getpid())):
        return None
    return int(usec) / 1e6


class Watchdog:
    """Feeds systemd's watchdog from a thread, but only while the daemon shows progress.

    A thread that pinged unconditionally would keep a controller stuck in a call alive for
    ever; pinging from the round loop alone would kill a healthy controller whose rounds are
    longer than ``WatchdogSec``. So the loop calls :meth:`progress` after each round and the
    thread pings while the last progress is at most ``allowance`` seconds old. A standby
    controller runs no rounds and waits on a lock that cannot hang: it is alive until
    :meth:`activate`.
    """

    def __init__(self, notifier: Notifier, allowance: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.notifier = notifier
        self.allowance = allowance
        self.clock = clock
        self._last = clock()
        self._active = False

    def activate(self) -> None:
        self._active = True
        self.progress()

    def progress(self) -> None:
        self._last = self.clock()

    def alive(self) -> bool:
        return not self._active or self.clock() - self._last <= self.allowance

    def start(self, stop: threading.Event) -> threading.Thread | None:
        """Ping at a third of systemd's interval until ``stop``; no thread when no watchdog."""
        interval = self.notifier.watchdog_interval
        if interval is None:
            return None

        def feed() -> None:
            while not stop.wait(interval / 3):
                if self.alive():
                    self.notifier.send("WATCHDOG=1")
                else:
                    log.error("no round has finished for %.0f s: letting systemd's watchdog "
                              "restart this controller", self.clock() - self._last)

        thread = threading.Thread(target=feed, name="sd-watchdog", daemon=True)
        thread.start()
        return thread

