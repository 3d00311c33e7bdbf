"""Launch a cell on N torchrun ranks, supervise it from the cell's main thread, clean up.

    run = labkit.torchrun("print(rank.rank())", nproc=2)

The supervisor is single-threaded on purpose: the cell's main thread reads the
channel, tails the rank logs and updates the widgets, so output always lands in
the launching cell (ipykernel ties output from threads to other cells), and an
interrupt arrives here as KeyboardInterrupt. Every wait is bounded.

Cleanup, whatever happened: SIGTERM to torchrun's process group (it passes the
signal to the ranks), SIGKILL after the grace period, then every process that
carries this run's id in its environment is killed: ranks live in sessions of
their own (torchrun starts them so), and their children might too.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import labkit
from labkit.channel import ChannelServer
from labkit.errors import LaunchError, OptionError, RankError, RunError, RunInterrupted, RunStopped, RunTimeout
from labkit.i18n import catalog, t
from labkit.options import RunConfig, check_picklable, resolve
from labkit.run import Run

catalog(
    {
        "launch.rank_failed": {
            "en": "rank {rank} failed{at}: {type}: {message}",
            "ro": "rangul {rank} a eșuat{at}: {type}: {message}",
        },
        "launch.at_step": {"en": " at step {step}", "ro": " la pasul {step}"},
        "launch.at_line": {"en": " (cell line {line})", "ro": " (linia {line} din celulă)"},
        "launch.rank_exit": {
            "en": "rank {rank} exited with code {code} (sys.exit)",
            "ro": "rangul {rank} a ieșit cu codul {code} (sys.exit)",
        },
        "launch.rank_signal": {
            "en": "rank {rank} was killed by {signal} (exit {code})",
            "ro": "rangul {rank} a fost omorât de {signal} (ieșire {code})",
        },
        "launch.hint.sigkill": {
            "en": "SIGKILL with no traceback usually means the machine ran out of memory (the OOM killer): try a smaller model, fewer ranks, or more sharding.",
            "ro": "SIGKILL fără traceback înseamnă de obicei că mașina a rămas fără memorie (OOM killer): încercați un model mai mic, mai puține ranguri sau mai multă fragmentare.",
        },
        "launch.hint.sigsegv": {
            "en": "a native crash; the rank's stderr (below) has the stack that faulthandler printed.",
            "ro": "o prăbușire nativă; stderr-ul rangului (mai jos) conține stiva afișată de faulthandler.",
        },
        "launch.rank_vanished": {
            "en": "rank {rank} stopped without a word (exit code {code})",
            "ro": "rangul {rank} s-a oprit fără niciun mesaj (cod de ieșire {code})",
        },
        "launch.early_exit": {
            "en": "rank {rank} finished early, while rank {other} still waited for it in a collective ({detail})",
            "ro": "rangul {rank} a terminat prea devreme, în timp ce rangul {other} încă îl aștepta într-o operație colectivă ({detail})",
        },
        "launch.hint.early": {
            "en": "every rank must make the same collective calls in the same order; look for a rank-dependent `if` or `return`.",
            "ro": "toate rangurile trebuie să facă aceleași apeluri colective în aceeași ordine; căutați un `if` sau un `return` care depinde de rang.",
        },
        "launch.timeout": {
            "en": "the run went past its timeout of {timeout:.0f} s; ranks still running: {alive}",
            "ro": "rularea a depășit limita de {timeout:.0f} s; ranguri încă active: {alive}",
        },
        "launch.timeout.last": {"en": "rank {rank}, last lines:", "ro": "rangul {rank}, ultimele linii:"},
        "launch.timeout.where": {"en": "stuck in: {frames}", "ro": "blocat în: {frames}"},
        "launch.stopped": {"en": "the run was stopped", "ro": "rularea a fost oprită"},
        "launch.interrupted": {
            "en": "interrupted: every rank was stopped (results so far are in labkit.last_run)",
            "ro": "întrerupt: toate rangurile au fost oprite (rezultatele de până acum sunt în labkit.last_run)",
        },
        "launch.agent_died": {
            "en": "torchrun exited with code {code} before the ranks reported back. Its output:\n{log}",
            "ro": "torchrun a ieșit cu codul {code} înainte ca rangurile să raporteze. Ieșirea sa:\n{log}",
        },
        "launch.missing": {
            "en": "ranks {ranks} never connected; torchrun's output:\n{log}",
            "ro": "rangurile {ranks} nu s-au conectat niciodată; ieșirea torchrun:\n{log}",
        },
        "launch.unkillable": {
            "en": "processes {pids} did not die after SIGKILL (stuck in the kernel?)",
            "ro": "procesele {pids} nu au murit după SIGKILL (blocate în nucleu?)",
        },
        "launch.secondary": {
            "en": "other ranks stopped because of it: {ranks}",
            "ro": "alte ranguri s-au oprit din cauza lui: {ranks}",
        },
        "launch.same_way": {
            "en": "ranks {ranks} failed the same way",
            "ro": "rangurile {ranks} au eșuat la fel",
        },
        "launch.stderr_tail": {
            "en": "rank {rank} stderr (last lines):",
            "ro": "stderr rangul {rank} (ultimele linii):",
        },
    }
)

# environment that belongs to an outer launcher (a Slurm job, another torchrun) and would
# confuse ours: torchrun sets the ones it needs for each rank.
SCRUB_PREFIXES = ("SLURM_", "TORCHELASTIC_", "PMI_", "OMPI_")
SCRUB_NAMES = {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"}
PEER_LOST = re.compile(
    r"Connection closed by peer|Connection reset by peer|remote process exited|Broken pipe|ECONNRESET", re.I
)
KEEP_RUN_DIRS = 30


def torchrun(
    target: str | Callable[..., Any],
    nproc: int | None = None,
    backend: str = "auto",
    timeout: float | None = None,
    vars: dict[str, Any] | None = None,  # noqa: A002 - the name of the magic's option
    env: dict[str, str] | None = None,
    quiet: bool = False,
    args: tuple[Any, ...] = (),
    kwargs: dict[str, Any] | None = None,
    raise_on_error: bool = True,
    **options: Any,
) -> Run:
    """Run ``target`` (code, a path to a .py file, or a function) on ``nproc`` torchrun ranks.

    Returns a ``Run``; raises ``RankError``/``RunTimeout``/... (each carrying ``.run``) when
    the run fails, unless ``raise_on_error=False``.
    """
    cfg = resolve(RunConfig(nproc=nproc, backend=backend, timeout=timeout, env=dict(env or {}), quiet=quiet, **options))
    job = Job.make(target, vars or {}, args, kwargs or {})
    return Launch(cfg, job).run(raise_on_error=raise_on_error)


class Job:
    """What the ranks execute, checked and serialized before anything starts."""

    def __init__(self, mode: str, source: str | None, path: str | None, payload: bytes | None, vars_blob: bytes | None):
        self.mode, self.source, self.path, self.payload, self.vars_blob = mode, source, path, payload, vars_blob

    @classmethod
    def make(cls, target: Any, vars: dict[str, Any], args: tuple, kwargs: dict) -> Job:  # noqa: A002
        import cloudpickle

        vars_blob = check_picklable(vars) if vars else None
        if callable(target):
            try:
                payload = cloudpickle.dumps((target, tuple(args), dict(kwargs)))
            except Exception as exc:  # noqa: BLE001
                raise OptionError(
                    t("opt.vars.pickle", name=getattr(target, "__name__", "function"), type="function", error=exc)
                ) from None
            return cls("function", None, None, payload, vars_blob)
        if not isinstance(target, str):
            raise OptionError(t("launch.bad_target", type=type(target).__name__))
        if target.endswith(".py") and "\n" not in target and os.path.isfile(target):
            with open(target) as f:
                source = f.read()
            compile(source, target, "exec")  # a SyntaxError here names the file and line
            return cls("path", source, os.path.abspath(target), None, vars_blob)
        compile(target, "<cell>", "exec")  # a SyntaxError names the cell line, before any spawn
        return cls("code", target, None, None, vars_blob)


catalog(
    {
        "launch.bad_target": {
            "en": "torchrun() takes code (a string), a path to a .py file, or a function; got {type}",
            "ro": "torchrun() primește cod (un șir), calea unui fișier .py sau o funcție; nu {type}",
        }
    }
)


def runs_root() -> str:
    """A private (0700) folder of ours for run folders: the socket and logs live there."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if not base or not os.access(base, os.W_OK):
        base = tempfile.gettempdir()
    root = os.path.join(base, f"labkit-{os.getuid()}")
    if len(root) > 60:  # AF_UNIX paths are limited to 107 bytes
        root = f"/tmp/labkit-{os.getuid()}"
    os.makedirs(root, mode=0o700, exist_ok=True)
    st = os.stat(root)
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        os.chmod(root, 0o700) if st.st_uid == os.getuid() else None
        if os.stat(root).st_mode & 0o077 or st.st_uid != os.getuid():
            raise LaunchError(f"{root} is not a private folder of this user; remove it")
    return root


