"""Run options, and every check that can be made before a process is spawned."""

from __future__ import annotations

import difflib
import os
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from labkit.i18n import catalog, t
from labkit.wire.errors import OptionError

BACKENDS = ("auto", "gloo", "nccl")
DISPLAYS = ("auto", "widgets", "text", "none")
RANK_MEMORY = 400 * 2**20  # a CPU rank with torch imported: ~300 MiB RSS, plus a small model

catalog(
    {
        "opt.nproc.type": {
            "en": "nproc must be a whole number of ranks, got {value!r}",
            "ro": "nproc trebuie să fie un număr întreg de ranguri, nu {value!r}",
        },
        "opt.nproc.small": {
            "en": "nproc must be at least 1, got {value}",
            "ro": "nproc trebuie să fie cel puțin 1, nu {value}",
        },
        "opt.nproc.large": {
            "en": "{value} CPU ranks is too many for this machine ({cpus} cores, {mem:.0f} GiB free): at most {limit}. Set LABKIT_MAX_RANKS to raise the limit.",
            "ro": "{value} ranguri CPU sunt prea multe pentru această mașină ({cpus} nuclee, {mem:.0f} GiB liberi): cel mult {limit}. Setați LABKIT_MAX_RANKS pentru a ridica limita.",
        },
        "opt.backend": {
            "en": "unknown backend {value!r}{hint}; choose one of: auto, gloo, nccl",
            "ro": "backend necunoscut {value!r}{hint}; alegeți unul dintre: auto, gloo, nccl",
        },
        "opt.didyoumean": {"en": " (did you mean {name!r}?)", "ro": " (ați vrut să scrieți {name!r}?)"},
        "opt.timeout": {
            "en": "timeout must be a positive number of seconds, got {value!r}",
            "ro": "timeout trebuie să fie un număr pozitiv de secunde, nu {value!r}",
        },
        "opt.display": {
            "en": "display must be one of auto, widgets, text, none; got {value!r}",
            "ro": "display trebuie să fie unul dintre auto, widgets, text, none; nu {value!r}",
        },
        "opt.start_method": {
            "en": "LABKIT_START_METHOD must be fork or spawn, got {value!r}",
            "ro": "LABKIT_START_METHOD trebuie să fie fork sau spawn, nu {value!r}",
        },
        "opt.env": {
            "en": "--env expects KEY=VALUE, got {value!r}",
            "ro": "--env așteaptă CHEIE=VALOARE, nu {value!r}",
        },
        "opt.nnodes": {
            "en": "nnodes must be a whole number of nodes, at least 1; got {value!r}",
            "ro": "nnodes trebuie să fie un număr întreg de noduri, cel puțin 1; nu {value!r}",
        },
        "opt.nodes.how": {
            "en": "{nnodes} nodes need a way to reach them: --slurm (srun) or --hosts a,b (ssh)",
            "ro": "{nnodes} noduri au nevoie de o cale de a ajunge la ele: --slurm (srun) sau --hosts a,b (ssh)",
        },
        "opt.nodes.both": {
            "en": "--slurm and --hosts exclude each other: Slurm chooses the nodes, --hosts names them",
            "ro": "--slurm și --hosts se exclud: Slurm alege nodurile, --hosts le numește",
        },
        "opt.nodes.count": {
            "en": "--nnodes {nnodes} but --hosts names {count} hosts ({hosts}): one agent per host",
            "ro": "--nnodes {nnodes}, dar --hosts numește {count} gazde ({hosts}): un agent pe gazdă",
        },
        "opt.nodes.no_srun": {
            "en": "--slurm needs srun, which is not on PATH here ({path}): run the kernel on a Slurm login or compute node, or load Slurm's module",
            "ro": "--slurm are nevoie de srun, care nu este în PATH aici ({path}): porniți kernelul pe un nod de login sau de calcul Slurm, sau încărcați modulul Slurm",
        },
        "opt.nodes.no_ssh": {
            "en": "--hosts needs ssh, which is not on PATH here",
            "ro": "--hosts are nevoie de ssh, care nu este în PATH aici",
        },
        "opt.nodes.slurm_args": {
            "en": "--slurm-args without --slurm: the arguments are srun's",
            "ro": "--slurm-args fără --slurm: argumentele sunt pentru srun",
        },
        "opt.nodes.slurm_args_bad": {
            "en": "--slurm-args {value!r}: {error}",
            "ro": "--slurm-args {value!r}: {error}",
        },
        "opt.nodes.channel_host": {
            "en": "--channel-host is for ranks on other nodes; with one node the channel is a Unix socket",
            "ro": "--channel-host este pentru rangurile de pe alte noduri; pe un singur nod canalul este un socket Unix",
        },
    }
)


