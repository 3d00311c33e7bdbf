"""What happens when a run has ended, from layers above the launcher.

    from labkit.launch import finished
    finished.subscribe(fn)        # fn(run) after every run of this process has ended (cold or warm)

The launcher calls ``notify(run)`` once the run is over (its error set), whether it succeeded
or not, and before its view shows the end. A subscriber may return a mime bundle: what it adds
to the run's output. The view shows the bundles with its own last output (one display message
instead of one more per subscriber; in a warm cell each costs about a millisecond), or alone.
``labkit.regress.record`` subscribes when ``%load_ext labkit`` runs, to leave each run's record
in the notebook; the launcher itself knows nothing of it. A subscriber that raises is reported
as a warning and never changes the run's outcome.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from labkit.launch.run import Run

Subscriber = Callable[["Run"], "dict[str, Any] | None"]
_subscribers: list[Subscriber] = []


def subscribe(fn: Subscriber) -> None:
    """Call ``fn(run)`` after each run ends (once, however often it is subscribed); what it
    returns, a mime bundle or None, goes into the run's output."""
    if fn not in _subscribers:
        _subscribers.append(fn)


def unsubscribe(fn: Subscriber) -> None:
    if fn in _subscribers:
        _subscribers.remove(fn)


def notify(run: Run) -> dict[str, Any]:
    """Tell every subscriber that ``run`` ended; the mime bundles they return, merged."""
    bundle: dict[str, Any] = {}
    for fn in list(_subscribers):
        try:
            bundle.update(fn(run) or {})
        except Exception as exc:  # a record that cannot be written must not fail the student's cell
            warnings.warn(f"labkit: {getattr(fn, '__qualname__', fn)} failed after {run.run_id}: {exc!r}", stacklevel=2)
    return bundle
