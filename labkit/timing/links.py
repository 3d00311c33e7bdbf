"""Links between ranks for the simulator: a bandwidth and a latency, and the ring algorithm's cost.

    from labkit.timing.links import link
    link("pcie4").time("all_gather", 8e6, 4)       # seconds for 8 MB gathered over 4 ranks
    link(10e9, 5e-6)                               # your own: 10 GB/s, 5 µs per ring step

A ring collective over N ranks takes ``(N-1)·latency + (N-1)/N·bytes/bandwidth`` (an
all-reduce, a reduce-scatter then an all-gather, twice that). The presets' bandwidths are
what NCCL typically reaches per GPU and direction, not the marketing peak; their latencies
are assumptions of the right order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from labkit.i18n import t
from labkit.timing.theory import ring_factor


@dataclass(frozen=True)
class Link:
    """A link between ranks: bandwidth each rank gets per direction (bytes/s), latency per ring step (s)."""

    name: str
    bandwidth: float
    latency: float = 0.0

    def time(
        self, kind: str, payload: float, group_size: int, idle: float = math.inf, background: bool = False
    ) -> float:
        """Ring algorithm: (N-1) steps (2(N-1) for an all-reduce), each moving payload/N:
        ``(N-1)·latency + (N-1)/N·payload/bandwidth`` (twice that for an all-reduce).
        ``idle``: how long the link was idle before; ``background``: whether the rank computes
        meanwhile (neither changes a device link's cost: its collectives have their own engine)."""
        if group_size <= 1 or payload <= 0:
            return 0.0
        steps = 2 * (group_size - 1) if kind == "all_reduce" else group_size - 1
        wire = payload * ring_factor(kind, group_size)
        return steps * self.latency + (0.0 if math.isinf(self.bandwidth) else wire / self.bandwidth)

    def time_samples(
        self, kind: str, payload: float, group_size: int, idle: float = math.inf, background: bool = False
    ) -> list[float]:
        """Equally likely durations of the collective, whose mean is ``time``: one here (a device
        link's collective takes the same time each step); ``gloolink.GlooLink`` spreads the wait
        for the slowest rank over the calibration's measured waits."""
        return [self.time(kind, payload, group_size, idle, background)]


# Bandwidths: per GPU and direction, what NCCL typically reaches (not the marketing peak).
# Latencies per ring step are assumptions of the right order; pass your own with link(bw, latency).
LINKS: dict[str, Link] = {
    "nvlink4": Link("NVLink 4 (H100, 450 GB/s)", 450e9, 3e-6),
    "pcie4": Link("PCIe 4.0 x16 (25 GB/s)", 25e9, 8e-6),
    "pcie5": Link("PCIe 5.0 x16 (50 GB/s)", 50e9, 8e-6),
    "ib100": Link("100 Gb/s network (12.5 GB/s)", 12.5e9, 10e-6),
    "ib400": Link("400 Gb/s network (50 GB/s)", 50e9, 10e-6),
    "infinite": Link("infinitely fast", math.inf, 0.0),
}


def link(spec: str | float | Link, latency: float = 0.0) -> Link:
    """A preset by name, or any bandwidth in bytes/s (with a latency in seconds)."""
    if isinstance(spec, Link):
        return spec
    if isinstance(spec, str):
        if spec not in LINKS:
            raise ValueError(t("timing.simulate.unknown_link", name=spec, choices=", ".join(LINKS)))
        return LINKS[spec]
    return Link(f"{spec / 1e9:g} GB/s, {latency * 1e6:g} µs", float(spec), latency)
