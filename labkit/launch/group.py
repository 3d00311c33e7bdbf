"""The rank group: one torchrun agent and its ranks, started, supervised and torn down.

    group = RankGroup(cfg, Job.serve())      # or Job.make(code, ...) for a one-shot run
    run = group.start()                      # the run folder, the channel, then torchrun
    outcome = group.supervise(run, check, view)   # poll -> ingest -> read logs -> update view
    group.end(run)                           # nothing of it is left

Both ways of running cells use it: ``labkit.launch.cold`` (one torchrun per cell) and
``labkit.launch.warm`` (one torchrun, many cells). There is one place that starts the agent and
one supervise loop; the callers differ only in when they stop waiting (``check``). How the agent
starts (forked from the prefork server, a new interpreter, srun, ssh, emulated nodes) is the
group's ``Launcher`` (``labkit.launch.launchers``), chosen once from the config: the group calls
it the same way whichever it is.

The loop is single-threaded on purpose: the cell's main thread reads the channel, tails the
rank logs and updates the widgets, so output always lands in the launching cell (ipykernel
ties output from threads to other cells), and an interrupt arrives here as KeyboardInterrupt.
Every wait is bounded.

Teardown, whatever happened: SIGTERM to torchrun's process group (it passes the signal to the
ranks), SIGKILL after the grace period, the launcher's ``cleanup`` (a Slurm job left: scancel),
then every process that carries this run's id in its environment is killed: ranks live in
process groups of their own, and their children might too.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from labkit import log
from labkit.i18n import get_lang, t
from labkit.launch import launchers, prefork
from labkit.launch.logs import tail_file
from labkit.launch.nodes import NodeLauncher
from labkit.launch.options import RunConfig, check_picklable, multinode
from labkit.launch.psfind import PROC, with_env
from labkit.launch.run import Run
from labkit.ranks.profiling import profile_dir
from labkit.wire.channel import ChannelServer
from labkit.wire.errors import OptionError
from labkit.wire.job import FUNCTION_FILE, JobSpec
from labkit.wire.protocol import Msg, Outcome, message
from labkit.wire.setting import Backend

# environment that belongs to an outer launcher (a Slurm job, another torchrun) and would
# confuse ours: torchrun sets the ones it needs for each rank.
SCRUB_PREFIXES = ("SLURM_", "TORCHELASTIC_", "PMI_", "OMPI_")
SCRUB_NAMES = {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"}
POLL = 0.05  # seconds the loop waits on the channel per turn
logger = log.get(__name__)


@dataclass
class Job:
    """What the ranks execute, checked and serialized before anything starts.

    ``mode``: "code" (a cell), "path" (a .py file), "function" (a pickled callable), or
    "serve" (warm ranks: cells come later, over the channel).
    """

    mode: str
    source: str | None = None
    path: str | None = None
    payload: bytes | None = None
    vars_blob: bytes | None = None

    @classmethod
    def serve(cls) -> Job:
        return cls("serve")

    @classmethod
    def make(cls, target: Any, vars: dict[str, Any], args: tuple, kwargs: dict) -> Job:
        import cloudpickle

        vars_blob = check_picklable(vars) if vars else None
        if callable(target):
            try:
                payload = cloudpickle.dumps((target, tuple(args), dict(kwargs)))
            except Exception as exc:
                name = getattr(target, "__name__", "function")
                raise OptionError(t("launch.opt.vars.pickle", name=name, type="function", error=exc)) from None
            return cls("function", payload=payload, vars_blob=vars_blob)
        if not isinstance(target, str):
            raise OptionError(t("launch.bad_target", type=type(target).__name__))
        if target.endswith(".py") and "\n" not in target and os.path.isfile(target):
            with open(target) as f:
                source = f.read()
            compile(source, target, "exec")  # a SyntaxError here names the file and line
            return cls("path", source, os.path.abspath(target), vars_blob=vars_blob)
        compile(target, "<cell>", "exec")  # a SyntaxError names the cell line, before any spawn
        return cls("code", target, vars_blob=vars_blob)

    def write(self, run_dir: str, cfg: RunConfig) -> None:
        """``job.json`` (a ``JobSpec``) and the files it names, in the run folder, for the bootstrap to read."""
        source_file = vars_file = None
        if self.source is not None:
            source_file = self.path or os.path.join(run_dir, "cell.py")
            if self.path is None:
                with open(source_file, "w") as f:
                    f.write(self.source)
        if self.payload is not None:
            with open(os.path.join(run_dir, FUNCTION_FILE), "wb") as f:
                f.write(self.payload)
        if self.vars_blob is not None:
            vars_file = "vars.pkl"
            with open(os.path.join(run_dir, vars_file), "wb") as f:
                f.write(self.vars_blob)
        spec = JobSpec(self.mode, cfg.backend, cfg.pg_timeout, cfg.sample_interval, source_file, vars_file)
        spec.write(run_dir)


class RankGroup:
    """One torchrun agent and its ranks. ``end()`` may be called twice, and at exit."""

    def __init__(self, cfg: RunConfig, job: Job) -> None:
        self.cfg = cfg
        self.job = job
        self.run_id = "run-" + time.strftime("%H%M%S-") + secrets.token_hex(3)
        self.run_dir = ""
        self.server: ChannelServer | None = None
        self.pids: dict[int, int] = {}  # rank -> pid, once every rank said hello
        self.stopped_by_us = False  # we ended a live agent: its stops are ours, not a failure's
        self.ended = False
        self.launcher = launchers.choose(cfg, self.run_id)  # how the agent starts (labkit.launch.launchers)
        self.nodes: NodeLauncher | None = self.launcher.nodes  # several nodes: what each node's agent gets

    @property
    def proc(self) -> subprocess.Popen | prefork.AgentProcess | None:
        """The agent process (None before it started)."""
        return self.launcher.proc

    # -- start ------------------------------------------------------------------------

    def start(self) -> Run:
        """The run folder, the channel and torchrun; returns the ``Run`` that its messages fill."""
        root = self.launcher.runs_root()
        self.run_dir = os.path.join(root, self.run_id)
        os.mkdir(self.run_dir, 0o700)
        self.job.write(self.run_dir, self.cfg)
        sock, token = os.path.join(self.run_dir, "ch.sock"), secrets.token_hex(32)
        run = self.new_run(self.run_id)
        env = rank_env(self.cfg, self.run_id, self.run_dir, sock, token)
        self.server = self.launcher.channel(sock, token)
        env = self.launcher.env(env, self.server.address or sock)
        command = self.launcher.command(self.command())
        agent_log = os.path.join(self.run_dir, "agent.log")
        logger.debug("%s: starting %s in %s", self.run_id, " ".join(command), self.run_dir)
        try:
            self.launcher.start(command, env, agent_log)
        except BaseException:
            self.end(run)
            raise
        return run

    def command(self) -> list[str]:
        """torchrun's command line, ``python -m labkit.launch.agent ...``; the launcher wraps it (srun, ssh, netem)."""
        return launchers.agent_command(
            [
                f"--nnodes={self.cfg.nnodes or 1}",
                f"--nproc-per-node={self.cfg.nproc}",
                "--rdzv-backend=c10d",
                *self.launcher.rdzv_args(),
                f"--rdzv-id={self.run_id}",
                "--max-restarts=0",
                "--monitor-interval=0.02",  # how soon torchrun sees its ranks end (a check costs microseconds)
                # torchrun's own files (the ranks' error files) go in the run folder, pruned with it; by default
                # each agent made a /tmp/torchelastic_* folder that nothing removed, one per cold cell
                f"--log-dir={os.path.join(self.run_dir, 'torchelastic')}",
                *rank_entry(self.cfg.start_method),
            ]
        )

    def new_run(self, run_id: str) -> Run:
        """A ``Run`` of this group's ranks (a warm cell gets one each, its pids known already)."""
        run = Run(run_id, (self.cfg.nproc or 1) * (self.cfg.nnodes or 1), self.cfg.backend, self.run_dir)
        for r, pid in self.pids.items():
            run.ranks[r].pid = pid
        return run

    # -- supervise --------------------------------------------------------------------

    def supervise(
        self,
        run: Run,
        check: Callable[[], Outcome | None],
        view: Any = None,
        route: Callable[[dict[str, Any]], None] | None = None,
    ) -> Outcome:
        """The one loop: read the channel, tail the logs, update the view, until ``check`` says why to stop.

        ``route`` takes each message (default: ``run.ingest``); a warm cell drops late answers there.
        """
        route = route or run.ingest
        while True:
            if self.agent_running() and all(s.pid and not s.connected for s in run.ranks.values()):
                self.launcher.wait(POLL)  # every rank came and went: torchrun's exit is next, see it at once
            for msg in self.server.poll(0 if self.launcher.poll() is not None else POLL):
                route(msg)
            run.poll_logs()
            if view is not None:
                view.update(run)
            outcome = check()
            if outcome is not None:
                return outcome

    def agent_running(self) -> bool:
        return self.launcher.running()

    def alive(self) -> bool:
        """torchrun still runs and every rank is connected (as of the last poll)."""
        return (
            not self.ended
            and self.agent_running()
            and len(self.server.connected_ranks()) == len(self.pids)
            and bool(self.pids)
        )

    def send(self, rank: int, kind: Msg, **payload: Any) -> None:
        self.server.send(rank, message(kind, **payload))

    def poll(self) -> list[dict[str, Any]]:
        """What arrived, without waiting (between warm cells)."""
        return [] if self.ended else self.server.poll(0)

    def signal_ranks(self, ranks: list[int], sig: int) -> None:
        for r in ranks:
            if r in self.pids and self.here(self.pids[r]):
                kill(self.pids[r], sig)

    def dump_stacks(self, pids: list[int]) -> None:
        """Ask hung ranks where they are: faulthandler prints every thread's stack to stderr."""
        pids = [pid for pid in pids if self.here(pid)]
        for pid in pids:
            kill(pid, signal.SIGUSR1)
        if pids:
            time.sleep(0.5)

    def here(self, pid: int) -> bool:
        """Is ``pid`` a process of this run on this machine? Ranks on other nodes have pids of their
        own there (srun and the channel's lifeline end them); here the same number is someone else."""
        return not self.launcher.remote or pid in find_run_processes(self.run_id)

    def wait_agent(self, seconds: float) -> None:
        self.launcher.wait(seconds)

    def write_file(self, name: str, data: bytes) -> str:
        """A file in the run folder, for the ranks to read (a warm cell's ``--vars``); returns ``name``."""
        with open(os.path.join(self.run_dir, name), "wb") as f:
            f.write(data)
        return name

    def remove_file(self, name: str) -> None:
        try:
            os.unlink(os.path.join(self.run_dir, name))
        except OSError:
            pass

    def agent_log(self, lines: int = 400) -> str:
        """The end of torchrun's own output (its failure report names ranks and exit codes)."""
        return self.launcher.agent_output(tail_file(os.path.join(self.run_dir, "agent.log"), lines))

    def node_log(self, lines: int = 400) -> str:
        """The agents' output as srun labelled it (``N: `` = node rank N), or the ssh fan-out's."""
        return tail_file(os.path.join(self.run_dir, "agent.log"), lines)

    # -- tear down ----------------------------------------------------------------------

    def stop(self, seconds: float) -> None:
        """The clean way out (warm ranks): every rank exits 0, then torchrun does; then the sweep."""
        if self.ended:
            return
        for r in self.pids:
            self.send(r, Msg.STOP)
        self.wait_agent(seconds)
        self.end(None)

    def end(self, run: Run | None) -> None:
        """Kill whatever is left of the group: no orphan, no socket. What the ranks sent goes to ``run``."""
        if self.ended:
            return
        self.ended = True
        run = run or self.new_run(self.run_id)
        with sigint_deferred():  # a second Ctrl-C must not abandon the teardown half-way
            self._teardown(run)
            self.launcher.close()
            run.agent_exit_code = self.launcher.returncode

    def _teardown(self, run: Run) -> None:
        agent, server = self.launcher, self.server
        if server is None:
            return
        self._drain(run, 0.0)
        if agent.running():
            # we are ending a live run (interrupt, stop, timeout): SIGTERM reaches every rank
            # through torchrun, and closing the channel ends any rank that lingers
            self.stopped_by_us = True
            agent.signal(signal.SIGTERM)
            agent.wait(min(1.0, self.cfg.grace))
            self._drain(run, 0.0)
            server.close()
            agent.wait(self.cfg.grace)
            if agent.running():
                agent.signal(signal.SIGKILL)
                agent.wait(2.0)
        else:
            # torchrun is gone by itself: what the ranks sent is still in the socket buffers
            self._drain(run, 2.0)
        run.rejected_clients = list(server.rejected)
        server.close()  # the lifeline: any rank still alive kills itself now
        agent.cleanup()  # what still holds the run elsewhere (a Slurm job or step: srun killed before it ended it)
        self._sweep(run)
        run.flush_logs()

    def _drain(self, run: Run, seconds: float) -> None:
        """Read what the ranks have sent, until they all closed or ``seconds`` passed."""
        end = time.time() + seconds
        for msg in self.server.poll(0):
            run.ingest(msg)
        while self.server.connected_ranks() and time.time() < end:
            for msg in self.server.poll(POLL):
                run.ingest(msg)

    def _sweep(self, run: Run) -> None:
        """Kill whatever of this run is left: rank process groups, then anything with our run id."""
        pids = {s.pid for s in run.ranks.values() if s.pid} | set(self.pids.values())
        for pid in filter(self.here, pids):
            killpg(pid, signal.SIGKILL)
        left = find_run_processes(self.run_id)
        for pid in left:
            kill(pid, signal.SIGKILL)
        deadline = time.time() + 3.0
        while left and time.time() < deadline:
            time.sleep(0.05)
            left = find_run_processes(self.run_id)
        run.unkillable = left


