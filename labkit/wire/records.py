"""What the ranks' records mean, on both sides of the wire: the collectives counted and their wire bytes.

A ``comm`` message carries, per collective kind, a payload (``bytes``) and what one rank sends
under the ring algorithm (``wire_bytes``): ``ring_factor`` is the one definition of that ratio,
used by the in-rank counter and by the kernel's theory and simulator alike.
"""

from __future__ import annotations

KINDS = ("all_gather", "reduce_scatter", "all_reduce", "broadcast")


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
