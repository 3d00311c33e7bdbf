"""The ``labkit`` command on any install (issue 47): ``--help`` of the command and of each subcommand without
the optional extras, a missing extra named instead of a traceback, ``python -m labkit``, ``run --json`` alone
on stdout, and argparse's own words in the user's language."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from labkit import cli, i18n

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
BLOCKED = ("nbformat", "papermill", "nbclient", "jupytext", "ipywidgets", "matplotlib", "IPython", "ipykernel")
COMMANDS = [
    [],
    ["run"],
    ["cleanup"],
    ["grade"],
    ["build-student"],
    ["export"],
    ["estimate"],
    ["build-course"],
    ["sweep"],
    ["regress"],
    ["regress", "compare"],
    ["regress", "baseline"],
    ["doctor"],
]
# a base install: every module an extra brings fails to import, as if it were not there
BASE_INSTALL = textwrap.dedent(
    """
    import importlib.abc, json, sys

    class NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {blocked!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

    sys.meta_path.insert(0, NotInstalled())
    from labkit.cli import main
    codes = []
    for argv in json.loads(sys.argv[1]):
        try:
            codes.append(main(argv))
        except SystemExit as exc:
            codes.append(exc.code)
        print("\\n=== done", flush=True)
    print(json.dumps(codes))
    """
).format(blocked=BLOCKED)


def base_install(*argvs: list[str], lang: str = "en") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LABKIT_LANG": lang}
    return subprocess.run(
        [sys.executable, "-c", BASE_INSTALL, json.dumps(list(argvs))],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_every_help_works_without_the_extras():
    out = base_install(*[[*c, "--help"] for c in COMMANDS])
    assert "Traceback" not in out.stderr, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == [0] * len(COMMANDS)
    helps = out.stdout.split("=== done")
    assert "run a Python file on N torchrun ranks" in helps[0] and "build-course" in helps[0]
    assert "--nproc NPROC" in helps[1] and "--json" in helps[1]
    course = helps[COMMANDS.index(["build-course"])]
    assert "labkit build-course needs nbformat, which is not installed here: pip install" in course
    assert "'fsdp-labkit[lab]'" in course


def test_a_command_without_its_extra_names_it():
    out = base_install(["build-course", "--out", "x"], ["--lang", "ro", "build-course"])
    assert json.loads(out.stdout.splitlines()[-1]) == [2, 2]
    assert "Traceback" not in out.stderr
    assert (
        "labkit build-course needs nbformat, which is not installed here: pip install 'fsdp-labkit[lab]'" in out.stderr
    )
    assert "labkit build-course are nevoie de nbformat" in out.stderr


def test_an_extra_missing_when_the_command_runs_is_named(monkeypatch, capsys):
    def needs_papermill(args):
        raise ModuleNotFoundError("No module named 'papermill'", name="papermill")

    monkeypatch.setattr(cli, "cmd_cleanup", needs_papermill)
    assert cli.main(["cleanup"]) == 2
    assert capsys.readouterr().err.strip() == (
        "labkit cleanup needs papermill, which is not installed here: pip install 'fsdp-labkit[grade]'"
    )

    def broken(args):
        raise ModuleNotFoundError("No module named 'labkit.nothing'", name="labkit.nothing")

    monkeypatch.setattr(cli, "cmd_cleanup", broken)
    with pytest.raises(ModuleNotFoundError):  # not an extra's: a real bug, with its traceback
        cli.main(["cleanup"])


def test_the_extras_table_follows_pyproject():
    with open(ROOT / "pyproject.toml", "rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    for module, extra in cli.EXTRAS.items():
        names = {re.split(r"[<>=!\[ ]", req, maxsplit=1)[0].lower() for req in extras[extra]}
        assert module.lower().replace("_", "-") in names, (module, extra)
    listed = {m.lower().replace("_", "-") for m in cli.EXTRAS}
    for extra in ("lab", "grade"):  # every package of the extras the commands need has its import name here
        reqs = {re.split(r"[<>=!\[ ]", r, maxsplit=1)[0].lower() for r in extras[extra] if "fsdp-labkit" not in r}
        assert reqs <= listed, reqs - listed


def test_the_listed_commands_are_the_ones_their_modules_register():
    parser = cli.build_parser()  # every module imported (this install has every extra)
    sub = next(a for a in parser._actions if a.dest == "command")
    registered = {a.dest: a.help for a in sub._choices_actions}
    for commands in cli.CONTRIBUTED.values():
        for name, key in commands:
            assert registered[name].replace("%%", "%") == i18n.t(key), name  # argparse %-formats a help
    listed = {name for commands in cli.CONTRIBUTED.values() for name, _ in commands}
    assert set(registered) == listed | {"run", "cleanup"}


def test_only_the_chosen_command_is_imported():
    script = "import sys\nfrom labkit.cli import build_parser\nbuild_parser('run')\nprint(sorted(m for m in sys.modules if m in %r))"
    # labkit.export is also the package of its messages: listing `export` with its help imports it
    modules = [m for m in cli.CONTRIBUTED if m != "labkit.export"]
    out = subprocess.run(
        [sys.executable, "-c", script % modules], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_python_dash_m_labkit():
    out = subprocess.run(
        [sys.executable, "-m", "labkit", "--version"], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert out.returncode == 0 and out.stdout.strip() == "fsdp-labkit 0.1.0", out.stderr


def test_argparse_speaks_romanian(capsys):
    with i18n.language("ro"):
        with pytest.raises(SystemExit) as info:
            cli.main(["run", "--help"])
        assert info.value.code == 0
        out = capsys.readouterr().out
        for words in ("utilizare: labkit run", "argumente poziționale:", "opțiuni:", "afișează acest mesaj de ajutor"):
            assert words in out
        assert "usage:" not in out and "show this help" not in out
        with pytest.raises(SystemExit) as info:
            cli.main(["run"])
        assert info.value.code == 2
        assert "labkit run: eroare: următoarele argumente sunt obligatorii: file" in capsys.readouterr().err
        with pytest.raises(SystemExit):
            cli.main(["run", "x.py", "--nprc", "2"])
        assert "labkit: eroare: argumente necunoscute: --nprc 2" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["run"])
    assert "labkit run: error: the following arguments are required: file" in capsys.readouterr().err


def test_an_unknown_language_is_one_line(capsys):
    assert cli.main(["--lang", "xx", "--help"]) == 2
    assert capsys.readouterr().err.strip() == "labkit: unknown language 'xx'; choose one of en, ro"


def test_a_bad_option_of_run_is_one_line(tmp_path, capsys):
    script = tmp_path / "job.py"
    script.write_text("pass\n")
    assert cli.main(["run", str(script), "--backend", "glo"]) == 1
    assert (
        capsys.readouterr().err.strip()
        == "unknown backend 'glo' (did you mean 'gloo'?); choose one of: auto, gloo, nccl"
    )


@pytest.mark.slow
def test_run_json_is_alone_on_stdout(tmp_path):
    script = tmp_path / "job.py"
    script.write_text("from labkit import rank\nprint('hello from', rank.rank())\nrank.report(x=rank.rank())\n")
    out = subprocess.run(
        [sys.executable, "-m", "labkit", "run", str(script), "-n", "2", "--backend", "gloo", "--json"],
        capture_output=True, text=True, timeout=180, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"0": {"x": 0}, "1": {"x": 1}}
    assert "2 ranks, backend gloo" in out.stderr and "rank 1 values: x=1" in out.stderr


def test_load_ext_imports_no_torch_and_no_notebook_reader():
    """``%load_ext labkit`` is the first cell of every lesson, in the lab and in each graded notebook: it
    costs what it imports. nbformat brings jsonschema, whose format checkers built a grammar for a second
    of CPU per kernel (the grader's notebooks paid it 20 times a lesson); torch waits for the first rank."""
    script = (
        "import sys\nfrom IPython.core.interactiveshell import InteractiveShell\n"
        "InteractiveShell.instance().run_cell('%load_ext labkit')\n"
        "print(sorted(m for m in ('torch', 'nbformat', 'jsonschema', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"
