"""Every ``LABKIT_*`` environment variable, in one table per owner: its name, default, who sets it, who reads it,
and what it means. This module holds labkit's own, the kernel⇄rank contract and what a user sets for
labkit's runs; the class hub's are in ``labkit.hub.env``, the tests' in ``labkit.testing.env``
(``REGISTRIES``). labkit's code reads every one of them through ``get`` (and ``require``, ``pop``), which
refuse a name that no registry has; tests/test_environment.py fails on a ``LABKIT_`` name used anywhere
in the repository and missing from them, and on a docs/environment.md that no longer matches them.

    from labkit.wire import env as envvars
    envvars.get("LABKIT_PG_TIMEOUT")          # the value, else the default below ("120")
    envvars.get("LABKIT_HUB_DIR")             # the hub's registry, read the first time it is asked for
    python -m labkit.wire.env --write docs/environment.md    # every registry, a section each

The other registries are read the way ``labkit.i18n`` reads the catalogs: by module name, the first
time a name that is not here is asked for, so this module imports neither the hub nor the tests
(tests/test_layout.py). Each registry is a module with ``VARS``, ``TITLE`` and ``ABOUT``.

Three readers cannot go through here and read ``os.environ`` themselves: ``labkit.i18n`` and
``labkit.log`` (the base layer, below ``wire``) and ``labkit.export.runtime`` (copied into exported scripts that run where
labkit is not installed). Their variables are listed all the same.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from types import ModuleType

USER = "the user (shell, deployment)"
# the registries, this one first: each a module with VARS, TITLE, ABOUT (read on first use, never imported here)
REGISTRIES = ("labkit.wire.env", "labkit.hub.env", "labkit.testing.env")
TITLE = "labkit: the kernel, its ranks, and what a user sets"
ABOUT = (
    "`labkit/wire/env.py`: what a user sets for labkit's runs, what the kernel sets for its ranks and agents "
    "(the kernel⇄rank contract), and the launch scripts' own."
)


@dataclass(frozen=True)
class Var:
    name: str
    default: str | None  # what ``get`` returns when it is unset (None: unset means "not given")
    set_by: str
    read_by: tuple[str, ...]  # modules (dotted) or files (paths) that read it
    meaning: str


VARS: tuple[Var, ...] = (
    Var(
        "LABKIT_PREFORK",
        "1",
        USER,
        ("labkit.launch.prefork",),
        "0 (or no, off, false): no prefork server; every cold cell starts torchrun as a new interpreter.",
    ),
    Var(
        "LABKIT_PREFORK_OF",
        None,
        "labkit.launch.prefork, in the server it starts",
        ("labkit.launch.forkserver",),
        "The kernel's pid, in its prefork server's environment: how a kernel's server is found in /proc.",
    ),
    Var(
        "LABKIT_PREFORK_ROOM",
        None,
        "labkit.launch.prefork, in the server it starts",
        ("labkit.launch.forkserver",),
        "Padding in the prefork server's environment block: the room a forked agent writes its run's environment into.",
    ),
    Var(
        "LABKIT_PROFILE_DIR",
        None,
        "labkit.launch.group, for %%torchrun --profile",
        ("labkit.ranks.profiling",),
        "Where each rank writes its torch.profiler (Kineto) trace: labkit-traces/<run id> beside the notebook.",
    ),
    Var(
        "LABKIT_PIN",
        None,
        "labkit.launch.group, for %%torchrun --pin",
        ("labkit.ranks.cores",),
        "Bind each rank to one core: rank (emulated nodes: rank r on core r mod cores) or local (local rank).",
    ),
    Var(
        "LABKIT_LAB_DIR",
        None,
        USER,
        ("launch/lab.sh",),
        "The folder JupyterLab opens instead of the learner's workspace: notebooks/ (the solution edition, as --instructor), "
        "or labkit/course/lessons to edit the MyST sources.",
    ),
    Var(
        "LABKIT_WORKSPACE",
        "~/fsdp-labkit-work",
        USER,
        ("launch/lab.sh", "labkit.grading.selfstudy"),
        "A self-learner's workspace: launch/lab.sh puts the student edition there once, and a newer one in updates/.",
    ),
    Var(
        "LABKIT_RECORD",
        "1",
        USER,
        ("labkit.regress.record",),
        "0: no run record (the application/vnd.labkit.run+json output and its file) after a run.",
    ),
    Var(
        "LABKIT_RECORD_DIR",
        None,
        "labkit.regress.sweep for each executed notebook; or the user",
        ("labkit.regress.record", "labkit.regress.sweep"),
        "A folder where every run's record is also written as <run id>.json.",
    ),
    Var(
        "LABKIT_COUNT_COMM",
        "1",
        USER,
        ("labkit.ranks.recording",),
        "0: the ranks do not count the whole cell's collectives for the run record.",
    ),
    # -- what a user sets ------------------------------------------------------------------------
    Var(
        "LABKIT_COURSE",
        None,
        USER,
        ("labkit.classroom.cli", "labkit.classroom.client"),
        "The course file (course.toml: roster, deadlines, late policy, points) for labkit collect, feedback, export.",
    ),
    Var(
        "LABKIT_EXCHANGE",
        None,
        USER,
        ("labkit.classroom.cli", "labkit.classroom.client"),
        "The submission exchange's folder, written directly (the instructor's commands; a one-person course).",
    ),
    Var(
        "LABKIT_EXCHANGE_URL",
        None,
        f"{USER}; the class hub for each student's server",
        ("labkit.classroom.client",),
        "The exchange service (a JupyterHub service) labkit.submit() hands notebooks to, with the student's hub token.",
    ),
    Var(
        "LABKIT_GRADING",
        None,
        "labkit.grading.runner, for the kernel of the notebook it grades",
        ("labkit.classroom.client",),
        "Set (1) while labkit grade runs a submission: its labkit.submit() cell hands nothing in again, and raises no error.",
    ),
    Var(
        "LABKIT_LANG",
        None,
        f"{USER}; labkit.grading.grade for the grading kernel; labkit.hub.spawners for a student's server; "
        "labkit.launch.group for the ranks (the kernel's language)",
        ("labkit.i18n", "launch/lib.sh"),
        "The language of every message: en or ro. Unset: the locale (LC_ALL, LC_MESSAGES, LANG), else en.",
    ),
    Var(
        "LABKIT_PG_TIMEOUT",
        "120",
        f"{USER}; launch/slurm/train.sbatch, the JupyterHub configs",
        ("labkit.launch.options", "labkit.export.runtime"),
        "Seconds a collective may wait in the ranks before it fails (the process group's timeout).",
    ),
    Var(
        "LABKIT_START_METHOD",
        None,
        USER,
        ("labkit.launch.options",),
        "fork (ranks forked from torchrun's agent, torch already imported) or spawn (a fresh interpreter "
        "per rank). Unset: fork on Linux, else spawn.",
    ),
    Var(
        "LABKIT_MAX_RANKS",
        None,
        f"{USER}; labkit.hub.spawners for a student's server (LABKIT_HUB_MAX_RANKS)",
        ("labkit.launch.options",),
        "The most CPU ranks one run may start. Unset: from the cores and the free memory.",
    ),
    Var(
        "LABKIT_REPORT_DIR",
        None,
        f"{USER}; labkit.testing (job scripts under plain torchrun)",
        ("labkit.ranks.rank", "labkit.export.runtime"),
        "Outside a labkit run (plain torchrun, an exported script): a folder where each rank writes its "
        "messages as JSON lines (rank{R}.jsonl). labkit's own runs remove it from the ranks' environment.",
    ),
    Var(
        "LABKIT_RUN_ROOT",
        None,
        USER,
        ("labkit.launch.rundirs",),
        "Where multi-node runs keep their run folders (every node must see it). Unset: ~/.cache/labkit-runs.",
    ),
    Var(
        "LABKIT_SSH",
        None,
        USER,
        ("labkit.launch.nodes", "labkit.launch.options"),
        'The command that starts an agent on a --hosts host (its options, a key). "": start the agents '
        "on this machine. Unset: ssh -o BatchMode=yes -o ConnectTimeout=10.",
    ),
    Var(
        "LABKIT_RDZV_PORT",
        None,
        USER,
        ("labkit.launch.nodes",),
        "The port where a multi-node run's agents meet. Unset: one free on the kernel's machine.",
    ),
    Var(
        "LABKIT_RDZV_TIMEOUT",
        None,
        f"{USER}; labkit.launch.nodes for each agent",
        ("labkit.launch.nodes",),
        "Seconds the nodes' agents wait for each other at the rendezvous. Unset: 300, or the run's timeout if shorter.",
    ),
    Var(
        "LABKIT_QUESTIONS",
        None,
        f"{USER}; labkit.grading.cli (--questions); labkit.grading.grade (empty in a sandbox: its install's catalog has them)",
        ("labkit.grading.sources", "labkit.grading.cli", "labkit.grading.student"),
        "More question modules or .py files for the grader and labkit.check, separated by os.pathsep.",
    ),
    Var(
        "LABKIT_CUDA_AUDIT",
        None,
        "tests/test_cuda_init.py, benchmarks/gpu_check.py",
        ("labkit.wire.devices",),
        "A file: every process appends there, as JSON lines, each call that touches CUDA (who initialises "
        "CUDA where it must not).",
    ),
    Var(
        "LABKIT_THEME",
        None,
        USER,
        ("labkit.views.palette",),
        "light or dark: the look of labkit's matplotlib figures. Unset: JupyterLab's saved theme setting "
        "(a dark theme's name has Dark in it), else light.",
    ),
    Var(
        "LABKIT_DEBUG",
        None,
        USER,
        ("labkit.log",),
        "1 (not 0, false, no, off): labkit's DEBUG log (the labkit logger) on stderr, under the cell: a run's command, "
        "run folder and teardown.",
    ),
    # -- what labkit sets for its ranks and agents -------------------------------------------------
    Var(
        "LABKIT_RUN_ID",
        None,
        "labkit.launch.group, for torchrun and every rank",
        ("labkit.launch.group",),
        "The run's id: the marker the cleanup sweep finds a run's processes by (in /proc/PID/environ).",
    ),
    Var(
        "LABKIT_RUN_DIR",
        None,
        "labkit.launch.group, for every rank",
        ("labkit.ranks.bootstrap",),
        "The run folder: job.json, the cell's source, the ranks' logs.",
    ),
    Var(
        "LABKIT_SOCKET",
        None,
        "labkit.launch.group (labkit.launch.nodes: the address the nodes reach), for every rank",
        ("labkit.ranks.bootstrap", "labkit.launch.nodes"),
        "The channel to the kernel: a Unix socket path, or tcp://HOST:PORT.",
    ),
    Var(
        "LABKIT_TOKEN",
        None,
        "labkit.launch.group, for every rank",
        ("labkit.ranks.bootstrap",),
        "The run's secret: shown on the Unix socket, proven by HMAC on TCP. The rank removes it from its "
        "environment at once.",
    ),
    Var(
        "LABKIT_BACKEND",
        "gloo",
        f"labkit.launch.group, for every rank; {USER} for an exported script",
        ("labkit.ranks.rank", "labkit.ranks.bootstrap", "labkit.export.runtime"),
        "The ranks' backend, gloo or nccl: rank.device() is cuda:LOCAL_RANK under nccl.",
    ),
    Var(
        "LABKIT_NODES",
        None,
        "labkit.launch.nodes, for each node's agent",
        ("labkit.launch.agent", "labkit.launch.nodes"),
        "A multi-node run's launcher: slurm, hosts, or emulated (network namespaces on this machine). Unset: one node.",
    ),
    Var(
        "LABKIT_NNODES",
        None,
        "labkit.launch.nodes, for each node's agent",
        (),
        "The number of nodes of a multi-node run (for the agents' logs and whoever debugs them).",
    ),
    Var(
        "LABKIT_HOSTS",
        None,
        "labkit.launch.nodes, for each node's agent (--hosts)",
        ("labkit.launch.nodes",),
        "The hosts of a --hosts run, comma-separated; the first hosts the rendezvous.",
    ),
    Var(
        "LABKIT_NODE_RANK",
        None,
        "labkit.launch.nodes (the ssh fan-out), for each node's agent",
        ("labkit.launch.nodes",),
        "This node's index among the --hosts.",
    ),
    Var(
        "LABKIT_NODE",
        "",
        "labkit.launch.nodes (each node's agent), for its ranks",
        ("labkit.ranks.bootstrap",),
        "The node's name, sent in each rank's hello: the dashboard shows node/local rank.",
    ),
    Var(
        "LABKIT_OBSERVE",
        "1",
        f"{USER} (benchmarks)",
        ("labkit.ranks.observe",),
        "0: labkit does not observe what a cell does on its ranks (to measure what that costs); no exercise of such a run can score.",
    ),
    Var(
        "LABKIT_GRADE_JOB",
        None,
        "labkit.grading.sandbox, for every process of one graded notebook",
        ("labkit.grading.sandbox",),
        "A marker in the environment of a graded notebook's processes: without a sandbox, how those left behind are found in /proc.",
    ),
    Var(
        "LABKIT_HOME",
        None,
        "labkit.grading.cli, the tests and benchmarks/grade_sandbox.py, in labkit grade's env=",
        ("labkit.grading.grade",),
        "The labkit folder the sandbox imports (a student install); unset: the students' install built for this labkit and its questions.",
    ),
    # -- the launch scripts (launch/*.sh) and deployment ------------------------------------------
    Var(
        "LABKIT_VENV",
        None,
        USER,
        ("launch/setup-env.sh", "launch/lab.sh", "launch/lib.sh", "launch/jupyterhub/batchspawner_config.py"),
        "Where the Python environment lives. Unset: .venv in the repository.",
    ),
    Var(
        "LABKIT_LAB_PORT",
        "8888",
        USER,
        ("launch/lab.sh",),
        "The first port launch/lab.sh tries for JupyterLab; the next free one is used.",
    ),
    Var(
        "LABKIT_COURSE_DIR",
        None,
        USER,
        ("launch/jupyterhub/batchspawner_config.py",),
        "The course's repository on a filesystem the nodes share (batchspawner). Unset: /opt/fsdp-labkit.",
    ),
    Var(
        "LABKIT_SKIP_TORCH",
        "0",
        f"{USER}; tests/test_grading_student_env.py",
        ("launch/setup-student-env.sh",),
        "1: launch/setup-student-env.sh installs no torch (an image that has it already; the tests).",
    ),
    Var(
        "LABKIT_DRY_RUN",
        "0",
        f"{USER} (--dry-run)",
        ("launch/torchrun-multinode.sh",),
        "1: launch/torchrun-multinode.sh prints the torchrun command and stops.",
    ),
)

REGISTRY: dict[str, Var] = {v.name: v for v in VARS}  # this module's own; ``table()``: every registry's
_TABLE: dict[str, Var] = {}
_DEFAULT = object()


def registries() -> tuple[ModuleType, ...]:
    """Every registry module, this one first (each imported once, on first use)."""
    return tuple(importlib.import_module(name) for name in REGISTRIES)


def table() -> dict[str, Var]:
    """Every registry's variables by name; a name two registries give is an error (one owner each)."""
    if not _TABLE:
        merged: dict[str, Var] = {}
        for module in registries():
            for v in module.VARS:
                if v.name in merged:
                    raise ValueError(f"{v.name} is in two registries: {module.__name__} and another of {REGISTRIES}")
                merged[v.name] = v
        _TABLE.update(merged)
    return _TABLE


