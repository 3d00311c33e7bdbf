"""Warm ranks: one torchrun group that stays up across cells, with its state.

    session = labkit.Session(nproc=2)                       # or: %torchrun_start -n 2
    session.run("model = build()")                          # or: %%ranks
    session.run("model = fully_shard(model, mesh=mesh)")    # the namespace persists
    run = session.run("for i in rank.steps(3): train()")    # a Run, as %%torchrun returns

A cold launch costs seconds (torchrun, then ``import torch`` in every rank); a snippet
on ranks that are already up costs a millisecond. A session is one torchrun launch
whose ranks run ``labkit.bootstrap`` in "serve" mode: each waits for cells on the
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
  every process of it is killed (the launcher's teardown), and the error says why.
- The kernel ends: ``stop()`` runs at exit; if the kernel is SIGKILLed, each rank's
  lifeline (the channel closing) ends it.
Between cells nothing polls: ``run()`` first checks that every rank is still there.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import weakref
from dataclasses import replace
from typing import Any

import labkit
from labkit.channel import ChannelServer
from labkit.errors import LaunchError, OptionError, RankError, RunError, RunInterrupted, RunStopped, RunTimeout
from labkit.i18n import catalog, t
from labkit.launcher import (
    PEER_LOST,
    Job,
    Launch,
    _kill,
    _sigint_deferred,
    _tail_file,
    _wait,
    hang_report,
    rank_env,
)
from labkit.options import DISPLAYS, RunConfig, check_picklable, resolve
from labkit.run import Run

catalog(
    {
        "warm.started": {
            "en": "{nproc} warm ranks ({backend}) ready in {seconds:.1f} s: run cells on them with %%ranks",
            "ro": "{nproc} ranguri persistente ({backend}) gata în {seconds:.1f} s: rulați celule pe ele cu %%ranks",
        },
        "warm.stopped": {"en": "the warm ranks were stopped", "ro": "rangurile persistente au fost oprite"},
        "warm.none": {
            "en": "no warm ranks are running: start them with %torchrun_start -n 2 (or labkit.Session(nproc=2))",
            "ro": "nu rulează niciun rang persistent: porniți-le cu %torchrun_start -n 2 (sau labkit.Session(nproc=2))",
        },
        "warm.not_running": {
            "en": "this session's ranks are not running ({why}); session.restart() (or %torchrun_restart) starts fresh ones",
            "ro": "rangurile acestei sesiuni nu rulează ({why}); session.restart() (sau %torchrun_restart) pornește altele noi",
        },
        "warm.why.never": {"en": "not started", "ro": "nepornite"},
        "warm.why.stopped": {"en": "stopped", "ro": "oprite"},
        "warm.why.ended": {"en": "ended in cell {cell}", "ro": "încheiate în celula {cell}"},
        "warm.busy": {
            "en": "this session is running a cell already; wait for it to end",
            "ro": "această sesiune rulează deja o celulă; așteptați să se termine",
        },
        "warm.bad_code": {
            "en": "Session.run() takes code (a string); got {type}",
            "ro": "Session.run() primește cod (un șir); nu {type}",
        },
        "warm.ended": {
            "en": "The session has ended and its processes are gone: session.restart() (or %torchrun_restart) starts fresh ranks.",
            "ro": "Sesiunea s-a încheiat și procesele ei au dispărut: session.restart() (sau %torchrun_restart) pornește ranguri noi.",
        },
        "warm.unsafe": {
            "en": "The session is still up, but its ranks may now disagree about which collective comes next: session.restart() (or %torchrun_restart) gives fresh ranks.",
            "ro": "Sesiunea rulează în continuare, dar rangurile ei pot să nu mai fie de acord asupra următoarei operații colective: session.restart() (sau %torchrun_restart) pornește ranguri noi.",
        },
        "warm.unsafe.note": {
            "en": "note: {reason}, so collectives may not line up; session.restart() (or %torchrun_restart) gives fresh ranks.",
            "ro": "notă: {reason}, deci operațiile colective pot să nu se potrivească; session.restart() (sau %torchrun_restart) pornește ranguri noi.",
        },
        "warm.reason.interrupted": {"en": "cell {cell} was interrupted", "ro": "celula {cell} a fost întreruptă"},
        "warm.reason.collective": {
            "en": "a collective failed on rank {rank} in cell {cell}",
            "ro": "o operație colectivă a eșuat pe rangul {rank} în celula {cell}",
        },
        "warm.busy_after_error": {
            "en": "ranks {ranks} were still running {grace:.0f} s after rank {rank} failed (waiting for it in a collective?), so they were interrupted.",
            "ro": "rangurile {ranks} încă rulau la {grace:.0f} s după ce rangul {rank} a eșuat (îl așteptau într-o operație colectivă?), așa că au fost întrerupte.",
        },
        "warm.timeout": {
            "en": "the cell went past its timeout of {timeout:g} s; ranks still running: {alive}",
            "ro": "celula a depășit limita de {timeout:g} s; ranguri încă active: {alive}",
        },
        "warm.done_early": {
            "en": "ranks {done} had finished the cell while ranks {busy} were still in it.",
            "ro": "rangurile {done} terminaseră celula, în timp ce rangurile {busy} erau încă în ea.",
        },
        "warm.same_error": {"en": "ranks {ranks} failed the same way", "ro": "rangurile {ranks} au eșuat la fel"},
        "warm.also_failed": {
            "en": "rank {rank} failed too: {type}: {message}",
            "ro": "rangul {rank} a eșuat și el: {type}: {message}",
        },
        "warm.interrupted": {
            "en": "interrupted: the cell was stopped on every rank (what it measured is in labkit.last_run)",
            "ro": "întrerupt: celula a fost oprită pe toate rangurile (ce a măsurat este în labkit.last_run)",
        },
        "warm.cell_stopped": {
            "en": "the cell was stopped on every rank",
            "ro": "celula a fost oprită pe toate rangurile",
        },
        "warm.stuck": {
            "en": "ranks {ranks} did not stop when interrupted (stuck outside Python?), so the session was ended.",
            "ro": "rangurile {ranks} nu s-au oprit la întrerupere (blocate în afara Python?), așa că sesiunea a fost încheiată.",
        },
        "warm.start_timeout": {
            "en": "the ranks were not ready within {timeout:.0f} s; torchrun's output:\n{log}",
            "ro": "rangurile nu au fost gata în {timeout:.0f} s; ieșirea torchrun:\n{log}",
        },
        "warm.start_interrupted": {
            "en": "interrupted while the warm ranks were starting; they were stopped",
            "ro": "întrerupt în timp ce rangurile persistente porneau; au fost oprite",
        },
        "warm.repr": {
            "en": "<labkit.Session {run_id}: {nproc} ranks, {backend}, {cells} cells, {state}>",
            "ro": "<labkit.Session {run_id}: {nproc} ranguri, {backend}, {cells} celule, {state}>",
        },
        "warm.state.up": {"en": "running", "ro": "rulează"},
        "warm.state.unsafe": {"en": "running, unsafe", "ro": "rulează, nesigură"},
        "warm.state.down": {"en": "not running", "ro": "nu rulează"},
    }
)

ERROR_GRACE = 2.0  # after one rank fails, seconds the others get to finish the cell before they are interrupted
INTERRUPT_WAIT = 1.0  # seconds ranks get to answer SIGINT; then their collective connections are cut
CUT_WAIT = 2.0  # seconds after the cut; a rank still busy then is stuck for good and the session ends
STOP_WAIT = 5.0  # seconds for a clean stop: the ranks exit 0, then torchrun does
# a collective failed this way: the group is broken, or the ranks are out of step
BROKEN = re.compile(PEER_LOST.pattern + r"|Timed out waiting|timeout caused pair closure|ProcessGroup.*abort", re.I)


class SessionEnded(RunError):
    """The session's ranks are not running: never started, stopped, or ended by a failure."""


