"""Ranks sharing the cores: how much slower each rank's CPU work runs than in the calibration.

With more ranks than cores (4 on this machine's 2) a rank's compute waits for a core while other
ranks compute; a rank asleep in a blocking collective, waiting for one still computing, gives its
core away (``runnable``, ``shared_cpu``). Ranks bound to cores (``Topology.pinned``, ``--pin``)
share a core only with the ranks bound to it; the last rank into a blocking collective then has
its core to itself once they wait in it too (``mates_wait``). Work on gloo's own thread (DDP's
buckets, FSDP2's asynchronous unshards) takes its CPU from a computing rank where every core is
busy (``busy``).
"""

from __future__ import annotations

from typing import Protocol

from labkit.timing.gloo import GlooCosts, Topology, contention
from labkit.timing.simulate import Result


class Calibration(Protocol):
    """What of ``predict.Calibration`` the sharing needs: its ranks, and their share of the CPU."""

    ranks: int
    share: float | None


def mates_wait(topo: Topology, channel: str) -> bool:
    """Ranks bound to cores: are the other ranks on a rank's core in its group on ``channel``, so
    asleep in the same blocking collective while the last one makes up its lag? Every rank's
    group (``world``) has them; HSDP's shard group, one node's ranks on different cores, does not
    (they run their own group's collective then)."""
    if not topo.pinned:
        return False
    group = set(topo.group(channel)[0])
    return all(r in group for r in range(topo.world) if r % max(topo.cores, 1) == 0)


def hands_over(topo: Topology, channel: str) -> bool:
    """Does a blocking collective on ``channel`` end with a wait for a core (``GlooCosts.slice``)?
    Ranks bound two or more to a core, on one node, with their core's other ranks in the group:
    the ranks leave the collective at different times (the ring's last steps reach them one after
    another), and the first to leave starts computing on the core its mate still needs for its last
    ring step. The woken mate waits for the computing rank's fresh slice. Measured on 1 node x 4
    bound to 2 cores (five idle runs of issue 50's matrix): every FSDP configuration of three
    models came out low without it (-1..-21%, mean -7%), within -9..+9% (mean -0.1%) with one
    slice (1.5 ms here) a blocking collective. Not over a link: the link's time per ring step lets
    the mate in while the bytes are on the wire (2 nodes x 2 at 620 Mbit/s and 2.3 Gbit/s came out
    +5..+13% over with it, -7..+8% without); not on unbound ranks (the scheduler moves the woken
    rank to the other core: not measured)."""
    return topo.nodes == 1 and topo.per_core() > 1 and mates_wait(topo, channel)


def busy(topo: Topology) -> float:
    """The share of a core that work on gloo's thread takes from a computing rank: all of it when
    the ranks keep every core busy, none when there are idle cores."""
    return min(1.0, topo.world / max(topo.cores, 1))


def runnable(res: Result, costs: GlooCosts, topo: Topology, speed: float) -> float:
    """How many ranks have CPU work, on average, while one has: itself, and each other rank (bound
    to cores: each other rank bound to its core) but for the share of that time it sleeps in a
    blocking collective waiting for a rank still computing.

    The ranks leave a blocking collective together and compute the same units, so while one
    computes the others mostly do too; one that finishes first waits, asleep, for the others. That
    wait is the calibration's ``drift`` per blocking collective (the wait less what collectives
    right after another one wait: then the other rank is still at work in the last one), at most
    the compute before it. DDP's buckets and FSDP2's asynchronous unshards block nothing: every
    rank busy. Measured (1 node x 4, from every rank's spans): compute overlapped by 2.97 other
    ranks' compute for FSDP's blocking configurations, 3.6 for DDP; the rank thread's wait for a
    core, against the calibration's, 1.60-1.71 and 1.78-1.86."""
    spans = sorted(res.spans, key=lambda s: s["start"])
    work = asleep = segment = 0.0
    for s in spans:
        if s["stream"] in ("compute", "host"):
            segment += s["end"] - s["start"]
        elif s["stream"] == "comm" and s.get("blocking", True):
            asleep += min(segment, costs.drift * speed)
            work += segment
            segment = 0.0
    work += segment
    sharing = topo.per_core() if topo.pinned else topo.world  # bound: only the ranks on its own core
    if work <= 0:
        return float(sharing)
    return 1.0 + (sharing - 1) * (1.0 - asleep / work)


def shared_cpu(cal: Calibration, topo: Topology) -> float:
    """How much slower each rank's CPU work runs with ``topo.world`` ranks on ``topo.cores`` cores
    than in the calibration: ``beside(cal, world / cores)``. Every rank counts as busy all the step:
    where ranks outnumber cores, ``predict`` starts from this and refines it with ``runnable`` (a
    rank asleep in a wait for one still computing gives its core away)."""
    if topo.world <= topo.cores:
        return contention(topo.world, topo.cores, cal.ranks)
    return beside(cal, topo.world / max(topo.cores, 1))


def beside(cal: Calibration, ranks_per_core: float) -> float:
    """How much slower a rank runs with ``ranks_per_core`` ranks wanting each core than in the
    calibration (one rank a core): ``(ranks_per_core + other) / base``. ``base`` is the calibration's
    own share of the CPU (``Calibration.share``: (ran + waited) / ran; 1.09 here, idle), and
    ``other = base - 1`` the work beside its rank on a core: gloo's and labkit's threads, and
    whatever else the machine runs. That work does not leave when more ranks come: it adds to
    their sharing (``max(base, ranks_per_core) / base`` counted it once only, and every 1 node x 4
    row of issue 50's idle runs came out 9-13% low; on a loaded machine, where the calibration's
    share was 2 and more, it predicted 4 ranks on 2 cores no slower than 2)."""
    base = max(cal.share or 1.0, 1.0)
    return max(1.0, (ranks_per_core + base - 1.0) / base)
