"""How a run's one agent process is started: one ``Launcher`` per way, chosen once from the ``RunConfig``.

Each launcher names the process it starts in ``ENTRY``:

=====================  ===================================================================================
``PreforkLauncher``    a fork of the kernel's prefork server (``labkit.launch.forkserver``) that runs
                       ``labkit.launch.agent``'s main, adopted by the kernel; when the server is dead, stale
                       or refuses, the ``LocalLauncher``'s new interpreter, said once (``labkit.launch.prefork``)
``LocalLauncher``      ``python -m labkit.launch.agent ...`` (torchrun), a new interpreter (``LABKIT_PREFORK=0``)
``EmulatedLauncher``   ``python -m labkit.launch.netem_run SPEC -- AGENT...``: one agent per network namespace
``SlurmLauncher``      ``srun --nodes=N --ntasks-per-node=1 ... AGENT...``: one agent per Slurm node
``SshLauncher``        ``python -m labkit.launch.nodes fanout HOST... -- AGENT...``: one ``ssh HOST`` per host
=====================  ===================================================================================

``labkit.launch.group`` asks its launcher, never which one it is, for: the runs folder (shared when
the ranks are on other machines), the channel (a Unix socket, or TCP the nodes reach), the agent's
command and environment, the start, and the process's poll, wait, signals and ``cleanup`` in the
teardown. Every launcher but the prefork one is a ``Popen`` of its command in a session of its own
(``killpg`` reaches what it started, and nothing else), its output in ``agent.log``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from abc import ABC, abstractmethod
from typing import IO, ClassVar

from labkit.launch import prefork
from labkit.launch.nodes import NodeLauncher, channel_host, launcher_for, unlabel
from labkit.launch.options import RunConfig, emulated, multinode
from labkit.launch.rundirs import prune_runs, runs_root
from labkit.wire.channel import ChannelServer

AGENT = ("-m", "labkit.launch.agent")  # torchrun itself (torch.distributed.run's main), quicker to report a failure


def agent_command(args: list[str]) -> list[str]:
    """``python -m labkit.launch.agent ARGS``: the agent every launcher starts (once, or once per node)."""
    return [sys.executable, *AGENT, *args]


class Launcher(ABC):
    """A run's agent process: started once, polled, waited for, signalled, cleaned up after.

    ``proc`` is a ``Popen`` or a ``prefork.AgentProcess`` (what the group uses of either: ``pid``,
    ``poll``, ``wait``, ``returncode``); None until ``start``.
    """

    ENTRY: ClassVar[str] = ""
    remote: ClassVar[bool] = False  # ranks on other machines: a shared runs folder, TCP channel, foreign pids
    prunes_first: ClassVar[bool] = True  # removes old run folders before the run's own is made
    nodes: NodeLauncher | None = None  # several nodes: what each node's agent is given

    def __init__(self, cfg: RunConfig, run_id: str) -> None:
        self.cfg, self.run_id = cfg, run_id
        self.proc: subprocess.Popen | prefork.AgentProcess | None = None
        self.root = ""
        self._log: IO[bytes] | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.run_id})"

    # -- before the start ----------------------------------------------------------------

    def runs_root(self) -> str:
        """Where the run folder goes; old ones are pruned there now, or when the agent is on its way."""
        self.root = runs_root(shared=self.remote)
        if self.prunes_first:
            prune_runs(self.root)
        return self.root

    def rdzv_args(self) -> list[str]:
        """torchrun's rendezvous options: on one node a free port, no race (several: each node's agent
        adds where they meet, ``labkit.launch.nodes.agent_args``)."""
        return ["--rdzv-endpoint=127.0.0.1:0"]

    def channel(self, sock: str, token: str) -> ChannelServer:
        """The kernel's end of the channel: the run folder's Unix socket, reachable from any network namespace."""
        return ChannelServer(sock, token)

    def command(self, agent: list[str]) -> list[str]:
        """The one process this launcher starts, around ``agent`` (``python -m labkit.launch.agent ...``)."""
        return agent

    def env(self, env: dict[str, str], address: str) -> dict[str, str]:
        """The started process's environment; ``address``: where the channel listens."""
        return env

    # -- the process -----------------------------------------------------------------------

    @abstractmethod
    def start(self, command: list[str], env: dict[str, str], log: str) -> subprocess.Popen | prefork.AgentProcess:
        """Start ``command`` with ``env``, its output in ``log``; the process handle (also ``self.proc``)."""

    def poll(self) -> int | None:
        """The exit code, None while it runs (or before it started)."""
        return self.proc.poll() if self.proc is not None else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait(self, seconds: float) -> None:
        """Until it ended or ``seconds`` passed."""
        if self.proc is not None:
            try:
                self.proc.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                pass

    def signal(self, sig: int) -> None:
        """``sig`` to its process group: torchrun passes SIGTERM on to its ranks (srun to every node's task)."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode if self.proc is not None else None

    def cleanup(self) -> None:
        """After the process is gone: what else holds the run somewhere (nothing here)."""
        return None

    def close(self) -> None:
        """Our end of ``agent.log``."""
        if self._log is not None:
            self._log.close()

    # -- reading what it said ------------------------------------------------------------------

    def agent_output(self, text: str) -> str:
        """The agent log as torchrun wrote it (several nodes: without the ``N: `` labels)."""
        return text


class PopenLauncher(Launcher):
    """A local ``Popen`` of the command, in a session of its own, its output in ``agent.log``."""

    def start(self, command: list[str], env: dict[str, str], log: str) -> subprocess.Popen | prefork.AgentProcess:
        self._log = open(log, "wb")
        self.proc = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # our own process group, so killpg reaches torchrun only
        )
        return self.proc


class LocalLauncher(PopenLauncher):
    """One node, a new interpreter: the only Popen of torchrun's agent."""

    ENTRY = "python -m labkit.launch.agent"


