"""Memory by category, measured inside each rank: parameters (sharded and unsharded),
gradients, optimizer state, activations and the rest, at each phase of a step and at its peak.

    from labkit import memtrack, rank
    tracker = memtrack.track(model, opt, steps=[1])   # opt-in: a measured step runs 2-4x slower
    for i in rank.steps(3):
        with tracker.step(i):
            loss = model(x, y)           # snapshot "forward" when the model returns
            loss.backward()
            opt.step()                   # snapshots "backward" (before) and "optimizer" (after)
            opt.zero_grad()
    # each measured step sends "memcat" messages: one per phase, then one for the peak

In the notebook, ``labkit.memory_view.memory_table(run)`` and ``plot_breakdown(run)`` read those messages.

How it measures, and why not torch's own tracker
------------------------------------------------
``torch.distributed._tools`` has ``MemTracker`` and ``FSDPMemTracker``, and they work with
this torch on CPU, but not for everything a lesson runs: ``FSDPMemTracker`` accepts FSDP2
modules only, and plain ``MemTracker`` on FSDP1 files the FlatParameter gradients under
"Temp" and the gathered parameters under whatever phase allocated them, because it labels
a tensor by *when* it was made. We label a storage by *what it is*, which is what the
lessons compare with the formulas. So this module has its own small tracker, of the kind
the issue allows (a dispatch mode over tensor storages):

1. A walk of the model and optimizer (``roles``) names the storages that hold state:
   FSDP1 FlatParameter shards, padded unsharded buffers and low-precision copies; FSDP2
   ``FSDPParam`` shards, unsharded parameters and their gradients; plain parameters;
   gradients; optimizer state. Each storage is counted once, however many views share it.
2. A ``TorchDispatchMode`` sees every tensor an operator returns during the measured step
   and follows its storage until it is freed (a weak reference), and a patched
   ``UntypedStorage.resize_`` follows FSDP's free-by-resizing of its buffers.
3. A storage that the walk does not name is an activation if it was made during a forward
   pass (including the recomputation of activation checkpointing) and is still alive,
   otherwise "other": gradients of activations, communication buffers, temporaries.

The tests check the parameters, gradients and optimizer state against
``FSDPMemTracker`` on FSDP2 and against ``labkit.memory_model`` on FSDP1 and FSDP2.

What it cannot see: storages made before the first measured step that the walk does not
name (DDP's gradient buckets, tensors the cell keeps in variables). On CUDA those appear in
"other" as the difference with ``torch.cuda.memory_allocated``; on CPU torch keeps no such
counter and they are left out. The peak's breakdown is taken when the running total
first comes within 0.1% of the step's peak; the last sliver, if any, is put in "other".
"""

from __future__ import annotations

import contextlib
import gc
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from labkit.i18n import t
from labkit.ranks import rank as _rank
from labkit.wire.protocol import Msg
from labkit.wire.records import CATEGORIES as CATEGORIES
from labkit.wire.records import PHASES as PHASES

# CATEGORIES and PHASES (labkit.wire.records): what a "memcat" message names, read by the notebook's views
# ---------------------------------------------------------------------------------------
# In the rank: which storage is what
# ---------------------------------------------------------------------------------------


def _storage(x: Any) -> tuple[Any, str] | tuple[None, None]:
    """The storage behind a tensor (a DTensor's local shard) and the tensor's device.

    The device comes from the tensor: a fake tensor's storage says "meta"."""
    import torch

    if not isinstance(x, torch.Tensor):
        return None, None
    local = getattr(x, "_local_tensor", None)  # DTensor: memory lives in its local shard
    if local is not None:
        x = local
    try:
        return x.untyped_storage(), str(x.device)
    except (RuntimeError, NotImplementedError, TypeError):
        return None, None


