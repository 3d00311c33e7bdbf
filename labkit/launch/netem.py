"""Emulated nodes on one machine: a network namespace per node, joined by shaped links.

    %%torchrun -n 2 --nodes 2 --link 200mbit,100us      # 4 ranks: 2 nodes of 2
    labkit.torchrun(code, nproc=2, nodes=2, link="200mbit")

The kernel starts one process, ``python -m labkit.launch.netem_run ...`` (the *supervisor*;
``labkit.launch.launchers.EmulatedLauncher``).
It enters a network namespace of its own (the *hub*; with a user namespace when it is not
root, as ``unshare -rn`` does, so no root is needed where unprivileged user namespaces are
allowed) and in it:

* a bridge ``br0``, the switch between the nodes;
* per node, a child process that enters a network namespace of its own (the *node*): its own
  loopback, unshaped (ranks on one node talk over it at memory speed), and ``eth0``, one end
  of a veth pair whose other end (``h<i>``) is on the hub's bridge. The node's address is
  ``10.233.0.<i+1>/24``; it exists only inside these namespaces, which have no other
  interface, so nothing routes anywhere else;
* shaping per direction: ``eth0``'s egress is the node's uplink, ``h<i>``'s egress its
  downlink, each a ``tbf`` at the link's rate (a node sending to two others shares its uplink
  between them, as a NIC does; a ring collective's two directions do not share anything);
* latency: ``netem delay`` on the uplink, with the ``tbf`` under it, where the kernel has
  ``sch_netem``. Where it has not (this module reports it: ``probe().netem``), the link adds
  only veth's own latency (tens of µs through the kernel's stack): the latency asked for is
  *not* emulated, the run says so, and the simulator is given the latency that was
  (``Emulation.latency_s``);
* one torchrun agent per node, started in its namespace, as on real nodes: node 0's agent hosts
  the rendezvous at ``10.233.0.1``, gloo's sockets use ``eth0``.

The channel to the notebook stays the run folder's Unix socket: a socket in the filesystem is
reachable from any network namespace (an abstract one would not be), and the kernel still
checks the peer's uid (the user namespace maps it back to ours).

Nothing outlives the run: a network namespace, with its links and the bridge, lasts as long as
a process is in it, and nothing pins one (no bind mount, no ``ip netns``). The supervisor is
the only process in the hub; each node's agent is its child with a parent-death signal; the
ranks are the agents' children with theirs; and every process carries the run's marker, so
labkit's sweep ends whatever is left (``RankGroup._sweep``). When the last process of a node
is gone, the kernel deletes its namespace, its veth pair and, with the hub, the bridge.

The supervisor prints each agent's output with ``N: `` before each line (N = node rank), as
``srun --label`` does, so ``labkit.launch.nodes`` reads it the same way. It stops every node
when one fails (as ``srun --kill-on-bad-exit``) and exits with that node's code.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from labkit.i18n import t
from labkit.launch.linkspec import MTU, LinkSpec, check_nodes, human_time, parse_link
from labkit.wire.errors import OptionError

SUBNET = "10.233.0"  # node i is SUBNET.(i+1)/24, inside the run's namespaces only
NODE_IF = "eth0"  # the node's end of its veth pair, in its namespace
VETH_LATENCY = 30e-6  # one way through veth and the bridge, measured (see docs/netem.md); used when netem is missing
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
PR_SET_PDEATHSIG = 1


# -- can this machine do it? -----------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """What a trial namespace could do: ``error`` is None when emulation works."""

    error: str | None
    netem: bool = False


@functools.cache
def probe() -> Probe:
    """Try it once per process: a namespace, a veth pair, a bridge, a tbf, and netem (optional).

    Runs in a child process (``python -m labkit.launch.netem probe``): unshare() must be
    called by a single-threaded process, and this one (a kernel) has threads.
    """
    if not sys.platform.startswith("linux"):
        return Probe(t("launch.netem.why.platform", platform=sys.platform))
    for name in ("ip", "tc"):
        if tool(name) is None:
            return Probe(t("launch.netem.why.tool", tool=name))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "labkit.launch.netem", "probe"],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "PYTHONPATH": _pythonpath()},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Probe(str(exc))
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return Probe((done.stderr or done.stdout).strip()[-500:] or f"exit code {done.returncode}")
    return Probe(found.get("error"), bool(found.get("netem")))


def require() -> Probe:
    """The probe, or ``OptionError`` naming why emulation cannot run here."""
    found = probe()
    if found.error:
        raise OptionError(t("launch.netem.unavailable", why=found.error))
    return found


def latency_note(link: str | LinkSpec | None) -> str:
    """What the run will say about latency: nothing where it is emulated or none was asked for."""
    spec = parse_link(link)
    if spec is None or spec.latency <= 0 or probe().netem:
        return ""
    return t("launch.netem.no_latency", asked=human_time(spec.latency), base=human_time(VETH_LATENCY))


def _pythonpath() -> str:
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)


def _userns_policy() -> str:
    """Why unprivileged user namespaces are refused, from the sysctls that refuse them."""
    for path, bad in (
        ("/proc/sys/kernel/unprivileged_userns_clone", "0"),
        ("/proc/sys/user/max_user_namespaces", "0"),
        ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1"),
    ):
        try:
            with open(path) as f:
                if f.read().strip() == bad:
                    return f"{path.removeprefix('/proc/sys/').replace('/', '.')} = {bad}"
        except OSError:
            pass
    return ""


def _probe_here() -> dict[str, Any]:
    """In the probe process: make the namespaces and links a run would, then exit (they go with it)."""
    try:
        enter_namespaces()
    except OSError as exc:
        policy = _userns_policy()
        if policy and os.geteuid() != 0:
            return {"error": t("launch.netem.why.userns", detail=policy)}
        return {"error": t("launch.netem.why.unshare", error=exc)}
    steps = [
        ["ip", "link", "set", "lo", "up"],
        ["ip", "link", "add", "br0", "type", "bridge"],
        ["ip", "link", "add", "h0", "type", "veth", "peer", "name", "p0"],
        ["ip", "link", "set", "h0", "master", "br0"],
        ["tc", "qdisc", "add", "dev", "h0", "root", "tbf", "rate", "100mbit", "burst", "20000", "limit", "100000"],
    ]
    for cmd in steps:
        error = run_ip(cmd)
        if error:
            if os.geteuid() != 0 and "not permitted" in error.lower():
                policy = _userns_policy() or error
                return {"error": t("launch.netem.why.userns", detail=policy)}
            return {"error": t("launch.netem.why.step", command=" ".join(cmd), error=error)}
    netem = not run_ip(["tc", "qdisc", "add", "dev", "p0", "root", "netem", "delay", "1ms"])
    return {"error": None, "netem": netem}


# where iproute2 lives: a PATH without the sbin folders (a grading sandbox's, a desktop
# session's) does not make ip and tc go away
SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def tool(name: str) -> str | None:
    """The path of ``ip`` or ``tc``: on PATH, else in the sbin folders (None: not installed)."""
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), *SBIN]))


def run_ip(cmd: list[str]) -> str:
    """Run an ip/tc command; its error text ("" when it worked)."""
    try:
        done = subprocess.run([tool(cmd[0]) or cmd[0], *cmd[1:]], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return "" if done.returncode == 0 else (done.stderr.strip() or f"exit code {done.returncode}")


# -- entering namespaces ---------------------------------------------------------------------


def libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def unshare(flags: int) -> None:
    if libc().unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def enter_namespaces() -> None:
    """This process into a new network namespace, and a user namespace first unless it is root.

    In the user namespace this process is root (uid 0 there, our own uid outside, as
    ``unshare -r``), so the ``ip`` and ``tc`` it runs may configure the namespace.
    """
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        unshare(CLONE_NEWNET)
        return
    unshare(CLONE_NEWUSER | CLONE_NEWNET)
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def netns_id(pid: int | str = "self") -> int:
    """The inode of a process's network namespace (what ``lsns`` lists)."""
    return os.stat(f"/proc/{pid}/ns/net").st_ino


