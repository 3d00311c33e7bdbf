"""Cold cells without the torch import: torchrun's agent forked from a process that imported torch already.

    prefork.start()                       # %load_ext labkit: the server starts importing in the background
    agent = prefork.spawn_agent(argv, env, log, cell_env)   # a cold cell: an AgentProcess, or None
    agent.poll(), agent.wait(5), agent.pid, agent.returncode   # as a Popen

The server (``labkit.launch.forkserver``) is one process per kernel, started with the kernel's
environment; each cell's agent is forked from it and adopted by the kernel (see there). The
cell then pays the fork, torchrun's rendezvous, ``init_process_group`` and its own code.

``labkit.launch.launchers.PreforkLauncher`` calls it, the launcher of a run on one node while
the switch is on. ``spawn_agent`` returns None, and that launcher starts torchrun as a new
interpreter (``Popen``, as ``LocalLauncher`` does), when:
- ``LABKIT_PREFORK=0`` (the switch: ``LocalLauncher`` from the start), or not Linux, or several
  nodes (each node's agent is started there by srun or ssh: a launcher of its own);
- the server died, or is stale: the kernel's environment, its folder or its Python changed
  since it started (``fingerprint``), or a file it imported did (``changed_files``). The cell
  says so once, and a fresh server starts for the next cells;
- the server could not import torch, or had more than one thread (forking it would not be
  safe): said once, and every cell of this kernel starts torchrun anew;
- the cell's ``--env`` sets a variable torch reads only when it is imported (``IMPORT_TIME``).
"""

from __future__ import annotations

import atexit
import ctypes
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, TypeVar

from labkit.i18n import t
from labkit.launch.forkserver import OWNER_VAR, ROOM_VAR
from labkit.wire import env as envvars
from labkit.wire.prefork import ForkReady, ForkReply, ForkRequest, ImportedFile
from labkit.wire.record import RecordError

