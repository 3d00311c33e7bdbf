"""Run options, declared once, and every check that can be made before a process is spawned.

Each field of ``RunConfig`` carries its declaration (``option(...)``): its help message, its short flag,
which magics and commands take it, and the function that coerces and checks a value. The magics'
parsers, ``labkit run``'s, and the keyword checks of ``labkit.torchrun`` and ``labkit.Session`` are
made from these declarations (``labkit.launch.parsers``); ``resolve`` coerces every value through them.
Adding an option is a field here and its help message in ``labkit/launch/messages.py``.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from typing import Any

from labkit.i18n import t
from labkit.wire import env as envvars
from labkit.wire.errors import OptionError
from labkit.wire.setting import Backend, Display

BACKENDS = Backend.choices()
DISPLAYS = Display.choices()
START_METHODS = ("fork", "spawn")
RANK_MEMORY = 400 * 2**20  # a CPU rank with torch imported: ~300 MiB RSS, plus a small model

# Where an option can be given: the magics, the command, the Python calls (their names appear in errors)
TORCHRUN = "%%torchrun"
START = "%torchrun_start"
RANKS = "%%ranks"  # a warm cell's own options: None (not given) keeps the session's value
RUN = "labkit run"
PYTHON = "labkit.torchrun()"
SESSION = "labkit.Session()"
COLD = frozenset({TORCHRUN, PYTHON})
WARM = frozenset({START, SESSION})
EVERYWHERE = COLD | WARM | {RUN}


@dataclass(frozen=True)
class Option:
    """One option's declaration: everything a parser, a keyword check and the coercion need."""

    help: str  # message key of its help line
    coerce: Callable[[str, Any], Any]  # (name, value) -> the value, coerced and checked, or an OptionError
    takes: frozenset[str]  # the magics, commands and calls that take it
    short: tuple[str, ...] = ()  # ("-n",); the long flag is the name, "_" -> "-"
    flag: bool = False  # on when given (store_true)
    many: bool = False  # given once per value (--env K=V --env K2=V2)
    help_for: Mapping[str, str] = field(default_factory=dict)  # a surface where it means something narrower
    after: str | None = None  # a cell option (not a field): listed after this field

    def help_key(self, surface: str) -> str:
        return self.help_for.get(surface, self.help)


def option(default: Any = None, *, factory: Callable[[], Any] | None = None, **declaration: Any) -> Any:
    """A ``RunConfig`` field with its declaration (``Option``'s fields) in its metadata."""
    meta = {"option": Option(**declaration)}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


# -- coercion: each returns the value as RunConfig holds it, or says which option and why not ----------


