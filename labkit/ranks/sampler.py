"""Background memory sampling inside a rank, on by default, cheap enough to leave on.

What is sampled, and why:
- CUDA: ``memory_allocated``, ``memory_reserved`` and ``max_memory_allocated`` of this
  rank's device. The caching allocator keeps these counters, so reading them is free.
  CUDA is only read once the cell has initialized it, never initialized by us (that
  would put a context on GPU 0 before the cell's ``set_device``).
- CPU: torch keeps no counter for CPU tensors, and scanning every Python object
  (``gc.get_objects``) costs ~90 ms per sample once torch is imported, far too
  slow to run 5 times a second. So we count the bytes of the tensors the cell can
  reach by name: its modules' parameters, gradients and buffers, its optimizers'
  state, and tensors bound to variables, each storage once. Activations that only
  autograd holds are not visible this way; ``labkit.memtrack`` measures them by
  category when a lesson asks for it.
- The process RSS (from /proc/self/statm; elsewhere psutil's, the same number: not
  ``ru_maxrss``, which is the peak, and in bytes on macOS but KiB on Linux), for everything
  else torch and Python hold.

Only counters are read on the background thread (RSS, and CUDA's allocator statistics).
Walking tensors there is not safe: the main thread changes them in C++ without the GIL
(FSDP frees and swaps parameter storages, ``zero_grad`` drops gradients), and reading a
tensor's storage while it is swapped crashed a rank with SIGSEGV. So CPU tensor bytes are
read on the rank's own thread: after each ``rank.step()`` and once at the end of the cell.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from labkit.wire.protocol import Msg

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
STATM = "/proc/self/statm"  # Linux; a read of it costs a few microseconds


def rss_bytes() -> int:
    """This process's resident memory now, in bytes."""
    try:
        with open(STATM) as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        import psutil

        return int(psutil.Process().memory_info().rss)


def reachable_tensor_bytes(namespace: dict[str, Any]) -> int:
    """Bytes of the tensor storages reachable from ``namespace`` (see the module docstring)."""
    import torch

    seen: set[int] = set()
    total = 0

    def add(t: Any) -> None:
        nonlocal total
        if not isinstance(t, torch.Tensor) or t.is_meta or t.device.type != "cpu":
            return
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # e.g. tensor subclasses without storage
            return
        ptr = storage.data_ptr()
        if ptr and ptr not in seen:
            seen.add(ptr)
            total += storage.nbytes()

    for value in list(namespace.values()):
        if isinstance(value, torch.Tensor):
            add(value)
            if value.is_leaf:  # .grad of a non-leaf warns (on the rank's stderr), and is None anyway
                add(value.grad)
        elif isinstance(value, torch.nn.Module):
            for p in value.parameters():
                add(p)
                add(p.grad)
            for b in value.buffers():
                add(b)
        elif isinstance(value, torch.optim.Optimizer):
            for state in list(value.state.values()):
                for v in list(state.values()):
                    add(v)
    return total


def cuda_sample() -> dict[str, int] | None:
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return None
    dev = torch.cuda.current_device()
    return {
        "allocated": torch.cuda.memory_allocated(dev),
        "reserved": torch.cuda.memory_reserved(dev),
        "peak": torch.cuda.max_memory_allocated(dev),
    }


class Sampler:
    """Sends one ``mem`` message every ``interval`` seconds between ``start()`` and ``stop()``.

    A warm session's rank keeps one sampler for all its cells. Its thread, made once, ticks every
    ``interval`` and samples when a cell is on; ``start`` and ``stop`` only set a flag, and wake
    nothing: making, waking and joining a thread for each cell cost more than a short cell itself
    (about 0.8 ms of a 2 ms warm cell, on ranks that idled between cells). The first sample of a
    cell comes within ``interval`` of its start.
    """

    def __init__(self, send: Callable[..., None], namespace: dict[str, Any], interval: float = 0.2) -> None:
        self.send = send
        self.namespace = namespace
        self.interval = interval
        self._on = threading.Lock()  # guards _running; a sample is sent holding it
        self._running = False
        self._thread: threading.Thread | None = None
        self._unhook: Callable[[], None] | None = None

    def start(self) -> None:
        if self.interval > 0:
            from labkit.ranks import rank

            self._unhook = rank.on_step(self._after_step)
            with self._on:
                self._running = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="labkit-sampler", daemon=True)
                self._thread.start()

    def sample(self, tensors: bool = True) -> dict[str, int]:
        """RSS and CUDA counters; with ``tensors`` (main thread only), the CPU tensor bytes too."""
        sample = {"rss": rss_bytes()}
        if tensors:
            try:
                sample["tensor_bytes"] = reachable_tensor_bytes(self.namespace)
            except (RuntimeError, ImportError):  # a module was being rewrapped as we looked
                pass
        cuda = cuda_sample()
        if cuda:
            sample.update(cuda)
        return sample

    def stop(self) -> None:
        """The cell is over: no background sample after this returns (one being sent is waited for)."""
        with self._on:
            self._running = False
        if self._unhook is not None:
            self._unhook()
            self._unhook = None
        self.send(Msg.MEM, **self.sample())  # a last sample, so the end state is always known

    def _after_step(self, i: int) -> None:
        self.send(Msg.MEM, **self.sample())

    def _loop(self) -> None:
        while True:
            time.sleep(self.interval)
            with self._on:
                if self._running:
                    self.send(Msg.MEM, **self.sample(tensors=False))