R = TypeVar("R", ForkReady, ForkReply)
SWITCH = "LABKIT_PREFORK"  # "0": no server, every cold cell starts torchrun as a new interpreter
READY_WAIT = 120.0  # seconds a cell waits for a server still importing torch (a loaded 2-core machine: 5-10 s)
ANSWER_WAIT = 30.0  # seconds for the server to fork an agent
ROOM = 32 * 1024  # bytes of room for a run's environment in the server's (see forkserver.write_environ_block)
PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37
# variables torch reads only when imported: set by a cell's --env, they need a fresh torchrun.
# OMP_NUM_THREADS and TORCH_DISTRIBUTED_DEBUG are read again in the forked agent; torch's NCCL, gloo
# and the rest of torch.distributed read theirs when a process group is made.
IMPORT_TIME = ("LOGLEVEL", "TORCH_", "PYTORCH_", "C10_", "CUDA_", "CUBLAS", "LD_", "PYTHON", "MALLOC", "KMP_", "GOMP_", "OMP_", "MKL_", "OPENBLAS_")  # fmt: skip
# variables that change by themselves and mean nothing at import: pytest sets the first for each test,
# torch sets the others to their defaults the first time its compiler's caches are used
VOLATILE = ("PYTEST_CURRENT_TEST", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
READ_AGAIN = ("OMP_NUM_THREADS", "TORCH_DISTRIBUTED_DEBUG", "TORCH_NCCL_", "TORCH_ELASTIC_", "TORCHELASTIC_")


def enabled() -> bool:
    return sys.platform.startswith("linux") and str(envvars.get(SWITCH)).strip().lower() not in ("0", "no", "off", "false")  # fmt: skip


# -- what the server was started from --------------------------------------------------------


def fingerprint() -> dict[str, Any]:
    """What a fresh torchrun would see differently from the server: the environment, the folder, the Python.

    Left out: labkit's own variables, read at run time, never at import (``LABKIT_START_METHOD``
    may change between cells), and ``VOLATILE`` ones that change by themselves and mean nothing
    to torch. The files the server imported are checked separately (``changed_files``).
    """
    env = {k: v for k, v in os.environ.items() if not (k.startswith("LABKIT_") and k != "LABKIT_CUDA_AUDIT")}
    for name in VOLATILE:
        env.pop(name, None)
    return {"env": env, "cwd": os.getcwd(), "python": sys.executable}


def changed_files(files: list[ImportedFile]) -> bool:
    """Has any file the server imported (path, size, mtime_ns) changed on disk since (an edit, a ``pip install``)?"""
    for f in files:
        try:
            st = os.stat(f.path)
        except OSError:
            return True
        if st.st_size != f.size or st.st_mtime_ns != f.mtime_ns:
            return True
    return False


def what_changed(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """The first difference between two fingerprints, in words; None when they match."""
    if old["python"] != new["python"]:
        return t("launch.prefork.what.python")
    if old["env"] != new["env"]:
        names = sorted(k for k in old["env"].keys() | new["env"].keys() if old["env"].get(k) != new["env"].get(k))
        return t("launch.prefork.what.env", name=", ".join(names[:3]) + ("…" if len(names) > 3 else ""))
    if old["cwd"] != new["cwd"]:
        return t("launch.prefork.what.cwd")
    return None


def import_time_names(env: dict[str, str]) -> list[str]:
    """The names in a cell's own ``--env`` that torch reads only at import (so a forked agent would miss them)."""
    return [k for k in env if k.startswith(IMPORT_TIME) and not k.startswith(READ_AGAIN)]


# -- the server, from the kernel's side ---------------------------------------------------


class Server:
    """One forkserver process of this kernel: its Popen, our end of the socket pair, its fingerprint."""

    def __init__(self, light: bool = False) -> None:
        self.owner = os.getpid()
        self.origin = fingerprint()
        ours, theirs = socket.socketpair()
        self.sock = ours
        self._buffer = b""
        self._asked = 0
        self.files: list[ImportedFile] = []  # what the server imported, as it found it on disk
        self.ready = False
        self.threads = 0
        self.error: str | None = None
        args = [str(theirs.fileno()), str(os.getpid())]
        # the parent-death signal follows the thread that forked the child: only the main one lives on
        if threading.current_thread() is threading.main_thread():
            args.append("pdeathsig")
        if light:  # no FSDP or dynamo in the server (``forkserver.LIGHT``)
            args.append("light")
        env = dict(os.environ)
        env.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's BLAS would start a thread at import
        env[OWNER_VAR] = str(os.getpid())
        env[ROOM_VAR] = "x" * ROOM
        group = {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-u", "-m", "labkit.launch.forkserver", *args],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                **group,  # a group of its own: the kernel's Ctrl-C (killpg) is not for it
            )
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def why_dead(self) -> str:
        if self.error:
            return self.error.strip().splitlines()[-1]
        if self.threads > 1:
            return t("launch.prefork.why.threads", threads=self.threads)
        return t("launch.prefork.why.exit", code=self.proc.poll())

    def wait_ready(self, seconds: float) -> bool:
        """Until the server says it has imported everything (True), or it died or is unusable (False)."""
        if self.ready:
            return True
        line = self._read(seconds)
        msg = self._record(ForkReady, line) if line is not None else None
        if msg is None or not msg.ready:
            self.error = (msg.error if msg else None) or self.error
            if line is None and self.alive():
                self.error = t("launch.prefork.why.silent", seconds=seconds)
            return False
        self.threads = msg.threads
        self.files = msg.files
        self.ready = self.threads == 1
        return self.ready

    def request(self, request: ForkRequest) -> ForkReply | None:
        """Ask for an agent (the request's ``id`` is this server's count); its answer (an answer to an
        earlier, abandoned request is ended and skipped). None: the server closed, stayed silent, or
        said something that is not a reply (``error`` says what)."""
        self._asked += 1
        try:
            self.sock.sendall(dataclasses.replace(request, id=self._asked).to_json().encode() + b"\n")
        except OSError:
            return None
        deadline = time.monotonic() + ANSWER_WAIT
        while True:
            line = self._read(max(0.0, deadline - time.monotonic()))
            answer = self._record(ForkReply, line) if line is not None else None
            if answer is None or answer.id == self._asked:
                return answer
            if answer.pid is not None:  # nobody waits for that agent any more
                AgentProcess(answer.pid).end()

    def _record(self, kind: type[R], line: bytes) -> R | None:
        """``line`` read as a ``kind`` record; None, with the reason in ``error``, when it is none."""
        try:
            return kind.from_json(line)
        except RecordError as exc:
            self.error = str(exc)
            return None

    def _read(self, seconds: float) -> bytes | None:
        """One line from the server within ``seconds``; None if it closed or stayed silent."""
        deadline = time.monotonic() + seconds
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(min(left, 0.5))
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                if not self.alive():
                    return None
                continue
            except OSError:
                return None
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def close(self) -> None:
        """End the server (its EOF; SIGKILL if it lingers). Nothing of a run depends on it."""
        try:
            self.sock.close()
        except OSError:
            pass
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                try:
                    self.proc.wait(timeout=2.0)
                except subprocess.TimeoutExpired:
                    pass


_server: Server | None = None
_lock = threading.Lock()  # one handoff at a time (two runs from two threads)
_said: set[str] = set()  # what this kernel was told already
_failed = False  # a server could not import torch here: cells start torchrun the usual way
light = False  # the next server started imports no FSDP (the grader's re-runs of exercises without it)


def start() -> Server | None:
    """Start the server in the background if it is not running (``%load_ext labkit``); never waits."""
    global _server
    if not enabled() or _failed:
        return None
    with _lock:
        if _server is None or _server.owner != os.getpid() or not _server.alive():
            if _server is not None and _server.owner == os.getpid():
                _server.close()  # a dead one: its end of the socket pair goes too
            _server = _start_server()
        return _server


def _start_server() -> Server | None:
    try:
        return Server(light)
    except OSError as exc:
        _say("failed", t("launch.prefork.failed", why=exc))
        return None


def stop() -> None:
    """End this kernel's server (at exit, and in tests)."""
    global _server
    with _lock:
        if _server is not None and _server.owner == os.getpid():
            _server.close()
        _server = None


def _say(kind: str, text: str) -> None:
    """A note, once per kind per kernel, on stderr: in a notebook, in the cell it concerns."""
    if kind in _said:
        return
    _said.add(kind)
    print(text, file=sys.stderr, flush=True)


def usable_server() -> Server | None:
    """The server, ready (waiting for its imports if it is still at them); None, with a note, when the
    cell must start torchrun the usual way. A dead or stale server is replaced for the next cells."""
    global _server, _failed
    if _failed:
        return None
    server = _server if _server is not None and _server.owner == os.getpid() else None
    if server is None:  # the first cell without %load_ext: it waits for the import, as a new torchrun would
        server = _server = _start_server()
        if server is None:
            return None
    if server.ready and not server.alive():
        _replace(t("launch.prefork.died", why=server.why_dead()), "died")
        return None
    changed = what_changed(server.origin, fingerprint())
    if changed is not None:
        _replace(t("launch.prefork.stale", what=changed), "stale")
        return None
    if server.wait_ready(READY_WAIT):
        if changed_files(server.files):
            _replace(t("launch.prefork.stale", what=t("launch.prefork.what.files")), "stale")
            return None
        return server
    if server.alive() and server.threads <= 1:  # silent past READY_WAIT: a fresh one for the next cells
        _replace(t("launch.prefork.died", why=server.why_dead()), "died")
        return None
    # it ended before it was ready (torch would not import this way), or forking it would not be safe
    # here: every cell starts torchrun anew from now on, rather than paying for a server that fails again
    _say("failed", t("launch.prefork.failed", why=server.why_dead()))
    server.close()
    _server, _failed = None, True
    return None


def _replace(note: str, kind: str) -> None:
    global _server
    _say(kind, note)
    if _server is not None:
        _server.close()
    _server = _start_server()


# -- the handoff ------------------------------------------------------------------------------


def spawn_agent(
    argv: list[str], env: dict[str, str], log: str, cell_env: dict[str, str], prune: str = ""
) -> AgentProcess | None:
    """torchrun's agent (``python -m labkit.launch.agent ARGV``) forked from the server, with
    ``env`` and its output in ``log``; None when the caller must start it itself (see the module's doc).
    ``prune``: a runs folder whose old run folders the server removes once the agent is on its way."""
    if not enabled():
        return None
    names = import_time_names(cell_env)
    if names:
        _say("env:" + names[0], t("launch.prefork.env", name=names[0]))
        return None
    with _lock:
        server = usable_server()
        if server is None:
            return None
        request = ForkRequest(0, argv, env, os.getcwd(), _umask(), log, prune)  # its id: server.request's
        held = sigint_held()
        with adopting(), held:  # a Ctrl-C waits until the agent is ours, never between the fork and its answer
            answer = server.request(request)
        agent = AgentProcess(answer.pid) if answer is not None and answer.pid is not None else None
        why = answer.error if answer is not None else None
        if agent is not None and not agent.adopted():  # not our child: we could not wait for it
            agent.end()
            agent = None
            why = t("launch.prefork.why.adopt")
        if held.caught:  # the cell was interrupted while its agent was handed over: nothing of it stays
            if agent is not None:
                agent.end()
            raise KeyboardInterrupt
        if agent is None:
            _replace(t("launch.prefork.died", why=why or server.why_dead()), "died")
        return agent


class sigint_held:
    """Hold a SIGINT (main thread only) during the block; ``caught`` says whether one came."""

    def __init__(self) -> None:
        self.caught: list[int] = []
        self.previous: Any = None

    def __enter__(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, lambda *_: self.caught.append(1))

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


class adopting:
    """The kernel as a child subreaper while an agent is handed over: the middle process exits,
    and its child (the agent) becomes ours. Restored right after, so that nothing else we did not
    start is ever reparented to the kernel."""

    def __enter__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        was = ctypes.c_int(0)
        libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(was), 0, 0, 0)
        self.was = was.value
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self.libc = libc

    def __exit__(self, *exc: object) -> None:
        self.libc.prctl(PR_SET_CHILD_SUBREAPER, self.was, 0, 0, 0)


class AgentProcess:
    """The forked agent, adopted by the kernel: what ``labkit.launch.group`` uses of a ``Popen``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def adopted(self) -> bool:
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as f:
                return int(f.read().rsplit(b") ", 1)[1].split()[1]) == os.getpid()
        except (OSError, ValueError, IndexError):
            return self.poll() is not None  # gone already: adopted if we could reap it

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by someone else: its code is lost (Popen says 0 too)
                self.returncode = 0
                return 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def end(self) -> None:
        """SIGKILL to its process group (its own session), and reap it: for an agent nobody will use."""
        _kill_group(self.pid)
        try:
            self.wait(2.0)
        except subprocess.TimeoutExpired:
            pass

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(["labkit.launch.agent"], timeout or 0)
            time.sleep(0.005)
        return self.returncode  # type: ignore[return-value]


def _drop_in_child() -> None:
    """A fork of the kernel (a cell's own multiprocessing) must not hold the server's lifeline."""
    global _server
    server = _server
    _server = None
    if isinstance(server, Server):
        try:
            server.sock.close()
        except OSError:
            pass


os.register_at_fork(after_in_child=_drop_in_child)


def _at_exit() -> None:
    if isinstance(_server, Server) and _server.owner == os.getpid():
        _server.close()


atexit.register(_at_exit)