def _whole(value: Any) -> int | None:
    """``value`` as a whole number ("2" from a magic line is 2), None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def coerce_nproc(name: str, value: Any) -> int | None:
    if value is None:
        return None  # resolve(): the visible GPUs, else 2
    n = _whole(value)
    if n is None:
        raise OptionError(t("launch.opt.nproc.type", value=value))
    if n < 1:
        raise OptionError(t("launch.opt.nproc.small", value=n))
    return n


def coerce_nnodes(name: str, value: Any) -> int | None:
    if value is None:
        return None  # check_nodes(): 1, or one per --hosts host
    n = _whole(value)
    if n is None or n < 1:
        raise OptionError(t("launch.opt.nnodes", value=value))
    return n


def coerce_nodes(name: str, value: Any) -> int | None:
    from labkit.launch.linkspec import check_nodes as emulated_nodes

    return None if value is None else emulated_nodes(value)


def coerce_backend(name: str, value: Any) -> Backend:
    backend = str(value).lower()
    if backend not in BACKENDS:
        raise OptionError(t("launch.opt.backend", value=value, hint=suggest(value, BACKENDS)))
    return Backend(backend)


def coerce_display(name: str, value: Any) -> Display:
    if value not in DISPLAYS:
        raise OptionError(t("launch.opt.display", value=value))
    return Display(value)


def coerce_start_method(name: str, value: Any) -> str:
    if value not in START_METHODS:
        raise OptionError(t("launch.opt.start_method", value=value))
    return str(value)


def _positive(value: Any) -> bool:
    try:
        return float(value) > 0 and not isinstance(value, bool)
    except (TypeError, ValueError):
        return False


def coerce_timeout(name: str, value: Any) -> float | None:
    """A limit in seconds (None: no limit)."""
    if value is not None and not _positive(value):
        raise OptionError(t("launch.opt.timeout", value=value))
    return None if value is None else float(value)


def coerce_seconds(name: str, value: Any) -> float:
    """A positive number of seconds."""
    if not _positive(value):
        raise OptionError(t("launch.opt.seconds", option=name, value=value))
    return float(value)


def coerce_interval(name: str, value: Any) -> float:
    """Seconds, 0 or more (0 turns the thing off)."""
    try:
        ok = float(value) >= 0 and not isinstance(value, bool)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise OptionError(t("launch.opt.interval", option=name, value=value))
    return float(value)


def coerce_flag(name: str, value: Any) -> bool:
    if isinstance(value, bool) or value in (0, 1):
        return bool(value)
    raise OptionError(t("launch.opt.flag", option=name, value=value))


def coerce_text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise OptionError(t("launch.opt.text", option=name, value=value))
    return value


def coerce_optional_text(name: str, value: Any) -> str | None:
    return None if value is None else coerce_text(name, value)


def coerce_env(name: str, value: Any) -> dict[str, str]:
    """A dict, or the magic's ``KEY=VALUE`` words; the values as the ranks' environment holds them: text."""
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return parse_env([str(v) for v in value])
    raise OptionError(t("launch.opt.env", value=value))


def coerce_hosts(name: str, value: Any) -> tuple[str, ...]:
    """``"a, b"`` (a magic line) or a sequence of names, as a tuple of names."""
    if isinstance(value, str):
        value = value.split(",")
    elif not isinstance(value, (list, tuple)):
        raise OptionError(t("launch.opt.text", option=name, value=value))
    return tuple(str(h).strip() for h in value if str(h).strip())


@dataclass
class RunConfig:
    """How to run: the options of ``%%torchrun``, ``labkit.torchrun``, ``labkit.Session`` and ``labkit run``."""

    nproc: int | None = option(  # None: the visible GPUs, else 2
        None, help="launch.magic.help.nproc", coerce=coerce_nproc, takes=EVERYWHERE, short=("-n",)
    )
    backend: Backend = option(  # auto: nccl when there are GPUs, else gloo
        Backend.AUTO, help="launch.magic.help.backend", coerce=coerce_backend, takes=EVERYWHERE
    )
    timeout: float | None = option(  # seconds for the whole run (on %%ranks: for the cell); None: no limit
        None,
        help="launch.magic.help.timeout",
        coerce=coerce_timeout,
        takes=COLD | {RANKS, RUN},
        help_for={RANKS: "launch.warm.help.timeout"},
    )
    env: dict[str, str] = option(
        factory=dict, help="launch.magic.help.env", coerce=coerce_env, takes=COLD | WARM, many=True
    )
    quiet: bool = option(
        False, help="launch.magic.help.quiet", coerce=coerce_flag, takes=COLD | {SESSION, RANKS}, flag=True
    )
    display: Display = option(
        Display.AUTO, help="launch.magic.help.display", coerce=coerce_display, takes=COLD | {SESSION, RANKS}
    )
    pg_timeout: float = option(  # the collective timeout in the ranks
        envvars.get_float("LABKIT_PG_TIMEOUT"),
        help="launch.warm.help.pg_timeout",
        coerce=coerce_seconds,
        takes=frozenset({PYTHON}) | WARM,
    )
    grace: float = option(  # seconds between SIGTERM and SIGKILL when stopping ranks
        5.0, help="launch.opt.help.grace", coerce=coerce_seconds, takes=frozenset({PYTHON, SESSION})
    )
    sample_interval: float = option(  # seconds between memory samples in each rank; 0 turns sampling off
        0.2, help="launch.opt.help.sample_interval", coerce=coerce_interval, takes=frozenset({PYTHON, SESSION})
    )
    # fork: ranks are copies of torchrun's agent, torch already imported (Linux); spawn: a fresh
    # interpreter per rank, as plain `torchrun script.py` does (macOS, or to rule fork out)
    start_method: str = option(
        factory=lambda: default_start_method(),
        help="launch.opt.help.start_method",
        coerce=coerce_start_method,
        takes=frozenset({PYTHON, SESSION}),
    )
    # several nodes (labkit.nodes): one torchrun agent per node, started by srun or ssh
    nnodes: int | None = option(  # None: 1, or one per --hosts host
        None, help="launch.magic.help.nnodes", coerce=coerce_nnodes, takes=COLD
    )
    slurm: bool = option(False, help="launch.magic.help.slurm", coerce=coerce_flag, takes=COLD, flag=True)
    slurm_args: str = option(  # srun's own options, e.g. "-p gpu -t 10"
        "", help="launch.magic.help.slurm_args", coerce=coerce_text, takes=COLD
    )
    hosts: tuple[str, ...] = option((), help="launch.magic.help.hosts", coerce=coerce_hosts, takes=COLD)
    channel_host: str | None = option(  # where the kernel listens for ranks; default: the interface facing the nodes
        None, help="launch.magic.help.channel_host", coerce=coerce_optional_text, takes=COLD
    )
    # emulated nodes on this machine (labkit.launch.netem): a network namespace per node, shaped links
    nodes: int | None = option(  # None or 1: no emulation
        None, help="launch.magic.help.nodes", coerce=coerce_nodes, takes=COLD
    )
    link: str | None = option(  # "200mbit,100us": rate each direction, latency (where the kernel can delay)
        None, help="launch.magic.help.link", coerce=coerce_optional_text, takes=COLD
    )
    profile: bool = option(  # each rank's torch.profiler trace, beside the notebook (labkit.timing.trace)
        False, help="launch.magic.help.profile", coerce=coerce_flag, takes=COLD, flag=True
    )
    # each rank bound to one core (labkit.ranks.cores): more ranks than cores, the same way each run
    pin: bool = option(False, help="launch.magic.help.pin", coerce=coerce_flag, takes=COLD | WARM, flag=True)


# A cell's own options, not the run's: ``--vars a,b`` names the notebook's variables to send (the Python
# calls take them as ``vars={...}``, a parameter of their own)
CELL_OPTIONS: dict[str, Option] = {
    "vars": Option(
        help="launch.magic.help.vars", coerce=coerce_text, takes=frozenset({TORCHRUN, RANKS}), after="timeout"
    ),
}


def declared(surface: str | None = None) -> dict[str, Option]:
    """The options ``surface`` takes (every one when None), by name, in the order of ``RunConfig``."""
    found: dict[str, Option] = {}
    for f in fields(RunConfig):
        if "option" in f.metadata:
            found[f.name] = f.metadata["option"]
            found.update({name: opt for name, opt in CELL_OPTIONS.items() if opt.after == f.name})
    found.update(CELL_OPTIONS)  # any whose field is gone, last
    return {name: opt for name, opt in found.items() if surface is None or surface in opt.takes}


def default(name: str) -> Any:
    """``RunConfig``'s default for ``name`` where it is a constant; None where it is made at run time."""
    found: list[Field[Any]] = [f for f in fields(RunConfig) if f.name == name]
    return found[0].default if found and found[0].default is not MISSING else None


