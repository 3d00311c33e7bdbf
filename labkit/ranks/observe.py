"""What labkit sees a cell do on a rank: the grader's evidence, which the cell does not produce.

While a cell runs, labkit's own instrumentation records, in order:

- every collective the rank issues (through the same dispatcher hook as ``labkit.comm``):
  the operation, dtype, sizes, reduce op, which function of the cell issued it, whether the
  cell called ``torch.distributed`` itself or FSDP/DDP did, and, for the cell's own blocking
  calls, a fingerprint of the tensor before and after (``labkit.ranks.fingerprint``);
- the forward of every ``TransformerLM`` and ``TransformerBlock`` (the course's models), and
  the loss a ``TransformerLM`` returned;

and when the cell ends, a summary of every module and tensor its variables hold (which
units FSDP made, the parameter bytes held, the gradients, FSDP2's prefetch settings).

``LABKIT_OBSERVE=0`` turns it off (to measure what it costs): no exercise of that run can then score.

The observation goes to the notebook, as an ``"observed"`` message in the cell's ``Run``
(``run.events``), so that ``labkit.check`` gives immediate feedback. ``labkit grade`` does not take
it from the student's notebook run at all: it re-runs each exercise on ranks of its own, in its judge's
sandbox, with inputs of its own (``labkit.grading.rerun``), and reads the observation those ranks send
to its own launcher. A cell that rewrites labkit's internals from inside a rank changes what its own
notebook shows, nothing more.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from types import FrameType
from typing import Any

from labkit.ranks import fingerprint
from labkit.ranks import rank as rank_api
from labkit.ranks.comm import C10D_OPS, CommCounter
from labkit.wire import env as envvars
from labkit.wire.protocol import Msg

KIND = Msg.OBSERVED  # the message type the notebook receives (Run.events)
MAX_TRACE = 4000  # entries kept per cell; the rest are counted only
MAX_GLOBALS = 200
# a collective with one of these (library code that issues collectives of its own: FSDP, DDP, DTensor,
# autograd's backward, DCP) between the cell and the dispatcher was issued by that library; without,
# the cell called torch.distributed itself (dist.all_reduce(...), through its wrappers and decorators)
NOT_DIRECT = (
    "/torch/nn/", "/torch/autograd/", "/torch/_tensor.py", "/torch/distributed/fsdp/",
    "/torch/distributed/_composable/", "/torch/distributed/algorithms/", "/torch/distributed/tensor/",
    "/torch/distributed/checkpoint/", "/torch/distributed/optim/", "/torch/distributed/pipelining/",
    "/torch/distributed/_functional_collectives", "/torch/distributed/device_mesh.py",
)  # fmt: skip
_IO = {  # c10d operator -> (index of its input, index of its output) among the arguments
    "c10d::_allgather_base_": (1, 0),
    "c10d::allgather_": (1, 0),
    "c10d::allgather_coalesced_": (1, 0),
    "c10d::allgather_into_tensor_coalesced_": (1, 0),
    "c10d::_reduce_scatter_base_": (1, 0),
    "c10d::reduce_scatter_": (1, 0),
    "c10d::reduce_scatter_tensor_coalesced_": (1, 0),
    "c10d::alltoall_base_": (1, 0),
    "c10d::alltoall_": (1, 0),
}
_MODELS = ("TransformerLM", "TransformerBlock")

_REDUCE_OPS = ("SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM")  # c10d's RedOpType


def _reduce_op(args: Any) -> str | None:
    """The reduce op of a c10d call: its ReduceOp argument is a TorchScript object with an ``op()`` method."""
    import torch

    for a in args:
        reduce_op: Any = a  # a TorchScript object: its methods are not in torch's stubs
        if isinstance(a, torch.ScriptObject) and reduce_op._has_method("op"):
            try:
                code = int(reduce_op.op())
            except (RuntimeError, TypeError, ValueError):
                return None
            return _REDUCE_OPS[code] if 0 <= code < len(_REDUCE_OPS) else str(code)
    return None


def _wait(out: Any) -> None:
    import torch
    import torch.distributed as dist

    for item in out if isinstance(out, (list, tuple)) else [out]:
        if isinstance(item, torch.ScriptObject):
            try:
                dist.Work.unbox(item).wait()
            except (RuntimeError, AttributeError):
                pass


class Observer(CommCounter):
    """Records one cell's collectives and model forwards (see the module docstring)."""

    def __init__(self, cell_files: set[str]) -> None:
        super().__init__()
        self.cell_files = cell_files
        self.trace: list[dict[str, Any]] = []
        self.dropped = 0
        self._pending = threading.local()
        # model -> a small number, in order of first forward; weak, so that a model freed in the cell
        # is freed (a later model at the same address gets a number of its own)
        self._ids: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._next_id = 0

    def _add(self, entry: dict[str, Any]) -> None:
        if len(self.trace) < MAX_TRACE:
            self.trace.append(entry)
        else:
            self.dropped += 1

    # -- collectives (called by labkit.comm's dispatcher hook) --------------------------

    def _caller(self) -> tuple[str | None, int | None, bool]:
        """(the cell function that issued the call, its line, whether the cell called torch.distributed itself)."""
        frame: FrameType | None = sys._getframe(2)
        direct = True
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename in self.cell_files:
                return frame.f_code.co_name, frame.f_lineno, direct
            if any(part in filename for part in NOT_DIRECT):
                direct = False
            frame = frame.f_back
        return None, None, False

    def before(self, name: str, args: Any) -> None:
        issuer, line, direct = self._caller()
        entry: dict[str, Any] = {"k": "call", "fn": issuer, "line": line, "direct": direct}
        if direct:
            where = _IO.get(name, (0, 0))[0]
            entry["fi"] = fingerprint.of_args(args[where]) if where < len(args) else None
        self._pending.entry = entry

    def record(self, name: str, args: Any, unit: str | None, issued: float, out: Any, blocking: bool) -> None:
        entry = getattr(self._pending, "entry", None) or {"k": "call", "fn": None, "line": None, "direct": False}
        self._pending.entry = None
        op, payload_at = C10D_OPS.get(name, (name, 0))
        i_in, i_out = _IO.get(name, (max(payload_at, 0), max(payload_at, 0)))
        ins = fingerprint.tensors(args[i_in]) if i_in < len(args) else []
        outs = fingerprint.tensors(args[i_out]) if i_out < len(args) else []
        entry.update(
            op=op,
            c10d=name,
            dtype=str(ins[0].dtype).replace("torch.", "") if ins else "",
            n_in=int(sum(t.numel() for t in ins)),
            n_out=int(sum(t.numel() for t in outs)),
            n_tensors=len(ins),
            red=_reduce_op(args),
            blocking=blocking,
            pi=fingerprint.ptr(ins[0]) if ins else None,
            po=fingerprint.ptr(outs[0]) if outs else None,
        )
        if entry.get("direct") and blocking and outs:
            _wait(out)  # the call returns before gloo has finished; torch.distributed waits right after
            entry["fo"] = fingerprint.of_args(args[i_out])
        self._add(entry)

    # -- the course's models ----------------------------------------------------------------

    def _number(self, module: Any) -> int:
        number = self._ids.get(module)
        if number is None:
            number = self._ids[module] = self._next_id
            self._next_id += 1
        return number

    def forward_pre(self, module: Any, args: Any) -> None:
        kind = model_kind(type(module))
        if kind is not None:
            import torch

            self._add({"k": "fwd", "m": kind, "id": self._number(module), "grad": torch.is_grad_enabled()})

    def forward_post(self, module: Any, args: Any, output: Any) -> None:
        if model_kind(type(module)) != "TransformerLM":
            return
        loss = None
        if getattr(output, "ndim", None) == 0:
            try:
                loss = float(output.detach().float().cpu())
            except (RuntimeError, ValueError):
                pass
        import torch

        self._add(
            {
                "k": "out",
                "m": "TransformerLM",
                "id": self._number(module),
                "loss": loss,
                "grad": torch.is_grad_enabled(),
            }
        )

    # -- the end of the cell ----------------------------------------------------------------

    def summary(self, namespace: dict[str, Any], ok: bool) -> dict[str, Any]:
        return {"ok": ok, "trace": self.trace, "dropped": self.dropped, "globals": holdings(namespace)}