# -- the run folder and the ranks' environment ----------------------------------------------


def rank_entry(start_method: str) -> list[str]:
    """How torchrun starts each rank: forked from its agent (torch already imported), or a new
    interpreter per rank (``spawn``: every rank imports torch again, seconds each)."""
    if start_method == "fork":
        # its file, found without importing it here: importing it imports torch (1.3 s), which the
        # launching process (a kernel before its first rank cell, the grader's judge) has no use for
        spec = importlib.util.find_spec("labkit.ranks.bootstrap")
        assert spec is not None and spec.origin is not None
        return ["--start-method=fork", "--run-path", os.path.abspath(spec.origin)]
    return ["-m", "labkit.ranks.bootstrap"]


def rank_env(cfg: RunConfig, run_id: str, run_dir: str, sock: str, token: str) -> dict[str, str]:
    # srun inside an allocation finds it through SLURM_JOB_ID and the rest: keep them for srun
    scrub = tuple(p for p in SCRUB_PREFIXES if not (cfg.slurm and p == "SLURM_"))
    env = {k: v for k, v in os.environ.items() if k not in SCRUB_NAMES and not k.startswith(scrub)}
    env.update(
        LABKIT_RUN_ID=run_id,  # the marker the cleanup sweep looks for
        LABKIT_RUN_DIR=run_dir,
        LABKIT_SOCKET=sock,
        LABKIT_TOKEN=token,
        LABKIT_BACKEND=cfg.backend,
        LABKIT_LANG=get_lang(),  # the ranks speak the kernel's language, %labkit_lang's included
        PYTHONUNBUFFERED="1",
        TORCH_ELASTIC_SHUTDOWN_TIMEOUT=str(int(cfg.grace)),
    )
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // max(1, cfg.nproc or 1))))
    if cfg.backend == Backend.GLOO and not multinode(cfg):
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # single node: keep gloo's data sockets on loopback
    env.pop("LABKIT_REPORT_DIR", None)
    if cfg.pin:  # emulated nodes share this machine's cores: number them by rank, real ones by local rank
        env["LABKIT_PIN"] = "rank" if (cfg.nodes or 1) > 1 else "local"
    if cfg.profile:  # beside the notebook (the kernel's working folder), not in the run folder that is pruned
        env["LABKIT_PROFILE_DIR"] = profile_dir(run_id)
    env.update(cfg.env)
    return env