def config(surface: str, **values: Any) -> RunConfig:
    """A ``RunConfig`` from the keywords ``surface`` was given; a name it does not take is refused, with the
    closest one it does. The values are coerced by ``resolve``."""
    check_names(surface, values)
    return RunConfig(**values)


def check_names(surface: str, values: Mapping[str, Any]) -> None:
    known = tuple(declared(surface))
    for name in values:
        if name not in known:
            raise OptionError(t("launch.opt.unknown", where=surface, name=name, hint=suggest(name, known)))


def coerce(name: str, value: Any) -> Any:
    """One option's value as ``RunConfig`` holds it: the same coercion, and the same error, on every path."""
    return declared()[name].coerce(name, value)


def coerced(cfg: RunConfig) -> RunConfig:
    """``cfg`` with every declared field coerced and checked on its own (``resolve`` checks them together)."""
    declarations = {f.name: f.metadata["option"] for f in fields(cfg) if "option" in f.metadata}
    return replace(cfg, **{name: opt.coerce(name, getattr(cfg, name)) for name, opt in declarations.items()})


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
    """A copy of ``cfg`` with every value coerced and checked, nproc and backend decided."""
    from labkit.wire import devices as gpus

    cfg = coerced(cfg)
    nproc = cfg.nproc
    if nproc is None:
        nproc = gpus.default_nproc() if cfg.backend != Backend.GLOO else 2
    backend = gpus.resolve_backend(cfg.backend, nproc, quiet=cfg.quiet)  # auto: nccl only with a GPU per rank
    if backend != Backend.NCCL:
        limit = max_cpu_ranks()
        if nproc > limit:
            raise OptionError(
                t("launch.opt.nproc.large", value=nproc, cpus=os.cpu_count(), mem=_free_memory() / 2**30, limit=limit)
            )
    elif envvars.get("LABKIT_MAX_RANKS"):  # NCCL ranks count against a set limit too (a hub's student)
        gpus.check_rank_limit(nproc, max_cpu_ranks(), gpus.visible_gpus())
    if cfg.pin and not hasattr(os, "sched_setaffinity"):
        raise OptionError(t("launch.opt.pin", platform=sys.platform))
    nodes, link = check_emulation(cfg)
    nnodes = check_nodes(cfg)
    if nodes > 1:
        nnodes = nodes
    return replace(cfg, nproc=nproc, backend=backend, nnodes=nnodes, nodes=nodes, link=link)