@dataclass
class RunConfig:
    """How to run: the options of ``%%torchrun`` and ``labkit.torchrun``."""

    nproc: int | None = None  # None: the visible GPUs, else 2
    backend: str = "auto"  # auto: nccl when there are GPUs, else gloo
    timeout: float | None = None  # seconds for the whole run; None: no limit
    env: dict[str, str] = field(default_factory=dict)
    quiet: bool = False
    display: str = "auto"
    pg_timeout: float = float(os.environ.get("LABKIT_PG_TIMEOUT", "120"))  # collective timeout in the ranks
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


START_METHODS = ("fork", "spawn")


def default_start_method() -> str:
    chosen = os.environ.get("LABKIT_START_METHOD", "").strip().lower()
    if chosen:
        return chosen  # checked in resolve()
    return "fork" if sys.platform.startswith("linux") else "spawn"


def suggest(value: str, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(str(value).lower(), choices, n=1)
    return t("opt.didyoumean", name=close[0]) if close else ""


def max_cpu_ranks() -> int:
    if os.environ.get("LABKIT_MAX_RANKS"):
        return int(os.environ["LABKIT_MAX_RANKS"])
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
        raise OptionError(t("opt.backend", value=cfg.backend, hint=suggest(cfg.backend, BACKENDS)))
    nproc = cfg.nproc
    if nproc is None:
        nproc = gpus.default_nproc() if backend != "gloo" else 2
    if isinstance(nproc, str) and nproc.strip().isdigit():
        nproc = int(nproc)
    if isinstance(nproc, bool) or not isinstance(nproc, int):
        raise OptionError(t("opt.nproc.type", value=nproc))
    if nproc < 1:
        raise OptionError(t("opt.nproc.small", value=nproc))
    backend = gpus.resolve_backend(backend, nproc, quiet=cfg.quiet)  # auto: nccl only with a GPU per rank
    if backend != "nccl":
        limit = max_cpu_ranks()
        if nproc > limit:
            raise OptionError(
                t("opt.nproc.large", value=nproc, cpus=os.cpu_count(), mem=_free_memory() / 2**30, limit=limit)
            )
    check_timeout(cfg.timeout)
    if cfg.display not in DISPLAYS:
        raise OptionError(t("opt.display", value=cfg.display))
    if cfg.start_method not in START_METHODS:
        raise OptionError(t("opt.start_method", value=cfg.start_method))
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
        raise OptionError(t("netem.nodes.real"))
    if link is not None and nodes < 2:
        raise OptionError(t("netem.link.one_node"))
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
        raise OptionError(t("opt.nnodes", value=cfg.nnodes))
    if cfg.slurm and hosts:
        raise OptionError(t("opt.nodes.both"))
    if cfg.slurm_args and not cfg.slurm:
        raise OptionError(t("opt.nodes.slurm_args"))
    if hosts and nnodes != len(hosts):
        raise OptionError(t("opt.nodes.count", nnodes=nnodes, count=len(hosts), hosts=",".join(hosts)))
    if nnodes > 1 and not (cfg.slurm or hosts):
        raise OptionError(t("opt.nodes.how", nnodes=nnodes))
    if cfg.channel_host and not (cfg.slurm or hosts):
        raise OptionError(t("opt.nodes.channel_host"))
    if cfg.slurm:
        if shutil.which("srun") is None:
            raise OptionError(t("opt.nodes.no_srun", path=os.environ.get("PATH", "")))
        try:
            shlex.split(cfg.slurm_args)
        except ValueError as exc:
            raise OptionError(t("opt.nodes.slurm_args_bad", value=cfg.slurm_args, error=exc)) from None
    if hosts and shutil.which("ssh") is None and os.environ.get("LABKIT_SSH", "x"):
        raise OptionError(t("opt.nodes.no_ssh"))
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
        raise OptionError(t("opt.timeout", value=timeout))
    return float(timeout)


def add_node_options(p: Any) -> None:
    """Where the ranks run (``labkit.magic``'s parser): real nodes, emulated nodes and links, profiling."""
    p.add_argument("--nnodes", default=None, help=t("magic.help.nnodes"))
    p.add_argument("--slurm", action="store_true", help=t("magic.help.slurm"))
    p.add_argument("--slurm-args", default="", help=t("magic.help.slurm_args"))
    p.add_argument("--hosts", default="", help=t("magic.help.hosts"))
    p.add_argument("--channel-host", default=None, help=t("magic.help.channel_host"))
    p.add_argument("--nodes", default=None, help=t("magic.help.nodes"))
    p.add_argument("--link", default=None, help=t("magic.help.link"))
    p.add_argument("--profile", action="store_true", help=t("magic.help.profile"))


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
    }