# -- processes ------------------------------------------------------------------------------


def find_run_processes(run_id: str | None = None) -> list[int]:
    """PIDs of our processes whose environment carries LABKIT_RUN_ID (= run_id, or any)."""
    marker = f"LABKIT_RUN_ID={run_id}".encode() if run_id else b"LABKIT_RUN_ID=run-"
    me, uid, found = os.getpid(), os.getuid(), []
    if not os.path.isdir(PROC):  # not Linux: psutil asks the system
        return with_env(marker, exact=bool(run_id))
    for name in os.listdir(PROC):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if os.stat(f"{PROC}/{name}").st_uid != uid:
                continue
            with open(f"{PROC}/{name}/environ", "rb") as f:
                env = f.read()
            with open(f"{PROC}/{name}/stat", "rb") as f:
                if f.read().split(b") ")[-1][:1] == b"Z":
                    continue  # a zombie is already dead; its parent will reap it
        except OSError:
            continue
        if any(item == marker or (not run_id and item.startswith(marker)) for item in env.split(b"\0")):
            found.append(int(name))
    return found


def cleanup() -> list[int]:
    """Kill every labkit rank of this user that is still alive (from any run); returns their PIDs."""
    pids = find_run_processes(None)
    for pid in pids:
        kill(pid, signal.SIGKILL)
    return pids


def killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class sigint_deferred:
    """Hold SIGINT during cleanup (main thread only; elsewhere signals do not arrive anyway)."""

    def __enter__(self) -> None:
        self.previous = None
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, signal.SIG_IGN)

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
