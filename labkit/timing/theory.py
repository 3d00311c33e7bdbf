"""What theory says the collectives of one training step should move, per rank.

    from labkit.timing import theory
    theory.theory_bytes(num_params, "FULL_SHARD", world_size=4)   # {"all_gather": {"bytes": ..., "wire_bytes": ...}, ...}
    theory.table(counts, theory=...)                                # measured beside theory, as text

The counts come from ``labkit.ranks.comm`` inside the ranks; this side needs no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from labkit.fmt import fmt_bytes, render_table
from labkit.i18n import t
from labkit.wire.protocol import Msg
from labkit.wire.records import KINDS, messages, ring_factor
from labkit.wire.setting import Strategy

HYBRID = (Strategy.HYBRID_SHARD, Strategy.HYBRID_SHARD_ZERO2)

__all__ = ["KINDS", "STRATEGIES", "StepCounts", "from_events", "ring_factor", "table", "theory_bytes", "total"]


STRATEGIES = (Strategy.DDP, Strategy.NO_SHARD, Strategy.FULL_SHARD, Strategy.SHARD_GRAD_OP, *HYBRID)


def _strategy_name(strategy: Any) -> str:
    name = strategy.value if isinstance(strategy, Strategy) else getattr(strategy, "name", str(strategy)).upper()
    if name not in STRATEGIES:
        raise ValueError(t("timing.comm.unknown_strategy", name=name, choices=", ".join(STRATEGIES)))
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
    if name in (Strategy.DDP, Strategy.NO_SHARD):
        return _rows({"all_reduce": (num_params * rb, n)})
    gathered = 2 * num_params - unsharded_root_params
    if name in (Strategy.SHARD_GRAD_OP, Strategy.HYBRID_SHARD_ZERO2):
        gathered = num_params
    if name in (Strategy.FULL_SHARD, Strategy.SHARD_GRAD_OP):
        return _rows({"all_gather": (gathered * dtype_bytes, n), "reduce_scatter": (num_params * rb, n)})
    s = shard_size or n
    if s < 1 or n % s:
        raise ValueError(t("timing.comm.bad_shard_size", world_size=n, shard_size=shard_size))
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
    head = [
        t("timing.comm.table.op"),
        t("timing.comm.table.calls"),
        t("timing.comm.table.bytes"),
        t("timing.comm.table.wire"),
    ]
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
        for m in messages({0: events}, Msg.COMM)[0]
    ]