class _Group:
    """The processes and channel of one started session. ``end()`` may be called twice, and at exit."""

    def __init__(self, launch: Launch, server: ChannelServer, agent_log: Any) -> None:
        self.launch, self.server, self.agent_log = launch, server, agent_log
        self.pids: dict[int, int] = {}
        self.pending: list[dict[str, Any]] = []  # read between cells; they go to the next cell's Run
        self.ended = False

    def check(self) -> bool:
        """Between cells: read what arrived (a closed connection above all); is the group whole?"""
        if not self.ended:
            self.pending += self.server.poll(0)
        return self.alive()

    def alive(self) -> bool:
        """torchrun still runs and every rank is connected (as of the last poll)."""
        proc = self.launch.proc
        return (
            not self.ended
            and proc is not None
            and proc.poll() is None
            and len(self.server.connected_ranks()) == len(self.pids)
        )

    def blank_run(self) -> Run:
        cfg = self.launch.cfg
        run = Run(self.launch.run_id, cfg.nproc or 1, cfg.backend, os.path.dirname(self.server.path))
        for r, pid in self.pids.items():
            run.ranks[r].pid = pid
        return run

    def stop(self) -> None:
        """The clean way out: every rank exits 0, then torchrun does; then the usual sweep."""
        if self.ended:
            return
        for r in self.pids:
            self.server.send(r, {"t": "stop"})
        if self.launch.proc is not None:
            _wait(self.launch.proc, STOP_WAIT)
        self.end(None)

    def end(self, run: Run | None) -> None:
        """Kill whatever is left of the group (the launcher's teardown: no orphan, no socket)."""
        if self.ended:
            return
        self.ended = True
        run = run or self.blank_run()
        with _sigint_deferred():
            self.launch._teardown(run, self.server, "exited")
            self.agent_log.close()
            run.agent_exit_code = self.launch.proc.returncode if self.launch.proc else None