def check_emulation(cfg: RunConfig) -> tuple[int, str | None]:
    """``(nodes, link)`` for emulated nodes; with more than one, the machine must be able to make them."""
    from labkit.launch import netem

    nodes = cfg.nodes if cfg.nodes is not None else 1
    link = netem.parse_link(cfg.link)
    if nodes > 1 and (cfg.slurm or cfg.hosts or (cfg.nnodes not in (None, 1))):
        raise OptionError(t("launch.netem.nodes.real"))
    if link is not None and nodes < 2:
        raise OptionError(t("launch.netem.link.one_node"))
    if nodes > 1:
        netem.require()  # at once, with the reason, where namespaces cannot be made
    return nodes, link.text if link else None


def emulated(cfg: RunConfig) -> bool:
    """Emulated nodes: agents in network namespaces on this machine, the Unix channel, a local run folder."""
    return (cfg.nodes or 1) > 1


def check_nodes(cfg: RunConfig) -> int:
    """``nnodes`` once ``--nnodes``, ``--slurm``, ``--slurm-args``, ``--hosts`` agree."""
    import shlex
    import shutil

    hosts = cfg.hosts
    nnodes = cfg.nnodes if cfg.nnodes is not None else (len(hosts) or 1)
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
    return nnodes


def multinode(cfg: RunConfig) -> bool:
    """Ranks on other machines (srun or ssh starts the agents): the TCP channel, a shared run folder."""
    return bool(cfg.slurm or cfg.hosts)


def check_timeout(timeout: Any) -> float | None:
    """``timeout`` as seconds (None: no limit); anything but a positive number is refused."""
    return coerce_timeout("timeout", timeout)


NODE_OPTIONS = ("nnodes", "slurm", "slurm_args", "hosts", "channel_host", "nodes", "link", "profile", "pin")


def node_options(opts: Any) -> dict[str, Any]:
    """``RunConfig`` fields from the parsed multi-node options."""
    return {name: getattr(opts, name) for name in NODE_OPTIONS}


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
