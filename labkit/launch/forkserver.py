"""The pre-forked server: one process that has imported torch and labkit, from which each cold
cell's torchrun agent is forked, so that a cell does not pay the torch import (about 1.5 s).

    python -u -m labkit.launch.forkserver FD KERNEL_PID [pdeathsig]

``labkit.launch.prefork`` starts it (kernel side) and talks to it over a socket pair (``FD``),
one JSON line each way, each a record declared in ``labkit.wire.prefork``:

    server -> kernel   ForkReady(ready=True, pid=P, threads=1, files=[...])   once the imports are done
    kernel -> server   ForkRequest(id, argv, env, cwd, umask, log, prune)
    server -> kernel   ForkReply(id, pid=AGENT_PID)  or  ForkReply(id, error="...")

The server imports torch, torchrun and the rank's side of labkit, and does nothing that starts
a thread or CUDA (it checks: its ``ready`` says how many threads it has, and the kernel will not
use a server with more than one). Each request forks twice: the middle process exits at once,
and the kernel, a child subreaper for that moment, adopts the agent. The agent is then the
kernel's child exactly as a ``Popen`` one is (waited for, signalled, its pid in the logs), and
the server keeps no child: when it dies nothing of a run goes with it.

The agent, first thing, becomes what ``Popen(command, env=env, start_new_session=True)`` made:
its own session, the default signal handlers, stdin from /dev/null, stdout and stderr to the
run's ``agent.log``, the kernel's folder and umask, and the run's environment: in ``os.environ``
and in the block ``/proc/PID/environ`` shows, where the leftover sweep looks for the run's id
(the kernel starts the server with room for it there: ``ROOM_VAR``). Then it runs
``labkit.launch.agent.main``, as ``python -m labkit.launch.agent`` would.

The server dies with the kernel: its end of the socket pair closes (EOF), and, when it was
started from the kernel's main thread, the parent-death signal.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import signal
import socket
import sys
import traceback

from labkit.launch.agent import RANK_IMPORTS
from labkit.wire.prefork import ForkReady, ForkReply, ForkRequest, ImportedFile
from labkit.wire.record import Record

ROOM_VAR = "LABKIT_PREFORK_ROOM"  # padding in the server's environment: the space a forked agent writes its own into
OWNER_VAR = (
    "LABKIT_PREFORK_OF"  # the kernel's pid: finds a kernel's server in /proc (and only the server: agents rewrite it)
)
# what each cold cell would otherwise import: torch, torchrun's agent, the rank's bootstrap, and
# what the ranks import (FSDP, dynamo: agent.RANK_IMPORTS; none of it starts a thread)
PRELOAD = (
    "torch",
    "torch.distributed",
    *RANK_IMPORTS,
    "torch.distributed.run",
    "torch.distributed.elastic.agent.server.local_elastic_agent",
    "torch.distributed.elastic.rendezvous.c10d_rendezvous_backend",
    "torch.distributed.elastic.rendezvous.dynamic_rendezvous",
    "torch.distributed.elastic.multiprocessing",
    "torch.multiprocessing.spawn",
    "cloudpickle",
    "labkit.launch.agent",
    "labkit.ranks.bootstrap",
    "labkit.ranks.rank",
    "labkit.ranks.sampler",
)
# a server for ranks that use no FSDP (the grader's re-runs of lessons 0-2): the rest, without FSDP and
# dynamo, which are a second of the import's 2.5 s on the development machine; a rank imports them if it must
LIGHT = tuple(name for name in PRELOAD if name not in RANK_IMPORTS)
PR_SET_PDEATHSIG = 1


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def main(argv: list[str]) -> None:
    fd, kernel = int(argv[0]), int(argv[1])
    sock = socket.socket(fileno=fd)
    if "pdeathsig" in argv[2:]:  # started from the kernel's main thread: die with it, at once
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != kernel:
            os._exit(1)
    reader = sock.makefile("rb")
    try:
        from labkit.wire import devices

        devices.audit_cuda("agent")  # under LABKIT_CUDA_AUDIT: this is the agent before its fork
        import importlib

        for name in LIGHT if "light" in argv[2:] else PRELOAD:
            importlib.import_module(name)
        warm_up()
        # Everything imported so far lives as long as the process: out of the collector's sight, a
        # rank's gc.collect() (memtrack calls it at each phase) walks only what the rank made, not
        # torch's 290,000 objects (0.15-0.3 s a call); and forked pages stay shared (Python's advice
        # for a process that forks without exec)
        gc.freeze()
    except BaseException:
        send(sock, ForkReady(ready=False, error=traceback.format_exc(limit=8)))
        os._exit(1)
    send(sock, ForkReady(ready=True, pid=os.getpid(), threads=threads(), files=imported_files()))
    while True:
        line = reader.readline()
        if not line:  # the kernel is gone
            os._exit(0)
        serve(sock, line)


def serve(sock: socket.socket, line: bytes) -> None:
    """Answer one request line: the agent's pid, or why not (a line that is no request included)."""
    request: ForkRequest | None = None
    try:
        request = ForkRequest.from_json(line)
        send(sock, ForkReply(request.id, pid=fork_agent(request, sock)))
    except Exception as exc:
        send(sock, ForkReply(request.id if request else id_of(line), error=f"{type(exc).__name__}: {exc}"))
    if request is not None and request.prune:  # housekeeping the cell would otherwise wait for
        prune(request.prune)