class Session:
    """A group of torchrun ranks kept alive across cells; ``run(code)`` runs a cell on all of them.

    Ends with ``stop()``, with the ``with`` block, when it is garbage collected, and with the kernel.
    """

    def __init__(
        self,
        nproc: int | None = None,
        backend: str = "auto",
        pg_timeout: float | None = None,
        timeout: float | None = None,
        env: dict[str, str] | None = None,
        display: str = "auto",
        quiet: bool = False,
        error_grace: float = ERROR_GRACE,
        start: bool = True,
    ) -> None:
        extra = {} if pg_timeout is None else {"pg_timeout": float(pg_timeout)}
        self.cfg = resolve(
            RunConfig(nproc=nproc, backend=backend, env=dict(env or {}), quiet=quiet, display=display, **extra)
        )
        self.timeout = _check_timeout(timeout)
        self.error_grace = error_grace
        self.cells = 0
        self.unsafe: str | None = None  # why the collective state cannot be trusted, once it cannot
        self.start_run: Run | None = None  # the start-up, as a Run: the ranks' hellos and early output
        self.start_seconds: float | None = None
        self._group: _Group | None = None
        self._finalizer: weakref.finalize | None = None
        self._why_down = t("warm.why.never")
        self._busy = False
        self._stop_requested = False
        if start:
            self.start()

    # -- life cycle -------------------------------------------------------------

    def start(self) -> Session:
        """Launch the ranks and wait until every one has joined the process group."""
        if self._group is not None and not self._group.ended:
            return self
        launch = Launch(self.cfg, Job("serve", None, None, None, None))
        run_dir, sock, token = launch._prepare()
        run = Run(launch.run_id, self.cfg.nproc or 1, self.cfg.backend, run_dir)
        server = ChannelServer(sock, token)
        agent_log = open(os.path.join(run_dir, "agent.log"), "wb")
        group = _Group(launch, server, agent_log)
        self._group, self.start_run, self.cells, self.unsafe = group, run, 0, None
        if self._finalizer is not None:
            self._finalizer.detach()
        # stop at exit or when collected; the callback holds the group, not the session
        self._finalizer = weakref.finalize(self, group.stop)
        try:
            launch.proc = subprocess.Popen(
                launch._command(),
                env=rank_env(self.cfg, launch.run_id, run_dir, sock, token),
                stdin=subprocess.DEVNULL,
                stdout=agent_log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # torchrun's own process group, as in the launcher
            )
            error = self._wait_ready(group, run)
        except KeyboardInterrupt:
            error = RunInterrupted(t("warm.start_interrupted"), run=run)
        except BaseException:
            group.end(run)
            raise
        if error is not None:
            self._down(group, run, t("warm.why.never"))
            raise error
        group.pids = {r: s.pid for r, s in run.ranks.items()}
        self.start_seconds = time.time() - run.started
        return self

    def _wait_ready(self, group: _Group, run: Run) -> RunError | RunInterrupted | None:
        """Until every rank said "ready" (its process group is up); else the reason it will not be."""
        limit = 60.0 + self.cfg.pg_timeout  # torch import and rendezvous, then init_process_group's own timeout
        ready: set[int] = set()
        failed_at = None
        while len(ready) < len(run.ranks):
            for msg in group.server.poll(0.05):
                run.ingest(msg)
                if msg.get("t") == "ready":
                    ready.add(msg["rank"])
            run.poll_logs()
            proc = group.launch.proc
            if failed_at is None and any(
                s.status == "failed" or (s.pid and not s.connected) for s in run.ranks.values()
            ):
                failed_at = time.time()  # torchrun is about to stop the others and exit: let it report
            if proc.poll() is not None or (failed_at and time.time() - failed_at > self.cfg.grace + 3):
                group.end(run)
                log = _tail_file(os.path.join(run.run_dir, "agent.log"), 40)
                return group.launch._diagnose(run, "exited") or LaunchError(
                    t("launch.agent_died", code=proc.returncode, log=log), run=run
                )
            if time.time() - run.started > limit:
                group.end(run)
                log = _tail_file(os.path.join(run.run_dir, "agent.log"), 40)
                return LaunchError(t("warm.start_timeout", timeout=limit, log=log), run=run)
        return None

    def stop(self) -> None:
        """End the ranks (cleanly: they exit 0). Calling it again does nothing."""
        group = self._group
        if group is not None and not group.ended:
            group.stop()
            self._why_down = t("warm.why.stopped")

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
        return self._group is not None and self._group.check()

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
        state = "down" if not self.alive else ("unsafe" if self.unsafe else "up")
        run_id = self.start_run.run_id if self.start_run else "-"
        return t(
            "warm.repr",
            run_id=run_id,
            nproc=self.nproc,
            backend=self.backend,
            cells=self.cells,
            state=t(f"warm.state.{state}"),
        )

    # -- cells --------------------------------------------------------------------

    def run(
        self,
        code: str,
        timeout: float | None = None,
        vars: dict[str, Any] | None = None,  # noqa: A002 - the name of the magic's option
        quiet: bool | None = None,
        display: str | None = None,
        raise_on_error: bool = True,
    ) -> Run:
        """Run ``code`` on every rank, in the namespace the earlier cells left; return the cell's ``Run``.

        Raises ``RankError``/``RunTimeout``/``RunInterrupted``/... (each with ``.run``) as
        ``labkit.torchrun`` does; the message says whether the session is still usable.
        """
        if not isinstance(code, str):
            raise OptionError(t("warm.bad_code", type=type(code).__name__))
        if self._busy:
            raise OptionError(t("warm.busy"))
        group = self._live()
        timeout = _check_timeout(timeout) if timeout is not None else self.timeout
        cfg = replace(self.cfg, quiet=self.cfg.quiet if quiet is None else quiet, display=display or self.cfg.display)
        if cfg.display not in DISPLAYS:
            raise OptionError(t("opt.display", value=cfg.display))
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
                try:
                    os.unlink(os.path.join(run.run_dir, vars_file))
                except OSError:
                    pass

    def _run(
        self,
        group: _Group,
        run: Run,
        n: int,
        code: str,
        cfg: RunConfig,
        timeout: float | None,
        vars_file: str | None,
        raise_on_error: bool,
    ) -> Run:
        from labkit.dashboard import make_view

        group.check()  # whatever came between cells, a closed connection included
        for msg in group.pending:
            self._route(run, n, msg)
        group.pending.clear()
        if not group.alive():
            error = self._died(group, run, n)
            run.error, run.ended = error, time.time()
            raise error
        if self.unsafe and not cfg.quiet:
            print(t("warm.unsafe.note", reason=self.unsafe), flush=True)
        view = make_view(run, cfg, on_stop=self._request_stop)
        try:
            for r in group.pids:
                group.server.send(r, {"t": "exec", "cell": n, "code": code, "vars": vars_file})
            outcome = self._supervise(group, run, n, timeout, view)
        except KeyboardInterrupt:
            outcome = "interrupted"
        except BaseException:
            self._down(group, run, t("warm.why.ended", cell=n))  # a fault of ours: leave nothing behind
            raise
        with _sigint_deferred():  # a second Ctrl-C must not abandon the ranks half-interrupted
            error = self._conclude(group, run, n, code, outcome, timeout)
            run.error, run.ended = error, time.time()
            view.finish(run)
        if error is not None and (raise_on_error or isinstance(error, RunInterrupted)):
            raise error
        return run

    def _request_stop(self) -> None:
        self._stop_requested = True

    def _live(self) -> _Group:
        group = self._group
        if group is None or group.ended:
            raise SessionEnded(t("warm.not_running", why=self._why_down))
        return group

    def _write_vars(self, group: _Group, vars: dict[str, Any] | None, n: int) -> str | None:  # noqa: A002
        if not vars:
            return None
        name = f"vars{n}.pkl"
        blob = check_picklable(vars)
        with open(os.path.join(os.path.dirname(group.server.path), name), "wb") as f:
            f.write(blob)
        return name

    def _new_run(self, group: _Group, n: int) -> Run:
        run = Run(f"{group.launch.run_id}#{n}", self.nproc, self.backend, os.path.dirname(group.server.path))
        for r, state in run.ranks.items():
            state.pid, state.connected, state.status = group.pids[r], True, "running"
        for log in run.logs.values():
            log.start_at_end()  # this cell's output only
        return run

    @staticmethod
    def _route(run: Run, n: int, msg: dict[str, Any]) -> None:
        kind = msg.get("t")
        if kind in ("cell_done", "cell_error"):
            if msg.get("cell") != n:
                return  # a late answer from an earlier cell
            msg = dict(msg, t="done" if kind == "cell_done" else "error")
        run.ingest(msg)

    @staticmethod
    def _busy_ranks(run: Run) -> list[int]:
        return [r for r, s in run.ranks.items() if s.status == "running"]

    def _supervise(self, group: _Group, run: Run, n: int, timeout: float | None, view: Any) -> str:
        deadline = run.started + timeout if timeout else None
        first_error: float | None = None
        while True:
            for msg in group.server.poll(0.05):
                self._route(run, n, msg)
            run.poll_logs()
            view.update(run)
            if not self._busy_ranks(run):
                return "done"
            if not group.alive():
                return "dead"
            if self._stop_requested:
                return "stopped"
            now = time.time()
            if deadline is not None and now > deadline:
                return "timeout"
            if first_error is None and any(s.status == "failed" for s in run.ranks.values()):
                first_error = now
            if first_error is not None and now - first_error > self.error_grace:
                return "failed"

    # -- the end of a cell ------------------------------------------------------------

    def _conclude(self, group: _Group, run: Run, n: int, code: str, outcome: str, timeout: float | None) -> Any:
        """The cell is over (or must be made to be): the error to raise, if any."""
        if outcome == "dead":
            return self._died(group, run, n)
        if outcome == "done":
            _flush_logs(run)
            error = self._cell_error(group, run)
            broken = self._broken_collective(run)
            if broken is not None:
                self.unsafe = t("warm.reason.collective", rank=broken, cell=n)
                done = [r for r, s in run.ranks.items() if s.status == "done"]
                early = [t("warm.done_early", done=_ranks(done), busy=broken), t("launch.hint.early")] if done else []
                error = _with_note(error, "\n".join([*early, t("warm.unsafe")]))
            return error

        busy = self._busy_ranks(run)
        report: list[str] = []
        if outcome == "timeout":
            for r in busy:  # faulthandler prints where each busy rank is, before the interrupt moves it
                _kill(group.pids[r], signal.SIGUSR1)
            time.sleep(0.5)
            run.poll_logs()
            done = [r for r, s in run.ranks.items() if s.status == "done"]
            report = [t("warm.timeout", timeout=timeout, alive=_ranks(busy))] + hang_report(
                run, busy, code, f"<cell {n}>"
            )
            if done:
                report += [t("warm.done_early", done=_ranks(done), busy=_ranks(busy)), t("launch.hint.early")]
        stuck = self._interrupt(group, run, n, busy)
        self.unsafe = t("warm.reason.interrupted", cell=n)
        dead = bool(stuck) or not group.alive()
        if dead:
            self._down(group, run, t("warm.why.ended", cell=n))
        else:
            _flush_logs(run)
        for r in busy:
            if run.ranks[r].status in ("running", "failed"):
                run.ranks[r].status = "stopped"
        note = (t("warm.stuck", ranks=_ranks(stuck)) + "\n" if stuck else "") + t(
            "warm.ended" if dead else "warm.unsafe"
        )

        if outcome == "failed":
            cause = group.launch._root_cause(run) or RankError(t("warm.cell_stopped"), run=run)
            head = t(
                "warm.busy_after_error", ranks=_ranks(busy), grace=self.error_grace, rank=getattr(cause, "rank", "?")
            )
            return _with_note(cause, head + "\n" + note)
        if outcome == "timeout":
            return RunTimeout("\n".join(report + [note]), run=run, alive=busy)
        if outcome == "stopped":
            return RunStopped(t("warm.cell_stopped") + "\n" + note, run=run)
        return RunInterrupted(t("warm.interrupted") + "\n" + note, run=run)

    @staticmethod
    def _cell_error(group: _Group, run: Run) -> RunError | None:
        """The root cause, as the launcher finds it; but no rank was stopped because of another
        (nobody exits in a warm cell), so the others' errors are told as their own."""
        error = group.launch._root_cause(run)
        if not isinstance(error, RankError) or error.context.get("kind") != "error":
            return error
        first = run.ranks[error.rank].error or {}
        same, notes = [], []
        for r, s in run.ranks.items():
            if r == error.rank or not s.error:
                continue
            if (s.error.get("type"), s.error.get("message")) == (first.get("type"), first.get("message")):
                same.append(r)
            else:
                notes.append(t("warm.also_failed", rank=r, type=s.error.get("type"), message=s.error.get("message")))
        if same:
            notes.insert(0, t("warm.same_error", ranks=_ranks(same)))
        error = group.launch._rank_error(run, error.rank, "error", [])
        return _with_note(error, "\n".join(notes)) if notes else error

    def _interrupt(self, group: _Group, run: Run, n: int, busy: list[int]) -> list[int]:
        """Stop the cell on each busy rank; return the ranks that could not be stopped."""
        for r in busy:
            _kill(group.pids[r], signal.SIGINT)
        left = self._wait_for(group, run, n, INTERRUPT_WAIT)
        if left and group.alive():
            for r in left:  # blocked in a collective, most likely: make it fail now
                group.server.send(r, {"t": "cut"})
            left = self._wait_for(group, run, n, CUT_WAIT)
        return left

    def _wait_for(self, group: _Group, run: Run, n: int, seconds: float) -> list[int]:
        end = time.time() + seconds
        while self._busy_ranks(run) and group.alive() and time.time() < end:
            for msg in group.server.poll(0.05):
                self._route(run, n, msg)
        return self._busy_ranks(run)

    def _broken_collective(self, run: Run) -> int | None:
        """The first rank whose error says its process group broke (peer gone, gloo timeout)."""
        for r, s in run.ranks.items():
            err = s.error or {}
            if BROKEN.search(str(err.get("message", "")) + str(err.get("traceback", ""))):
                return r
        return None

    def _died(self, group: _Group, run: Run, n: int) -> RunError:
        """A rank or torchrun is gone: let torchrun finish its report, end the rest, say who died and how."""
        if group.launch.proc is not None:
            _wait(group.launch.proc, self.cfg.grace + 3)
        self._down(group, run, t("warm.why.ended", cell=n))
        log = _tail_file(os.path.join(run.run_dir, "agent.log"), 40)
        error = group.launch._diagnose(run, "exited")
        if error is None:
            error = LaunchError(t("launch.agent_died", code=run.agent_exit_code, log=log), run=run)
        return _with_note(error, t("warm.ended"))

    def _down(self, group: _Group, run: Run, why: str) -> None:
        group.end(run)
        self._why_down = why