def all_vars() -> tuple[Var, ...]:
    """Every variable, registry by registry."""
    return tuple(v for module in registries() for v in module.VARS)


def var(name: str) -> Var:
    """The entry of ``name``; a ``KeyError`` naming it when no registry has it (add it to its owner's ``VARS``)."""
    entry = REGISTRY.get(name) or table().get(name)
    if entry is None:
        raise KeyError(
            f"{name} is in no registry ({', '.join(REGISTRIES)}): add it to its owner's VARS "
            "(name, default, who sets and reads it)"
        )
    return entry


def get(name: str, default: str | None | object = _DEFAULT) -> str | None:
    """The variable's value; unset, ``default`` if given, else the registry's default."""
    entry = var(name)
    value = os.environ.get(name)
    if value is not None:
        return value
    return entry.default if default is _DEFAULT else default  # type: ignore[return-value]


def get_float(name: str) -> float:
    """The value as a number, else the registry's default (a variable with no default must be set)."""
    value = get(name)
    if value is None:
        raise KeyError(f"{name} is not set and has no default")
    return float(value)


def require(name: str) -> str:
    """The value of a variable labkit must have set (a rank's run folder): ``KeyError`` when it did not."""
    var(name)
    return os.environ[name]


def pop(name: str, default: str = "") -> str:
    """The value, removed from this process's environment (a secret that nothing we start may inherit)."""
    var(name)
    return os.environ.pop(name, default)


