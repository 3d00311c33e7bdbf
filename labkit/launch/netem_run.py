"""The supervisor of emulated nodes: ``python -m labkit.launch.netem_run SPEC -- AGENT...``.

It runs in the hub namespace that it enters first (``labkit.launch.netem``: what the namespaces,
links and nodes are, and why nothing outlives the run): it makes each node, starts the agent
in it, relays and labels the agents' output, and stops every node when one fails.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import time
from dataclasses import asdict
from typing import Any

from labkit.launch.linkspec import MTU, LinkSpec
from labkit.launch.netem import (
    CLONE_NEWNET,
    NODE_IF,
    PR_SET_PDEATHSIG,
    VETH_LATENCY,
    Emulation,
    address,
    enter_namespaces,
    libc,
    netns_id,
    run_ip,
    shape_commands,
    unshare,
)
from labkit.wire import env as envvars


def command(nodes: int, link: LinkSpec | None, agent: list[str]) -> list[str]:
    """The kernel's one process: the supervisor, which starts ``agent`` once per node."""
    spec = {"nodes": nodes, "rate": link.rate if link else 0.0, "latency": link.latency if link else 0.0}
    return [sys.executable, "-m", "labkit.launch.netem_run", json.dumps(spec), "--", *agent]


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
        error = run_ip(cmd)
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
                libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the supervisor gone: this node goes
                for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                    signal.signal(sig, signal.SIG_DFL)
                unshare(CLONE_NEWNET)
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
        if run_ip(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1us"]):
            return False
        run_ip(["tc", "qdisc", "del", "dev", "lo", "root"])
        return True

    def _link_node(self, i: int) -> None:
        """The node's veth pair: ``eth0`` into its namespace, ``h<i>`` on the bridge, shaped toward the node."""
        pid, hub = self.children[i], f"h{i}"
        self._must(["ip", "link", "add", hub, "type", "veth", "peer", "name", NODE_IF, "netns", str(pid)])
        self._must(["ip", "link", "set", hub, "mtu", str(MTU), "master", "br0", "up"])
        if self.link is not None:
            for cmd in shape_commands(
                hub, self.link, netem=False
            ):  # the delay once per direction: on the sender's side
                self._must(cmd)

    def _configure_node(self, i: int) -> str:
        """In the node's namespace: loopback up, ``eth0`` addressed and shaped (its uplink)."""
        cmds = [
            ["ip", "link", "set", "lo", "up"],
            ["ip", "link", "set", NODE_IF, "mtu", str(MTU), "up"],
            ["ip", "addr", "add", f"{address(i)}/24", "dev", NODE_IF],
        ]
        if self.link is not None:
            cmds += shape_commands(NODE_IF, self.link, self.netem)
        for cmd in cmds:
            error = run_ip(cmd)
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
        run_dir = envvars.get("LABKIT_RUN_DIR")
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
    if len(argv) < 3 or argv[1] != "--":
        raise SystemExit("usage: python -m labkit.launch.netem_run SPEC -- AGENT...")
    spec = json.loads(argv[0])
    link = LinkSpec(spec["rate"], spec["latency"]) if spec["rate"] else None
    return Supervisor(int(spec["nodes"]), link, argv[2:]).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
