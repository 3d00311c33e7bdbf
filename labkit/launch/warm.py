"""Warm ranks: one torchrun group that stays up across cells, with its state.

    session = labkit.Session(nproc=2)                       # or: %torchrun_start -n 2
    session.run("model = build()")                          # or: %%ranks
    session.run("model = fully_shard(model, mesh=mesh)")    # the namespace persists
    run = session.run("for i in rank.steps(3): train()")    # a Run, as %%torchrun returns

A cold launch costs seconds (torchrun, then ``import torch`` in every rank); a snippet
on ranks that are already up costs a millisecond. A session is one torchrun launch
whose ranks run ``labkit.ranks.bootstrap`` in "serve" mode: each waits for cells on the
channel, runs them on its main thread in a namespace that persists, and answers
``cell_done`` or ``cell_error``. Every cell gets its own ``Run`` (values, memory,
steps, and that cell's output only) and the same dashboard as ``%%torchrun``.

What a failure leaves behind:
- A cell raises on some ranks: the error names the rank and the cell line, and the
  session lives on. Ranks still busy ``error_grace`` seconds later are most likely
  waiting for the failed one in a collective: they are interrupted, as below.
- Timeout, the kernel's interrupt, the Stop button: each busy rank gets SIGINT
  (KeyboardInterrupt in the cell). A rank blocked in a collective runs no Python
  until the collective returns, so after INTERRUPT_WAIT its collective connections
  are cut, which fails the collective at once. The session lives on, but the ranks
  may disagree about which collective comes next: the error says so, offers
  ``restart()``, and the session stays marked ``unsafe``.
- A rank that ignores all that, a rank that dies, torchrun dying: the session ends,
  every process of it is killed (the rank group's teardown), and the error says why.
- The kernel ends: ``stop()`` runs at exit; if the kernel is SIGKILLed, each rank's
  lifeline (the channel closing) ends it.
Between cells nothing polls: ``run()`` first checks that every rank is still there.
"""

from __future__ import annotations

import signal
import time
import weakref
from dataclasses import replace
from typing import Any

import labkit
from labkit.i18n import t
from labkit.launch import diagnose, finished
from labkit.launch.diagnose import ranks_text, with_note
from labkit.launch.group import Job, RankGroup, sigint_deferred
from labkit.launch.options import SESSION, RunConfig, check_picklable, check_timeout, coerce, config, resolve
from labkit.launch.run import Run
from labkit.wire.errors import LaunchError, OptionError, RankError, RunError, RunInterrupted, RunStopped, RunTimeout
from labkit.wire.protocol import TYPE, Msg, Outcome, Status, retyped
from labkit.wire.setting import Backend, Display

ERROR_GRACE = 2.0  # after one rank fails, seconds the others get to finish the cell before they are interrupted
INTERRUPT_WAIT = 1.0  # seconds ranks get to answer SIGINT; then their collective connections are cut
# seconds after the cut; a rank still busy then is stuck for good and the session ends.
# Not less: on a loaded 2-core CI machine a cut rank once took over 2 s to answer.
CUT_WAIT = 5.0
STOP_WAIT = 5.0  # seconds for a clean stop: the ranks exit 0, then torchrun does


class SessionEnded(RunError):
    """The session's ranks are not running: never started, stopped, or ended by a failure."""


