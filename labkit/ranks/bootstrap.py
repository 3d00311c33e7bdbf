"""The program every rank runs: ``torchrun ... --start-method=fork --run-path .../bootstrap.py``
(or ``torchrun ... -m labkit.ranks.bootstrap`` with ``LABKIT_START_METHOD=spawn``).

Forked ranks are copies of torchrun's agent, which has imported torch already, so a rank
starts in milliseconds rather than importing torch again (2-3 s per rank on a laptop,
all ranks sharing its cores). A fork inherits the agent's signal handlers and process
group, so the first thing a rank does is take the defaults and a group of its own.

In order, and the order matters:
1. Lifelines first, so no failure below can leave an orphan: die with the torchrun
   agent (PR_SET_PDEATHSIG), and die with the notebook kernel (when the channel
   socket closes, this rank kills its own process group, grandchildren included).
2. stdout and stderr to per-rank files, so that output of different ranks never
   interleaves and a flood of it stays on disk.
3. The channel, then the memory sampler.
4. The process group, unless the cell creates its own; always with a timeout,
   since gloo's default of 30 minutes turns a lab mistake into a silent hang.
5. The cell's code, compiled as ``<cell>`` so tracebacks show the cell's lines.

In "serve" mode (warm ranks, ``labkit.launch.warm``) step 5 becomes a loop: the rank waits
for cells from the kernel and runs each one on its main thread in a namespace that
persists, until the kernel says stop or goes away.
"""

from __future__ import annotations

import ast
import builtins
import ctypes
import faulthandler
import linecache
import os
import queue
import signal
import socket
import sys
import time
import traceback
from typing import Any

from labkit.ranks import cores, observe, recording
from labkit.ranks import rank as rank_api
from labkit.ranks.profiling import maybe_profile
from labkit.ranks.sampler import Sampler
from labkit.wire import devices as gpus
from labkit.wire import env as envvars
from labkit.wire.channel import ChannelClient
from labkit.wire.job import FUNCTION_FILE, JobSpec
from labkit.wire.protocol import TYPE, Msg
from labkit.wire.setting import Backend

CELL_FILENAME = "<cell>"
_finishing = False
_in_cell = False  # serve mode: a SIGINT interrupts a cell, never the loop between cells


def set_parent_death_signal() -> None:
    """Ask Linux to SIGKILL us when our parent (the torchrun agent) dies, e.g. by SIGKILL."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before the prctl: nobody will signal us
        os._exit(1)


def own_group_and_default_signals() -> None:
    """A forked rank starts in the agent's process group with the agent's signal handlers
    (torchrun turns SIGTERM into an exception there). Take a group of our own, so that
    "kill our own group" never reaches the agent or another rank, and the default handlers,
    as a rank started by exec has them."""
    if os.getpgid(0) != os.getpid():
        os.setpgid(0, 0)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def redirect_output(run_dir: str, rank: int) -> None:
    for fd, name in ((1, f"rank{rank}.out"), (2, f"rank{rank}.err")):
        target = os.open(os.path.join(run_dir, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.stdout.reconfigure(line_buffering=True, errors="backslashreplace")
    sys.stderr.reconfigure(line_buffering=True, errors="backslashreplace")


def kernel_gone() -> None:
    """The channel closed: the notebook stopped the run, or the kernel died. End this rank now."""
    if _finishing:
        return
    try:
        os.write(2, b"labkit: the notebook ended the run (channel closed); this rank stops.\n")
        os.killpg(0, signal.SIGKILL)  # our own process group: this rank and any children it made
    finally:
        os._exit(1)


def calls_init_process_group(source: str) -> bool:
    """Does the cell's code call ``init_process_group`` itself?"""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
            if name == "init_process_group":
                return True
    return False


def init_process_group(backend: str, timeout_s: float) -> None:
    import datetime

    import torch.distributed as dist

    if dist.is_initialized():
        return
    kwargs: dict[str, Any] = {"timeout": datetime.timedelta(seconds=timeout_s)}
    if backend == Backend.NCCL:
        kwargs["device_id"] = gpus.bind_device(backend)  # cuda:LOCAL_RANK, before anything touches CUDA
    kwargs.update(file_store())
    dist.init_process_group(backend, **kwargs)
    everyone_joined()


