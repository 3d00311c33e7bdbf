"""Ranks on several machines: the commands that start one torchrun agent per node, and what each node does.

    %%torchrun --nnodes 2 --slurm                 # inside an allocation, or srun asks for one
    %%torchrun --nnodes 2 --slurm --slurm-args "-p gpu -t 10"
    %%torchrun --hosts a,b                        # lab machines without a scheduler: ssh

Existing engines only: ``srun --ntasks-per-node=1`` (or one ``ssh`` per host) starts
``python -m labkit.launch.agent`` (torchrun) on every node; the agents meet in torchrun's c10d
rendezvous on the first node, and the ranks connect back to the kernel over the TCP
channel (``labkit.wire.channel``: HMAC challenge, the token never on a command line).
``labkit.launch.launchers`` (``SlurmLauncher``, ``SshLauncher``, ``EmulatedLauncher``) starts the one
process this module's command is (srun, the ssh fan-out below, or the netem supervisor), and
``labkit.launch.group`` supervises it and tears it down; ``cleanup`` adds ``scancel``.

Kernel side: ``NodeLauncher`` (command, environment, cleanup, what a failure says).
Node side: ``agent_args`` (the rendezvous endpoint, whether this node hosts it), called by
``labkit.launch.agent`` before torchrun parses its arguments. ``python -m labkit.launch.nodes fanout|remote``
is the ssh path: one local process that starts an ssh per host and reads the environment
to each remote agent through ssh's stdin, which stays open as the remote agent's lifeline.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from labkit.i18n import t
from labkit.wire import env as envvars
from labkit.wire.channel import parse_tcp, tcp_address
from labkit.wire.protocol import Msg
from labkit.wire.records import RunRecord, first_message

ENV_KEYS = ("LABKIT_", "PYTHON", "OMP_NUM_THREADS", "TORCH_", "NCCL_", "GLOO_", "CUDA_VISIBLE_DEVICES", "PATH")
SSH = ("ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10")  # never prompts: a missing key fails at once
RDZV_TIMEOUT = 300.0  # seconds the agents wait for every node to join, without a run timeout


@dataclass
class NodeLauncher:
    """How the kernel starts the agents of ``nnodes`` nodes: ``kind`` is "slurm", "hosts" or "emulated"
    (network namespaces on this machine, ``labkit.launch.netem``; ``link``: the link between them)."""

    kind: str
    nnodes: int
    run_id: str
    slurm_args: str = ""
    hosts: tuple[str, ...] = ()
    port: int = 0  # the rendezvous port on the first node
    link: str | None = None

    @property
    def local(self) -> bool:
        """Every node on this machine (emulated): the Unix channel, a local run folder, local pids."""
        return self.kind == "emulated"

    def command(self, agent: list[str]) -> list[str]:
        """The one process that starts every node's agent (``agent``: ``python -m labkit.launch.agent ...``)."""
        if self.kind == "slurm":
            return self.srun() + agent
        if self.kind == "emulated":
            from labkit.launch.linkspec import parse_link
            from labkit.launch.netem_run import command

            return command(self.nnodes, parse_link(self.link), agent)
        return [sys.executable, "-m", "labkit.launch.nodes", "fanout", *self.hosts, "--", *agent]

    def srun(self) -> list[str]:
        cmd = ["srun", f"--job-name={self.run_id}", f"--nodes={self.nnodes}", "--ntasks-per-node=1"]
        cmd += ["--kill-on-bad-exit=1", "--label", "--export=ALL", "--unbuffered"]
        if os.environ.get("SLURM_STEP_ID") and self.in_allocation():
            cmd.append("--overlap")  # the kernel itself runs in a step (batchspawner): share its CPUs
        return cmd + shlex.split(self.slurm_args)

    def in_allocation(self) -> bool:
        """Does the kernel's own Slurm job have the nodes? If not (a batchspawner server is a 1-node
        job), srun asks for a new allocation of ``nnodes``, as it does outside any job."""
        nodes = os.environ.get("SLURM_JOB_NUM_NODES") or os.environ.get("SLURM_NNODES") or "0"
        return bool(os.environ.get("SLURM_JOB_ID")) and int(nodes) >= self.nnodes

    def env(self, env: dict[str, str], timeout: float | None) -> dict[str, str]:
        """The agents' environment (srun --export=ALL, or the ssh fan-out, passes it on)."""
        env = dict(env)
        if self.kind == "slurm" and not self.in_allocation():  # a job of its own, not a step of the kernel's
            env = {k: v for k, v in env.items() if not k.startswith(("SLURM_", "SRUN_")) or k == "SLURM_CONF"}
        rdzv = min(RDZV_TIMEOUT, timeout) if timeout else RDZV_TIMEOUT
        env.update(
            LABKIT_NODES=self.kind,
            LABKIT_NNODES=str(self.nnodes),
            LABKIT_RDZV_PORT=str(self.port),
            LABKIT_RDZV_TIMEOUT=str(int(envvars.get("LABKIT_RDZV_TIMEOUT", rdzv))),  # type: ignore[arg-type]
        )
        if self.kind == "hosts":
            env["LABKIT_HOSTS"] = ",".join(self.hosts)
        if env.get("LABKIT_SOCKET"):
            env["LABKIT_SOCKET"] = self.reachable(env["LABKIT_SOCKET"])
        return env

    def reachable(self, address: str) -> str:
        """The channel's address as the nodes dial it: a wildcard listener (``--channel-host 0.0.0.0``,
        asked for explicitly) is reached at the address that faces the nodes."""
        tcp = parse_tcp(address)
        if tcp is None or tcp[0] not in ("0.0.0.0", "::"):
            return address
        return tcp_address(channel_host(self.kind, self.hosts, None), tcp[1])

    def cleanup(self) -> list[str]:
        """After srun is gone: cancel the job or step of this run if Slurm still has it; what was cancelled."""
        if self.kind != "slurm" or shutil.which("squeue") is None:
            return []
        found = []
        me = ["-u", str(os.getuid())]  # our own jobs and steps only
        for args in (["squeue", "-h", *me, "-o", "%i %j"], ["squeue", "-h", "-s", *me, "-o", "%i %j"]):
            try:
                out = subprocess.run(args, capture_output=True, text=True, timeout=10).stdout
            except (OSError, subprocess.TimeoutExpired):
                continue
            found += [line.split()[0] for line in out.splitlines() if line.split()[1:] == [self.run_id]]
        if found:
            subprocess.run(["scancel", *found], capture_output=True, timeout=10)
        return found