class PreforkLauncher(LocalLauncher):
    """One node, the agent forked from the prefork server, which has imported torch already."""

    ENTRY = "a fork of the prefork server (python -m labkit.launch.forkserver) running labkit.launch.agent's main"
    prunes_first = False  # the server prunes, after it has handed this run its agent

    def start(self, command: list[str], env: dict[str, str], log: str) -> subprocess.Popen | prefork.AgentProcess:
        args = command[1 + len(AGENT) :]  # what follows python -m labkit.launch.agent
        agent = prefork.spawn_agent(args, env, log, self.cfg.env, prune=self.root)
        if agent is not None:
            self.proc = agent
            return agent
        prune_runs(self.root)  # no usable server (it said why): a new interpreter, as LocalLauncher
        return super().start(command, env, log)


class NodesLauncher(PopenLauncher):
    """Several nodes: one local process (srun, the ssh fan-out, the netem supervisor) that starts an
    agent on each node; ``nodes`` gives them their environment and rendezvous."""

    remote = True

    def __init__(self, cfg: RunConfig, run_id: str, nodes: NodeLauncher) -> None:
        super().__init__(cfg, run_id)
        self.nodes = self.spec = nodes  # ``spec``: the same, never None here

    def rdzv_args(self) -> list[str]:
        return []

    def channel(self, sock: str, token: str) -> ChannelServer:
        """Ranks on other machines connect back over TCP (HMAC challenge; the token stays in env)."""
        host = channel_host(self.spec.kind, self.spec.hosts, self.cfg.channel_host)
        return ChannelServer(sock, token, tcp_host=host)

    def command(self, agent: list[str]) -> list[str]:
        return self.spec.command(agent)

    def env(self, env: dict[str, str], address: str) -> dict[str, str]:
        return self.spec.env({**env, "LABKIT_SOCKET": address}, self.cfg.timeout)

    def agent_output(self, text: str) -> str:
        return unlabel(text)  # srun --label's "N: " prefixes off (the fan-out and netem_run label alike)


class SlurmLauncher(NodesLauncher):
    """``--slurm``: srun starts one agent per node, in this allocation or one it asks for."""

    ENTRY = "srun --nodes=N --ntasks-per-node=1 --kill-on-bad-exit=1 --label ... python -m labkit.launch.agent ..."

    def cleanup(self) -> None:
        self.spec.cleanup()  # a job or step Slurm still runs for us (srun killed before it could end it)


class SshLauncher(NodesLauncher):
    """``--hosts``: a local fan-out starts ``ssh HOST python -m labkit.launch.nodes remote ...`` per host."""

    ENTRY = "python -m labkit.launch.nodes fanout HOST... -- python -m labkit.launch.agent ..."


class EmulatedLauncher(NodesLauncher):
    """``--nodes N``: the netem supervisor starts one agent per network namespace, on this machine."""

    ENTRY = "python -m labkit.launch.netem_run SPEC -- python -m labkit.launch.agent ..."
    remote = False  # a local run folder, the Unix socket (reachable from any namespace), local pids

    def channel(self, sock: str, token: str) -> ChannelServer:
        return Launcher.channel(self, sock, token)


BY_KIND: dict[str, type[NodesLauncher]] = {"slurm": SlurmLauncher, "hosts": SshLauncher, "emulated": EmulatedLauncher}


def choose(cfg: RunConfig, run_id: str) -> Launcher:
    """The one place that picks how a run's agent starts, from its config."""
    if multinode(cfg) or emulated(cfg):
        nodes = launcher_for(cfg.nnodes or 1, cfg.slurm, cfg.slurm_args, cfg.hosts, run_id, cfg.link)
        return BY_KIND[nodes.kind](cfg, run_id, nodes)
    return PreforkLauncher(cfg, run_id) if prefork.enabled() else LocalLauncher(cfg, run_id)