def _flush_logs(run: Run) -> None:
    # the ranks flush before they answer, so the files hold the cell's whole output now
    for log in run.logs.values():
        log.flush()
    run.poll_logs()


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks)) or "-"


def _check_timeout(timeout: float | None) -> float | None:
    if timeout is None:
        return None
    try:
        ok = float(timeout) > 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise OptionError(t("opt.timeout", value=timeout))
    return float(timeout)


def _with_note(error: Any, note: str) -> Any:
    """The same error, its message followed by ``note`` (a RankError stays a RankError)."""
    if error is None:
        return None
    if isinstance(error, RunInterrupted):
        return RunInterrupted(f"{error}\n{note}", run=error.run)
    if isinstance(error, RunError):
        return type(error)(f"{error}\n{note}", run=error.run, **error.context)
    return error


# -- magics -------------------------------------------------------------------------

catalog(
    {
        "warm.usage.start": {
            "en": "%torchrun_start [-n NPROC] [--backend auto|gloo|nccl] [--pg-timeout SECONDS] [--env K=V ...]",
            "ro": "%torchrun_start [-n NPROC] [--backend auto|gloo|nccl] [--pg-timeout SECUNDE] [--env K=V ...]",
        },
        "warm.usage.ranks": {
            "en": "%%ranks [--timeout SECONDS] [--vars a,b] [--quiet] [--display auto|widgets|text|none]",
            "ro": "%%ranks [--timeout SECUNDE] [--vars a,b] [--quiet] [--display auto|widgets|text|none]",
        },
        "warm.help.pg_timeout": {
            "en": "collective timeout in the ranks, in seconds",
            "ro": "limita operațiilor colective în ranguri, în secunde",
        },
        "warm.help.timeout": {
            "en": "limit for this cell, in seconds",
            "ro": "limita pentru această celulă, în secunde",
        },
        "warm.bad_option": {"en": "{magic}: {error}\nusage: {usage}", "ro": "{magic}: {error}\nutilizare: {usage}"},
        "warm.no_session": {"en": "no warm ranks to stop", "ro": "nu există ranguri persistente de oprit"},
        "warm.restarting": {"en": "restarting the warm ranks…", "ro": "se repornesc rangurile persistente…"},
        "warm.replacing": {
            "en": "stopping the warm ranks that were running first",
            "ro": "mai întâi se opresc rangurile persistente care rulau",
        },
    }
)

