"""Run options, and every check that can be made before a process is spawned."""

from __future__ import annotations

import difflib
import os
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from labkit.i18n import t
from labkit.wire import env as envvars
from labkit.wire.errors import OptionError

BACKENDS = ("auto", "gloo", "nccl")
DISPLAYS = ("auto", "widgets", "text", "none")
RANK_MEMORY = 400 * 2**20  # a CPU rank with torch imported: ~300 MiB RSS, plus a small model


@dataclass
class RunConfig:
    """How to run: the options of ``%%torchrun`` and ``labkit.torchrun``."""

    nproc: int | None = None  # None: the visible GPUs, else 2
    backend: str = "auto"  # auto: nccl when there are GPUs, else gloo
    timeout: float | None = None  # seconds for the whole run; None: no limit
    env: dict[str, str] = field(default_factory=dict)
    quiet: bool = False
    display: str = "auto"
    pg_timeout: float = envvars.get_float("LABKIT_PG_TIMEOUT")  # collective timeout in the ranks
    grace: float = 5.0  # seconds between SIGTERM and SIGKILL when stopping ranks
    sample_interval: float = 0.2  # seconds between memory samples in each rank; 0 turns sampling off
    # fork: ranks are copies of torchrun's agent, torch already imported (Linux); spawn: a fresh
    # interpreter per rank, as plain `torchrun script.py` does (macOS, or to rule fork out)
    start_method: str = field(default_factory=lambda: default_start_method())
    # several nodes (labkit.nodes): one torchrun agent per node, started by srun or ssh
    nnodes: int | None = None  # None: 1, or one per --hosts host
    slurm: bool = False
    slurm_args: str = ""  # srun's own options, e.g. "-p gpu -t 10"
    hosts: tuple[str, ...] = ()
    channel_host: str | None = None  # where the kernel listens for ranks; default: the interface facing the nodes
    # emulated nodes on this machine (labkit.launch.netem): a network namespace per node, shaped links
    nodes: int | None = None  # None or 1: no emulation
    link: str | None = None  # "200mbit,100us": rate each direction, latency (where the kernel can delay)
    profile: bool = False  # each rank's torch.profiler trace, beside the notebook (labkit.timing.trace)
    pin: bool = False  # each rank bound to one core (labkit.ranks.cores): more ranks than cores, the same way each run


START_METHODS = ("fork", "spawn")


def default_start_method() -> str:
    chosen = (envvars.get("LABKIT_START_METHOD") or "").strip().lower()
    if chosen:
        return chosen  # checked in resolve()
    return "fork" if sys.platform.startswith("linux") else "spawn"