def launcher_for(
    nnodes: int, slurm: bool, slurm_args: str, hosts: tuple[str, ...], run_id: str, link: str | None = None
) -> NodeLauncher:
    """``hosts`` empty and not ``slurm``: emulated nodes (every port is free in their fresh namespaces)."""
    kind = "slurm" if slurm else "hosts" if hosts else "emulated"
    port = 29400 if kind == "emulated" else int(envvars.get("LABKIT_RDZV_PORT") or free_port())
    return NodeLauncher(kind, nnodes, run_id, slurm_args, tuple(hosts), port, link)


def free_port() -> int:
    """A port free here now; on a cluster's first node it is free too unless something else took it
    (set LABKIT_RDZV_PORT to choose one)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


# -- where the kernel listens -----------------------------------------------------------


def channel_host(kind: str, hosts: tuple[str, ...], chosen: str | None) -> str:
    """The address the ranks connect back to: ``chosen``, else the one this machine uses to reach the nodes."""
    if chosen:
        return chosen
    if kind == "hosts" and hosts:
        return route_to(hosts[0])
    first = first_slurm_node()
    if first:
        return route_to(node_addr(first))
    controller = slurm_controller()
    return route_to(controller) if controller else own_address()


def route_to(host: str) -> str:
    """The local address of the interface that reaches ``host`` (a UDP connect sends nothing)."""
    try:
        family, _, _, _, addr = socket.getaddrinfo(host, 9, type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(addr)
            return s.getsockname()[0]
    except OSError:
        return own_address()


def own_address() -> str:
    """This machine's first address (what ``hostname -I`` prints first); loopback if it has no other."""
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            return info[4][0]
    except OSError:
        pass
    return "127.0.0.1"