_session: Session | None = None  # the session the magics use


def current() -> Session | None:
    """The session of ``%torchrun_start`` (None before it)."""
    return _session


def _parser(magic: str, usage_key: str) -> Any:
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # argparse would call sys.exit(); we raise instead
            raise OptionError(t("warm.bad_option", magic=magic, error=message, usage=t(usage_key)))

    return Parser(prog=magic, add_help=False, usage=t(usage_key))


def _parse(p: Any, line: str, magic: str, usage_key: str) -> Any:
    import shlex

    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise OptionError(t("warm.bad_option", magic=magic, error=exc, usage=t(usage_key))) from None
    return p.parse_args(words)


def start_line(line: str) -> Session:
    """What ``%torchrun_start`` does, without IPython."""
    global _session
    import labkit.magic  # noqa: F401 - the option help texts it shares with %%torchrun

    p = _parser("%torchrun_start", "warm.usage.start")
    p.add_argument("-n", "--nproc", help=t("magic.help.nproc"))
    p.add_argument("--backend", default="auto", help=t("magic.help.backend"))
    p.add_argument("--pg-timeout", type=float, default=None, help=t("warm.help.pg_timeout"))
    p.add_argument("--env", action="append", default=[], help=t("magic.help.env"))
    opts = _parse(p, line, "%torchrun_start", "warm.usage.start")
    from labkit.options import parse_env

    env = parse_env(opts.env)
    if _session is not None and _session.alive:
        print(t("warm.replacing"), flush=True)
        _session.stop()
    _session = Session(nproc=opts.nproc, backend=opts.backend, pg_timeout=opts.pg_timeout, env=env)
    print(t("warm.started", nproc=_session.nproc, backend=_session.backend, seconds=_session.start_seconds), flush=True)
    return _session


