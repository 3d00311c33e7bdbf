"""Emulated nodes on one machine: a network namespace per node, joined by shaped links.

    %%torchrun -n 2 --nodes 2 --link 200mbit,100us      # 4 ranks: 2 nodes of 2
    labkit.torchrun(code, nproc=2, nodes=2, link="200mbit")

The kernel starts one process, ``python -m labkit.launch.netem run ...`` (the *supervisor*).
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
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from labkit.i18n import catalog, t
from labkit.wire.errors import OptionError

catalog(
    {
        "netem.link.bad": {
            "en": "--link {value!r}: write RATE[,LATENCY], e.g. 200mbit,100us or 1gbit (rates in bit, kbit, mbit, gbit; latency in us, ms)",
            "ro": "--link {value!r}: scrieți RATĂ[,LATENȚĂ], de ex. 200mbit,100us sau 1gbit (rate în bit, kbit, mbit, gbit; latența în us, ms)",
        },
        "netem.link.bytes": {
            "en": "--link {value!r}: {unit} means bytes per second in tc; write the rate in bits: {bits}",
            "ro": "--link {value!r}: {unit} înseamnă octeți pe secundă în tc; scrieți rata în biți: {bits}",
        },
        "netem.link.range": {
            "en": "--link {value!r}: the rate must be between 1mbit and 100gbit, the latency at most 1 s",
            "ro": "--link {value!r}: rata trebuie să fie între 1mbit și 100gbit, latența cel mult 1 s",
        },
        "netem.nodes": {
            "en": "--nodes must be a whole number of emulated nodes, 1 to {most}; got {value!r}",
            "ro": "--nodes trebuie să fie un număr întreg de noduri emulate, între 1 și {most}; nu {value!r}",
        },
        "netem.link.one_node": {
            "en": "--link shapes the link between emulated nodes: give --nodes 2 or more (ranks on one node talk over its loopback)",
            "ro": "--link modelează legătura dintre noduri emulate: dați --nodes 2 sau mai mult (rangurile de pe un nod comunică prin loopback-ul lui)",
        },
        "netem.nodes.real": {
            "en": "--nodes emulates nodes on this machine; --nnodes, --slurm and --hosts use real ones: choose one",
            "ro": "--nodes emulează noduri pe această mașină; --nnodes, --slurm și --hosts folosesc noduri reale: alegeți una",
        },
        "netem.unavailable": {
            "en": "emulated nodes need network namespaces, and this machine cannot make them: {why}. "
            "Run without --nodes/--link (one node), or use the simulator (labkit.simulate).",
            "ro": "nodurile emulate au nevoie de spații de nume de rețea, iar această mașină nu le poate crea: {why}. "
            "Rulați fără --nodes/--link (un singur nod) sau folosiți simulatorul (labkit.simulate).",
        },
        "netem.why.userns": {
            "en": "unprivileged user namespaces are not allowed ({detail})",
            "ro": "spațiile de nume de utilizator neprivilegiate nu sunt permise ({detail})",
        },
        "netem.why.unshare": {
            "en": "unshare() was refused: {error} (a container's seccomp or security profile forbids it)",
            "ro": "unshare() a fost refuzat: {error} (profilul seccomp sau de securitate al containerului îl interzice)",
        },
        "netem.why.tool": {
            "en": "the {tool} command (iproute2) is not installed",
            "ro": "comanda {tool} (iproute2) nu este instalată",
        },
        "netem.why.step": {
            "en": "`{command}` failed inside the namespace: {error}",
            "ro": "`{command}` a eșuat în spațiul de nume: {error}",
        },
        "netem.why.platform": {
            "en": "network namespaces exist on Linux only (this is {platform})",
            "ro": "spațiile de nume de rețea există doar pe Linux (aceasta este {platform})",
        },
        "netem.no_latency": {
            "en": "note: this kernel has no netem qdisc, so the link's latency ({asked}) is not emulated: "
            "its rate is, each direction; the latency is veth's own (about {base}). The simulator uses the latter.",
            "ro": "notă: acest kernel nu are qdisc-ul netem, deci latența legăturii ({asked}) nu este emulată: "
            "rata ei este, în fiecare direcție; latența este cea proprie veth (circa {base}). Simulatorul o folosește pe aceasta.",
        },
    }
)

SUBNET = "10.233.0"  # node i is SUBNET.(i+1)/24, inside the run's namespaces only
NODE_IF = "eth0"  # the node's end of its veth pair, in its namespace
MTU = 9000  # jumbo frames, as cluster networks use; fewer packets for the CPU to push
MOST_NODES = 16
VETH_LATENCY = 30e-6  # one way through veth and the bridge, measured (see docs/netem.md); used when netem is missing
CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
PR_SET_PDEATHSIG = 1


# -- the link ------------------------------------------------------------------------------

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
        raise OptionError(t("netem.link.bad", value=value))
    number, unit = float(m.group(1)), m.group(2) or "bit"
    if unit in _BYTE_UNITS:
        bits = f"{number * _BYTE_UNITS[unit] / 1e6:g}mbit"
        raise OptionError(t("netem.link.bytes", value=value, unit=unit, bits=bits))
    if unit not in _RATE_UNITS:
        raise OptionError(t("netem.link.bad", value=value))
    rate = number * _RATE_UNITS[unit]
    latency = 0.0
    if lat_s:
        m = re.fullmatch(r"([0-9]*\.?[0-9]+)([a-zµ]+)", lat_s)
        if not m or m.group(2) not in _TIME_UNITS:
            raise OptionError(t("netem.link.bad", value=value))
        latency = float(m.group(1)) * _TIME_UNITS[m.group(2)]
    if not (1e6 <= rate <= 100e9) or latency > 1.0:
        raise OptionError(t("netem.link.range", value=value))
    return LinkSpec(rate, latency, str(value).strip())


def check_nodes(nodes: Any) -> int:
    """``--nodes`` as a whole number of emulated nodes (1: no emulation)."""
    if isinstance(nodes, str) and nodes.strip().isdigit():
        nodes = int(nodes)
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= MOST_NODES:
        raise OptionError(t("netem.nodes", value=nodes, most=MOST_NODES))
    return nodes


def human_time(seconds: float) -> str:
    return f"{seconds * 1e6:.0f} µs" if seconds < 1e-3 else f"{seconds * 1e3:g} ms"


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
        return Probe(t("netem.why.platform", platform=sys.platform))
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return Probe(t("netem.why.tool", tool=tool))
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
        raise OptionError(t("netem.unavailable", why=found.error))
    return found


def latency_note(link: str | LinkSpec | None) -> str:
    """What the run will say about latency: nothing where it is emulated or none was asked for."""
    spec = parse_link(link)
    if spec is None or spec.latency <= 0 or probe().netem:
        return ""
    return t("netem.no_latency", asked=human_time(spec.latency), base=human_time(VETH_LATENCY))


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
            return {"error": t("netem.why.userns", detail=policy)}
        return {"error": t("netem.why.unshare", error=exc)}
    steps = [
        ["ip", "link", "set", "lo", "up"],
        ["ip", "link", "add", "br0", "type", "bridge"],
        ["ip", "link", "add", "h0", "type", "veth", "peer", "name", "p0"],
        ["ip", "link", "set", "h0", "master", "br0"],
        ["tc", "qdisc", "add", "dev", "h0", "root", "tbf", "rate", "100mbit", "burst", "20000", "limit", "100000"],
    ]
    for cmd in steps:
        error = _ip(cmd)
        if error:
            if os.geteuid() != 0 and "not permitted" in error.lower():
                policy = _userns_policy() or error
                return {"error": t("netem.why.userns", detail=policy)}
            return {"error": t("netem.why.step", command=" ".join(cmd), error=error)}
    netem = not _ip(["tc", "qdisc", "add", "dev", "p0", "root", "netem", "delay", "1ms"])
    return {"error": None, "netem": netem}


def _ip(cmd: list[str]) -> str:
    """Run an ip/tc command; its error text ("" when it worked)."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return "" if done.returncode == 0 else (done.stderr.strip() or f"exit code {done.returncode}")


