"""Exactly one active controller per heartbeat file.

Two controllers acting at once issued every pin, release and requeue twice and re-pinned the
same jobs to different nodes (red team item 12). So a controller must hold an exclusive
``flock`` on ``<heartbeat>.lock`` before its first round; a second one stands by, like
Slurm's backup controller, and takes over when the lock frees. The kernel drops a ``flock``
when its holder exits however it exits (``kill -9`` included), so there is no lease to expire
and no stale owner to clean up; a controller that hangs while holding it stops writing the
heartbeat, so the plugin fails open meanwhile. The lock lives beside the heartbeat because
the heartbeat is what makes a controller's word count; a standby on another host must see
the same file system (``flock`` over NFS is only as good as the NFS).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from pathlib import Path


class ActiveLock:
    def __init__(self, heartbeat: str | Path) -> None:
        self.path = Path(f"{heartbeat}.lock")
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        """Take the lock if it is free; on success write who holds it, for ``holder``."""
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode())
        self._fd = fd
        return True

    def holder(self) -> str:
        """Who holds the lock, as its holder wrote it ("" when unknown)."""
        with contextlib.suppress(OSError):
            return self.path.read_text(errors="replace").strip()
        return ""

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None