def roles(model: Any, optimizers: Sequence[Any] = ()) -> dict[int, tuple[str, Any, str]]:
    """``{storage key: (category, storage, device)}`` for every storage holding state.

    FSDP structures first, so that a FlatParameter whose ``.data`` currently points at its
    gathered buffer is still known as "params_unsharded" there and "params" in its shard.
    """
    found: dict[int, tuple[str, Any, str]] = {}

    def add(role: str, x: Any) -> None:
        st, device = _storage(x)
        if st is not None:
            found.setdefault(st._cdata, (role, st, device))

    from labkit.ranks.torch_hooks import fsdp1_handle, fsdp2_group, missing

    for m in model.modules():
        handle = fsdp1_handle(m)  # FSDP1 FullyShardedDataParallel (warns where this torch moved it)
        fp = getattr(handle, "flat_param", None)
        if fp is not None:
            add("params", getattr(fp, "_local_shard", None))
            for name in ("_full_param_padded", "_full_prec_full_param_padded", "_mp_shard"):
                add("params_unsharded", getattr(fp, name, None))
            for g in (fp.grad, getattr(fp, "_saved_grad_shard", None), getattr(fp, "_cpu_grad", None)):
                add("grads", g)
        group = fsdp2_group(m)  # FSDP2 fully_shard
        if group is not None and not hasattr(group, "fsdp_params"):
            missing("fsdp2.param_group", "FSDPParamGroup.fsdp_params")
        for p in getattr(group, "fsdp_params", ()):
            if not hasattr(p, "_sharded_param_data"):  # set when the parameter is sharded, never lazily
                missing("fsdp2.param_group", "FSDPParam._sharded_param_data")
            add("params", getattr(p, "_sharded_param_data", None))
            add("grads", p.sharded_param.grad)
            unsharded = getattr(p, "_unsharded_param", None)
            add("params_unsharded", unsharded)
            add("params_unsharded", getattr(p, "_sharded_post_forward_param_data", None))
            for x in getattr(p, "all_gather_outputs", ()) or ():
                add("params_unsharded", x)
            add("grads", getattr(unsharded, "grad", None))
            add("grads", getattr(p, "unsharded_accumulated_grad", None))
        if group is not None:  # FSDP2's communication buffers, kept between calls for overlap
            comm = getattr(group, "comm_ctx", None)
            kept = getattr(getattr(comm, "all_gather_state", None), "all_gather_result", None)
            for result in (getattr(group, "_all_gather_result", None), kept):
                add("other", getattr(result, "all_gather_output", None))
            for rs in getattr(comm, "reduce_scatter_states", ()) or ():
                add("other", getattr(rs, "reduce_scatter_input", None))
    for p in model.parameters():
        add("params", p)
        add("grads", p.grad)
    for opt in optimizers:
        for state in opt.state.values():
            for v in state.values():
                add("optimizer", v)
    return found


def split_by_role(model: Any, optimizers: Sequence[Any] = ()) -> dict[str, int]:
    """Bytes of state by category right now, without any tracking (cheap; no activations)."""
    out = dict.fromkeys(CATEGORIES, 0)
    for role, st, _ in roles(model, optimizers).values():
        out[role] += st.nbytes()
    return out


# ---------------------------------------------------------------------------------------
# In the rank: the tracker
# ---------------------------------------------------------------------------------------

_MODE_CLASS: Any = None


def _mode_class() -> Any:
    """The dispatch mode, defined on first use so that importing this module needs no torch."""
    global _MODE_CLASS
    if _MODE_CLASS is None:
        import torch
        from torch._guards import active_fake_mode
        from torch.distributed.tensor import DTensor
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves

        class StorageMode(TorchDispatchMode):
            def __init__(self, tracker: Tracker) -> None:
                super().__init__()
                self.tracker = tracker

            def __enter__(self) -> Any:
                # None when measuring for real; the FakeTensorMode of an estimate otherwise.
                self.fake_mode = active_fake_mode()
                return super().__enter__()

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
                if any(tp is DTensor for tp in types):
                    return NotImplemented  # let DTensor run its local ops; we see those
                out = func(*args, **(kwargs or {}))
                # DTensor works out output shapes under a fake mode of its own: those tensors
                # never hold memory, so only ops under the mode we started in count (as in
                # torch's MemTracker).
                if active_fake_mode() is self.fake_mode:
                    for x in tree_leaves(out):
                        if isinstance(x, torch.Tensor):
                            self.tracker._saw(x)
                    if func.namespace == "c10d":  # a collective: its tensors are communication buffers
                        for x in tree_leaves((args, kwargs)):
                            if isinstance(x, torch.Tensor):
                                self.tracker._communicated(x)
                    self.tracker._check_peak()
                return out

        _MODE_CLASS = StorageMode
    return _MODE_CLASS


class _Live:
    __slots__ = ("device", "nbytes", "origin", "ref")

    def __init__(self, nbytes: int, device: str, origin: str, ref: Any) -> None:
        self.nbytes, self.device, self.origin, self.ref = nbytes, device, origin, ref


