"""Collectives counted inside the ranks (what theory says they should be: ``labkit.timing.theory``).

    from labkit import comm
    for i in rank.steps(3):
        with comm.count(step=i) as c:        # sends a "comm" message when the step ends
            loss = model(x, y); loss.backward(); opt.step()
    c.totals()   # {"all_gather": {"calls": 6, "bytes": ..., "wire_bytes": ...}, ...}

How it counts: a small kernel registered in front of every c10d operator
(``c10d::_allgather_base_``, ``c10d::allreduce_``, ...) sees each collective the rank
runs, whoever issues it: FSDP1, FSDP2, DDP's C++ reducer, or the student's own
``dist.all_reduce`` (see ``_install`` for why not a TorchDispatchMode). It counts what
each operator was *asked to do*, so a reduce-scatter that gloo happens to run as an
all-reduce internally is still counted as a reduce-scatter.

Two byte counts, both per rank and per step:

* ``bytes`` (payload): the size of the full, unsharded tensor the collective works
  on: the output of an all-gather, the input of a reduce-scatter, the tensor of an
  all-reduce or broadcast. Read from the tensors; no model of the network involved.
* ``wire_bytes``: what this rank sends on the link under the ring algorithm (the
  one NCCL and gloo use for large messages). With N ranks in the group,
  all-gather, reduce-scatter and broadcast send (N-1)/N of the payload, and an
  all-reduce, which is a reduce-scatter followed by an all-gather, sends 2(N-1)/N.

So "DDP moves 2Ψ, FULL_SHARD 3Ψ" is a statement about wire bytes in units of
(N-1)/N·Ψ·(bytes per element): see ``theory_bytes``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from labkit.ranks import rank as _rank
from labkit.ranks.fsdp_units import padded_numel, padded_units, unit_name
from labkit.wire.protocol import Msg
from labkit.wire.records import ring_factor

__all__ = ["Call", "CommCounter", "count", "padded_numel", "padded_units", "steps", "unit_name"]


# c10d operator -> (collective, index of the argument holding the full-size payload).
# Schemas: torch.ops.c10d.<name>.default._schema. Output-first for all-gather ops,
# input second for reduce-scatter ops, the tensors themselves otherwise.
C10D_OPS: dict[str, tuple[str, int]] = {
    "c10d::allgather_": ("all_gather", 0),
    "c10d::_allgather_base_": ("all_gather", 0),
    "c10d::allgather_coalesced_": ("all_gather", 0),
    "c10d::allgather_into_tensor_coalesced_": ("all_gather", 0),
    "c10d::reduce_scatter_": ("reduce_scatter", 1),
    "c10d::_reduce_scatter_base_": ("reduce_scatter", 1),
    "c10d::reduce_scatter_tensor_coalesced_": ("reduce_scatter", 1),
    "c10d::allreduce_": ("all_reduce", 0),
    "c10d::allreduce_coalesced_": ("all_reduce", 0),
    "c10d::broadcast_": ("broadcast", 0),
    "c10d::reduce_": ("reduce", 0),
    "c10d::alltoall_": ("all_to_all", 1),
    "c10d::alltoall_base_": ("all_to_all", 1),
    "c10d::gather_": ("gather", 1),
    "c10d::scatter_": ("scatter", 0),
    "c10d::send": ("send", 0),
    "c10d::recv_": ("recv", 0),
    "c10d::barrier": ("barrier", -1),
}
# Functional collectives (DTensor, torch.compile): payload is the input; an all-gather's
# output is group_size times larger.
FUNCTIONAL_OPS: dict[str, str] = {
    "_c10d_functional::all_gather_into_tensor": "all_gather",
    "_c10d_functional::all_gather_into_tensor_coalesced": "all_gather",
    "_c10d_functional::reduce_scatter_tensor": "reduce_scatter",
    "_c10d_functional::reduce_scatter_tensor_coalesced": "reduce_scatter",
    "_c10d_functional::all_reduce": "all_reduce",
    "_c10d_functional::all_reduce_coalesced": "all_reduce",
    "_c10d_functional::broadcast": "broadcast",
    "_c10d_functional::all_to_all_single": "all_to_all",
}


@dataclass
class Call:
    """One collective as this rank issued it. Times are ``time.time()`` seconds."""

    op: str  # all_gather, reduce_scatter, all_reduce, broadcast, ...
    c10d: str  # the operator's own name, e.g. c10d::_allgather_base_
    bytes: int  # payload (see the module docstring)
    group_size: int
    dtype: str
    issued: float  # when the rank called it
    returned: float  # when the call returned (async ops return before they finish)
    done: float | None = None  # when the backend reported it complete
    unit: str | None = None  # the FSDP unit it belongs to, when a timeline names it
    blocking: bool = False  # issued with async_op=False: the caller waits for it right away

    @property
    def wire_bytes(self) -> float:
        return self.bytes * ring_factor(self.op, self.group_size)

    def as_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "c10d": self.c10d,
            "bytes": self.bytes,
            "wire_bytes": self.wire_bytes,
            "group_size": self.group_size,
            "dtype": self.dtype,
            "issued": self.issued,
            "done": self.done if self.done is not None else self.returned,
            "unit": self.unit,
            "blocking": self.blocking,
        }


def _tensor_bytes(x: Any) -> int:
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(_tensor_bytes(v) for v in x)
    return 0


def _first_dtype(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return str(x.dtype).replace("torch.", "")
    if isinstance(x, (list, tuple)):
        for v in x:
            d = _first_dtype(v)
            if d:
                return d
    return ""


def _group_size(args: Sequence[Any]) -> int:
    for a in args:
        if isinstance(a, torch.ScriptObject):
            try:
                return dist.ProcessGroup.unbox(a).size()
            except (RuntimeError, TypeError):
                continue
    return dist.get_world_size() if dist.is_initialized() else 1


def _functional_group_size(args: Sequence[Any]) -> int:
    for a in args[1:]:
        if isinstance(a, int) and not isinstance(a, bool):
            return a  # all_gather / reduce_scatter pass group_size explicitly
    name = args[-1]
    try:
        return dist.distributed_c10d._resolve_process_group(name).size()
    except (RuntimeError, ValueError, KeyError, AttributeError):
        return dist.get_world_size() if dist.is_initialized() else 1


def _find_work(out: Any) -> Any:
    if isinstance(out, (list, tuple)):
        for v in out:
            w = _find_work(v)
            if w is not None:
                return w
        return None
    return out if isinstance(out, torch.ScriptObject) else None


def _describe(name: str, args: Sequence[Any], issued: float) -> Call:
    if name in C10D_OPS:
        kind, where = C10D_OPS[name]
        payload = _tensor_bytes(args[where]) if where >= 0 else 0
        group = _group_size(args)
        dtype = _first_dtype(args[max(where, 0)])
    else:
        kind = FUNCTIONAL_OPS[name]
        group = _functional_group_size(args)
        payload = _tensor_bytes(args[0]) * (group if kind == "all_gather" else 1)
        dtype = _first_dtype(args[0])
    return Call(kind, name, payload, group, dtype, issued, time.time())


def _watch_completion(call: Call, out: Any) -> None:
    """Note when the backend finishes the work: async ops return long before that."""
    work = _find_work(out)
    if work is None:
        call.done = call.returned  # functional ops: their wait_tensor comes later; use the return
        return
    try:
        fut = dist.Work.unbox(work).get_future()
    except (RuntimeError, AttributeError):
        call.done = call.returned
        return

    def mark(_: Any) -> None:
        call.done = time.time()

    fut.add_done_callback(mark)


class CommCounter:
    """Records every collective this process issues while active (``with CommCounter() as c:``)."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.unit_of: Any = None  # set by labkit.timeline: a callable naming the current FSDP unit
        self.synchronize: Any = None  # set by labkit.timeline on GPUs: wait for the device around each call

    def __enter__(self) -> CommCounter:
        _install()
        _active.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _active.remove(self)

    def before(self, name: str, args: Sequence[Any]) -> None:
        """Called just before each collective runs (``labkit.ranks.observe`` reads its input here)."""

    def record(self, name: str, args: Sequence[Any], unit: str | None, issued: float, out: Any, blocking: bool) -> None:
        call = _describe(name, args, issued)
        call.unit, call.blocking = unit, blocking
        self.calls.append(call)
        if self.synchronize is not None:
            call.done = call.returned  # synchronized: done when the call returned
        else:
            _watch_completion(call, out)

    def totals(self) -> dict[str, dict[str, float]]:
        """Per collective: number of calls, payload bytes, and wire bytes sent by this rank."""
        out: dict[str, dict[str, float]] = {}
        for c in self.calls:
            row = out.setdefault(c.op, {"calls": 0, "bytes": 0, "wire_bytes": 0.0})
            row["calls"] += 1
            row["bytes"] += c.bytes
            row["wire_bytes"] += c.wire_bytes
        return out