def scontrol(*args: str) -> str:
    try:
        done = subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def first_slurm_node(nodelist: str | None = None) -> str:
    """The first node of a node list (default: this allocation's); "" outside an allocation."""
    nodelist = nodelist or os.environ.get("SLURM_JOB_NODELIST", "")
    names = scontrol("show", "hostnames", nodelist).split() if nodelist else []
    return names[0] if names else ""


def node_addr(node: str) -> str:
    """The address Slurm itself uses for ``node`` (NodeAddr): the name does not resolve everywhere."""
    m = re.search(r"NodeAddr=(\S+)", scontrol("show", "node", "-o", node))
    return m.group(1) if m else node


def slurm_controller() -> str:
    """SlurmctldHost's address (``host(addr)``), to find the interface that faces the cluster."""
    m = re.search(r"SlurmctldHost\[0\]\s*=\s*([^\s(]+)(?:\(([^)]+)\))?", scontrol("show", "config"))
    return (m.group(2) or m.group(1)) if m else ""


# -- node side: called by labkit.launch.agent on every node ----------------------------------


def agent_args() -> list[str]:
    """torchrun options this node adds: where the nodes meet, and whether this node hosts the store.

    Also sets ``LABKIT_NODE`` (the node's name, for the dashboard's ``node/local rank``).
    """
    if envvars.get("LABKIT_NODES") == "slurm":
        node_rank = int(os.environ.get("SLURM_PROCID", "0"))  # one task per node: the task is the node
        head = node_addr(first_slurm_node(os.environ.get("SLURM_STEP_NODELIST") or None))
        name = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    else:
        hosts = envvars.require("LABKIT_HOSTS").split(",")
        node_rank = int(envvars.require("LABKIT_NODE_RANK"))
        head, name = hosts[0], hosts[node_rank]
    local = []
    if envvars.get("LABKIT_NODES") == "emulated":  # its address, not the machine's name (outside the namespace)
        name, local = envvars.require("LABKIT_NODE"), [f"--local-addr={hosts[node_rank]}"]
    os.environ["LABKIT_NODE"] = name
    port = envvars.require("LABKIT_RDZV_PORT")
    timeout = envvars.get("LABKIT_RDZV_TIMEOUT", str(int(RDZV_TIMEOUT)))
    print(f"labkit: node {name} (node rank {node_rank}) agent started", file=sys.stderr, flush=True)
    return [
        f"--rdzv-endpoint={head}:{port}",
        f"--rdzv-conf=is_host={int(node_rank == 0)},join_timeout={timeout}",
        *local,
    ]


# -- the agents' log, read after a failure ------------------------------------------------


def unlabel(text: str) -> str:
    """srun --label's ``N: `` prefixes removed: torchrun's own report, as ``labkit.launch.diagnose`` reads it."""
    return re.sub(r"^ *\d+: ", "", text, flags=re.M)


def node_names(text: str) -> dict[int, str]:
    """srun task (= node rank) -> node name, from the line each agent prints when it starts."""
    return {int(t): n for t, n in re.findall(r"^ *(\d+): labkit: node (\S+) \(node rank", text, re.M)}


def node_report(text: str, nnodes: int) -> list[str]:
    """What the log says about nodes: srun's errors, and nodes that never joined the rendezvous."""
    lines = [m for m in re.findall(r"^srun: error: .*$", text, re.M)]
    lines += re.findall(r"^labkit: node \S+ exited .*$", text, re.M)
    started = node_names(text) or {
        int(r): n for n, r in re.findall(r"^labkit: node (\S+) \(node rank (\d+)", text, re.M)
    }
    if "RendezvousTimeoutError" in text:
        missing = sorted(set(range(nnodes)) - set(started))
        names = ", ".join(sorted(started.values())) or "-"
        lines.append(t("launch.nodes.rdzv", started=names, missing=", ".join(map(str, missing)) or "-"))
    return lines


