"""The in-rank side of labkit: what a cell running on a rank calls.

    from labkit import rank
    for step in rank.steps(10):      # times each step, streams it to the notebook
        loss = train_step()
    rank.report(loss=loss.item())    # ends up in run.values[rank]

Outside a labkit run (a script under plain torchrun, an exported lab) every
call still works: values are kept in ``rank.values`` and, if
``LABKIT_REPORT_DIR`` is set, written there as JSON lines, one file per rank.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from labkit.wire import env as envvars
from labkit.wire.channel import ChannelClient
from labkit.wire.protocol import Msg, kind_of, stamped
from labkit.wire.setting import Backend

_client: ChannelClient | None = None
values: dict[str, Any] = {}  # everything this rank reported, as sent


def use_channel(client: ChannelClient | None) -> None:
    """Send through ``client`` from now on (the bootstrap calls this once the channel is up)."""
    global _client
    _client = client


def connected() -> bool:
    return _client is not None and not _client.closed


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def device() -> Any:
    """This rank's device: ``cuda:LOCAL_RANK`` under NCCL, else the CPU.

    LOCAL_RANK, not RANK: on a second node, global rank 8 is GPU 0 of that node.
    """
    import torch

    if envvars.get("LABKIT_BACKEND") == Backend.NCCL and torch.cuda.is_available():
        return torch.device("cuda", local_rank())
    return torch.device("cpu")


def to_jsonable(value: Any) -> Any:
    """Tensors, numpy values and containers of them, as plain JSON values."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [to_jsonable(v) for v in value]
    tolist = getattr(value, "tolist", None)  # torch.Tensor, numpy arrays and scalars
    if callable(tolist):
        if getattr(value, "is_meta", False):
            return {"meta_tensor": list(value.shape)}
        return to_jsonable(value.detach().cpu().tolist() if hasattr(value, "detach") else tolist())
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses

        return to_jsonable(dataclasses.asdict(value))
    return repr(value)


def _check_sendable(value: Any, path: str) -> None:
    """A ``TypeError`` naming the key (``'stats.files[1]'`` inside containers) where ``value`` holds
    something ``to_jsonable`` would only send as its ``repr``: a lock or an open file would otherwise
    arrive in the notebook as the string ``'<unlocked _thread.lock object at 0x…>'``.

    Only ``report`` checks: labkit's own messages keep ``to_jsonable``'s repr fallback."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return
    if isinstance(value, dict):
        for k, v in value.items():
            _check_sendable(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, (list, tuple, set)):
        for i, v in enumerate(value):
            _check_sendable(v, f"{path}[{i}]")
    elif callable(getattr(value, "tolist", None)):
        return  # torch.Tensor, numpy arrays and scalars: numbers
    elif hasattr(value, "__dataclass_fields__") and not isinstance(value, type):
        import dataclasses

        _check_sendable(dataclasses.asdict(value), path)
    else:
        from labkit.i18n import t

        raise TypeError(t("ranks.report.unsendable", name=path, type=type(value).__qualname__))


def send(kind: Msg, **payload: Any) -> None:
    """Send one message of type ``kind`` to the notebook (used by labkit's own trackers).

    ``kind`` is a declared type (``labkit.wire.protocol.Msg``, its payload in ``PAYLOADS``); the plain
    string of one is taken, any other raises ``ValueError`` before anything is sent."""
    msg = stamped(kind_of(kind), **to_jsonable(payload))
    if _client is not None:
        _client.send(msg)
        return
    folder = envvars.get("LABKIT_REPORT_DIR")
    if folder:
        with open(os.path.join(folder, f"rank{rank()}.jsonl"), "a") as f:
            f.write(json.dumps(msg, default=repr) + "\n")


def report(**named_values: Any) -> None:
    """Send named values to the notebook; they appear in ``run.values[rank]``.

    Numbers, strings, None, tensors, numpy values, dataclasses, and lists and dicts of them;
    anything else raises ``TypeError`` naming its key (send ``str(value)`` to send its text).
    """
    _check_sendable(named_values, "")
    clean = to_jsonable(named_values)
    values.update(clean)
    send(Msg.REPORT, values=clean)


def log(text: str) -> None:
    """A short status line shown in this rank's row of the dashboard."""
    send(Msg.LOG, text=str(text)[:500])


@contextlib.contextmanager
def step(index: int | None = None) -> Iterator[None]:
    """Time one training step: ``with rank.step(): ...``. The ``on_step`` hooks run after it."""
    global _step_count
    i = _step_count if index is None else index
    total = {} if _steps_total is None else {"n": _steps_total}  # rank.steps(n): the dashboard shows i/n, time left
    t0 = time.perf_counter()
    send(Msg.STEP_START, i=i, **total)
    yield
    dt = time.perf_counter() - t0
    _step_count = i + 1
    send(Msg.STEP, i=i, dt=dt, **total)
    for hook in list(_step_hooks):  # on this (the main) thread, between steps: tensors are safe to read
        hook(i)


_step_count = 0
_steps_total: int | None = None  # n of the rank.steps(n) loop running now


def steps(n: int) -> Iterator[int]:
    """``for i in rank.steps(n):`` yields 0..n-1 and times each step (the dashboard shows i/n and the time left)."""
    global _steps_total
    _steps_total = n
    try:
        for i in range(n):
            with step(i):
                yield i
    finally:
        _steps_total = None


def current_step() -> int:
    """How many steps this rank has finished in the current cell (the step an error happened in)."""
    return _step_count


def reset_steps() -> None:
    """A new cell starts counting steps from 0 (warm ranks run many cells in one process)."""
    global _step_count
    _step_count = 0


def phase(name: str) -> None:
    """Mark a point in the step (e.g. "forward", "backward", "optimizer"); trackers snapshot here."""
    for hook in list(_phase_hooks):
        hook(name)
    send(Msg.PHASE, name=name)


_phase_hooks: list[Callable[[str], None]] = []
_step_hooks: list[Callable[[int], None]] = []


def on_phase(hook: Callable[[str], None]) -> Callable[[], None]:
    """Register ``hook(name)`` to run at each ``phase()`` (memory and comm trackers use this).

    Returns a function that unregisters it.
    """
    _phase_hooks.append(hook)
    return lambda: _phase_hooks.remove(hook) if hook in _phase_hooks else None


def on_step(hook: Callable[[int], None]) -> Callable[[], None]:
    """Register ``hook(i)`` to run after each step ``i`` ends (``rank.steps`` / ``rank.step``).

    It runs on the rank's main thread, between steps: the place to read tensors safely (the
    memory sampler reads CPU tensor bytes here; ``labkit.memtrack`` can snapshot here).
    Returns a function that unregisters it.
    """
    _step_hooks.append(hook)
    return lambda: _step_hooks.remove(hook) if hook in _step_hooks else None