def prune_runs(root: str, keep: int = KEEP_RUN_DIRS) -> None:
    """Old run folders go; the most recent ones stay, so their logs can be read."""
    dirs = [os.path.join(root, d) for d in os.listdir(root) if d.startswith("run-")]
    dirs = [d for d in dirs if not os.path.exists(os.path.join(d, "ch.sock"))]  # a live run (a warm session) stays
    dirs.sort(key=os.path.getmtime)
    for d in dirs[:-keep] if len(dirs) > keep else []:
        shutil.rmtree(d, ignore_errors=True)


def rank_entry(start_method: str) -> list[str]:
    """How torchrun starts each rank: forked from its agent (torch already imported), or a new
    interpreter per rank (``spawn``: every rank imports torch again, seconds each)."""
    if start_method == "fork":
        import labkit.bootstrap

        return ["--start-method=fork", "--run-path", os.path.abspath(labkit.bootstrap.__file__)]
    return ["-m", "labkit.bootstrap"]


def rank_env(cfg: RunConfig, run_id: str, run_dir: str, sock: str, token: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUB_NAMES and not k.startswith(SCRUB_PREFIXES)}
    env.update(
        LABKIT_RUN_ID=run_id,  # the marker the cleanup sweep looks for
        LABKIT_RUN_DIR=run_dir,
        LABKIT_SOCKET=sock,
        LABKIT_TOKEN=token,
        LABKIT_BACKEND=cfg.backend,
        PYTHONUNBUFFERED="1",
        TORCH_ELASTIC_SHUTDOWN_TIMEOUT=str(int(cfg.grace)),
    )
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // max(1, cfg.nproc or 1))))
    if cfg.backend == "gloo":
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # single node: keep gloo's data sockets on loopback
    env.pop("LABKIT_REPORT_DIR", None)
    env.update(cfg.env)
    return env