class Session:
    """A group of torchrun ranks kept alive across cells; ``run(code)`` runs a cell on all of them.

    Ends with ``stop()``, with the ``with`` block, when it is garbage collected, and with the kernel.
    """

    def __init__(
        self,
        nproc: int | None = None,
        backend: str = Backend.AUTO,
        pg_timeout: float | None = None,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        display: str = Display.AUTO,
        quiet: bool = False,
        error_grace: float = ERROR_GRACE,
        start: bool = True,
        pin: bool = False,
        **options: Any,
    ) -> None:
        """``options``: ``RunConfig``'s other fields a session takes (``start_method``, ``sample_interval``,
        ``grace``); a name it has not is an ``OptionError`` with the closest one."""
        given = {"nproc": nproc, "backend": backend, "env": env or {}, "quiet": quiet, "display": display, "pin": pin}
        if pg_timeout is not None:  # else RunConfig's: LABKIT_PG_TIMEOUT
            given["pg_timeout"] = pg_timeout
        self.cfg = resolve(config(SESSION, **given, **options))
        self.timeout = check_timeout(timeout)
        self.error_grace = error_grace
        self.cells = 0
        self.unsafe: str | None = None  # why the collective state cannot be trusted, once it cannot
        self.start_run: Run | None = None  # the start-up, as a Run: the ranks' hellos and early output
        self.start_seconds: float | None = None
        self._group: RankGroup | None = None
        self._pending: list[dict[str, Any]] = []  # read between cells; they go to the next cell's Run
        self._finalizer: weakref.finalize | None = None
        self._why_down = t("launch.warm.why.never")
        self._busy = False
        self._stop_requested = False
        if start:
            self.start()

    # -- life cycle -------------------------------------------------------------

    def start(self) -> Session:
        """Launch the ranks and wait until every one has joined the process group."""
        if self._group is not None and not self._group.ended:
            return self
        group = RankGroup(self.cfg, Job.serve())
        self._group, self.cells, self.unsafe, self._pending = group, 0, None, []
        if self._finalizer is not None:
            self._finalizer.detach()
        # stop at exit or when collected; the callback holds the group, not the session
        self._finalizer = weakref.finalize(self, group.stop, STOP_WAIT)
        try:
            run = self.start_run = group.start()  # it may wait for the prefork server's import
        except KeyboardInterrupt:
            raise RunInterrupted(t("warm.start_interrupted")) from None
        try:
            error = self._wait_ready(group, run)
        except KeyboardInterrupt:
            error = RunInterrupted(t("launch.warm.start_interrupted"), run=run)
        except BaseException:
            group.end(run)
            raise
        if error is not None:
            self._down(group, run, t("launch.warm.why.never"))
            raise error
        group.pids = {r: s.pid for r, s in run.ranks.items()}
        self.start_seconds = time.time() - run.started
        return self

    def _wait_ready(self, group: RankGroup, run: Run) -> RunError | None:
        """Until every rank said "ready" (its process group is up); else the reason it will not be."""
        limit = 60.0 + self.cfg.pg_timeout  # torch import and rendezvous, then init_process_group's own timeout
        ready: set[int] = set()
        failed_at: list[float] = []

        def route(msg: dict[str, Any]) -> None:
            run.ingest(msg)
            if msg.get(TYPE) == Msg.READY:
                ready.add(msg["rank"])

        def check() -> Outcome | None:
            now = time.time()
            if len(ready) == len(run.ranks):
                return Outcome.DONE
            if not failed_at and any(
                s.status == Status.FAILED or (s.pid and not s.connected) for s in run.ranks.values()
            ):
                failed_at.append(now)  # torchrun is about to stop the others and exit: let it report
            if not group.agent_running() or (failed_at and now - failed_at[0] > self.cfg.grace + 3):
                return Outcome.EXITED
            return Outcome.TIMEOUT if now - run.started > limit else None

        outcome = group.supervise(run, check, route=route)
        if outcome == Outcome.DONE:
            return None
        group.end(run)
        log = group.agent_log()
        if outcome == Outcome.TIMEOUT:
            return LaunchError(
                t("launch.warm.start_timeout", timeout=limit, log="\n".join(log.splitlines()[-40:])), run=run
            )
        error = diagnose.explain(run, outcome, log, stopped_by_us=group.stopped_by_us)
        return error or diagnose.agent_died(run, log)

    def stop(self) -> None:
        """End the ranks (cleanly: they exit 0). Calling it again does nothing."""
        group = self._group
        if group is not None and not group.ended:
            group.stop(STOP_WAIT)
            self._why_down = t("launch.warm.why.stopped")

    def restart(self) -> Session:
        """Fresh ranks with the same options: a new namespace and a new process group."""
        self.stop()
        return self.start()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def alive(self) -> bool:
        """Every rank still there? Reads what arrived between cells (a closed connection above all)."""
        if self._group is None:
            return False
        self._pending += self._group.poll()
        return self._group.alive()

    @property
    def nproc(self) -> int:
        return self.cfg.nproc or 1

    @property
    def backend(self) -> str:
        return self.cfg.backend

    @property
    def pids(self) -> dict[int, int]:
        return dict(self._group.pids) if self._group else {}

    @property
    def run_dir(self) -> str | None:
        return self.start_run.run_dir if self.start_run else None

    def __repr__(self) -> str:
        state = t(f"launch.warm.state.{'down' if not self.alive else ('unsafe' if self.unsafe else 'up')}")
        run_id = self.start_run.run_id if self.start_run else "-"
        return t(
            "launch.warm.repr", run_id=run_id, nproc=self.nproc, backend=self.backend, cells=self.cells, state=state
        )

    # -- cells --------------------------------------------------------------------

    def run(
        self,
        code: str,
        timeout: float | None = None,
        vars: dict[str, Any] | None = None,
        quiet: bool | None = None,
        display: str | None = None,
        raise_on_error: bool = True,
    ) -> Run:
        """Run ``code`` on every rank, in the namespace the earlier cells left; return the cell's ``Run``.

        Raises ``RankError``/``RunTimeout``/``RunInterrupted``/... (each with ``.run``) as
        ``labkit.torchrun`` does; the message says whether the session is still usable.
        """
        if not isinstance(code, str):
            raise OptionError(t("launch.warm.bad_code", type=type(code).__name__))
        if self._busy:
            raise OptionError(t("launch.warm.busy"))
        group = self._live()
        timeout = check_timeout(timeout) if timeout is not None else self.timeout
        cfg = replace(
            self.cfg,
            quiet=self.cfg.quiet if quiet is None else coerce("quiet", quiet),
            display=self.cfg.display if display is None else coerce("display", display),
        )
        n = self.cells + 1
        compile(code, f"<cell {n}>", "exec")  # a SyntaxError names the line, before any rank sees the cell
        vars_file = self._write_vars(group, vars, n)
        self.cells = n
        run = self._new_run(group, n)
        labkit.last_run = run
        self._busy, self._stop_requested = True, False
        try:
            return self._run(group, run, n, code, cfg, timeout, vars_file, raise_on_error)
        finally:
            self._busy = False
            if vars_file:
                group.remove_file(vars_file)

    def _run(
        self,
        group: RankGroup,
        run: Run,
        n: int,
        code: str,
        cfg: RunConfig,
        timeout: float | None,
        vars_file: str | None,
        raise_on_error: bool,
    ) -> Run:
        from labkit.views.dashboard import make_view

        alive = self.alive  # whatever came between cells, a closed connection included
        for msg in self._pending:
            self._route(run, n, msg)
        self._pending.clear()
        if not alive:
            error = self._died(group, run, n)
            run.error, run.ended = error, time.time()
            raise error
        if self.unsafe and not cfg.quiet:
            print(t("launch.warm.unsafe.note", reason=self.unsafe), flush=True)
        view = make_view(run, self._request_stop, display=cfg.display, quiet=cfg.quiet)
        deadline = run.started + timeout if timeout else None
        first_error: list[float] = []

        def check() -> Outcome | None:
            if not self._busy_ranks(run):
                return Outcome.DONE
            if not group.alive():
                return Outcome.DEAD
            if self._stop_requested:
                return Outcome.STOPPED
            now = time.time()
            if deadline is not None and now > deadline:
                return Outcome.TIMEOUT
            if not first_error and any(s.status == Status.FAILED for s in run.ranks.values()):
                first_error.append(now)
            return Outcome.FAILED if first_error and now - first_error[0] > self.error_grace else None

        try:
            for r in group.pids:
                group.send(r, Msg.EXEC, cell=n, code=code, vars=vars_file)
            outcome = group.supervise(run, check, view, route=lambda msg: self._route(run, n, msg))
        except KeyboardInterrupt:
            outcome = Outcome.INTERRUPTED
        except BaseException:
            self._down(group, run, t("launch.warm.why.ended", cell=n))  # a fault of ours: leave nothing behind
            raise
        with sigint_deferred():  # a second Ctrl-C must not abandon the ranks half-interrupted
            error = self._conclude(group, run, n, code, outcome, timeout)
            run.error, run.ended = error, time.time()
            view.finish(run, finished.notify(run))
        if error is not None and (raise_on_error or isinstance(error, RunInterrupted)):
            raise error
        return run

    def _request_stop(self) -> None:
        self._stop_requested = True

    def _live(self) -> RankGroup:
        group = self._group
        if group is None or group.ended:
            raise SessionEnded(t("launch.warm.not_running", why=self._why_down))
        return group

    def _write_vars(self, group: RankGroup, vars: dict[str, Any] | None, n: int) -> str | None:
        return group.write_file(f"vars{n}.pkl", check_picklable(vars)) if vars else None

    def _new_run(self, group: RankGroup, n: int) -> Run:
        run = group.new_run(f"{group.run_id}#{n}")
        for state in run.ranks.values():
            state.connected, state.status = True, Status.RUNNING
        for log in run.logs.values():
            log.start_at_end()  # this cell's output only
        return run

    @staticmethod
    def _route(run: Run, n: int, msg: dict[str, Any]) -> None:
        kind = msg.get(TYPE)
        if kind in (Msg.CELL_DONE, Msg.CELL_ERROR):
            if msg.get("cell") != n:
                return  # a late answer from an earlier cell
            msg = retyped(msg, Msg.DONE if kind == Msg.CELL_DONE else Msg.ERROR)
        run.ingest(msg)

    @staticmethod
    def _busy_ranks(run: Run) -> list[int]:
        return [r for r, s in run.ranks.items() if s.status == Status.RUNNING]

    # -- the end of a cell ------------------------------------------------------------

    def _conclude(self, group: RankGroup, run: Run, n: int, code: str, outcome: Outcome, timeout: float | None) -> Any:
        """The cell is over (or must be made to be): the error to raise, if any."""
        if outcome == Outcome.DEAD:
            return self._died(group, run, n)
        if outcome == Outcome.DONE:
            run.flush_logs()  # the ranks flush before they answer: the files hold the whole cell
            error = diagnose.root_cause(run, group.agent_log(), stopped_by_us=group.stopped_by_us, gang=False)
            broken = diagnose.broken_collective(run)
            if broken is not None:
                self.unsafe = t("launch.warm.reason.collective", rank=broken, cell=n)
                done = [r for r, s in run.ranks.items() if s.status == Status.DONE]
                early = [t("launch.warm.done_early", done=ranks_text(done), busy=broken), t("launch.hint.early")]
                error = with_note(error, "\n".join([*(early if done else []), t("launch.warm.unsafe")]))
            return error

        busy = self._busy_ranks(run)
        report: list[str] = []
        if outcome == Outcome.TIMEOUT:  # faulthandler prints where each busy rank is, before the interrupt moves it
            group.dump_stacks([group.pids[r] for r in busy])
            run.poll_logs()
            done = [r for r, s in run.ranks.items() if s.status == Status.DONE]
            report = [t("launch.warm.timeout", timeout=timeout, alive=ranks_text(busy))]
            report += diagnose.hang_report(run, busy, code, f"<cell {n}>")
            if done:
                report += [
                    t("launch.warm.done_early", done=ranks_text(done), busy=ranks_text(busy)),
                    t("launch.hint.early"),
                ]
        stuck = self._interrupt(group, run, n, busy)
        self.unsafe = t("launch.warm.reason.interrupted", cell=n)
        dead = bool(stuck) or not group.alive()
        if dead:
            self._down(group, run, t("launch.warm.why.ended", cell=n))
        else:
            run.flush_logs()
        for r in busy:
            if run.ranks[r].status in (Status.RUNNING, Status.FAILED):
                run.ranks[r].status = Status.STOPPED
        note = (t("launch.warm.stuck", ranks=ranks_text(stuck)) + "\n" if stuck else "") + t(
            "launch.warm.ended" if dead else "launch.warm.unsafe"
        )

        if outcome == Outcome.FAILED:
            cause = diagnose.root_cause(run, group.agent_log(), stopped_by_us=group.stopped_by_us)
            cause = cause or RankError(t("launch.warm.cell_stopped"), run=run)
            rank = "?" if cause.rank is None else cause.rank
            head = t("launch.warm.busy_after_error", ranks=ranks_text(busy), grace=self.error_grace, rank=rank)
            return with_note(cause, head + "\n" + note)
        if outcome == Outcome.TIMEOUT:
            return RunTimeout("\n".join(report + [note]), run=run, alive=busy)
        if outcome == Outcome.STOPPED:
            return RunStopped(t("launch.warm.cell_stopped") + "\n" + note, run=run)
        return RunInterrupted(t("launch.warm.interrupted") + "\n" + note, run=run)

    def _interrupt(self, group: RankGroup, run: Run, n: int, busy: list[int]) -> list[int]:
        """Stop the cell on each busy rank; return the ranks that could not be stopped."""
        group.signal_ranks(busy, signal.SIGINT)
        left = self._wait_for(group, run, n, INTERRUPT_WAIT)
        if left and group.alive():
            for r in left:  # blocked in a collective, most likely: make it fail now
                group.send(r, Msg.CUT)
            left = self._wait_for(group, run, n, CUT_WAIT)
        return left

    def _wait_for(self, group: RankGroup, run: Run, n: int, seconds: float) -> list[int]:
        end = time.time() + seconds

        def check() -> Outcome | None:
            if not self._busy_ranks(run):
                return Outcome.DONE
            if not group.alive():
                return Outcome.DEAD
            return Outcome.TIMEOUT if time.time() >= end else None

        group.supervise(run, check, route=lambda msg: self._route(run, n, msg))
        return self._busy_ranks(run)

    def _died(self, group: RankGroup, run: Run, n: int) -> RunError:
        """A rank or torchrun is gone: let torchrun finish its report, end the rest, say who died and how."""
        group.wait_agent(self.cfg.grace + 3)
        self._down(group, run, t("launch.warm.why.ended", cell=n))
        log = group.agent_log()
        error = diagnose.explain(run, Outcome.EXITED, log, stopped_by_us=group.stopped_by_us)
        return with_note(error or diagnose.agent_died(run, log), t("launch.warm.ended"))

    def _down(self, group: RankGroup, run: Run, why: str) -> None:
        group.end(run)
        self._why_down = why
