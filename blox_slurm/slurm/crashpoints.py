"""Named points where the crash campaign kills the controller, instead of hoping a timer does.

``BLOX_CRASHPOINT=<point>`` in a controller's environment makes it ``SIGKILL`` itself the
first time it passes ``<point>`` (tests/reliability/test_crash.py arms one per life). Unset,
which is every real deployment, a crashpoint is one string comparison. The points are the
seams a crash can split: a round observed but not decided, decided but not applied, a verb
done but not recorded, a job pinned but not released.
"""

from __future__ import annotations

import os
import signal

POINTS = ("observed", "decided", "acted", "pinned")
_ARMED = os.environ.get("BLOX_CRASHPOINT", "")


def crashpoint(name: str) -> None:
    if name == _ARMED:
        os.kill(os.getpid(), signal.SIGKILL)