def ranks_cell(line: str, cell: str, namespace: dict[str, Any]) -> Run:
    """What ``%%ranks`` does, without IPython."""
    from labkit.errors import CellSyntaxError
    from labkit.magic import _syntax_lines, pick_vars

    p = _parser("%%ranks", "warm.usage.ranks")
    p.add_argument("--timeout", type=float, default=None, help=t("warm.help.timeout"))
    p.add_argument("--vars", default="", help=t("magic.help.vars"))
    p.add_argument("--quiet", action="store_true", help=t("magic.help.quiet"))
    p.add_argument("--display", default=None, help=t("magic.help.display"))
    opts = _parse(p, line, "%%ranks", "warm.usage.ranks")
    if _session is None:
        raise SessionEnded(t("warm.none"))
    try:
        return _session.run(
            "\n" + cell,  # line 1 of the cell is the %%ranks line: keep line numbers as the student sees them
            timeout=opts.timeout,
            vars=pick_vars(opts.vars, namespace),
            quiet=opts.quiet,
            display="none" if opts.quiet else opts.display,
        )
    except SyntaxError as exc:
        raise CellSyntaxError("\n".join(_syntax_lines(exc))) from None


def stop_line() -> None:
    if _session is None or not _session.alive:
        print(t("warm.no_session"), flush=True)
        return
    _session.stop()
    print(t("warm.stopped"), flush=True)


def restart_line() -> Session:
    if _session is None:
        raise SessionEnded(t("warm.none"))
    print(t("warm.restarting"), flush=True)
    _session.restart()
    print(t("warm.started", nproc=_session.nproc, backend=_session.backend, seconds=_session.start_seconds), flush=True)
    return _session


def register(ipython: Any) -> None:
    """``%torchrun_start``, ``%%ranks``, ``%torchrun_stop``, ``%torchrun_restart`` (called by labkit.magic)."""
    from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

    @magics_class
    class WarmMagics(Magics):
        @line_magic
        def torchrun_start(self, line: str) -> None:
            start_line(line)

        @cell_magic
        def ranks(self, line: str, cell: str) -> None:
            run = None
            try:
                run = ranks_cell(line, cell, self.shell.user_ns)
            finally:
                self.shell.user_ns["_"] = run if run is not None else labkit.last_run

        @line_magic
        def torchrun_stop(self, line: str) -> None:
            stop_line()

        @line_magic
        def torchrun_restart(self, line: str) -> None:
            restart_line()

    ipython.register_magics(WarmMagics)
