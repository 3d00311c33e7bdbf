"""What ``--link`` and ``--nodes`` say: a link's rate and latency, checked before anything starts.

    parse_link("200mbit,100us")   # LinkSpec(rate=200e6 bits/s each direction, latency=100e-6 s)

Rates in bits per second (``bit``, ``kbit``, ``mbit``, ``gbit``): tc's ``mbps`` means megabytes,
so it is refused with what to write instead. ``labkit.launch.netem`` makes the link.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from labkit.fmt import fmt_spec
from labkit.i18n import t
from labkit.wire.errors import OptionError

MTU = 9000  # jumbo frames, as cluster networks use; fewer packets for the CPU to push
MOST_NODES = 16

_RATE_UNITS = {"bit": 1.0, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}
_BYTE_UNITS = {"bps": 8.0, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9}
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


@dataclass(frozen=True)
class LinkSpec:
    """A link between emulated nodes: ``rate`` in bits/s each direction, one-way ``latency`` in seconds."""

    rate: float
    latency: float = 0.0
    text: str = ""

    @property
    def bytes_per_s(self) -> float:
        return self.rate / 8

    def tc_rate(self) -> str:
        return f"{int(self.rate)}bit"

    def burst(self) -> int:
        """tbf's bucket: a millisecond at the rate, at least two jumbo frames (a smaller bucket cannot pass a frame)."""
        return max(2 * MTU + 1000, int(self.bytes_per_s * 1e-3))

    def queue(self) -> int:
        """tbf's queue in bytes: 100 ms at the rate, at least 1 MiB, so that TCP sees delay, not loss
        (a drop costs a retransmission timeout, hundreds of ms, that no model of the link predicts)."""
        return max(2**20, int(self.bytes_per_s * 0.1))


def parse_link(value: str | LinkSpec | None) -> LinkSpec | None:
    """``"200mbit,100us"`` -> ``LinkSpec(200e6, 100e-6)``; None stays None."""
    if value is None or isinstance(value, LinkSpec):
        return value
    text = str(value).strip().lower().replace(" ", "")
    rate_s, _, lat_s = text.partition(",")
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)([a-zµ]*)", rate_s)
    if not m:
        raise OptionError(t("launch.netem.link.bad", value=value))
    number, unit = float(m.group(1)), m.group(2) or "bit"
    if unit in _BYTE_UNITS:
        bits = f"{number * _BYTE_UNITS[unit] / 1e6:g}mbit"
        raise OptionError(t("launch.netem.link.bytes", value=value, unit=unit, bits=bits))
    if unit not in _RATE_UNITS:
        raise OptionError(t("launch.netem.link.bad", value=value))
    rate = number * _RATE_UNITS[unit]
    latency = 0.0
    if lat_s:
        m = re.fullmatch(r"([0-9]*\.?[0-9]+)([a-zµ]+)", lat_s)
        if not m or m.group(2) not in _TIME_UNITS:
            raise OptionError(t("launch.netem.link.bad", value=value))
        latency = float(m.group(1)) * _TIME_UNITS[m.group(2)]
    if not (1e6 <= rate <= 100e9) or latency > 1.0:
        raise OptionError(t("launch.netem.link.range", value=value))
    return LinkSpec(rate, latency, str(value).strip())


def check_nodes(nodes: Any) -> int:
    """``--nodes`` as a whole number of emulated nodes (1: no emulation)."""
    if isinstance(nodes, str) and nodes.strip().isdigit():
        nodes = int(nodes)
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= MOST_NODES:
        raise OptionError(t("launch.netem.nodes", value=nodes, most=MOST_NODES))
    return nodes


def human_time(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} µs" if seconds < 1e-3 else f"{fmt_spec(seconds * 1e3, 'g')} ms"