def parse_env(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise OptionError(t("opt.env", value=item))
        out[key.strip()] = value
    return out


def check_picklable(values: dict[str, Any]) -> bytes:
    """cloudpickle the ``--vars`` values, naming the one that cannot be sent."""
    import cloudpickle

    for name, value in values.items():
        try:
            cloudpickle.dumps(value)
        except Exception as exc:
            raise OptionError(t("opt.vars.pickle", name=name, type=type(value).__name__, error=exc)) from None
    return cloudpickle.dumps(values)


catalog(
    {
        "opt.vars.pickle": {
            "en": "variable {name!r} ({type}) cannot be sent to the ranks: {error}",
            "ro": "variabila {name!r} ({type}) nu poate fi trimisă rangurilor: {error}",
        },
        "opt.vars.undefined": {
            "en": "--vars names {name!r}, which is not defined in the notebook",
            "ro": "--vars numește {name!r}, care nu este definită în notebook",
        },
    }
)


# the magics' usage lines and option help (labkit.magic builds its parsers from these)
catalog(
    {
        "magic.usage": {
            "en": "%%torchrun [-n NPROC] [--backend auto|gloo|nccl] [--timeout SECONDS] [--vars a,b] [--env K=V ...] [--quiet] [--nnodes N --slurm [--slurm-args ARGS] | --hosts a,b] [--channel-host ADDR] [--nodes N [--link RATE[,LATENCY]]] [--profile]",
            "ro": "%%torchrun [-n NPROC] [--backend auto|gloo|nccl] [--timeout SECUNDE] [--vars a,b] [--env K=V ...] [--quiet] [--nnodes N --slurm [--slurm-args ARGS] | --hosts a,b] [--channel-host ADR] [--nodes N [--link RATĂ[,LATENȚĂ]]] [--profile]",
        },
        "warm.usage.start": {
            "en": "%torchrun_start [-n NPROC] [--backend auto|gloo|nccl] [--pg-timeout SECONDS] [--env K=V ...]",
            "ro": "%torchrun_start [-n NPROC] [--backend auto|gloo|nccl] [--pg-timeout SECUNDE] [--env K=V ...]",
        },
        "warm.usage.ranks": {
            "en": "%%ranks [--timeout SECONDS] [--vars a,b] [--quiet] [--display auto|widgets|text|none]",
            "ro": "%%ranks [--timeout SECUNDE] [--vars a,b] [--quiet] [--display auto|widgets|text|none]",
        },
        "magic.help.nproc": {
            "en": "number of ranks (default: the visible GPUs, else 2)",
            "ro": "numărul de ranguri (implicit: GPU-urile vizibile, altfel 2)",
        },
        "magic.help.backend": {"en": "process-group backend", "ro": "backend-ul grupului de procese"},
        "magic.help.timeout": {
            "en": "limit for the whole run, in seconds",
            "ro": "limita pentru întreaga rulare, în secunde",
        },
        "magic.help.vars": {
            "en": "notebook variables to send to every rank",
            "ro": "variabile din notebook trimise fiecărui rang",
        },
        "magic.help.env": {
            "en": "environment variable for the ranks (repeatable)",
            "ro": "variabilă de mediu pentru ranguri (repetabilă)",
        },
        "magic.help.quiet": {"en": "no dashboard, no summary", "ro": "fără panou și fără rezumat"},
        "magic.help.nnodes": {
            "en": "nodes, one torchrun agent each (needs --slurm or --hosts)",
            "ro": "noduri, câte un agent torchrun pe fiecare (cere --slurm sau --hosts)",
        },
        "magic.help.slurm": {
            "en": "start the agents with srun (inside an allocation, or srun asks for one)",
            "ro": "pornește agenții cu srun (într-o alocare, sau srun cere una)",
        },
        "magic.help.slurm_args": {"en": "srun's own options, quoted", "ro": "opțiunile lui srun, între ghilimele"},
        "magic.help.hosts": {
            "en": "hosts to start the agents on with ssh",
            "ro": "gazdele pe care ssh pornește agenții",
        },
        "magic.help.channel_host": {
            "en": "address the ranks connect back to (default: the interface facing the nodes)",
            "ro": "adresa la care se conectează rangurile (implicit: interfața spre noduri)",
        },
        "magic.help.nodes": {
            "en": "emulated nodes on this machine, a network namespace each (-n ranks on each)",
            "ro": "noduri emulate pe această mașină, fiecare cu spațiul său de nume de rețea (-n ranguri pe fiecare)",
        },
        "magic.help.link": {
            "en": "the link between emulated nodes: RATE[,LATENCY] each direction, e.g. 200mbit,100us",
            "ro": "legătura dintre nodurile emulate: RATĂ[,LATENȚĂ] în fiecare direcție, de ex. 200mbit,100us",
        },
        "magic.help.profile": {
            "en": "write each rank's torch.profiler trace beside the notebook",
            "ro": "scrie urma torch.profiler a fiecărui rang lângă notebook",
        },
        "magic.help.display": {
            "en": "widgets, text or none (default: auto)",
            "ro": "widgets, text sau none (implicit: auto)",
        },
        "warm.help.pg_timeout": {
            "en": "collective timeout in the ranks, in seconds",
            "ro": "limita operațiilor colective în ranguri, în secunde",
        },
        "warm.help.timeout": {
            "en": "limit for this cell, in seconds",
            "ro": "limita pentru această celulă, în secunde",
        },
    }
)