_stores = 0  # process groups this rank has made: each gets a store file of its own


def file_store() -> dict[str, Any]:
    """On one node, the group's rendezvous through a file in the run folder, not torchrun's agent store.

    A rank forked from torchrun's agent makes a TCPStore client to the agent's store in
    init_process_group, and under load one rank in a few dozen 4-rank runs hung there until the
    timeout (its stack: ``rendezvous._create_c10d_store``; the others then fail waiting for its
    key). A file needs no connection and no thread of the agent. Across nodes the ranks share no
    local folder: torchrun's store stays (``{}``: init_process_group's env:// defaults).
    """
    global _stores
    one_folder = envvars.get("LABKIT_NODES") == "emulated"  # nodes emulated on one machine share the run folder
    if os.environ.get("LOCAL_WORLD_SIZE") != os.environ.get("WORLD_SIZE") and not one_folder:
        return {}
    _stores += 1
    path = os.path.join(envvars.require("LABKIT_RUN_DIR"), f"store-{_stores}")  # every rank counts the same
    return {
        "init_method": f"file://{path}",
        "rank": int(os.environ["RANK"]),
        "world_size": int(os.environ["WORLD_SIZE"]),
    }


def everyone_joined() -> None:
    """Wait until every rank is past init_process_group.

    Without it a rank whose cell is short can finish and close its connections while a
    slower peer is still inside init (gloo connects every pair there), and that peer fails
    with "connection closed by peer" although nothing in the cell was wrong. A barrier on
    the new group is enough: no rank leaves it before all have entered it.
    """
    import torch.distributed as dist

    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()


