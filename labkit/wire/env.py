"""Every ``LABKIT_*`` environment variable, in one table: its name, default, who sets it, who reads it,
and what it means. labkit's code reads them through ``get`` (and ``require``, ``pop``), which
refuse a name that is not here; tests/test_environment.py fails on a ``LABKIT_`` name used anywhere
in the repository and missing here, and on a docs/environment.md that no longer matches the table.

    from labkit.wire import env as envvars
    envvars.get("LABKIT_PG_TIMEOUT")          # the value, else the default below ("120")
    python -m labkit.wire.env --write docs/environment.md    # the table as the docs show it

Three readers cannot go through here and read ``os.environ`` themselves: ``labkit.i18n`` and
``labkit.log`` (the base layer, below ``wire``) and ``labkit.export.runtime`` (copied into exported scripts that run where
labkit is not installed). Their variables are listed all the same.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

USER = "the user (shell, deployment)"


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
        "notebooks",
        USER,
        ("launch/lab.sh",),
        "The folder JupyterLab opens: notebooks/ (the built lessons), or labkit/course/lessons to edit the MyST sources.",
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
        "LABKIT_LANG",
        None,
        f"{USER}; labkit.grading.grade for the grading kernel; labkit.hub.spawners for a student's server",
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
        ("labkit.launch.group", "labkit.ranks.observe", "labkit.grading.sink"),
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
        "LABKIT_OBSERVE_SINK",
        None,
        "labkit.grading.grade, for the kernel that runs a submission (passed on to its ranks)",
        ("labkit.ranks.observe", "labkit.grading.runner"),
        "While graded: the grader's Unix socket where each rank sends what labkit observed; the rank takes it out of its environment before any cell code runs.",
    ),
    Var(
        "LABKIT_GRADE_OUT",
        None,
        "labkit.grading.grade, for the kernel that runs a submission",
        ("labkit.grading.checks", "labkit.grading.runner"),
        "While graded: the sandbox's folder where a check writes what it hands in besides its record (a model's weights).",
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
    # -- the class hub (launch/hub.sh, labkit.hub) ------------------------------------------------
    Var(
        "LABKIT_HUB_DIR",
        "/srv/labkit-hub",
        f"{USER} (hub.sh --dir); launch/hub.sh exports it",
        ("labkit.hub.settings", "launch/hub.sh"),
        "The class hub's state: its database, cookie secret, the student editions, the submissions, the students' Python view.",
    ),
    Var(
        "LABKIT_HUB_STUDENTS",
        None,
        f"{USER} (hub.sh --students); launch/hub.sh exports it",
        ("labkit.hub.settings", "launch/hub.sh"),
        "The students who may log in to the class hub: system accounts, comma-separated.",
    ),
    Var(
        "LABKIT_HUB_INSTRUCTORS",
        None,
        f"{USER} (hub.sh --instructors); launch/hub.sh exports it",
        ("labkit.hub.settings", "launch/hub.sh"),
        "The class hub's instructors (JupyterHub admins): they read every submission in ~/submissions.",
    ),
    Var(
        "LABKIT_HUB_SPAWNER",
        "local",
        f"{USER} (hub.sh --slurm); launch/hub.sh exports it",
        ("labkit.hub.settings",),
        "local: each student's server is a process under their uid, in their cgroups; slurm: a Slurm job (batchspawner).",
    ),
    Var(
        "LABKIT_HUB_IP",
        "127.0.0.1",
        f"{USER} (hub.sh --ip); launch/hub.sh exports it",
        ("labkit.hub.settings", "launch/hub.sh"),
        "Where the class hub listens (put TLS in front before opening it to a network).",
    ),
    Var(
        "LABKIT_HUB_PORT",
        "8000",
        f"{USER} (hub.sh --port); launch/hub.sh exports it",
        ("labkit.hub.settings", "launch/hub.sh"),
        "The class hub's public port.",
    ),
    Var(
        "LABKIT_HUB_PYTHON",
        None,
        "launch/hub.sh (python -m labkit.hub.view)",
        ("labkit.hub.settings", "tests/browser/test_hub_browser.py"),
        "The Python the students' servers, kernels and ranks run: the course environment's, or a view of it they can execute.",
    ),
    Var(
        "LABKIT_HUB_SCRIPTS",
        None,
        "launch/hub.sh",
        ("labkit.hub.settings",),
        "The course environment's bin/ (jupyterhub-singleuser, run by LABKIT_HUB_PYTHON).",
    ),
    Var(
        "LABKIT_HUB_PROXY",
        None,
        f"{USER}; launch/hub.sh (npm) when unset",
        ("labkit.hub.settings", "launch/hub.sh"),
        "The configurable-http-proxy command. Unset: the one on PATH, else installed with npm under LABKIT_HUB_NPM.",
    ),
    Var(
        "LABKIT_HUB_NPM",
        None,
        USER,
        ("launch/hub.sh",),
        "Where launch/hub.sh installs configurable-http-proxy with npm. Unset: ~/.cache/labkit-hub/npm.",
    ),
    Var(
        "LABKIT_HUB_MEMORY",
        "4G",
        f"{USER} (hub.sh --memory); launch/hub.sh exports it",
        ("labkit.hub.settings",),
        "Per student: the memory of their server, kernels and ranks together (cgroup; a Slurm hub's --mem).",
    ),
    Var(
        "LABKIT_HUB_CPUS",
        "2",
        f"{USER} (hub.sh --cpus); launch/hub.sh exports it",
        ("labkit.hub.settings",),
        "Per student: CPUs (cgroup quota; a Slurm hub's --cpus-per-task).",
    ),
    Var(
        "LABKIT_HUB_MAX_RANKS",
        "4",
        f"{USER} (hub.sh --max-ranks); launch/hub.sh exports it",
        ("labkit.hub.settings",),
        "The most ranks one cell of a student may start: their server's LABKIT_MAX_RANKS.",
    ),
    Var(
        "LABKIT_HUB_MAX_PROCESSES",
        "512",
        USER,
        ("labkit.hub.settings",),
        "Per student: the most processes in their cgroup (pids.max).",
    ),
    Var(
        "LABKIT_HUB_CULL_TIMEOUT",
        "3600",
        f"{USER} (hub.sh --cull-timeout); launch/hub.sh exports it",
        ("labkit.hub.settings",),
        "Seconds a server may be idle before jupyterhub-idle-culler stops it.",
    ),
    Var(
        "LABKIT_HUB_CULL_EVERY",
        "300",
        USER,
        ("labkit.hub.settings",),
        "Seconds between two rounds of jupyterhub-idle-culler.",
    ),
    Var(
        "LABKIT_HUB_SLURM_PARTITION",
        None,
        USER,
        ("labkit.hub.settings",),
        "A Slurm hub's partition for the students' servers. Unset: the cluster's default.",
    ),
    Var(
        "LABKIT_HUB_SLURM_RUNTIME",
        "8:00:00",
        USER,
        ("labkit.hub.settings",),
        "A Slurm hub's time limit of a student's server job.",
    ),
    Var(
        "LABKIT_HUB_SLURM_MEMORY",
        None,
        f"{USER}; tests/browser/test_hub_browser.py",
        ("labkit.hub.settings",),
        "A Slurm hub's --mem for a server's job. Unset: LABKIT_HUB_MEMORY; \"\": none asked (nodes that declare no memory).",
    ),
    Var(
        "LABKIT_HUB_JUPYTER_CONFIG",
        None,
        "launch/hub.sh (launch/jupyter)",
        ("labkit.hub.settings", "launch/hub.sh"),
        "JupyterLab's course defaults (no news prompt) for the students' servers: their JUPYTER_CONFIG_PATH.",
    ),
    Var(
        "LABKIT_HUB_API_PORT",
        "8081",
        "launch/hub.sh (a free port)",
        ("labkit.hub.config", "launch/hub.sh"),
        "The port of JupyterHub's own API, on 127.0.0.1.",
    ),
    Var(
        "LABKIT_HUB_PROXY_API_PORT",
        "8001",
        "launch/hub.sh (a free port)",
        ("labkit.hub.config", "launch/hub.sh"),
        "The port of configurable-http-proxy's API, on 127.0.0.1.",
    ),
    Var(
        "LABKIT_HUB_ENV_KEEP",
        None,
        f"{USER}; labkit.testing.hub",
        ("labkit.hub.config", "labkit.testing.hub"),
        "More variables the students' servers inherit from the hub, comma-separated (PATH, LANG, LC_ALL, SLURM_CONF always).",
    ),
    Var(
        "LABKIT_HUB_GROUP",
        "labkit-instructors",
        USER,
        ("labkit.hub.settings",),
        "The instructors' system group: it reads the submissions.",
    ),
    Var(
        "LABKIT_HUB_SERVER_IP",
        "0.0.0.0",
        f"{USER}; tests/browser/test_hub_browser.py",
        ("labkit.hub.spawners",),
        "Where a Slurm hub's server listens on its node: every interface, or 127.0.0.1 when the nodes are the hub's own machine.",
    ),
    # -- tests and deployment scripts --------------------------------------------------------------
    Var(
        "LABKIT_TEST_SESSION",
        None,
        "labkit.testing.processes (mark_session)",
        ("labkit.testing.processes",),
        "Marks the processes of one test session, so its leak checks see only its own.",
    ),
    Var(
        "LABKIT_HUB_TEST",
        None,
        "labkit.testing.hub, for launch/hub.sh and all it starts",
        ("labkit.testing.hub",),
        "Marks the processes of a test's class hub (its servers, kernels and ranks kept it through LABKIT_HUB_ENV_KEEP), so the test finds any left.",
    ),
    Var(
        "LABKIT_SLURM_CLUSTER",
        None,
        "labkit.testing.slurm, for the test cluster's daemons",
        ("labkit.testing.slurm",),
        "Marks the processes of a test Slurm cluster, so they can be found and ended.",
    ),
    Var(
        "LABKIT_BROWSER_TEST",
        None,
        "tests/browser/jupyterlab_driver.py, for its JupyterLab",
        ("tests/browser/jupyterlab_driver.py",),
        "Marks the processes of a browser test's JupyterLab, so they can be found and ended.",
    ),
    Var(
        "LABKIT_UPDATE_SCREENSHOTS",
        None,
        USER,
        ("tests/browser/test_dashboard_browser.py",),
        "1: the browser tests rewrite docs/screenshots/.",
    ),
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

REGISTRY: dict[str, Var] = {v.name: v for v in VARS}
_DEFAULT = object()


def var(name: str) -> Var:
    """The registry's entry; a ``KeyError`` naming the variable when it has none (add it to ``VARS``)."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(
            f"{name} is not in labkit.wire.env.VARS: add it there (name, default, who sets and reads it)"
        ) from None


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
    return float(value)  # type: ignore[arg-type]


def require(name: str) -> str:
    """The value of a variable labkit must have set (a rank's run folder): ``KeyError`` when it did not."""
    var(name)
    return os.environ[name]


def pop(name: str, default: str = "") -> str:
    """The value, removed from this process's environment (a secret that nothing we start may inherit)."""
    var(name)
    return os.environ.pop(name, default)


def markdown() -> str:
    """docs/environment.md: the table as a page."""
    lines = [
        "# Environment variables",
        "",
        "Generated from `labkit/wire/env.py` (`VARS`) by `python -m labkit.wire.env --write docs/environment.md`;",
        "`tests/test_environment.py` fails when this page and the table differ. Edit the table, not this page.",
        "",
        "| Variable | Default | Set by | Read by | Meaning |",
        "|---|---|---|---|---|",
    ]
    for v in VARS:
        default = "" if v.default is None else f"`{v.default}`" if v.default else '`""`'
        readers = ", ".join(f"`{r}`" for r in v.read_by) or "-"
        cells = [f"`{v.name}`", default or "-", v.set_by, readers, v.meaning]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


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
