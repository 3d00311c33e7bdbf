"""Launch a cell on N torchrun ranks, supervise it from the cell's main thread, clean up.

    run = labkit.torchrun("print(rank.rank())", nproc=2)

One torchrun per call: a ``RankGroup`` (``labkit.launch.group``) starts it, supervises it until
torchrun exits, the timeout passes, the Stop button or the kernel's interrupt ends it, and
tears it down; ``labkit.launch.diagnose`` turns what happened into the error the cell raises.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import labkit
from labkit import log as logs
from labkit.i18n import t
from labkit.launch import diagnose, finished
from labkit.launch.group import Job, RankGroup, cleanup, find_run_processes
from labkit.launch.nodes import failed_nodes, failure_note
from labkit.launch.options import PYTHON, RunConfig, config, emulated, resolve
from labkit.launch.run import Run
from labkit.ranks.profiling import profile_dir
from labkit.wire.errors import RunInterrupted
from labkit.wire.protocol import Outcome, Status
from labkit.wire.setting import Backend

__all__ = ["Launch", "cleanup", "find_run_processes", "torchrun"]


def after_run(run: Run, cfg: RunConfig, group: RankGroup) -> None:
    """What emulated nodes and ``--profile`` leave on the run: ``run.emulation``, ``run.profiles``."""
    import glob
    import os

    from labkit.launch import netem

    run.emulation = netem.Emulation.read(run.run_dir) if group.nodes is not None and group.nodes.local else None
    folder = profile_dir(run.run_id)
    run.profiles = sorted(glob.glob(os.path.join(folder, "rank*.json"))) if cfg.profile else []
    if run.profiles and not cfg.quiet:
        print(t("launch.profile_written", folder=folder))


def torchrun(
    target: str | Callable[..., Any],
    nproc: int | None = None,
    backend: str = Backend.AUTO,
    timeout: float | None = None,
    vars: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    quiet: bool = False,
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    raise_on_error: bool = True,
    **options: Any,
) -> Run:
    """Run ``target`` (code, a path to a .py file, or a function) on ``nproc`` torchrun ranks.

    Returns a ``Run``; raises ``RankError``/``RunTimeout``/... (each carrying ``.run``) when
    the run fails, unless ``raise_on_error=False``. ``options`` are ``RunConfig``'s other fields
    (``display``, ``pin``, ``nodes``, ...); a name it has not is an ``OptionError`` with the closest one.
    """
    given = {"nproc": nproc, "backend": backend, "timeout": timeout, "env": env or {}, "quiet": quiet}
    cfg = resolve(config(PYTHON, **given, **options))
    job = Job.make(target, vars or {}, args, kwargs or {})
    if emulated(cfg) and not cfg.quiet:
        from labkit.launch.netem import latency_note

        note = latency_note(cfg.link)
        if note:
            print(note)
    return Launch(cfg, job).run(raise_on_error=raise_on_error)


class Launch:
    """One one-shot run: start the group, watch it until it ends, explain how it ended."""

    def __init__(self, cfg: RunConfig, job: Job) -> None:
        self.cfg = cfg
        self.job = job
        self.group = RankGroup(cfg, job)
        self.stop_requested = False
        self._deadline: float | None = None
        self._first_failure: float | None = None

    @property
    def run_id(self) -> str:
        return self.group.run_id

    def run(self, raise_on_error: bool = True) -> Run:
        from labkit.views.dashboard import make_view, show

        try:
            run = self.group.start()  # it may wait for the prefork server's import: a Ctrl-C there ends it all
        except KeyboardInterrupt:
            raise RunInterrupted(t("launch.start_interrupted")) from None
        labkit.last_run = run
        self._deadline = run.started + self.cfg.timeout if self.cfg.timeout else None
        outcome = Outcome.EXITED
        error: BaseException | None = None
        view = None
        try:
            view = make_view(run, self.request_stop, display=self.cfg.display, quiet=self.cfg.quiet)
            outcome = self.group.supervise(run, lambda: self._check(run), view)
        except KeyboardInterrupt:
            outcome = Outcome.INTERRUPTED
        finally:
            alive = None
            if outcome == Outcome.TIMEOUT:  # where each hung rank is, before the teardown moves it
                self.group.dump_stacks([s.pid for s in run.ranks.values() if s.pid and s.exit_code is None])
                alive = diagnose.still_running(run)  # the teardown's exit codes mark them stopped or failed
            self.group.end(run)
            logs.get(__name__).debug("%s: ended (%s), processes left: %s", run.run_id, outcome, run.unkillable)
            # the agents' own log (srun's words on our own stop: noise)
            log = "" if self.group.nodes is None or self.group.stopped_by_us else self.group.node_log()
            error = diagnose.explain(
                run,
                outcome,
                self.group.agent_log(),
                timeout=self.cfg.timeout,
                alive=alive,
                source=self.job.source or "",
                stopped_by_us=self.group.stopped_by_us,
                failed_nodes=failed_nodes(log),
            )
            if error is not None and self.group.nodes is not None:  # name the node, and what srun said
                note = failure_note(run, getattr(error, "rank", None), log, self.group.nodes.nnodes, str(error))
                error = diagnose.with_note(error, note) if note else error
            run.error = error
            run.ended = time.time()
            after_run(run, self.cfg, self.group)
            extra = finished.notify(run)
            if view is not None:
                view.finish(run, extra)
            else:
                show(extra)
        if error is not None and (raise_on_error or isinstance(error, RunInterrupted)):
            raise error
        return run

    def _dump_the_awaited(self, run: Run) -> None:
        """A rank failed waiting in init_process_group for ranks that never came: before torchrun
        stops them, ask those ranks where they are (their stack goes to their stderr)."""
        awaited = {r for s in run.ranks.values() for r in diagnose.waited_for(s.error)}
        pids = [s.pid for r, s in run.ranks.items() if r in awaited and s.pid and s.exit_code is None]
        self.group.dump_stacks(pids)

    def request_stop(self) -> None:
        self.stop_requested = True

    def _check(self, run: Run) -> Outcome | None:
        """Why to stop watching now, if there is a reason."""
        if not self.group.agent_running():
            return Outcome.EXITED
        now = time.time()
        if self.stop_requested:
            return Outcome.STOPPED
        if self._deadline is not None and now > self._deadline:
            return Outcome.TIMEOUT
        failed = any(
            s.status == Status.FAILED or (s.pid and not s.connected and s.exit_code is None) for s in run.ranks.values()
        )
        if failed and self._first_failure is None:
            self._first_failure = now
            self._dump_the_awaited(run)
        # torchrun stops the other ranks within a fraction of a second; give it a few seconds
        if self._first_failure is not None and now - self._first_failure > self.cfg.grace + 3:
            return Outcome.STUCK  # torchrun should have stopped everyone by now; we do it
        return None
