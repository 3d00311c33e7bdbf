"""Typed exceptions. Each carries the context a student needs: which rank, why, and the
``Run`` with everything measured up to the failure (``err.run``), so no result is lost."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from labkit.launch.run import Run


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
    """A run that started but did not end well. ``run`` holds what was measured."""

    def __init__(self, message: str, run: Run | None = None, **context: Any) -> None:
        super().__init__(message)
        self.run = run
        self.context = context

    def _render_traceback_(self) -> list[str]:
        """What IPython (and so papermill and nbval) shows: our message and the rank's
        traceback, not the launcher's own frames, which would tell a student nothing."""
        lines = [f"{type(self).__name__}: {self}"]
        detail = self.context.get("traceback")
        if detail:
            lines += ["", *str(detail).rstrip().splitlines()]
        return lines

    def __getattr__(self, name: str) -> Any:
        # err.rank, err.exit_code, ... read from the context given at raise time
        try:
            return self.__dict__["context"][name]
        except KeyError:
            raise AttributeError(name) from None


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

    def __init__(self, message: str, run: Run | None = None) -> None:
        super().__init__(message)
        self.run = run