class Tracker:
    """Measures the steps it is told to (``steps``; None means every ``step()``)."""

    def __init__(
        self, model: Any, optimizer: Any = None, steps: Sequence[int] | None = None, send: bool = True
    ) -> None:
        self.model = model
        self.optimizers = (
            [] if optimizer is None else list(optimizer) if isinstance(optimizer, (list, tuple)) else [optimizer]
        )
        self.steps = None if steps is None else set(steps)
        self.send = send
        self.results: list[dict[str, Any]] = []
        self._count = 0
        self._active = False
        self._live: dict[int, _Live] = {}
        self._total: dict[str, int] = {}
        self._peak: dict[str, int] = {}
        self._peak_snap: dict[str, dict[str, int]] = {}
        self._peak_stage: dict[str, str] = {}
        self._snap_at: dict[str, int] = {}
        self._stage = "before"
        self._fwd_depth = 0
        self._step_index = 0
        self._handles: list[Any] = []

    # -- the student's side ------------------------------------------------------------

    @contextlib.contextmanager
    def step(self, index: int | None = None) -> Iterator[None]:
        """Measure this step if it is one of ``steps``; otherwise do nothing at all."""
        i = self._count if index is None else index
        self._count = i + 1
        if self.steps is not None and i not in self.steps:
            yield
            return
        if self._active:
            raise RuntimeError(t("ranks.memtrack.nested"))
        # Tensors held only by reference cycles (autograd graphs, checkpoint frames) are freed
        # whenever the cycle collector happens to run, which depends on the process's history
        # (a forked or warm rank differs from a fresh one): collecting before the step, pausing
        # the collector during it and collecting at each phase's end makes every run measure alike.
        gc.collect()
        was_enabled = gc.isenabled()
        gc.disable()
        self._begin(i)
        try:
            with _mode_class()(self):
                yield
        finally:
            self._end()
            if was_enabled:
                gc.enable()

    # -- hooks -------------------------------------------------------------------------

    def _begin(self, i: int) -> None:
        import torch

        self._active, self._step_index, self._stage, self._fwd_depth = True, i, "before", 0
        self._live.clear()
        self._total, self._peak, self._peak_snap, self._peak_stage, self._snap_at = {}, {}, {}, {}, {}
        for _, st, device in roles(self.model, self.optimizers).values():
            self._add(st, device, "before")
        self._peak = dict(self._total)
        for dev in self._total:
            self._peak_snap[dev], self._peak_stage[dev], self._snap_at[dev] = self._categorize(dev), "before", 0
        for dev in self._cuda_devices():
            torch.cuda.reset_peak_memory_stats(dev)
        # DDP rebuilds its gradient buckets inside its own forward, before the model's: hooking
        # the inner module keeps those buckets out of the activations.
        m = self.model.module if _is_ddp(self.model) else self.model
        self._handles = [
            m.register_forward_pre_hook(lambda *_: self._set_stage("forward")),
            m.register_forward_hook(lambda *_: self._phase("forward", next_stage="backward")),
            torch.nn.modules.module.register_module_forward_pre_hook(self._enter_module),
            torch.nn.modules.module.register_module_forward_hook(self._leave_module),
        ]
        for opt in self.optimizers:
            self._handles.append(opt.register_step_pre_hook(lambda *_: self._phase("backward", next_stage="optimizer")))
            self._handles.append(opt.register_step_post_hook(lambda *_: self._phase("optimizer", next_stage="after")))
        self._orig_resize = torch.UntypedStorage.resize_
        tracker = self

        def resize_(st: Any, size: int) -> Any:
            out = tracker._orig_resize(st, size)
            tracker._resized(st)
            return out

        torch.UntypedStorage.resize_ = resize_  # FSDP frees and regrows its buffers this way

    def _end(self) -> None:
        import torch

        torch.UntypedStorage.resize_ = self._orig_resize
        for h in self._handles:
            h.remove()
        self._handles = []
        self._emit("peak", self._peak_breakdown())
        self._live.clear()
        self._active = False

    def _set_stage(self, stage: str) -> None:
        self._stage = stage

    def _enter_module(self, module: Any, *_: Any) -> None:
        if not _is_ddp(module):
            self._fwd_depth += 1

    def _leave_module(self, module: Any, *_: Any) -> None:
        if not _is_ddp(module):
            self._fwd_depth = max(0, self._fwd_depth - 1)

    def _phase(self, name: str, next_stage: str) -> None:
        self._stage = next_stage
        # The collector is paused during the step (see ``step``): garbage made in this phase (the
        # first forward of a process keeps its embedding's output in a dead frame of torch's lazy
        # import of dynamo) is collected here, so that no phase reports what no tensor needs.
        gc.collect()
        by_dev = {dev: self._categorize(dev) for dev in self._total}
        for dev in self._cuda_devices():
            self._add_untracked(by_dev, dev, self._allocated(dev))
        self._emit(name, by_dev)

    # -- bookkeeping -------------------------------------------------------------------

    def _add(self, st: Any, device: str, origin: str) -> None:
        key = st._cdata
        if key in self._live:
            return
        nbytes = st.nbytes()
        ref = weakref.ref(st, lambda _, key=key: self._freed(key))
        self._live[key] = _Live(nbytes, device, origin, ref)
        self._total[device] = self._total.get(device, 0) + nbytes

    def _saw(self, x: Any) -> None:
        st, device = _storage(x)
        if st is None:
            return
        live = self._live.get(st._cdata)
        if live is None:
            origin = "forward" if self._fwd_depth > 0 else self._stage
            self._add(st, device, origin)
        elif live.nbytes != st.nbytes():
            self._resized(st)

    def _communicated(self, x: Any) -> None:
        """A storage a collective read or wrote is a communication buffer ("other"), not an
        activation, even if forward made it: FSDP2's all-gather input, made in forward and
        normally freed at once, stays alive while gloo's thread still holds the finished work,
        and a busy machine can delay that past the end of forward (a 256 KiB shard counted as
        an activation once in a loaded test run). The walk's names (``roles``) still come first."""
        st, _ = _storage(x)
        live = self._live.get(st._cdata) if st is not None else None
        if live is not None:
            live.origin = "comm"

    def _resized(self, st: Any) -> None:
        live = self._live.get(st._cdata)
        if live is None:
            return
        new = st.nbytes()
        self._total[live.device] += new - live.nbytes
        live.nbytes = new
        self._check_peak()

    def _freed(self, key: int) -> None:
        live = self._live.pop(key, None)
        if live is not None:
            self._total[live.device] -= live.nbytes

    def _check_peak(self) -> None:
        for dev, total in self._total.items():
            if total > self._peak.get(dev, 0):
                self._peak[dev] = total
                # Re-categorize only when the peak has grown by 0.1% (plus 4 KiB) since the last
                # breakdown: each breakdown walks every live storage, and a forward pass sets a
                # new peak at almost every operator.
                if total > self._snap_at.get(dev, 0) * 1.001 + 4096:
                    self._peak_snap[dev], self._snap_at[dev] = self._categorize(dev), total
                    self._peak_stage[dev] = self._stage

    def _categorize(self, device: str) -> dict[str, int]:
        known = {k: role for k, (role, _, _) in roles(self.model, self.optimizers).items()}
        out = dict.fromkeys(CATEGORIES, 0)
        for key, live in list(self._live.items()):
            if live.device == device:
                role = known.get(key) or ("activations" if live.origin == "forward" else "other")
                out[role] += live.nbytes
        return out

    def _peak_breakdown(self) -> dict[str, dict[str, int]]:
        out = {}
        for dev, snap in self._peak_snap.items():
            snap = dict(snap)
            snap["other"] += self._peak[dev] - sum(snap.values())  # the last sliver after the breakdown
            out[dev] = snap
        for dev in self._cuda_devices():
            self._add_untracked(out, dev, self._max_allocated(dev))
        return out

    def _add_untracked(self, by_dev: dict[str, dict[str, int]], dev: str, allocated: int) -> None:
        """On CUDA, what the allocator holds beyond the storages we know of is "other"."""
        snap = by_dev.setdefault(dev, dict.fromkeys(CATEGORIES, 0))
        snap["other"] += max(0, allocated - sum(snap.values()))

    def _cuda_devices(self) -> list[str]:
        import torch

        if not torch.cuda.is_available() or not torch.cuda.is_initialized():
            return []
        return sorted({dev for dev in self._total if dev.startswith("cuda")})

    def _allocated(self, dev: str) -> int:
        import torch

        return int(torch.cuda.memory_allocated(dev))

    def _max_allocated(self, dev: str) -> int:
        import torch

        return int(torch.cuda.max_memory_allocated(dev))

    def _emit(self, phase: str, by_dev: dict[str, dict[str, int]]) -> None:
        main = _main_device(by_dev)
        msg = {
            "step": self._step_index,
            "phase": phase,
            "device": main,
            "categories": by_dev.get(main, dict.fromkeys(CATEGORIES, 0)),
            "by_device": by_dev,
            "peak": self._peak_breakdown().get(main, {}) if phase != "peak" else by_dev.get(main, {}),
        }
        if phase == "peak":
            msg["stage"] = self._peak_stage.get(main, "")
        self.results.append(msg)
        if self.send:
            _rank.send(Msg.MEMCAT, **msg)


def _is_ddp(module: Any) -> bool:
    from torch.nn.parallel import DistributedDataParallel

    return isinstance(module, DistributedDataParallel)


def _main_device(by_dev: dict[str, Any]) -> str:
    """The accelerator if there is one (offloaded state lives on the CPU beside it), else the CPU."""
    cuda = sorted(d for d in by_dev if d.startswith("cuda"))
    return cuda[0] if cuda else ("cpu" if "cpu" in by_dev or not by_dev else sorted(by_dev)[0])


def track(model: Any, optimizer: Any = None, steps: Sequence[int] | None = None, send: bool = True) -> Tracker:
    """A :class:`Tracker` for ``model`` and ``optimizer`` (one or a list); see the module docstring.

    Measure step 1 or later: in step 0 the optimizer creates its state during the step.
    """
    return Tracker(model, optimizer, steps, send)