# -- the hook: a kernel for each collective, at the Autograd dispatch key -----------------
#
# A TorchDispatchMode would see the collectives too, but it sees every other operator as
# well, in Python: it made the small model's step 40% slower, which falsifies a timeline.
# A kernel registered at the Autograd key of the c10d operators only runs for them, for
# every caller that goes through the dispatcher: FSDP1, FSDP2, DDP's C++ reducer (also on
# the autograd engine's threads) and the student's own dist.all_reduce. It passes the call
# on below autograd, which is where it would have gone anyway: these operators have no
# autograd kernel of their own (checked before registering). Not seen: collectives run
# under torch.inference_mode(), whose tensors skip the Autograd key.

_active: list[CommCounter] = []  # counters counting now; kernels record into each
_libraries: list[Any] = []  # kept alive: a Library that is garbage-collected unregisters its kernels
_install_lock = threading.Lock()


def _install() -> None:
    with _install_lock:
        if _libraries:
            return
        for namespace, names in (("c10d", C10D_OPS), ("_c10d_functional", FUNCTIONAL_OPS)):
            lib = torch.library.Library(namespace, "IMPL")
            for qualified in names:
                op_name = qualified.split("::")[1]
                packet = getattr(getattr(torch.ops, namespace), op_name, None)
                if packet is None or torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "Autograd"):
                    continue
                lib.impl(op_name, _kernel(qualified, packet.default), "Autograd")
            _libraries.append(lib)


