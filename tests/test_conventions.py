"""What users of a Python tool and a Jupyter magic expect without reading the docs: ``--help`` and
``?`` on the magics, ``labkit --version``, a ``labkit`` logger, extras, a licence, typed markers."""

from __future__ import annotations

import os

import pytest

from labkit.i18n import language

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pyproject() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


@pytest.fixture(scope="module")
def ipython():
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython()
    ip.run_line_magic("load_ext", "labkit")
    return ip


@pytest.mark.parametrize("lang, heading, line", [("en", "options:", "show these options"), ("ro", "opțiuni:", "arată")])
def test_torchrun_help_and_question_mark_in_the_users_language(ipython, capsys, lang, heading, line):
    import labkit

    before = labkit.last_run
    with language(lang):
        # --help beside an option argparse would refuse: the help, not "unrecognized arguments"
        ipython.run_cell("%%torchrun --help --bogus\nraise SystemExit('the cell must not run')\n")
        helped = capsys.readouterr()
        ipython.run_cell("%%torchrun?")
        asked = capsys.readouterr().out
    assert "unrecognized" not in helped.out + helped.err and "the cell must not run" not in helped.out + helped.err
    for text in (helped.out, asked):
        assert heading in text and line in text
        assert "%%torchrun [-n NPROC]" in text  # the usage line as the student types it
        assert "--nproc" in text and "--slurm" in text
    assert labkit.last_run is before  # nothing ran


def test_warm_magics_help(ipython, capsys):
    with language("en"):
        ipython.run_cell("%torchrun_start --help")
        ipython.run_cell("%%ranks -h\nraise SystemExit('no')\n")
        ipython.run_cell("%torchrun_start?")
    out = capsys.readouterr().out
    assert out.count("--pg-timeout PG_TIMEOUT") == 2 and "%%ranks [--timeout" in out
    from labkit.launch import magic

    assert magic.current() is None  # --help started no warm ranks


def test_version(capsys):
    import labkit
    from labkit.cli import main

    project = pyproject()["project"]
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"fsdp-labkit {project['version']}" == f"fsdp-labkit {labkit.__version__}"
    assert project["scripts"]["labkit"] == "labkit.cli:main"


def test_labkit_debug_turns_on_the_labkit_logger(monkeypatch, capfd):
    import logging

    from labkit import log

    monkeypatch.setenv("LABKIT_DEBUG", "1")
    try:
        assert log.debug_from_env()
        log.get("labkit.launch.group").debug("hello %s", "there")
        logging.getLogger("elsewhere").debug("not ours")
        err = capfd.readouterr().err
        assert "labkit DEBUG labkit.launch.group: hello there" in err and "not ours" not in err
        monkeypatch.setenv("LABKIT_DEBUG", "0")
        assert not log.debug_from_env()
        log.get("labkit.launch.group").debug("quiet now")
        assert "quiet now" not in capfd.readouterr().err
    finally:
        monkeypatch.delenv("LABKIT_DEBUG")
        log.debug_from_env()


@pytest.mark.slow
def test_labkit_debug_shows_a_runs_start_and_teardown():
    import subprocess
    import sys

    env = {**os.environ, "LABKIT_DEBUG": "1"}
    code = "import labkit; labkit.torchrun('pass', nproc=1, display='none')"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [x for x in done.stderr.splitlines() if x.startswith("labkit DEBUG labkit.launch.")]
    assert [x.split(": ", 2)[2].split()[0] for x in lines] == ["starting", "ended"], done.stderr
    run_id = lines[0].split(": ")[1]
    assert "labkit.launch.agent" in lines[0] and lines[0].endswith(run_id)  # the command, then the run folder
    assert lines[1].startswith(f"labkit DEBUG labkit.launch.cold: {run_id}: ended (") and lines[1].endswith("left: []")


def extra_closure(project: dict, extras: tuple[str, ...]) -> set[str]:
    """The distributions ``fsdp-labkit[extras]`` asks for, its own extras followed."""
    import re

    names: set[str] = set()
    todo, seen = ["", *extras], set()  # "": the dependencies themselves
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        reqs = project["dependencies"] if extra == "" else project["optional-dependencies"][extra]
        for req in reqs:
            m = re.match(r"([A-Za-z0-9_.\-]+)(?:\[([^\]]+)\])?", req)
            name = m.group(1).lower().replace("_", "-")
            if name == project["name"]:
                todo += [e.strip() for e in m.group(2).split(",")]
            else:
                names.add(name)
    return names


def third_party_imports(paths: list[str]) -> set[str]:
    """Top-level modules imported anywhere in these files (function bodies too), not stdlib or labkit."""
    import ast
    import sys

    found = set()
    for path in paths:
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m not in ("labkit", "__future__")}