class Launch:
    def __init__(self, cfg: RunConfig, job: Job) -> None:
        self.cfg = cfg
        self.job = job
        self.run_id = "run-" + time.strftime("%H%M%S-") + secrets.token_hex(3)
        self.proc: subprocess.Popen | None = None
        self.stop_requested = False
        self.stopped_by_us = False

    # -- setup --------------------------------------------------------------

    def _prepare(self) -> tuple[str, str, str]:
        root = runs_root()
        prune_runs(root)
        run_dir = os.path.join(root, self.run_id)
        os.mkdir(run_dir, 0o700)
        spec: dict[str, Any] = {
            "mode": self.job.mode,
            "backend": self.cfg.backend,
            "pg_timeout": self.cfg.pg_timeout,
            "sample_interval": self.cfg.sample_interval,
        }
        if self.job.source is not None:
            spec["source_file"] = self.job.path or os.path.join(run_dir, "cell.py")
            if self.job.path is None:
                with open(spec["source_file"], "w") as f:
                    f.write(self.job.source)
        if self.job.payload is not None:
            with open(os.path.join(run_dir, "function.pkl"), "wb") as f:
                f.write(self.job.payload)
        if self.job.vars_blob is not None:
            with open(os.path.join(run_dir, "vars.pkl"), "wb") as f:
                f.write(self.job.vars_blob)
            spec["vars_file"] = "vars.pkl"
        with open(os.path.join(run_dir, "job.json"), "w") as f:
            json.dump(spec, f)
        return run_dir, os.path.join(run_dir, "ch.sock"), secrets.token_hex(32)

    def _command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "labkit.agent",  # torchrun itself (torch.distributed.run's main), quicker to report a failure
            "--nnodes=1",
            f"--nproc-per-node={self.cfg.nproc}",
            "--rdzv-backend=c10d",
            "--rdzv-endpoint=127.0.0.1:0",  # a free port chosen by the store itself: no race
            f"--rdzv-id={self.run_id}",
            "--max-restarts=0",
            "--monitor-interval=0.1",
            *rank_entry(self.cfg.start_method),
        ]

    # -- the run ------------------------------------------------------------

    def run(self, raise_on_error: bool = True) -> Run:
        from labkit.dashboard import make_view

        run_dir, sock, token = self._prepare()
        run = Run(self.run_id, self.cfg.nproc or 1, self.cfg.backend, run_dir)
        labkit.last_run = run
        server = ChannelServer(sock, token)
        view = make_view(run, self.cfg, on_stop=self.request_stop)
        agent_log = open(os.path.join(run_dir, "agent.log"), "wb")
        outcome = "done"
        try:
            self.proc = subprocess.Popen(
                self._command(),
                env=rank_env(self.cfg, self.run_id, run_dir, sock, token),
                stdin=subprocess.DEVNULL,
                stdout=agent_log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # our own process group, so killpg reaches torchrun only
            )
            outcome = self._supervise(run, server, view)
        except KeyboardInterrupt:
            outcome = "interrupted"
        finally:
            with _sigint_deferred():  # a second Ctrl-C must not abandon the cleanup half-way
                self._teardown(run, server, outcome)
                agent_log.close()
                run.agent_exit_code = self.proc.returncode if self.proc else None
                error = self._diagnose(run, outcome)
                run.error = error
                run.ended = time.time()
                view.finish(run)
        if error is not None and (raise_on_error or isinstance(error, RunInterrupted)):
            raise error
        return run

    def request_stop(self) -> None:
        self.stop_requested = True

    def _supervise(self, run: Run, server: ChannelServer, view: Any) -> str:
        deadline = run.started + self.cfg.timeout if self.cfg.timeout else None
        first_failure: float | None = None
        while True:
            for msg in server.poll(0.05):
                run.ingest(msg)
            run.poll_logs()
            view.update(run)
            if self.proc.poll() is not None:
                return "exited"
            now = time.time()
            if self.stop_requested:
                return "stopped"
            if deadline is not None and now > deadline:
                return "timeout"
            failed = any(
                s.status == "failed" or (s.pid and not s.connected and s.exit_code is None) for s in run.ranks.values()
            )
            if failed and first_failure is None:
                first_failure = now
            # torchrun stops the other ranks within a fraction of a second; give it a few seconds
            if first_failure is not None and now - first_failure > self.cfg.grace + 3:
                return "stuck"  # torchrun should have stopped everyone by now; we do it

    def _teardown(self, run: Run, server: ChannelServer, outcome: str) -> None:
        proc = self.proc
        if outcome == "timeout":
            self._dump_stacks(run)
        self._drain(run, server, 0.0)
        if proc is not None and proc.poll() is None:
            # we are ending a live run (interrupt, stop, timeout): SIGTERM reaches every rank
            # through torchrun, and closing the channel ends any rank that lingers
            self.stopped_by_us = True
            _killpg(proc.pid, signal.SIGTERM)
            _wait(proc, min(1.0, self.cfg.grace))
            self._drain(run, server, 0.0)
            server.close()
            _wait(proc, self.cfg.grace)
            if proc.poll() is None:
                _killpg(proc.pid, signal.SIGKILL)
                _wait(proc, 2.0)
        else:
            # torchrun is gone by itself: what the ranks sent is still in the socket buffers
            self._drain(run, server, 2.0)
        run.rejected_clients = list(server.rejected)
        server.close()  # the lifeline: any rank still alive kills itself now
        self._sweep(run)
        for log in run.logs.values():
            log.flush()
        run.poll_logs()

    @staticmethod
    def _drain(run: Run, server: ChannelServer, seconds: float) -> None:
        """Read what the ranks have sent, until they all closed or ``seconds`` passed."""
        end = time.time() + seconds
        while True:
            for msg in server.poll(0.05 if seconds else 0):
                run.ingest(msg)
            if not server.connected_ranks() or time.time() >= end:
                break

    def _dump_stacks(self, run: Run) -> None:
        """Ask hung ranks where they are: faulthandler prints every thread's stack to stderr."""
        alive = [s.pid for s in run.ranks.values() if s.pid and s.exit_code is None]
        for pid in alive:
            try:
                os.kill(pid, signal.SIGUSR1)
            except OSError:
                pass
        if alive:
            time.sleep(0.5)

    def _sweep(self, run: Run) -> None:
        """Kill whatever of this run is left: rank process groups, then anything with our run id."""
        pids = {s.pid for s in run.ranks.values() if s.pid}
        for pid in pids:
            _killpg(pid, signal.SIGKILL)
        left = find_run_processes(self.run_id)
        for pid in left:
            _kill(pid, signal.SIGKILL)
        deadline = time.time() + 3.0
        while left and time.time() < deadline:
            time.sleep(0.05)
            left = find_run_processes(self.run_id)
        if left:
            run.unkillable = left  # type: ignore[attr-defined]

    # -- what went wrong ------------------------------------------------------

    def _diagnose(self, run: Run, outcome: str) -> BaseException | None:
        codes = parse_agent_exit_codes(os.path.join(run.run_dir, "agent.log"))
        for r, state in run.ranks.items():
            if state.exit_code is None and r in codes:
                state.exit_code = codes[r]
            if state.exit_code is not None and state.exit_code < 0:
                state.signal = _signal_name(-state.exit_code)
                if state.status not in ("failed", "done"):
                    state.status = "killed"
        if outcome == "interrupted":
            self._mark_stopped(run)
            return RunInterrupted(t("launch.interrupted"), run=run)
        if outcome == "stopped":
            self._mark_stopped(run)
            return RunStopped(t("launch.stopped"), run=run)
        if outcome == "timeout":
            alive = [r for r, s in run.ranks.items() if s.status in ("starting", "running")]
            self._mark_stopped(run)
            lines = [t("launch.timeout", timeout=self.cfg.timeout, alive=", ".join(map(str, alive)) or "-")]
            lines += hang_report(run, alive, self.job.source or "")
            return RunTimeout("\n".join(lines), run=run, alive=alive)
        return self._root_cause(run)

    def _mark_stopped(self, run: Run) -> None:
        for s in run.ranks.values():
            if s.status in ("starting", "running", "killed") and s.exit_code != 0:
                s.status = "stopped"

    def _root_cause(self, run: Run) -> RunError | None:
        stopped = parse_agent_stops(os.path.join(run.run_dir, "agent.log"))
        for s in run.ranks.values():
            if s.exit_code is None and s.pid in stopped and not s.error and not self.stopped_by_us:
                # torchrun ended this rank because another failed (it reports only the first failure)
                s.signal, s.status = stopped[s.pid], "stopped"
            elif s.status == "running" and s.exit_code is None:  # ended without a word or a code from torchrun
                s.status = "failed"
        if run.ok:
            return None
        never = [r for r, s in run.ranks.items() if s.pid is None]
        if len(never) == len(run.ranks):
            log = _tail_file(os.path.join(run.run_dir, "agent.log"), 40)
            return LaunchError(t("launch.agent_died", code=run.agent_exit_code, log=log), run=run)

        candidates = []  # (time, rank, kind) of each first-hand failure
        for r, s in run.ranks.items():
            closed = next((m["time"] for m in run.events[r] if m.get("t") == "closed"), None)
            if s.error:
                candidates.append((s.error.get("time", 0), r, "error"))
            elif s.exit_code not in (None, 0) and s.signal != "SIGTERM":
                candidates.append((closed or time.time(), r, "exit" if s.exit_code > 0 else "signal"))
            elif s.exit_code is None and s.status == "failed":
                candidates.append((closed or time.time(), r, "vanished"))
        if not candidates and never:
            log = _tail_file(os.path.join(run.run_dir, "agent.log"), 40)
            return LaunchError(t("launch.missing", ranks=", ".join(map(str, never)), log=log), run=run)
        if not candidates:  # only SIGTERMs: torchrun stopped them, say so
            candidates = [(0, r, "signal") for r, s in run.ranks.items() if s.exit_code not in (None, 0)]
        if not candidates:  # stopped by torchrun, and the one it stopped them for left no trace
            candidates = [(0, r, "vanished") for r, s in run.ranks.items() if s.exit_code != 0]

        # first-hand reports first: a rank that vanished without a code or a word was most often
        # stopped by torchrun after another rank failed, and the channel may notice both at once.
        # Last, an error that only says a peer went away: that peer (killed, exited, vanished) is
        # the cause, even when the channel noticed its end after the error arrived.
        def order(c: tuple[float, int, str]) -> tuple[int, float, int]:
            err = run.ranks[c[1]].error or {}
            peer_lost = c[2] == "error" and PEER_LOST.search(err.get("message", "") + err.get("traceback", ""))
            return (2 if peer_lost else 1 if c[2] == "vanished" else 0, c[0], c[1])

        candidates.sort(key=order)
        when, r, kind = candidates[0]
        early = self._early_exit(run, when, r, kind)
        if early is not None:
            return early
        return self._rank_error(run, r, kind, [c[1] for c in candidates[1:]])

    def _early_exit(self, run: Run, when: float, r: int, kind: str) -> RunError | None:
        """A rank that returned cleanly before its peers' next collective is the real root cause."""
        err = run.ranks[r].error or {}
        if kind != "error" or not PEER_LOST.search(err.get("message", "") + err.get("traceback", "")):
            return None
        for other in run.ranks:
            done = next((m for m in run.events[other] if m.get("t") == "done"), None)
            if other != r and done is not None and done.get("time", when) <= when:
                msg = t("launch.early_exit", rank=other, other=r, detail=err.get("type", "error"))
                return RankError(msg + "\n" + t("launch.hint.early"), run=run, rank=other, exit_code=0, signal=None)
        return None

    def _rank_error(self, run: Run, r: int, kind: str, others: list[int]) -> RankError:
        s = run.ranks[r]
        hint = ""
        detail = ""
        if kind == "error":
            err = s.error or {}
            at = ""
            if err.get("step"):
                at += t("launch.at_step", step=err["step"])
            if err.get("lineno"):
                at += t("launch.at_line", line=err["lineno"])
            head = t("launch.rank_failed", rank=r, at=at, type=err.get("type"), message=err.get("message"))
            detail = err.get("traceback", "")
        elif kind == "exit":
            head = t("launch.rank_exit", rank=r, code=s.exit_code)
        elif kind == "signal":
            head = t("launch.rank_signal", rank=r, signal=s.signal, code=s.exit_code)
            hint = {"SIGKILL": t("launch.hint.sigkill"), "SIGSEGV": t("launch.hint.sigsegv")}.get(s.signal or "", "")
        else:
            head = t("launch.rank_vanished", rank=r, code=s.exit_code)
        if kind != "error":
            tail = run.logs[r].streams["stderr"][-15:]
            if tail:
                detail = t("launch.stderr_tail", rank=r) + "\n" + "\n".join(tail)
        lines = [head]
        if hint:
            lines.append(hint)
        same = sorted(o for o in others if _same_failure(s, run.ranks[o]))
        if same:  # every rank ran the same cell; the same error on several is not caused by the first
            lines.append(t("launch.same_way", ranks=", ".join(map(str, same))))
        rest = [o for o in others if o not in same]
        if rest:
            lines.append(t("launch.secondary", ranks=", ".join(map(str, rest))))
        message = "\n".join(lines)
        return RankError(message, run=run, rank=r, exit_code=s.exit_code, signal=s.signal, traceback=detail, kind=kind)


