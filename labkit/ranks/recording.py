"""What a rank tells the run's record besides what the cell sends: its torch, and every collective.

The bootstrap runs each cell inside ``recording()``. At the start, one ``rank_env`` message
(torch, CUDA and NCCL versions as this rank sees them: the kernel need not import torch for
them); at the end (error or not), one ``comm_total`` message with ``{kind: {"calls", "bytes"}}``
over the whole cell and, after each ``rank.step``, the totals so far (``at_steps``), so that one
collective more per step reads as such. It counts whatever issues a collective (FSDP, DDP, the
cell's own ``dist.all_reduce``) with ``labkit.comm``'s counter, alongside any counter the
cell opens itself. ``LABKIT_COUNT_COMM=0`` in the rank's environment turns it off.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from labkit.ranks import rank as _rank
from labkit.wire import env as envvars
from labkit.wire.protocol import CommAtStep, CommCounts, Msg, RankEnv


def enabled() -> bool:
    return envvars.get("LABKIT_COUNT_COMM") != "0"


def torch_env() -> RankEnv:
    import torch

    nccl = None
    if torch.cuda.is_available():  # no CUDA context is made by asking
        with contextlib.suppress(AttributeError, RuntimeError, TypeError):
            nccl = ".".join(str(x) for x in torch.cuda.nccl.version())
    return {"torch": str(torch.__version__), "cuda": torch.version.cuda, "nccl": nccl}


@contextlib.contextmanager
def recording() -> Iterator[None]:
    """Send ``rank_env`` now and ``comm_total`` for the collectives issued inside the block."""
    if not enabled():
        yield
        return
    from labkit.ranks.comm import CommCounter

    class Totals(CommCounter):
        """Keeps sums, not a list of calls: a long cell issues thousands."""

        def __init__(self) -> None:
            super().__init__()
            self.sums: dict[str, CommCounts] = {}

        def record(self, *args: Any, **kwargs: Any) -> None:
            super().record(*args, **kwargs)
            call = self.calls.pop()
            row = self.sums.setdefault(call.op, {"calls": 0, "bytes": 0})
            row["calls"] += 1
            row["bytes"] += int(call.bytes)

    _rank.send(Msg.RANK_ENV, **torch_env())
    counter = Totals()
    at_steps: list[CommAtStep] = []

    def after_step(i: int) -> None:
        at_steps.append(
            {"step": i, "counts": {k: CommCounts(calls=v["calls"], bytes=v["bytes"]) for k, v in counter.sums.items()}}
        )

    unhook = _rank.on_step(after_step)
    try:
        with counter:
            yield
    finally:
        unhook()
        _rank.send(Msg.COMM_TOTAL, counts=counter.sums, at_steps=at_steps, world_size=_rank.world_size())
