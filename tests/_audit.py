"""What the controller's audit log may show in a live test: Slurm's failures the test did
not cause."""

from __future__ import annotations

from typing import Any

#: What Slurm answers a pin or hold of a job it started between the round's read and the verb:
#: a race no controller can avoid; the next round sees the job running and acts on that.
RACED_A_START = "Job is no longer pending execution"
#: ... and what 24.11 and 26.05 answer a pin (``ReqNodeList``) of a job that started on other
#: nodes meanwhile: on a running job the update means "shrink to these nodes".
RACED_A_START_ELSEWHERE = "Invalid node name specified"


def raced(verb: str, error: str) -> bool:
    return (verb.startswith("pin ") and (RACED_A_START in error
                                         or RACED_A_START_ELSEWHERE in error)) or (
        verb == "hold" and RACED_A_START in error)


def unexpected_failures(db: Any) -> list[tuple[str, str, str]]:
    """The store's failed actions as (verb, job ids, Slurm's error), except pins and holds
    that lost that race."""
    return [(r["verb"], r["ids"], r["error"]) for r in db.query(
        "SELECT * FROM actions WHERE ok = 0") if not raced(r["verb"], r["error"] or "")]
