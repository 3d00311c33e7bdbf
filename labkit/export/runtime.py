"""What an exported script runs around the notebook's cells, copied into it verbatim by ``labkit export``.

Each function is self-contained (its imports inside) because ``inspect.getsource`` copies it into a
script that may run where labkit is not installed; their names start with ``_labkit_`` so that they
cannot clash with the names of the cells they run around. They do, before and after each cell, what
labkit's bootstrap does on a rank: the cell's process group with the lab's timeout, ``rank.report()``
values shown, the group destroyed at the cell's end.

``_labkit_to_jsonable`` is not written here: it is ``labkit.ranks.rank.to_jsonable`` itself, which the
export copies into the script under that name (``standin_sources``), and which this module imports
under the same name for the stand-in run in-process (tests/test_export.py).
"""

from labkit.ranks.rank import to_jsonable as _labkit_to_jsonable


def _labkit_standin_rank(wire):
    """labkit is not installed here: a stand-in for ``labkit.rank`` with the same calls and JSON lines.

    ``wire``: the message keys (``labkit.wire.protocol``'s TYPE and TIME) and the types it sends
    (``kinds``: ``Msg``'s values), given by the export so that this copy writes messages as labkit does. tests/test_export.py checks its calls against labkit.rank's.
    """
    import contextlib
    import json
    import os
    import sys
    import time
    import types

    mod = types.ModuleType("labkit.ranks.rank")
    mod.values = {}
    count = [0]  # the next step's index, as labkit.rank keeps it
    steps_total = [None]  # n of the steps(n) loop running now
    channel = [None]  # a channel given by use_channel (an exported script has none of its own)
    phase_hooks, step_hooks = [], []
    mod.rank = lambda: int(os.environ.get("RANK", "0"))
    mod.local_rank = lambda: int(os.environ.get("LOCAL_RANK", "0"))
    mod.world_size = lambda: int(os.environ.get("WORLD_SIZE", "1"))

    to_jsonable = _labkit_to_jsonable  # labkit.ranks.rank's, copied into the script by the export
    kinds = wire["kinds"]

    def use_channel(client):
        channel[0] = client

    def connected():
        return channel[0] is not None and not getattr(channel[0], "closed", False)

    def send(kind, **payload):
        msg = {wire["type"]: kind, wire["time"]: time.time(), **to_jsonable(payload)}
        if channel[0] is not None:
            channel[0].send(msg)
            return
        folder = os.environ.get("LABKIT_REPORT_DIR")
        if folder:
            with open(os.path.join(folder, f"rank{mod.rank()}.jsonl"), "a") as f:
                f.write(json.dumps(msg, default=repr) + "\n")

    def report(**named_values):
        clean = to_jsonable(named_values)
        mod.values.update(clean)
        send(kinds["report"], values=clean)

    @contextlib.contextmanager
    def step(index=None):
        i = count[0] if index is None else index
        total = {} if steps_total[0] is None else {"n": steps_total[0]}  # inside steps(n), as labkit.rank
        t0 = time.perf_counter()
        send(kinds["step_start"], i=i, **total)
        yield
        dt = time.perf_counter() - t0
        count[0] = i + 1
        send(kinds["step"], i=i, dt=dt, **total)
        for hook in list(step_hooks):
            hook(i)

    def current_step():
        return count[0]

    def reset_steps():
        count[0] = 0

    def steps(n):
        steps_total[0] = n
        try:
            for i in range(n):
                with step(i):
                    yield i
        finally:
            steps_total[0] = None

    def device():
        import torch

        nccl = os.environ.get("LABKIT_BACKEND") == "nccl" and torch.cuda.is_available()
        return torch.device("cuda", mod.local_rank()) if nccl else torch.device("cpu")

    def log(text):
        send(kinds["log"], text=str(text)[:500])

    def phase(name):
        for hook in list(phase_hooks):
            hook(name)
        send(kinds["phase"], name=name)

    def hook_list(hooks):
        def register(hook):
            hooks.append(hook)
            return lambda: hooks.remove(hook) if hook in hooks else None

        return register

    mod.send, mod.report, mod.step, mod.steps, mod.device = send, report, step, steps, device
    mod.current_step, mod.reset_steps, mod.log, mod.phase = current_step, reset_steps, log, phase
    mod.to_jsonable, mod.use_channel, mod.connected = to_jsonable, use_channel, connected
    mod.on_phase, mod.on_step = hook_list(phase_hooks), hook_list(step_hooks)
    # ``from labkit.ranks import rank`` and ``from labkit import rank`` both find it: packages need a path
    package, ranks = types.ModuleType("labkit"), types.ModuleType("labkit.ranks")
    package.__path__, ranks.__path__ = [], []
    package.rank, package.ranks, ranks.rank = mod, ranks, mod
    sys.modules.update({"labkit": package, "labkit.ranks": ranks, "labkit.ranks.rank": mod})
    return mod