def render(module: ModuleType) -> str:
    """One registry's section of docs/environment.md: its title, what it holds, its table."""
    lines = [f"## {module.TITLE}", "", module.ABOUT, ""]
    lines += ["| Variable | Default | Set by | Read by | Meaning |", "|---|---|---|---|---|"]
    for v in module.VARS:
        default = "" if v.default is None else f"`{v.default}`" if v.default else '`""`'
        readers = ", ".join(f"`{r}`" for r in v.read_by) or "-"
        cells = [f"`{v.name}`", default or "-", v.set_by, readers, v.meaning]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def section() -> str:
    """This registry's section of docs/environment.md."""
    return render(sys.modules[__name__])


def markdown() -> str:
    """docs/environment.md: every registry's section, in the order of ``REGISTRIES``."""
    head = [
        "# Environment variables",
        "",
        "Generated from the registries (`VARS` in `labkit/wire/env.py`, `labkit/hub/env.py`, `labkit/testing/env.py`)",
        "by `python -m labkit.wire.env --write docs/environment.md`; `tests/test_environment.py` fails when this",
        "page and the registries differ. Edit the registries, not this page.",
        "",
    ]
    return "\n".join(head) + "\n" + "\n".join(module.section() for module in registries())


def main(argv: list[str] | None = None) -> None:
    import argparse  # not at import: every rank imports this module

    parser = argparse.ArgumentParser(prog="python -m labkit.wire.env", description="labkit's environment variables")
    parser.add_argument("--write", metavar="FILE", help="write the markdown page there instead of printing it")
    args = parser.parse_args(argv)
    if args.write:
        with open(args.write, "w") as f:
            f.write(markdown())
    else:
        print(markdown(), end="")


if __name__ == "__main__":
    main()