def _same_failure(a: Any, b: Any) -> bool:
    """Two ranks failed the same way: the same exception type at the same line, or the same exit code."""
    if a.error and b.error:
        keys = ("type", "lineno")  # not the message: it often names the rank
        return all(a.error.get(k) == b.error.get(k) for k in keys)
    return not a.error and not b.error and a.exit_code == b.exit_code and a.signal == b.signal


# -- processes --------------------------------------------------------------------


def find_run_processes(run_id: str | None = None) -> list[int]:
    """PIDs of our processes whose environment carries LABKIT_RUN_ID (= run_id, or any)."""
    marker = f"LABKIT_RUN_ID={run_id}".encode() if run_id else b"LABKIT_RUN_ID=run-"
    me, uid, found = os.getpid(), os.getuid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
            with open(f"/proc/{name}/stat", "rb") as f:
                if f.read().split(b") ")[-1][:1] == b"Z":
                    continue  # a zombie is already dead; its parent will reap it
        except OSError:
            continue
        if any(item == marker or (not run_id and item.startswith(marker)) for item in env.split(b"\0")):
            found.append(int(name))
    return found


def cleanup() -> list[int]:
    """Kill every labkit rank of this user that is still alive (from any run); returns their PIDs."""
    pids = find_run_processes(None)
    for pid in pids:
        _kill(pid, signal.SIGKILL)
    return pids