def test_extras_give_each_side_what_it_imports_and_no_more():
    import glob
    from importlib.metadata import packages_distributions

    project = pyproject()["project"]
    dist_of = {m: {d.lower().replace("_", "-") for d in ds} for m, ds in packages_distributions().items()}
    files = glob.glob(os.path.join(ROOT, "labkit", "**", "*.py"), recursive=True)
    # what grades (papermill runs the submissions) and what tests: the rest is the student's lab
    grader = ("grade.py", "runner.py")  # the grader, and the program it runs in each sandbox
    grading = [f for f in files if os.path.dirname(f).endswith("grading") and os.path.basename(f) in grader]
    within = lambda f, pkg: os.path.relpath(f, os.path.join(ROOT, "labkit")).startswith(pkg + os.sep)  # noqa: E731
    testing = [f for f in files if within(f, "testing")]
    hub = [f for f in files if within(f, "hub")]  # the class hub's process
    student = [f for f in files if f not in grading + testing + hub]
    for paths, extras in ((student, ("lab",)), (grading, ("grade",)), (hub, ("hub",))):
        # ipykernel's, papermill's and jupyterhub's own
        allowed = extra_closure(project, extras) | {"ipython", "jupyter-client", "traitlets"}
        for module in third_party_imports(paths):
            assert dist_of.get(module, {module}) & allowed, f"{module} is imported but not in fsdp-labkit{list(extras)}"
    lab = extra_closure(project, ("lab",))
    for tool in ("nbval", "papermill", "pytest", "playwright", "ruff", "nbclient"):
        assert tool not in lab, f"a student's kernel does not need {tool}"
    assert "papermill" in extra_closure(project, ("grade",)) and "playwright" in extra_closure(project, ("browser",))
    ruff = next(r for r in project["optional-dependencies"]["test"] if r.startswith("ruff"))
    from importlib.metadata import version

    assert ruff == f"ruff=={version('ruff')}", "ruff is pinned (a new ruff reformats code), and the pin is installed"


def test_license_and_typed_marker_ship():
    project = pyproject()
    assert project["project"]["license"] == {"text": "MIT"}
    with open(os.path.join(ROOT, "LICENSE")) as f:
        text = f.read()
    assert text.startswith("MIT License") and "Permission is hereby granted, free of charge" in text
    # PEP 561: type checkers read labkit's hints only where the package carries py.typed
    assert os.path.isfile(os.path.join(ROOT, "labkit", "py.typed"))
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["labkit"]


def test_rss_without_proc_is_the_current_size_not_the_peak(monkeypatch):
    import resource
    import sys

    import psutil

    from labkit.ranks import sampler

    big = bytearray(300 * 2**20)  # touched: resident, then given back
    big[::4096] = b"x" * len(big[::4096])
    del big
    monkeypatch.setattr(sampler, "STATM", "/nonexistent/statm")
    rss = sampler.rss_bytes()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    assert abs(rss - psutil.Process().memory_info().rss) < 32 * 2**20
    assert rss < peak - 200 * 2**20  # ru_maxrss, the old fallback, would say the peak


def test_run_processes_found_with_and_without_proc(monkeypatch):
    import subprocess
    import sys
    import time

    from labkit.launch import group

    env = {**os.environ, "LABKIT_RUN_ID": "run-conventions-test"}
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    try:
        deadline = time.monotonic() + 10
        while child.pid not in group.find_run_processes("run-conventions-test"):
            assert time.monotonic() < deadline
        monkeypatch.setattr(group, "PROC", "/nonexistent")
        assert child.pid in group.find_run_processes("run-conventions-test")
        assert child.pid in group.find_run_processes(None)
        assert child.pid not in group.find_run_processes("run-other")
    finally:
        child.kill()
        child.wait()


def test_socket_descriptors_with_and_without_proc(monkeypatch):
    import socket

    from labkit.ranks import bootstrap

    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        peer, _ = server.accept()
        try:
            linux = bootstrap._socket_fds()
            monkeypatch.setattr(bootstrap, "FDS", "/nonexistent")
            portable = bootstrap._socket_fds()
            for fd in (server.fileno(), client.fileno(), peer.fileno()):
                assert fd in linux and fd in portable
        finally:
            client.close()
            peer.close()


def test_a_value_a_rank_cannot_send_is_named(monkeypatch, tmp_path):
    import threading

    from labkit.ranks import rank

    monkeypatch.setenv("LABKIT_REPORT_DIR", str(tmp_path))
    with language("en"), pytest.raises(TypeError, match=r"rank.report: 'lock' is a lock, which cannot be sent"):
        rank.report(loss=1.5, lock=threading.Lock())
    with language("ro"), pytest.raises(TypeError, match=r"'stats.files\[1\]' este un TextIOWrapper"):
        with open(tmp_path / "f", "w") as f:
            rank.report(stats={"files": [1, f]})
    assert not (tmp_path / "rank0.jsonl").exists()  # nothing half-sent
    rank.report(loss=1.5, shape=(2, 3), names=["a"])
    assert rank.values["loss"] == 1.5 and rank.values["shape"] == [2, 3]