def suggest(value: str, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(str(value).lower(), choices, n=1)
    return t("launch.opt.didyoumean", name=close[0]) if close else ""


def max_cpu_ranks() -> int:
    if envvars.get("LABKIT_MAX_RANKS"):
        return int(envvars.require("LABKIT_MAX_RANKS"))
    by_cpu = max(8, 4 * (os.cpu_count() or 1))
    return max(1, min(by_cpu, int(_free_memory() // RANK_MEMORY)))


def _free_memory() -> float:
    try:
        import psutil

        return float(psutil.virtual_memory().available)
    except ImportError:
        return 8 * 2**30


def resolve(cfg: RunConfig) -> RunConfig:
    """A copy of ``cfg`` with nproc and backend decided and every value checked."""
    from labkit.wire import devices as gpus

    backend = str(cfg.backend).lower()
    if backend not in BACKENDS:
        raise OptionError(t("launch.opt.backend", value=cfg.backend, hint=suggest(cfg.backend, BACKENDS)))
    nproc = cfg.nproc
    if nproc is None:
        nproc = gpus.default_nproc() if backend != "gloo" else 2
    if isinstance(nproc, str) and nproc.strip().isdigit():
        nproc = int(nproc)
    if isinstance(nproc, bool) or not isinstance(nproc, int):
        raise OptionError(t("launch.opt.nproc.type", value=nproc))
    if nproc < 1:
        raise OptionError(t("launch.opt.nproc.small", value=nproc))
    backend = gpus.resolve_backend(backend, nproc, quiet=cfg.quiet)  # auto: nccl only with a GPU per rank
    if backend != "nccl":
        limit = max_cpu_ranks()
        if nproc > limit:
            raise OptionError(
                t("launch.opt.nproc.large", value=nproc, cpus=os.cpu_count(), mem=_free_memory() / 2**30, limit=limit)
            )
    check_timeout(cfg.timeout)
    if cfg.display not in DISPLAYS:
        raise OptionError(t("launch.opt.display", value=cfg.display))
    if cfg.start_method not in START_METHODS:
        raise OptionError(t("launch.opt.start_method", value=cfg.start_method))
    if cfg.pin and not hasattr(os, "sched_setaffinity"):
        raise OptionError(t("launch.opt.pin", platform=sys.platform))
    nodes, link = check_emulation(cfg)
    nnodes, hosts = check_nodes(cfg)
    if nodes > 1:
        nnodes = nodes
    timeout = check_timeout(cfg.timeout)
    return replace(
        cfg, nproc=nproc, backend=backend, timeout=timeout, nnodes=nnodes, hosts=hosts, nodes=nodes, link=link
    )


def check_emulation(cfg: RunConfig) -> tuple[int, str | None]:
    """``(nodes, link)`` for emulated nodes; with more than one, the machine must be able to make them."""
    from labkit.launch import netem

    nodes = netem.check_nodes(cfg.nodes if cfg.nodes is not None else 1)
    link = netem.parse_link(cfg.link)
    if nodes > 1 and (cfg.slurm or cfg.hosts or (cfg.nnodes not in (None, 1, "1"))):
        raise OptionError(t("launch.netem.nodes.real"))
    if link is not None and nodes < 2:
        raise OptionError(t("launch.netem.link.one_node"))
    if nodes > 1:
        netem.require()  # at once, with the reason, where namespaces cannot be made
    return nodes, link.text if link else None


def emulated(cfg: RunConfig) -> bool:
    """Emulated nodes: agents in network namespaces on this machine, the Unix channel, a local run folder."""
    return (cfg.nodes or 1) > 1


def check_nodes(cfg: RunConfig) -> tuple[int, tuple[str, ...]]:
    """``(nnodes, hosts)`` once ``--nnodes``, ``--slurm``, ``--slurm-args``, ``--hosts`` agree."""
    import shlex
    import shutil

    hosts = cfg.hosts.split(",") if isinstance(cfg.hosts, str) else list(cfg.hosts or ())
    hosts = tuple(h.strip() for h in hosts if h.strip())
    nnodes = cfg.nnodes if cfg.nnodes is not None else (len(hosts) or 1)
    if isinstance(nnodes, str) and nnodes.strip().isdigit():
        nnodes = int(nnodes)
    if isinstance(nnodes, bool) or not isinstance(nnodes, int) or nnodes < 1:
        raise OptionError(t("launch.opt.nnodes", value=cfg.nnodes))
    if cfg.slurm and hosts:
        raise OptionError(t("launch.opt.nodes.both"))
    if cfg.slurm_args and not cfg.slurm:
        raise OptionError(t("launch.opt.nodes.slurm_args"))
    if hosts and nnodes != len(hosts):
        raise OptionError(t("launch.opt.nodes.count", nnodes=nnodes, count=len(hosts), hosts=",".join(hosts)))
    if nnodes > 1 and not (cfg.slurm or hosts):
        raise OptionError(t("launch.opt.nodes.how", nnodes=nnodes))
    if cfg.channel_host and not (cfg.slurm or hosts):
        raise OptionError(t("launch.opt.nodes.channel_host"))
    if cfg.slurm:
        if shutil.which("srun") is None:
            raise OptionError(t("launch.opt.nodes.no_srun", path=os.environ.get("PATH", "")))
        try:
            shlex.split(cfg.slurm_args)
        except ValueError as exc:
            raise OptionError(t("launch.opt.nodes.slurm_args_bad", value=cfg.slurm_args, error=exc)) from None
    if hosts and shutil.which("ssh") is None and envvars.get("LABKIT_SSH", "x"):
        raise OptionError(t("launch.opt.nodes.no_ssh"))
    return nnodes, hosts


def multinode(cfg: RunConfig) -> bool:
    """Ranks on other machines (srun or ssh starts the agents): the TCP channel, a shared run folder."""
    return bool(cfg.slurm or cfg.hosts)


def check_timeout(timeout: Any) -> float | None:
    """``timeout`` as seconds (None: no limit); anything but a positive number is refused."""
    if timeout is None:
        return None
    try:
        ok = float(timeout) > 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise OptionError(t("launch.opt.timeout", value=timeout))
    return float(timeout)


def add_node_options(p: Any) -> None:
    """Where the ranks run (``labkit.magic``'s parser): real nodes, emulated nodes and links, profiling."""
    p.add_argument("--nnodes", default=None, help=t("launch.magic.help.nnodes"))
    p.add_argument("--slurm", action="store_true", help=t("launch.magic.help.slurm"))
    p.add_argument("--slurm-args", default="", help=t("launch.magic.help.slurm_args"))
    p.add_argument("--hosts", default="", help=t("launch.magic.help.hosts"))
    p.add_argument("--channel-host", default=None, help=t("launch.magic.help.channel_host"))
    p.add_argument("--nodes", default=None, help=t("launch.magic.help.nodes"))
    p.add_argument("--link", default=None, help=t("launch.magic.help.link"))
    p.add_argument("--profile", action="store_true", help=t("launch.magic.help.profile"))
    p.add_argument("--pin", action="store_true", help=t("launch.magic.help.pin"))


def node_options(opts: Any) -> dict[str, Any]:
    """``RunConfig`` fields from the parsed multi-node options."""
    return {
        "nnodes": opts.nnodes,
        "slurm": opts.slurm,
        "slurm_args": opts.slurm_args,
        "hosts": opts.hosts,
        "channel_host": opts.channel_host,
        "nodes": opts.nodes,
        "link": opts.link,
        "profile": opts.profile,
        "pin": opts.pin,
    }


def parse_env(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise OptionError(t("launch.opt.env", value=item))
        out[key.strip()] = value
    return out


def check_picklable(values: dict[str, Any]) -> bytes:
    """cloudpickle the ``--vars`` values, naming the one that cannot be sent."""
    import cloudpickle

    for name, value in values.items():
        try:
            cloudpickle.dumps(value)
        except Exception as exc:
            raise OptionError(t("launch.opt.vars.pickle", name=name, type=type(value).__name__, error=exc)) from None
    return cloudpickle.dumps(values)