def _kernel(name: str, op: Any) -> Any:
    kind = C10D_OPS[name][0] if name in C10D_OPS else FUNCTIONAL_OPS[name]
    arg_names = [a.name for a in op._schema.arguments]
    async_at = arg_names.index("async_op") if "async_op" in arg_names else None

    def kernel(*args: Any, **kwargs: Any) -> Any:
        counters = list(_active)
        if not counters:
            with torch._C._AutoDispatchBelowAutograd():
                return op(*args, **kwargs)
        namer = next((c.unit_of for c in counters if c.unit_of is not None), None)
        unit = namer(kind) if namer is not None else None  # before the call, which may block
        sync = next((c.synchronize for c in counters if c.synchronize is not None), None)
        if sync is not None:
            sync()
        for c in counters:
            c.before(name, args)
        issued = time.time()
        with torch._C._AutoDispatchBelowAutograd():
            out = op(*args, **kwargs)
        if sync is not None:
            sync()  # the collective has run on the device: its end is now
        blocking = async_at is not None and not kwargs.get("async_op", args[async_at] if async_at < len(args) else True)
        if blocking and sync is None:
            # the caller waits for it right away; wait here, so that its end is when it ended: gloo's
            # reduce-scatter completes its future at once (measured: 2 ms for a 380 ms collective)
            work = _find_work(out)
            if work is not None:
                dist.Work.unbox(work).wait()
        for c in counters:
            c.record(name, args, unit, issued, out, blocking)
        return out

    return kernel


@contextlib.contextmanager
def count(step: int | None = None, send: bool = True, calls: bool = True, **fields: Any) -> Iterator[CommCounter]:
    """Count the collectives of one step; on exit, send ``comm`` (``counts``, each call, and ``fields``)."""
    counter = CommCounter()
    with counter:
        yield counter
    _wait_for_completions(counter)
    if send:
        payload: dict[str, Any] = {"counts": counter.totals(), "world_size": _rank.world_size(), **fields}
        if calls:
            payload["calls"] = [c.as_dict() for c in counter.calls]
        _rank.send(Msg.COMM, step=step, **payload)


def steps(n: int) -> Iterator[int]:
    """``for i in comm.steps(n):``: ``rank.steps`` with each step's collectives counted and sent."""
    for i in _rank.steps(n):
        with count(step=i):
            yield i


def _wait_for_completions(counter: CommCounter, timeout: float = 5.0) -> None:
    # A completion callback may still be running on the backend's thread; give it a moment.
    deadline = time.time() + timeout
    while any(c.done is None for c in counter.calls) and time.time() < deadline:
        time.sleep(0.001)
    for c in counter.calls:
        if c.done is None:
            c.done = c.returned
