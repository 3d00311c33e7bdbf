"""A simulator ``Link`` priced by gloo's costs on a topology (``GlooLink``): what a collective takes on
CPU ranks, how long it waits for the slowest rank of its group (``group_wait``), and what an
asynchronous one takes from the compute it runs beside (``GlooLink.cpu_time``, ``gather_charges``).

    from labkit.timing.gloolink import GlooLink
    link = GlooLink(cal.gloo, topo, "world", speed=1.0, wait=cal.gloo.skew)
    link.time("all_gather", 4e6, topo.world)

The cost of one collective is ``labkit.timing.gloo``'s; this adds what the schedule needs around
it: the waits measured in the calibration (``GlooCosts.waits``), less what a slow link hides,
and the share of a core gloo's thread takes (``labkit.timing.sharing``). ``labkit.timing.predict``
builds one per process group and hands it to ``labkit.timing.simulate``.
"""

from __future__ import annotations

import math

from labkit.timing.gloo import GlooCosts, Topology, collective_time, link_slack, slowest, steps
from labkit.timing.links import Link
from labkit.timing.sharing import busy, hands_over, mates_wait

__all__ = ["GlooLink", "gather_charges", "group_wait"]


class GlooLink(Link):
    """A ``Link`` whose collectives cost what ``gloo.collective_time`` says on a topology and channel."""

    def __init__(
        self,
        costs: GlooCosts,
        topo: Topology,
        channel: str,
        speed: float,
        wait: float = 0.0,
        catch_up: float | None = None,
    ) -> None:
        """``catch_up``: how much slower than the calibration the last rank makes up its lag (default
        ``speed``; see ``predict._settled`` for ranks bound to cores)."""
        rate = "no link" if math.isinf(topo.rate) else f"{topo.rate * 8 / 1e6:g} Mbit/s"
        super().__init__(f"{topo.nodes}x{topo.per_node} ranks, {rate}", topo.rate, topo.latency)
        catch_up = speed if catch_up is None else catch_up
        object.__setattr__(self, "_gloo", (costs, topo, channel, speed, wait, catch_up))

    def time(
        self, kind: str, payload: float, group_size: int, idle: float = math.inf, background: bool = False
    ) -> float:
        """The collective, and the wait for the slowest rank (``wait`` seconds at the calibration's
        CPU speed, on average) where the link does not hide it (``gloo.link_slack``): the mean of
        ``time_samples``.

        ``background``: it runs on gloo's thread while the rank computes (FSDP2's asynchronous
        unshard, DDP's bucket all-reduce). Its CPU work (copies, the TCP stack) then shares the
        cores with that compute: 1 + ``busy`` times slower, the share of a core that ``cpu_time``
        charges the compute for it (with as many busy ranks as cores, two threads on a core, each
        at half speed)."""
        samples = self.time_samples(kind, payload, group_size, idle, background)
        return math.fsum(samples) / len(samples)

    def time_samples(
        self, kind: str, payload: float, group_size: int, idle: float = math.inf, background: bool = False
    ) -> list[float]:
        """Equally likely durations of the collective: its work (``time``) and, in turn, each of the
        calibration's measured waits for the slowest rank (``GlooCosts.waits``), less what the link
        hides. The wait is spread: a quarter of the calibration's collectives waited nothing, one in
        ten over 5 ms (mean 1.9 ms); what hides it or runs beside it has to be set against each
        wait, not their mean (a link that hides 2 ms of a 1.9 ms mean still shows the waits above
        2 ms). Ranks that share a core on one node wait for it at the end as well (``hands_over``).
        """
        costs, topo, channel, speed, wait, catch_up = self._gloo
        hidden = link_slack(costs, topo, kind, payload, channel, idle) if wait else 0.0
        shared = speed * (1.0 + busy(topo)) if background else speed
        work = collective_time(costs, topo, kind, payload, channel, shared, idle)
        wait *= group_wait(costs, len(topo.group(channel)[0]))
        waits = [w * wait / costs.skew for w in costs.waits] if costs.waits and costs.skew > 0 else [wait]
        catch_up = catch_up if mates_wait(topo, channel) and not background else speed
        handover = costs.slice if hands_over(topo, channel) and not background else 0.0
        return [work + handover + max(0.0, w * catch_up - hidden) for w in waits]

    def cpu_time(self, kind: str, payload: float, group_size: int, idle: float = math.inf) -> float:
        """What an asynchronous collective takes from the rank's compute: its CPU work on gloo's
        thread (``alpha`` and ``beta``: the copies and the TCP stack), times the share of it that has
        to take a core from a computing rank (all of it when the ranks already keep every core busy,
        none when a core is idle). Not the wait for the slowest rank: that is in the collective's
        time (``time``), so the schedule makes the rank wait for the gather only where the compute
        it was issued under does not cover it (measured: explicit prefetch 5-11% faster than
        implicit on one node; charging the wait here as well predicts no gain)."""
        costs, topo, channel, speed, *_ = self._gloo
        group, _ = topo.group(channel)
        g = len(group)
        if g <= 1 or payload <= 0:
            return 0.0
        fallback = "reduce_scatter" if kind == "all_reduce" else "all_gather"
        beta = costs.beta.get(kind) or costs.beta.get(fallback, 0.0)
        work = steps(kind, g) * (costs.alpha + payload / g * beta) * speed * busy(topo)
        return work * gather_charges(kind, topo)


def group_wait(costs: GlooCosts, g: int) -> float:
    """A blocking collective's wait in a group of ``g`` ranks against the calibration's (its
    ``skew``): the part the ranks' compute adds (``drift``) is the wait for the last of them,
    ``gloo.slowest(g) / slowest(ranks)`` as long; the rest does not grow with the group: ranks
    leaving the last collective at different times, each ring step waiting for its neighbour.

    Measured on 1 node x 4 (FSDP1 FULL_SHARD): blocking collectives (all-gathers and
    reduce-scatters) 76-100 ms a step; the whole wait 1.83 times as long makes them 90-117 ms, the
    drift alone growing (0.28-0.46 of the wait) 79-103."""
    if g <= 1:
        return 0.0  # a group of one waits for no one
    if costs.ranks <= 1 or costs.skew <= 0:
        return 1.0
    part = min(max(costs.drift / costs.skew, 0.0), 1.0)
    return 1.0 + part * (slowest(g) / slowest(costs.ranks) - 1.0)


def gather_charges(kind: str, topo: Topology) -> int:
    """How many times an asynchronous unshard's CPU work delays the rank that issued it: twice
    where each core has one rank, once where ranks share a core.

    One rank on a core (2 ranks on 2 cores, bound): gloo's thread copies on that rank's core. The
    forward and backward under explicit prefetch take about that work longer than implicit's at
    the same pace (2.6-8.6 ms a step, the work 8.4 ms), and the rank still waits between
    them as long as the work and the wait for the gather together: the thread gets the core in
    slices between the compute's, so the gather ends later than its share of the core gives.
    Two ranks on a core (1 node x 4 bound): the thread runs while the core's other rank sleeps in
    a blocking collective, once (1 node x 4 explicit at the run's pace came out +4..+14% with
    once). DDP's bucket all-reduces: once, its calibration's compute was timed with them running."""
    return 2 if kind == "all_gather" and topo.per_core() == 1 else 1
