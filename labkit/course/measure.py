"""What the lessons measure inside the ranks, and how the notebook reads it back.

In a rank:

    from labkit.course.measure import state_bytes
    rank.report(**state_bytes(model, optimizer))   # params, grads, optim: this rank's bytes

In the notebook:

    measure.last_message(run, "comm", rank=0, strategy="FULL_SHARD")["counts"]
    measure.peak_gathered(msg["spans"], msg["unit_bytes"])

Only tensors are counted, each by ``numel() * element_size()``: what the rank holds, read
from the tensors themselves. Under FSDP1 a module's ``parameters()`` are its
FlatParameters, so a sharded rank counts its own (padded) shard.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from labkit.wire import records
from labkit.wire.records import Message, Source


def nbytes(tensors: Iterable[Any]) -> int:
    """Bytes of the given tensors (``None`` entries, e.g. missing gradients, count 0)."""
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def state_bytes(model: Any, optimizer: Any) -> dict[str, int]:
    """This rank's model states: parameters, their gradients, and the optimizer's tensors."""
    import torch

    params = list(model.parameters())
    optim = [v for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)]
    return {"params": nbytes(params), "grads": nbytes(p.grad for p in params), "optim": nbytes(optim)}


def last_message(run: Source, kind: str, rank: int = 0, **match: Any) -> Message:
    """The last message of type ``kind`` from ``rank`` whose fields equal ``match``."""
    found = records.last_message(run, rank, kind, **match)
    if found is None:
        raise KeyError(f"rank {rank} sent no {kind!r} message with {match}")
    return found


def peak_gathered(spans: Sequence[dict[str, Any]], unit_bytes: dict[str, int]) -> int:
    """The most bytes of unsharded parameters held at one moment, from a step's ``held`` spans.

    ``labkit.timeline.Recorder`` opens a unit's ``held`` span at its all-gather and closes it
    when FSDP frees the gathered parameters (for NO_SHARD and DDP: the whole step).
    """
    changes = []
    for s in spans:
        if s["kind"] == "held":
            changes += [(s["start"], unit_bytes[s["unit"]]), (s["end"], -unit_bytes[s["unit"]])]
    held = peak = 0
    for _, change in sorted(changes):  # at the same instant, a free (negative) counts first
        held += change
        peak = max(peak, held)
    return peak