def default_pg_timeout(timeout_s: float) -> None:
    """A cell that calls init_process_group itself still gets the lab's collective timeout."""
    import datetime
    import functools

    import torch.distributed as dist

    original = dist.init_process_group

    @functools.wraps(original)
    def with_timeout(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("timeout", datetime.timedelta(seconds=timeout_s))
        if len(args) < 2 and not {"init_method", "store", "rank", "world_size"} & set(kwargs):
            kwargs.update(file_store())  # env:// by default: the file store instead, as labkit's own groups
        result = original(*args, **kwargs)
        if (
            dist.get_backend() == Backend.GLOO
        ):  # NCCL connects lazily, and a barrier there would pick a device for the cell
            everyone_joined()
        return result

    dist.init_process_group = with_timeout


def destroy_process_group() -> None:
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception:
            pass


def format_error(exc: BaseException, cell_filename: str = CELL_FILENAME) -> tuple[str, int | None]:
    """The traceback without labkit's own frames, and the cell line where it happened."""
    tb = traceback.TracebackException.from_exception(exc)
    tb.stack = traceback.StackSummary.from_list([f for f in tb.stack if not f.filename.endswith("bootstrap.py")])
    lineno = None
    for frame in tb.stack:
        if frame.filename == cell_filename:
            lineno = frame.lineno
    return "".join(tb.format()), lineno


def send_error(exc: BaseException, kind: Msg = Msg.ERROR, cell_filename: str = CELL_FILENAME, **extra: Any) -> None:
    """The traceback to this rank's stderr (flushed), then the error to the notebook."""
    text, lineno = format_error(exc, cell_filename)
    sys.stderr.write(text)
    sys.stderr.flush()
    rank_api.send(
        kind,
        type=type(exc).__name__,
        message=str(exc)[:2000],
        traceback=text[-20000:],
        lineno=lineno,
        step=rank_api.current_step(),
        **extra,
    )


def load_job(run_dir: str) -> JobSpec:
    return JobSpec.read(run_dir)


def load_pickle(run_dir: str, name: str) -> Any:
    import cloudpickle

    with open(os.path.join(run_dir, name), "rb") as f:
        return cloudpickle.load(f)


def execute(job: JobSpec, run_dir: str, namespace: dict[str, Any]) -> Any:
    """Run the job's code in ``namespace``; return the function's result, if a function."""
    backend, pg_timeout = job.backend, job.pg_timeout
    gpus.bind_device(backend)  # first, even when the cell makes its own process group
    if job.mode == "function":
        fn, args, kwargs = load_pickle(run_dir, FUNCTION_FILE)
        init_process_group(backend, pg_timeout)
        with observe.cell(fn.__code__.co_filename, namespace):  # what the grader reads (labkit.ranks.observe)
            return fn(*args, **kwargs)

    source_file = str(job.source_file)  # modes code and path always name one (JobSpec checks)
    with open(source_file) as f:
        source = f.read()
    filename = CELL_FILENAME if job.mode == "code" else source_file
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    if calls_init_process_group(source):
        default_pg_timeout(pg_timeout)
    else:
        init_process_group(backend, pg_timeout)
    with observe.cell(filename, namespace):  # what the grader reads (labkit.ranks.observe)
        exec(compile(source, filename, "exec"), namespace)
    return None


def main() -> None:
    global _finishing
    set_parent_death_signal()
    own_group_and_default_signals()
    run_dir = envvars.require("LABKIT_RUN_DIR")
    rank = int(os.environ["RANK"])
    redirect_output(run_dir, rank)
    cores.pin()  # --pin: before gloo's and torch's threads start, which inherit it
    faulthandler.enable(file=sys.stderr, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)  # "where is it stuck?"

    hello = {
        "rank": rank,
        "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
        "world_size": int(os.environ.get("WORLD_SIZE", "1")),
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "node": envvars.get("LABKIT_NODE"),  # several nodes: its name (labkit.launch.nodes), for node/local rank
    }
    token = envvars.pop("LABKIT_TOKEN")  # out of the environment of anything we start
    inbox: queue.SimpleQueue = queue.SimpleQueue()  # messages from the kernel, for the main thread
    client = ChannelClient(
        envvars.require("LABKIT_SOCKET"), token, hello, on_message=lambda m: from_kernel(m, inbox), on_close=kernel_gone
    )
    rank_api.use_channel(client)
    send = rank_api.send

    job = load_job(run_dir)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    if job.mode == "serve":
        return finish(client, serve(job, run_dir, namespace, inbox))
    if job.vars_file:
        namespace.update(load_pickle(run_dir, job.vars_file))
    sampler = Sampler(send, namespace, job.sample_interval)
    sampler.start()

    exit_code = 0
    try:
        with (
            recording.recording(),
            maybe_profile(rank),
        ):  # the run record's counts; --profile: this rank's torch.profiler trace
            result = execute(job, run_dir, namespace)
    except SystemExit as exc:
        code = exc.code
        exit_code = code if isinstance(code, int) else (0 if code is None else 1)
        if exit_code:
            send(Msg.EXIT, code=exit_code, step=rank_api.current_step())
        result = None
    except BaseException as exc:
        send_error(exc)
        exit_code = 1
        result = None
    _finishing = True
    sampler.stop()
    if exit_code == 0:
        destroy_process_group()
        send(Msg.DONE, result=result, time_end=time.time())
    finish(client, exit_code)


def finish(client: ChannelClient, exit_code: int) -> None:
    global _finishing
    _finishing = True
    client.close()
    sys.stdout.flush()
    sys.stderr.flush()
    if exit_code == 0 and _forked():
        # torchrun counts a forked rank as done only when its function returns; its wrapper
        # then ends the process with os._exit, without interpreter teardown, as we would
        return
    # os._exit: skip interpreter teardown, where a broken process group can hang at exit
    os._exit(exit_code)


def _forked() -> bool:
    import multiprocessing

    return multiprocessing.parent_process() is not None


# -- serve mode: warm ranks ------------------------------------------------------


def from_kernel(msg: dict[str, Any], inbox: queue.SimpleQueue) -> None:
    """Runs on the channel's reader thread. A cut must happen here, while the main thread is
    blocked in a collective; everything else is for the main thread."""
    if msg.get(TYPE) == Msg.CUT:
        cut_collectives()
    else:
        inbox.put(msg)


def on_sigint(signum: int, frame: Any) -> None:
    if _in_cell:
        raise KeyboardInterrupt  # between cells a late interrupt is dropped: there is nothing to stop


def serve(job: JobSpec, run_dir: str, namespace: dict[str, Any], inbox: queue.SimpleQueue) -> int:
    """Join the process group, then run each cell the kernel sends until it says stop."""
    try:
        init_process_group(job.backend, job.pg_timeout)
    except BaseException as exc:
        send_error(exc)
        return 1
    default_pg_timeout(job.pg_timeout)  # a cell that destroys the group and makes its own keeps the timeout
    signal.signal(signal.SIGINT, on_sigint)  # whatever torchrun left us, SIGINT interrupts a cell
    sampler = Sampler(
        rank_api.send, namespace, job.sample_interval
    )  # one for every cell: its thread sleeps between them
    rank_api.send(Msg.READY)
    while True:
        msg = inbox.get()
        if msg.get(TYPE) == Msg.STOP:
            return 0
        if msg.get(TYPE) == Msg.EXEC:
            try:
                run_cell(msg, run_dir, namespace, sampler)
            except KeyboardInterrupt:  # landed in our own code after the cell ended; it had nothing to stop
                pass


def run_cell(msg: dict[str, Any], run_dir: str, namespace: dict[str, Any], sampler: Sampler) -> None:
    """One cell: its output flushed and its end (``cell_done`` or ``cell_error``) sent, whatever happens."""
    global _in_cell
    cell = msg["cell"]
    filename = f"<cell {cell}>"  # one name per cell: a function from cell 2 still shows cell 2's lines in cell 5
    source = msg["code"]
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    rank_api.reset_steps()
    sampler.start()
    failure: BaseException | None = None
    try:
        try:
            if msg.get("vars"):
                namespace.update(load_pickle(run_dir, msg["vars"]))
            code = compile(source, filename, "exec")
            _in_cell = True
            with observe.cell(filename, namespace, cell):  # what the grader reads (labkit.ranks.observe)
                exec(code, namespace)
        finally:
            _in_cell = False
    except SystemExit as exc:  # sys.exit() ends the cell, not the rank: the session lives on
        if exc.code not in (None, 0):
            failure = exc
    except BaseException as exc:
        failure = exc
    sampler.stop()
    sys.stdout.flush()
    sys.stderr.flush()
    if failure is None:
        rank_api.send(Msg.CELL_DONE, cell=cell, time_end=time.time())
    else:
        send_error(failure, Msg.CELL_ERROR, filename, cell=cell)


def cut_collectives() -> None:
    """Make a collective that blocks this rank fail now instead of at its timeout.

    Neither SIGINT (handled only once the collective returns) nor ``abort()`` (a no-op for
    gloo in torch 2.13) wakes a rank blocked in gloo; shutting down its TCP connections to
    the peers does, with "Connection closed by peer". The connection to torchrun's store
    and listening sockets are left alone (shutting down gloo's listener aborts the process).
    The process group is unusable afterwards: the kernel says so and offers a restart.
    """
    dist = sys.modules.get("torch.distributed")
    if dist is not None and envvars.get("LABKIT_BACKEND") == Backend.NCCL and dist.is_initialized():
        for pg in list(dist.distributed_c10d._world.pg_map):
            try:
                pg.abort()  # NCCL communicators support abort
            except Exception:
                pass
    store_port = int(os.environ.get("MASTER_PORT", "0"))
    for fd in _socket_fds():
        try:
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            if sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
                if sock.getpeername()[1] != store_port:
                    sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # not connected (a listener): leave it
            pass
        finally:
            sock.close()


FDS = "/proc/self/fd"


def _socket_fds() -> list[int]:
    """This process's socket descriptors: from /proc on Linux, else psutil's TCP connections."""
    if not os.path.isdir(FDS):
        import psutil

        return [c.fd for c in psutil.Process().net_connections("tcp") if c.fd >= 0]
    fds = []
    for name in os.listdir(FDS):
        try:
            if os.readlink(f"{FDS}/{name}").startswith("socket:"):
                fds.append(int(name))
        except OSError:
            continue
    return fds


if __name__ == "__main__":
    # run as a script (torchrun --run-path) or with -m: either way the package's module runs,
    # so there is one labkit.ranks.bootstrap in the rank, whatever else imports it
    from labkit.ranks.bootstrap import main as package_main

    package_main()