def _labkit_setup(nproc, pg_timeout, messages, wire):
    """Once, before the first cell: labkit.rank, or its stand-in."""
    import os
    import sys

    try:
        from labkit.ranks import rank
    except ImportError:
        rank = _labkit_standin_rank(wire)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if nproc is not None and world != nproc and rank.rank() == 0:
        print(messages["world"].format(nproc=nproc, world=world), file=sys.stderr, flush=True)
    return {
        "rank": rank,
        "backend": os.environ.get("LABKIT_BACKEND"),  # set by hand, it wins over the cells' --backend
        "pg_timeout": float(os.environ.get("LABKIT_PG_TIMEOUT", pg_timeout)),
        "messages": messages,
        "kinds": wire["kinds"],
    }


def _labkit_begin_cell(state, index, backend, own_init):
    """Before a cell: what labkit's bootstrap does before it runs a cell on a rank."""
    import datetime
    import os

    import torch
    import torch.distributed as dist

    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    backend = state["backend"] or backend
    os.environ["LABKIT_BACKEND"] = backend  # rank.device() reads it
    rank = state["rank"]
    rank.values.clear()
    rank.reset_steps()
    state["cell"] = index
    if "init" not in state:
        state["init"] = dist.init_process_group

        def init_process_group(*args, **kwargs):
            """The group of a cell: with the lab's timeout, and a store of the cell's own.

            Each cell makes and destroys a group, and torch 2.13 numbers a group made again in
            the same process as the one before it: on the same store it reads the last group's
            keys and fails ("Connection reset by peer") or hangs. A prefix per cell keeps them apart.
            """
            timeout = datetime.timedelta(seconds=state["pg_timeout"])
            kwargs.setdefault("timeout", timeout)
            if len(args) < 2 and "init_method" not in kwargs and "store" not in kwargs:
                r, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
                if "store" not in state:  # torchrun's own store (env://), one for the whole script
                    state["store"] = next(dist.rendezvous("env://", r, world, timeout=timeout))[0]
                kwargs.update(
                    store=dist.PrefixStore(f"labkit/cell{state['cell']}", state["store"]), rank=r, world_size=world
                )
            return state["init"](*args, **kwargs)

        dist.init_process_group = init_process_group  # a cell that makes its own group gets both too
    if not own_init and not dist.is_initialized():
        kwargs = {}
        if backend == "nccl":
            local = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local)  # LOCAL_RANK, before anything touches CUDA
            kwargs["device_id"] = torch.device("cuda", local)
        dist.init_process_group(backend, **kwargs)
    rank.send(state["kinds"]["cell"], index=index)


def _labkit_end_cell(state, index):
    """After a cell: rank 0 shows what was reported, and the group goes, as at the end of a labkit run."""
    import json

    import torch.distributed as dist

    rank = state["rank"]
    if rank.values and rank.rank() == 0:
        print(state["messages"]["reported"].format(index=index, values=json.dumps(rank.values)), flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()


def _labkit_exit():
    """After the last cell: end the rank as labkit ends one, without the interpreter's teardown.

    In teardown torch's C++ objects (the store's client, the process groups' transports) go in no
    set order, and under Slurm a rank now and then aborted there ("terminate called without an
    active exception", SIGABRT) after every rank had reported, failing a job that had finished.
    labkit's own ranks end with os._exit and never did. What Python does first at exit is kept:
    threads the cells started and did not make daemons are waited for, then atexit handlers run.
    """
    import atexit
    import os
    import sys
    import threading

    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


RUNTIME = (_labkit_standin_rank, _labkit_setup, _labkit_begin_cell, _labkit_end_cell, _labkit_exit)


def standin_sources() -> list[str]:
    """What an exported script holds before its cells: labkit's own ``to_jsonable`` (self-contained,
    renamed so that a cell's names cannot clash with it), then the functions above."""
    import inspect

    from labkit.ranks import rank

    shared = inspect.getsource(rank.to_jsonable).replace("to_jsonable", "_labkit_to_jsonable")
    # the script has no ``typing``: the signature's hints go (its body is plain Python already)
    typed = "def _labkit_to_jsonable(value: Any) -> Any:"
    assert typed in shared, "labkit.ranks.rank.to_jsonable's signature changed: update standin_sources"
    return [shared.replace(typed, "def _labkit_to_jsonable(value):"), *[inspect.getsource(fn) for fn in RUNTIME]]