def hang_report(run: Run, ranks: list[int], source: str, cell_name: str = "<cell>") -> list[str]:
    """For each hung rank: its last lines, and where its main thread is (from faulthandler's dump)."""
    lines = []
    for r in ranks:
        lines.append(t("launch.timeout.last", rank=r))
        # a forked rank's stack goes on below the cell into torchrun's agent: read enough lines
        tail = [x for x in run.logs[r].streams["stdout"][-3:] + run.logs[r].streams["stderr"][-150:] if x.strip()]
        where = stuck_at(tail, source.splitlines(), cell_name)
        shown = [x for x in tail if not x.startswith((" ", "Thread 0x", "Current thread", "Stack"))][-4:]
        lines.extend("    " + x for x in shown or ["-"])
        if where:
            lines.append("    " + t("launch.timeout.where", frames=" <- ".join(where)))
    return lines


def stuck_at(stderr_lines: list[str], cell_lines: list[str] = (), cell_name: str = "<cell>") -> list[str]:
    """From a faulthandler dump, the innermost frames of the main thread: where a rank hangs."""
    start = max((i for i, x in enumerate(stderr_lines) if x.startswith("Current thread")), default=None)
    if start is None:
        return []
    frames = []
    for x in stderr_lines[start + 1 :]:
        m = re.match(r'\s+File "(.+)", line (\d+) in (.+)', x)
        if not m:
            break
        name, line, func = m.group(1), int(m.group(2)), m.group(3)
        if name == cell_name and 0 < line <= len(cell_lines):
            frames.append(f"cell line {line}: {cell_lines[line - 1].strip()}")
        elif "labkit" not in name and "runpy" not in name:
            frames.append(f"{os.path.basename(name)}:{line} {func}")
    return frames[:4]


