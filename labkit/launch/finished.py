"""What happens when a run has ended, from layers above the launcher.

    from labkit.launch import finished
    finished.subscribe(fn)        # fn(run) after every run of this process has ended (cold or warm)

The launcher calls ``notify(run)`` once the run is over (its error set, its view finished),
whether it succeeded or not. ``labkit.regress.record`` subscribes when ``%load_ext labkit``
runs, to leave each run's record in the notebook; the launcher itself knows nothing of it.
A subscriber that raises is reported as a warning and never changes the run's outcome.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from labkit.launch.run import Run

_subscribers: list[Callable[[Run], None]] = []


def subscribe(fn: Callable[[Run], None]) -> None:
    """Call ``fn(run)`` after each run ends (once, however often it is subscribed)."""
    if fn not in _subscribers:
        _subscribers.append(fn)


def unsubscribe(fn: Callable[[Run], None]) -> None:
    if fn in _subscribers:
        _subscribers.remove(fn)


def notify(run: Run) -> None:
    for fn in list(_subscribers):
        try:
            fn(run)
        except Exception as exc:  # a record that cannot be written must not fail the student's cell
            warnings.warn(f"labkit: {getattr(fn, '__qualname__', fn)} failed after {run.run_id}: {exc!r}", stacklevel=2)