_kinds: dict[type, str | None] = {}


def model_kind(cls: type) -> str | None:
    """ "TransformerLM" / "TransformerBlock" for the course's models (FSDP2's subclasses too), else None."""
    if cls not in _kinds:
        _kinds[cls] = next(
            (c.__name__ for c in cls.__mro__ if c.__name__ in _MODELS and c.__module__.startswith("labkit.models")),
            None,
        )
    return _kinds[cls]


def holdings(namespace: dict[str, Any]) -> dict[str, Any]:
    """Every tensor and module the cell's variables hold at its end, summarized."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    out: dict[str, Any] = {}
    for name, value in list(namespace.items()):
        if name.startswith("_") or len(out) >= MAX_GLOBALS:
            continue
        try:
            if isinstance(value, torch.Tensor):
                out[name] = {"tensor": fingerprint.tensor(value)}
            elif isinstance(value, torch.nn.Module):
                out[name] = {"module": fingerprint.module(value)}
        except Exception as e:  # one odd object must not cost the rest: say what it was
            out[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
    return out


@contextlib.contextmanager
def cell(source_file: str, namespace: dict[str, Any], cell_id: int | None = None) -> Iterator[Observer]:
    """Observe one cell run in ``namespace``; on exit, raised or not, send what was seen
    to the notebook and to the grader's sink."""
    from torch.nn.modules import module as nn_module

    if envvars.get("LABKIT_OBSERVE") == "0":  # off (benchmarks): the grader then sees nothing of this run
        yield Observer({source_file})
        return
    observer, ok = Observer({source_file}), False
    hooks = [
        nn_module.register_module_forward_pre_hook(observer.forward_pre),
        nn_module.register_module_forward_hook(observer.forward_post),
    ]
    observer.__enter__()
    try:
        yield observer
        ok = True
    finally:
        observer.__exit__(None, None, None)
        for h in hooks:
            h.remove()
        _send(observer, namespace, ok, cell_id)


def _send(observer: Observer, namespace: dict[str, Any], ok: bool, cell_id: int | None) -> None:
    started = time.perf_counter()
    try:
        summary = observer.summary(namespace, ok)
    except Exception as e:  # the observation must never fail the cell
        summary = {"ok": False, "error": f"{type(e).__name__}: {e}"[:300], "trace": [], "globals": {}}
    summary["seconds"] = round(time.perf_counter() - started, 4)
    rank_api.send(Msg.OBSERVED, cell=cell_id, observation=summary)
