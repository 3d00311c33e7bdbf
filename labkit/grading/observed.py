"""What labkit observed on the ranks of a run, as the notebook's ``Run`` holds it.

``labkit.ranks.observe`` sends each rank's observation of a cell as an ``"observed"``
message; a ``Run`` keeps it in ``run.events``. The notebook's checks read it from there for
immediate feedback; the grader reads the copy that reached its own sink instead.
"""

from __future__ import annotations

from typing import Any

from labkit.grading.compare import Verdict

KIND = "observed"  # labkit.ranks.observe.KIND (not imported: that module imports torch)


def observations_of(run: Any) -> dict[int, dict[str, Any]]:
    """``{rank: observation}`` of a Run (the last cell it ran); empty for anything that is not a Run."""
    events = getattr(run, "events", None)
    if not isinstance(events, dict):
        return {}
    out = {}
    for r, msgs in events.items():
        found = [m for m in msgs if isinstance(m, dict) and m.get("t") == KIND]
        if found and isinstance(found[-1].get("observation"), dict):
            out[int(r)] = found[-1]["observation"]
    return out


def run_id(run: Any) -> str | None:
    """The id a Run's observations carry (a warm cell's is ``<session>#<cell>``)."""
    value = getattr(run, "run_id", None)
    return value if isinstance(value, str) else None


def as_verdict(result: Any, hint_key: str) -> Verdict:
    """A verifier's answer as a Verdict: True/False, or a Verdict (a wrong one without a key gets the hint)."""
    if isinstance(result, Verdict):
        return result if result.correct or result.key else Verdict(False, hint_key, result.fields)
    return Verdict(True) if result else Verdict(False, hint_key)