def id_of(line: bytes) -> int | None:
    """The ``id`` of a request that could not be read as one, where it has one: the kernel waits for it."""
    try:
        found = json.loads(line).get("id")
    except (ValueError, AttributeError):
        return None
    return found if isinstance(found, int) and not isinstance(found, bool) else None


def warm_up() -> None:
    """What every agent would do once more in each cell: parse torchrun's options (argparse
    compiles its regular expressions on first use, tens of milliseconds; the cache is inherited)."""
    from torch.distributed.run import parse_args

    parse_args(["--nnodes=1", "--nproc-per-node=2", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0"]
               + ["--rdzv-id=warm-up", "--max-restarts=0", "--monitor-interval=0.02", "--start-method=fork"]
               + ["--run-path", "cell.py"])  # fmt: skip


def imported_files() -> list[ImportedFile]:
    """labkit's modules in this process and torch's version file, as (path, size, mtime_ns): a
    change to any of them on disk makes this server stale (``prefork.what_changed``)."""
    import torch

    paths = {os.path.join(os.path.dirname(torch.__file__), "version.py")}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if name.split(".")[0] == "labkit" and file:
            paths.add(file)
    files = []
    for path in sorted(paths):
        try:
            st = os.stat(path)
        except OSError:
            continue
        files.append(ImportedFile(path, st.st_size, st.st_mtime_ns))
    return files


def send(sock: socket.socket, record: Record) -> None:
    sock.sendall(record.to_json().encode() + b"\n")


def prune(root: str) -> None:
    try:
        from labkit.launch.rundirs import prune_runs

        prune_runs(root)
    except Exception:
        pass


def fork_agent(request: ForkRequest, sock: socket.socket) -> int:
    """Fork the agent (through a middle process that exits at once); return its pid."""
    if threads() != 1:  # a fork copies one thread: a lock another one held would stay locked forever
        raise OSError(f"{threads()} threads in the server; it forks only while it has one")
    sys.stdout.flush()
    sys.stderr.flush()
    r, w = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            os.close(r)
            agent = os.fork()
            if agent == 0:
                os.close(w)
                become_agent(request, sock)  # never returns
            os.write(w, str(agent).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        answer = f.read()
    os.waitpid(middle, 0)  # gone: the agent has been adopted by the kernel
    if not answer:
        raise OSError("the agent could not be forked")
    return int(answer)


def become_agent(request: ForkRequest, sock: socket.socket) -> None:
    """In the forked agent: what Popen would have set up, then torchrun's main. Never returns."""
    try:
        os.close(sock.detach())  # the server's end of the socket pair is not the agent's
        os.setsid()  # start_new_session=True: killpg(agent pid) reaches torchrun and nothing else
        default_signals()
        stdio(request.log)
        os.chdir(request.cwd)
        os.umask(request.umask)
        set_environ(request.env)
        apply_import_time_settings(request.env)
        import labkit.launch.agent as agent

        sys.argv = [agent.__file__, *request.argv]
        sys.path[0] = request.cwd  # as python -m puts the current folder first
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    agent.run()


def default_signals() -> None:
    """The handlers and mask a fresh interpreter starts with."""
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as Python sets it at start-up
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def stdio(log: str) -> None:
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(null)
    os.close(out)


def set_environ(env: dict[str, str]) -> None:
    """The run's environment, for this process (libc's and ``os.environ``) and for /proc/PID/environ."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.clearenv()  # every entry, those os.environ did not know included
    os.environ.clear()
    os.environ.update(env)  # setenv: libc's copies, none of them in the block rewritten below
    write_environ_block(env)


def environ_block() -> tuple[int, int]:
    """Where this process's initial environment lives: what /proc/PID/environ reads."""
    with open("/proc/self/stat", "rb") as f:
        fields = f.read().rsplit(b") ", 1)[1].split()
    return int(fields[47]), int(fields[48])  # env_start, env_end: fields 50 and 51 of stat(5)


def write_environ_block(env: dict[str, str]) -> int:
    """Write ``env`` over the initial environment block, labkit's variables first, as much as fits
    in whole entries (the rest stays in ``os.environ``); returns how many entries fit."""
    start, end = environ_block()
    size = end - start
    items = sorted(env.items(), key=lambda kv: not kv[0].startswith("LABKIT_"))
    block, fitted = b"", 0
    for key, value in items:
        entry = os.fsencode(key) + b"=" + os.fsencode(value) + b"\0"
        if len(block) + len(entry) >= size:
            continue
        block += entry
        fitted += 1
    ctypes.memmove(start, block + b"\0" * (size - len(block)), size)
    return fitted


def apply_import_time_settings(env: dict[str, str]) -> None:
    """Settings torch read from the environment when the server imported it: read them again;
    and a fresh random state where a new interpreter would have one.

    OpenMP's thread count (torch keeps what it found at its import, not the variable's later value)
    and ``TORCH_DISTRIBUTED_DEBUG`` (read when torch.distributed is imported). Variables torch reads
    only at import and not listed here make the kernel use the usual launch (``prefork.IMPORT_TIME``).
    """
    import torch

    threads = env.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))
    import torch.distributed as dist

    if dist.is_available():
        dist.set_debug_level_from_env()
    # every fork would start from the server's random state: Python's random reseeds itself after a
    # fork, numpy's global generator does not (torch's starts from a fixed seed in any new process)
    nprandom = sys.modules.get("numpy.random")
    if nprandom is not None:
        nprandom.seed()


if __name__ == "__main__":
    main(sys.argv[1:])