# -- entering namespaces ---------------------------------------------------------------------


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _unshare(flags: int) -> None:
    if _libc().unshare(flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def enter_namespaces() -> None:
    """This process into a new network namespace, and a user namespace first unless it is root.

    In the user namespace this process is root (uid 0 there, our own uid outside, as
    ``unshare -r``), so the ``ip`` and ``tc`` it runs may configure the namespace.
    """
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        _unshare(CLONE_NEWNET)
        return
    _unshare(CLONE_NEWUSER | CLONE_NEWNET)
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


def command(nodes: int, link: LinkSpec | None, agent: list[str]) -> list[str]:
    """The kernel's one process: the supervisor, which starts ``agent`` once per node."""
    spec = {"nodes": nodes, "rate": link.rate if link else 0.0, "latency": link.latency if link else 0.0}
    return [sys.executable, "-m", "labkit.launch.netem", "run", json.dumps(spec), "--", *agent]


def address(i: int) -> str:
    return f"{SUBNET}.{i + 1}"


def _shape(dev: str, link: LinkSpec, netem: bool) -> list[list[str]]:
    """tc commands for one direction: tbf at the rate, under a netem delay where there is netem."""
    tbf = ["tbf", "rate", link.tc_rate(), "burst", str(link.burst()), "limit", str(link.queue())]
    if netem and link.latency > 0:
        delay = ["netem", "delay", f"{link.latency * 1e6:.0f}us", "limit", "100000"]
        return [
            ["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", *delay],
            ["tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", *tbf],
        ]
    return [["tc", "qdisc", "add", "dev", dev, "root", *tbf]]


class Supervisor:
    """Runs in the hub namespace: makes the nodes, starts an agent in each, relays and labels their output."""

    def __init__(self, nodes: int, link: LinkSpec | None, agent: list[str]) -> None:
        self.n, self.link, self.agent = nodes, link, agent
        self.children: dict[int, int] = {}  # node rank -> pid
        self.outputs: dict[int, int] = {}  # fd of a child's output -> node rank
        self.pending: dict[int, bytes] = {}
        self.codes: dict[int, int] = {}
        self.stopping = False
        self.stop_signal = signal.SIGTERM
        self.netem = False  # a delay qdisc on each uplink (set in run(), before the nodes are configured)
        self.grace = float(os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "5"))

    def run(self) -> int:
        try:
            enter_namespaces()
            for cmd in (["ip", "link", "set", "lo", "up"], ["ip", "link", "add", "br0", "type", "bridge"]):
                self._must(cmd)
            self._must(["ip", "link", "set", "br0", "up"])
            self.netem = self._has_netem()
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, self._on_signal)
            controls = [self._fork_node(i) for i in range(self.n)]
            for i, (ctl_r, ctl_w) in enumerate(controls):
                self._wait_byte(ctl_r, i, b"R")  # in its namespace
                self._link_node(i)
                os.write(ctl_w, b"C")
                self._wait_byte(ctl_r, i, b"K")  # configured
            self._record()
            for _, ctl_w in controls:
                os.write(ctl_w, b"G")  # every node is up: start the agents
        except SetupError as exc:
            self._say(f"labkit: emulated nodes could not be set up: {exc}")
            self._stop_all()
            return 97
        return self._supervise()

    # -- setup ---------------------------------------------------------------

    def _must(self, cmd: list[str]) -> None:
        error = _ip(cmd)
        if error:
            raise SetupError(f"{' '.join(cmd)}: {error}")

    def _fork_node(self, i: int) -> tuple[int, int]:
        """A child that enters its own network namespace, waits to be linked, configures itself, runs the agent."""
        up_r, up_w = os.pipe()  # child -> supervisor: R (in its namespace), K (configured) or an error
        down_r, down_w = os.pipe()  # supervisor -> child: C (configure), G (go)
        out_r, out_w = os.pipe()  # the agent's stdout and stderr
        pid = os.fork()
        if pid == 0:  # the node
            try:
                os.close(up_r), os.close(down_w), os.close(out_r)
                os.dup2(out_w, 1), os.dup2(out_w, 2)
                _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the supervisor gone: this node goes
                for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                    signal.signal(sig, signal.SIG_DFL)
                _unshare(CLONE_NEWNET)
                os.write(up_w, b"R")
                if os.read(down_r, 1) != b"C":
                    os._exit(1)
                error = self._configure_node(i)
                os.write(up_w, b"K" if not error else error.encode()[:4000])
                if error or os.read(down_r, 1) != b"G":
                    os._exit(1)
                os.execvpe(self.agent[0], self.agent, self._node_env(i))
            except BaseException as exc:  # nothing of the supervisor's may run in the child
                try:
                    os.write(up_w, f"node {i}: {exc}".encode())
                finally:
                    os._exit(1)
        os.close(up_w), os.close(down_r), os.close(out_w)
        self.children[i] = pid
        self.outputs[out_r] = i
        return up_r, down_w

    def _wait_byte(self, fd: int, i: int, want: bytes) -> None:
        ready, _, _ = select.select([fd], [], [], 30)
        got = os.read(fd, 4000) if ready else b""
        if got != want:
            raise SetupError(got.decode(errors="replace") or f"node {i} did not answer")

    def _has_netem(self) -> bool:
        """Can this kernel delay packets (sch_netem)? Asked only when a latency is."""
        if not (self.link and self.link.latency > 0):
            return False
        if _ip(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1us"]):
            return False
        _ip(["tc", "qdisc", "del", "dev", "lo", "root"])
        return True

    def _link_node(self, i: int) -> None:
        """The node's veth pair: ``eth0`` into its namespace, ``h<i>`` on the bridge, shaped toward the node."""
        pid, hub = self.children[i], f"h{i}"
        self._must(["ip", "link", "add", hub, "type", "veth", "peer", "name", NODE_IF, "netns", str(pid)])
        self._must(["ip", "link", "set", hub, "mtu", str(MTU), "master", "br0", "up"])
        if self.link is not None:
            for cmd in _shape(hub, self.link, netem=False):  # the delay once per direction: on the sender's side
                self._must(cmd)

    def _configure_node(self, i: int) -> str:
        """In the node's namespace: loopback up, ``eth0`` addressed and shaped (its uplink)."""
        cmds = [
            ["ip", "link", "set", "lo", "up"],
            ["ip", "link", "set", NODE_IF, "mtu", str(MTU), "up"],
            ["ip", "addr", "add", f"{address(i)}/24", "dev", NODE_IF],
        ]
        if self.link is not None:
            cmds += _shape(NODE_IF, self.link, self.netem)
        for cmd in cmds:
            error = _ip(cmd)
            if error:
                return f"node {i}: {' '.join(cmd)}: {error}"
        return ""

    def _node_env(self, i: int) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            LABKIT_NODES="emulated",
            LABKIT_NODE=f"n{i}",
            LABKIT_NODE_RANK=str(i),
            LABKIT_HOSTS=",".join(address(j) for j in range(self.n)),
            GLOO_SOCKET_IFNAME=NODE_IF,  # gloo's sockets on the node's link (to its own ranks: loopback)
            TP_SOCKET_IFNAME=NODE_IF,
        )
        return env

    def _record(self) -> None:
        run_dir = os.environ.get("LABKIT_RUN_DIR")
        if not run_dir:
            return
        link = self.link or LinkSpec(0.0)
        emulation = Emulation(
            nodes=self.n,
            rate=link.rate,
            latency_asked=link.latency,
            latency_s=link.latency if self.netem else VETH_LATENCY,
            netem=self.netem,
            addresses=[address(i) for i in range(self.n)],
            netns=[netns_id()] + [netns_id(self.children[i]) for i in range(self.n)],
            supervisor=os.getpid(),
        )
        with open(os.path.join(run_dir, "netem.json"), "w") as f:
            json.dump(asdict(emulation), f)

    # -- running -------------------------------------------------------------

    def _on_signal(self, sig: int, _frame: Any) -> None:
        if not self.stopping:
            self.stopping = True
            self.stop_signal = signal.Signals(sig)
            self._signal_children(signal.SIGTERM)

    def _signal_children(self, sig: int) -> None:
        for i, pid in self.children.items():
            if i not in self.codes:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass

    def _supervise(self) -> int:
        """Relay output until every agent ended; the first that fails ends the others."""
        failed: int | None = None
        deadline: float | None = None
        while len(self.codes) < len(self.children):
            self._relay(0.1)
            self._reap()
            bad = [i for i, c in self.codes.items() if c != 0]
            if (bad or self.stopping) and deadline is None:
                if bad and failed is None:
                    failed = bad[0]
                    self._say(f"labkit: node n{failed} exited with code {self.codes[failed]}")
                self._signal_children(signal.SIGTERM)
                deadline = time.monotonic() + self.grace + 1
            if deadline is not None and time.monotonic() > deadline:
                self._signal_children(signal.SIGKILL)
        self._relay(0)
        self._flush()
        if failed is not None:
            return self.codes[failed]
        if self.stopping:
            return 128 + int(self.stop_signal)
        return 0

    def _reap(self) -> None:
        for i, pid in self.children.items():
            if i in self.codes:
                continue
            try:
                got, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                self.codes[i] = 1
                continue
            if got:
                self.codes[i] = os.waitstatus_to_exitcode(status)

    def _relay(self, timeout: float) -> None:
        if not self.outputs:
            time.sleep(timeout)
            return
        try:
            ready, _, _ = select.select(list(self.outputs), [], [], timeout)
        except InterruptedError:
            return
        for fd in ready:
            i = self.outputs[fd]
            try:
                data = os.read(fd, 65536)
            except OSError:
                data = b""
            if not data:
                os.close(fd)
                del self.outputs[fd]
                continue
            lines = (self.pending.pop(i, b"") + data).split(b"\n")
            self.pending[i] = lines.pop()
            for line in lines:
                self._write(i, line)

    def _flush(self) -> None:
        for i, rest in self.pending.items():
            if rest:
                self._write(i, rest)
        self.pending = {}

    def _write(self, i: int, line: bytes) -> None:
        os.write(1, f"{i}: ".encode() + line + b"\n")

    def _say(self, text: str) -> None:
        os.write(2, text.encode() + b"\n")

    def _stop_all(self) -> None:
        self._signal_children(signal.SIGKILL)
        for pid in self.children.values():
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        self._relay(0)
        self._flush()


class SetupError(Exception):
    """The namespaces or links could not be made (the supervisor exits 97 with this text)."""


def main(argv: list[str]) -> int:
    what = argv[0] if argv else ""
    if what == "probe":
        print(json.dumps(_probe_here()), flush=True)
        return 0
    if what == "run":
        spec = json.loads(argv[1])
        split = argv.index("--")
        link = LinkSpec(spec["rate"], spec["latency"]) if spec["rate"] else None
        return Supervisor(int(spec["nodes"]), link, argv[split + 1 :]).run()
    raise SystemExit("usage: python -m labkit.launch.netem probe | run SPEC -- AGENT...")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