def parse_agent_exit_codes(path: str) -> dict[int, int]:
    """torchrun's failure report lists each failed rank's exit code; read them."""
    text = _tail_file(path, 400)
    codes: dict[int, int] = {}
    for m in re.finditer(r"rank\s*:\s*(\d+)\s*\(local_rank[^\n]*\n\s*exitcode\s*:\s*(-?\d+)", text):
        codes[int(m.group(1))] = int(m.group(2))
    return codes


def parse_agent_stops(path: str) -> dict[int, str]:
    """PIDs torchrun sent a signal to while stopping the other ranks, with the signal's name."""
    text = _tail_file(path, 400)
    found = re.finditer(
        r"(?:Terminating|Closing) process (\d+) via signal (SIG[A-Z]+)|Sending process (\d+) closing signal (SIG[A-Z]+)",
        text,
    )
    return {int(m.group(1) or m.group(3)): m.group(2) or m.group(4) for m in found}


def _tail_file(path: str, lines: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 200_000))
            return "\n".join(f.read().decode("utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait(proc: subprocess.Popen, seconds: float) -> None:
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        pass


class _sigint_deferred:
    """Hold SIGINT during cleanup (main thread only; elsewhere signals do not arrive anyway)."""

    def __enter__(self) -> None:
        self.previous = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, signal.SIG_IGN)

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
