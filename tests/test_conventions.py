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
    lines = [x for x in done.stderr.splitlines() if x.startswith("labkit DEBUG labkit.launch.group: run-")]
    assert [x.split(": ", 2)[2].split()[0] for x in lines] == ["starting", "teardown,", "swept"], done.stderr
    run_id = lines[0].split(": ")[1]
    assert "labkit.launch.agent" in lines[0] and lines[0].endswith(run_id)  # the command, then the run folder
