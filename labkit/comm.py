"""Collectives counted inside the ranks, and what theory says they should be.

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
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from labkit import rank as _rank
from labkit.fsdp_units import padded_numel, padded_units, unit_name
from labkit.i18n import catalog, t
from labkit.protocol import TYPE, Msg
from labkit.units import fmt_bytes, render_table

__all__ = [
    "KINDS",
    "STRATEGIES",
    "Call",
    "CommCounter",
    "StepCounts",
    "count",
    "from_events",
    "padded_numel",
    "padded_units",
    "ring_factor",
    "steps",
    "table",
    "theory_bytes",
    "total",
    "unit_name",
]

catalog(
    {
        "comm.unknown_strategy": {
            "en": "unknown strategy {name!r}; choose one of {choices}",
            "ro": "strategie necunoscută {name!r}; alegeți una dintre {choices}",
        },
        "comm.bad_shard_size": {
            "en": "HYBRID_SHARD needs shard_size dividing world_size ({world_size}); got {shard_size}",
            "ro": "HYBRID_SHARD are nevoie de un shard_size care să dividă world_size ({world_size}); primit {shard_size}",
        },
        "comm.table.op": {"en": "collective", "ro": "colectivă"},
        "comm.table.calls": {"en": "calls", "ro": "apeluri"},
        "comm.table.bytes": {"en": "payload", "ro": "încărcătură"},
        "comm.table.wire": {"en": "sent per rank (ring)", "ro": "trimis per rang (inel)"},
    }
)

KINDS = ("all_gather", "reduce_scatter", "all_reduce", "broadcast")

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


def ring_factor(kind: str, group_size: int) -> float:
    """Bytes a rank sends per payload byte under the ring algorithm."""
    n = max(group_size, 1)
    if kind == "all_reduce":
        return 2 * (n - 1) / n  # reduce-scatter, then all-gather
    if kind in ("barrier", "recv"):
        return 0.0
    if kind == "send":
        return 1.0
    return (n - 1) / n


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
        issued = time.time()
        with torch._C._AutoDispatchBelowAutograd():
            out = op(*args, **kwargs)
        if sync is not None:
            sync()  # the collective has run on the device: its end is now
        blocking = async_at is not None and not kwargs.get("async_op", args[async_at] if async_at < len(args) else True)
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


# -- theory -------------------------------------------------------------------

STRATEGIES = ("DDP", "NO_SHARD", "FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2")


def _strategy_name(strategy: Any) -> str:
    name = getattr(strategy, "name", str(strategy)).upper()
    if name not in STRATEGIES:
        raise ValueError(t("comm.unknown_strategy", name=name, choices=", ".join(STRATEGIES)))
    return name


def theory_bytes(
    num_params: int,
    strategy: Any,
    world_size: int,
    dtype_bytes: int = 4,
    *,
    reduce_dtype_bytes: int | None = None,
    unsharded_root_params: int = 0,
    shard_size: int | None = None,
) -> dict[str, dict[str, float]]:
    """Per rank and per step: payload and ring wire bytes of each collective, in theory.

    ``num_params`` is Ψ as the collectives see it (padding included, see ``padded_units``).
    ``unsharded_root_params``: parameters FSDP keeps gathered between forward and backward,
    so they are not gathered again (FSDP1 FULL_SHARD keeps its root unit: measured 1.814Ψ
    gathered instead of 2Ψ on the small model). ``shard_size``: HYBRID_SHARD's shard group.

        DDP, NO_SHARD       all_reduce Ψ                      wire 2(N-1)/N Ψ
        FULL_SHARD          all_gather 2Ψ (fwd + bwd), RS Ψ   wire 3(N-1)/N Ψ
        SHARD_GRAD_OP       all_gather Ψ (fwd only),   RS Ψ   wire 2(N-1)/N Ψ
        HYBRID_SHARD (S)    FULL_SHARD within S ranks, then all_reduce of Ψ/S across N/S groups
    """
    name = _strategy_name(strategy)
    rb = reduce_dtype_bytes or dtype_bytes
    n = world_size
    if name in ("DDP", "NO_SHARD"):
        return _rows({"all_reduce": (num_params * rb, n)})
    gathered = 2 * num_params - unsharded_root_params
    if name in ("SHARD_GRAD_OP", "_HYBRID_SHARD_ZERO2"):
        gathered = num_params
    if name in ("FULL_SHARD", "SHARD_GRAD_OP"):
        return _rows({"all_gather": (gathered * dtype_bytes, n), "reduce_scatter": (num_params * rb, n)})
    s = shard_size or n
    if s < 1 or n % s:
        raise ValueError(t("comm.bad_shard_size", world_size=n, shard_size=shard_size))
    return _rows(
        {
            "all_gather": (gathered * dtype_bytes, s),
            "reduce_scatter": (num_params * rb, s),
            "all_reduce": (num_params / s * rb, n // s),  # each shard across its replicas
        }
    )


def _rows(spec: dict[str, tuple[float, int]]) -> dict[str, dict[str, float]]:
    out = {}
    for kind, (payload, group) in spec.items():
        if group > 1:  # a group of one rank does not communicate
            out[kind] = {"bytes": float(payload), "wire_bytes": payload * ring_factor(kind, group)}
    return out


def total(rows: dict[str, dict[str, float]], key: str = "wire_bytes") -> float:
    """Sum one column (``bytes`` or ``wire_bytes``) over the collectives in a counts/theory dict."""
    return float(sum(r.get(key, 0) for r in rows.values()))


def table(rows: dict[str, dict[str, float]], theory: dict[str, dict[str, float]] | None = None) -> str:
    """A small text table of counts (and theory beside them, if given)."""
    head = [t("comm.table.op"), t("comm.table.calls"), t("comm.table.bytes"), t("comm.table.wire")]
    lines = [head]
    for kind in sorted(set(rows) | set(theory or {})):
        r = rows.get(kind, {})
        cells = [kind, str(int(r.get("calls", 0))), _mib(r.get("bytes")), _mib(r.get("wire_bytes"))]
        if theory is not None and kind in theory:
            cells[2] += f" / {_mib(theory[kind]['bytes'])}"
            cells[3] += f" / {_mib(theory[kind]['wire_bytes'])}"
        lines.append(cells)
    return render_table(lines, align="lrrr")


def _mib(n: float | None) -> str:
    return fmt_bytes(n, "MiB", decimals=3)


@dataclass
class StepCounts:
    """The ``comm`` messages of one rank, per step, as read back on the kernel side."""

    step: int | None
    counts: dict[str, dict[str, float]]
    calls: list[dict[str, Any]] = field(default_factory=list)
    world_size: int = 1


def from_events(events: Sequence[dict[str, Any]]) -> list[StepCounts]:
    """The ``comm`` messages in one rank's event list (``run.events[r]``), in order."""
    return [
        StepCounts(m.get("step"), m.get("counts", {}), m.get("calls", []), m.get("world_size", 1))
        for m in events
        if m.get(TYPE) == Msg.COMM
    ]