def netns_in_use(inodes: list[int] | set[int]) -> set[int]:
    """Which of these network namespaces some live process is still in (none, after a run)."""
    wanted, found = set(inodes), set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                ino = os.stat(f"/proc/{name}/ns/net").st_ino
            except OSError:
                continue
            if ino in wanted:
                found.add(ino)
    return found


# -- the supervisor ---------------------------------------------------------------------------


@dataclass
class Emulation:
    """What the run got (``netem.json`` in the run folder): read back by the kernel and the tests."""

    nodes: int
    rate: float
    latency_asked: float
    latency_s: float  # the latency the link has: the one asked for with netem, veth's own without
    netem: bool
    addresses: list[str]
    netns: list[int]  # the namespaces' inodes: hub first, then each node
    supervisor: int

    @classmethod
    def read(cls, run_dir: str) -> Emulation | None:
        try:
            with open(os.path.join(run_dir, "netem.json")) as f:
                return cls(**json.load(f))
        except (OSError, ValueError, TypeError):
            return None


def address(i: int) -> str:
    return f"{SUBNET}.{i + 1}"


def shape_commands(dev: str, link: LinkSpec, netem: bool) -> list[list[str]]:
    """tc commands for one direction: tbf at the rate, under a netem delay where there is netem."""
    tbf = ["tbf", "rate", link.tc_rate(), "burst", str(link.burst()), "limit", str(link.queue())]
    if netem and link.latency > 0:
        delay = ["netem", "delay", f"{link.latency * 1e6:.0f}us", "limit", "100000"]
        return [
            ["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", *delay],
            ["tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", *tbf],
        ]
    return [["tc", "qdisc", "add", "dev", dev, "root", *tbf]]


def main(argv: list[str]) -> int:
    what = argv[0] if argv else ""
    if what == "probe":
        print(json.dumps(_probe_here()), flush=True)
        return 0
    raise SystemExit("usage: python -m labkit.launch.netem probe (runs: python -m labkit.launch.netem_run)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


__all__ = ["MTU", "Emulation", "LinkSpec", "check_nodes", "human_time", "parse_link", "probe", "require"]
