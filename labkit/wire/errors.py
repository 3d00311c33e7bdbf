"""Typed exceptions. Each carries the context a student needs: which rank, why, and the
``Run`` with everything measured up to the failure (``err.run``), so no result is lost."""

from __future__ import annotations

from typing import Any

from labkit.wire.records import RunRecord


class LabkitError(Exception):
    """Base class of labkit's errors."""


class OptionError(LabkitError, ValueError):
    """A bad option or input, found before any process is started."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]  # the message says it all; no frames


class CellSyntaxError(OptionError):
    """The cell does not compile; raised by ``%%torchrun`` before anything is spawned."""

    def _render_traceback_(self) -> list[str]:
        return str(self).splitlines()


class RunError(LabkitError, RuntimeError):
    """A run that started but did not end well. ``run`` holds what was measured; the rest says
    which rank and how, where the error is about one (None where it is not)."""

    rank: int | None  # the rank whose failure explains the run
    exit_code: int | None  # its exit code (negative: killed by that signal)
    signal: str | None  # the signal that ended it ("SIGKILL")
    traceback: str | None  # the rank's traceback of the cell's error
    kind: str | None  # how the rank failed: error, exit, signal, vanished
    alive: list[int] | None  # RunTimeout: the ranks still running at the timeout

    FIELDS = ("rank", "exit_code", "signal", "traceback", "kind", "alive")

    def __init__(
        self,
        message: str,
        run: RunRecord | None = None,
        *,
        rank: int | None = None,
        exit_code: int | None = None,
        signal: str | None = None,
        traceback: str | None = None,
        kind: str | None = None,
        alive: list[int] | None = None,
    ) -> None:
        super().__init__(message)
        self.run = run
        self.rank, self.exit_code, self.signal = rank, exit_code, signal
        self.traceback, self.kind, self.alive = traceback, kind, alive

    @property
    def context(self) -> dict[str, Any]:
        """What it carries besides the message and the run, as given (what ``with_note`` passes on)."""
        return {name: getattr(self, name) for name in self.FIELDS if getattr(self, name) is not None}

    def _render_traceback_(self) -> list[str]:
        """What IPython (and so papermill and nbval) shows: our message and the rank's
        traceback, not the launcher's own frames, which would tell a student nothing."""
        lines = [f"{type(self).__name__}: {self}"]
        if self.traceback:
            lines += ["", *str(self.traceback).rstrip().splitlines()]
        return lines


class RankError(RunError):
    """A rank raised, exited with a non-zero code, or was killed by a signal."""


class RunTimeout(RunError):
    """The run went past ``timeout``; ``alive`` names the ranks that were still running."""


class RunStopped(RunError):
    """The run was stopped from the dashboard's Stop button or ``Run.stop()``."""


class LaunchError(RunError):
    """torchrun itself failed, or died, before or while the ranks ran."""


class LabkitInternalError(RunError):
    """A fault inside labkit (a malformed message, a reader that crashed)."""


class RunInterrupted(KeyboardInterrupt):
    """The kernel was interrupted; every rank was stopped. ``run`` holds the partial results."""

    def __init__(self, message: str, run: RunRecord | None = None) -> None:
        super().__init__(message)
        self.run = run
