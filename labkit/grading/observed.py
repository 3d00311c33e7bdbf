"""What labkit observed on the ranks of a run, as the notebook's ``Run`` holds it.

``labkit.ranks.observe`` sends each rank's observation of a cell as an ``observed`` message
(``Msg.OBSERVED``); a ``Run`` keeps it in ``run.events``. The notebook's checks read it from there
for immediate feedback; the grader reads the copy that reached its own sink instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from labkit.grading.compare import Verdict
from labkit.wire.protocol import Msg
from labkit.wire.records import last_message


def observations_of(value: object) -> dict[int, dict[str, Any]]:
    """``{rank: observation}`` of a Run (the last cell it ran); empty for anything that is not a Run.

    ``value`` is whatever the student handed in, so it is looked at, never trusted to be a run."""
    events = getattr(value, "events", None)
    if not isinstance(events, Mapping):
        return {}
    out = {}
    for r in events:
        if not isinstance(events[r], (list, tuple)) or not all(isinstance(m, dict) for m in events[r]):
            continue
        found = last_message(events, r, Msg.OBSERVED)
        if found is not None and isinstance(found.get("observation"), dict):
            out[int(r)] = found["observation"]
    return out


def run_id(value: object) -> str | None:
    """The id a Run's observations carry (a warm cell's is ``<session>#<cell>``)."""
    found = getattr(value, "run_id", None)
    return found if isinstance(found, str) else None


def as_verdict(result: Any, hint_key: str) -> Verdict:
    """A verifier's answer as a Verdict: True/False, or a Verdict (a wrong one without a key gets the hint)."""
    if isinstance(result, Verdict):
        return result if result.correct or result.key else Verdict(False, hint_key, result.fields)
    return Verdict(True) if result else Verdict(False, hint_key)