def failed_nodes(text: str) -> tuple[str, ...]:
    """The nodes whose agent ended badly, in the order srun (or the ssh fan-out) reported them.

    srun prints a line as it sees each task end ("srun: error: n2: task 1: Killed"), so the first
    node named is the one that failed first; the others' agents most often exited because of it.
    """
    found = re.findall(r"^srun: error: (\S+): task \d+: |^labkit: node (\S+) exited ", text, re.M)
    names = [a or b for a, b in found]
    return tuple(dict.fromkeys(names))


def failure_note(run: RunRecord, rank: int | None, text: str, nnodes: int, said: str = "") -> str:
    """Where the failed rank ran (``node/local rank``), and what srun or the nodes said: the note a
    multi-node error gets under ``labkit.launch.diagnose``'s wording. ``text``: the agents' labelled log;
    ``said``: the error's message (a line it already shows is not repeated)."""
    lines = []
    hello = first_message(run, rank, Msg.HELLO) if rank is not None else None
    if hello and hello.get("node"):
        lines.append(t("launch.nodes.ran_on", rank=rank, node=hello["node"], local=hello.get("local_rank")))
    lines += [line for line in node_report(text, nnodes) if line not in said]
    return "\n".join(lines)


# -- the ssh fan-out (kernel side) and the remote agent (node side) -------------------------


def fanout(hosts: list[str], agent: list[str]) -> int:
    """One ``ssh HOST python -m labkit.launch.nodes remote`` per host; the environment goes through stdin.

    Stays in the foreground: the first node that fails ends the others (closing their stdin
    ends the remote agent), like srun --kill-on-bad-exit; exits with that node's code.
    """
    env = {k: v for k, v in os.environ.items() if k.startswith(ENV_KEYS)}
    ssh = shlex.split(envvars.get("LABKIT_SSH", " ".join(SSH)) or "")
    cwd = os.getcwd()
    procs = []
    for i, host in enumerate(hosts):
        # the same Python and labkit there (a shared home or the same image); PYTHONPATH is no secret
        where = ["env", f"PYTHONPATH={os.environ['PYTHONPATH']}"] if os.environ.get("PYTHONPATH") else []
        remote = [*where, sys.executable, "-m", "labkit.launch.nodes", "remote", cwd, *agent]
        cmd = [*ssh, host, shlex.join(remote)] if ssh else remote  # LABKIT_SSH="": the same agent, here
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, start_new_session=True)
        proc.stdin.write((json.dumps({**env, "LABKIT_NODE_RANK": str(i)}) + "\n").encode())
        proc.stdin.flush()
        procs.append(proc)
    signal.signal(signal.SIGTERM, lambda *_: stop_all(procs))
    code = 0
    while code == 0 and any(p.poll() is None for p in procs):
        time.sleep(0.1)
        for host, p in zip(hosts, procs):
            if p.poll() not in (None, 0):
                print(f"labkit: node {host} exited with code {p.returncode}", file=sys.stderr, flush=True)
                code = p.returncode
    stop_all(procs)
    return code or max((p.returncode or 0 for p in procs), default=0)


def stop_all(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        try:
            p.stdin.close()  # the remote agent's lifeline
        except OSError:
            pass
    deadline = time.monotonic() + 10
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def remote(cwd: str, agent: list[str]) -> int:
    """On a node: read the environment (one JSON line) from stdin, run the agent, end it when stdin closes."""
    env = json.loads(sys.stdin.readline())
    os.chdir(cwd)
    proc = subprocess.Popen(agent, env={**os.environ, **env}, start_new_session=True, stdin=subprocess.DEVNULL)

    def lifeline() -> None:
        sys.stdin.read()  # returns when the kernel's side (ssh, or the fan-out) goes away
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            time.sleep(float(env.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "5")))
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    threading.Thread(target=lifeline, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: os.killpg(proc.pid, signal.SIGTERM))
    return proc.wait()


def main(argv: list[str]) -> int:
    what, rest = argv[0], argv[1:]
    if what == "fanout":
        split = rest.index("--")
        return fanout(rest[:split], rest[split + 1 :])
    if what == "remote":
        return remote(rest[0], rest[1:])
    raise SystemExit("usage: python -m labkit.launch.nodes fanout HOST... -- AGENT... | remote CWD AGENT...")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
