"""The project's own files: environment.yml matches pyproject.toml, the CLI starts, the commands exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import yaml

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONDA_NAMES = {"torch": "pytorch"}  # PyPI name -> conda-forge name, where they differ


def split(req: str) -> tuple[str, str]:
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", req)
    assert m, req
    return m.group(1).lower().replace("_", "-"), m.group(2).replace(" ", "")


def test_environment_yml_matches_pyproject():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    with open(os.path.join(ROOT, "environment.yml")) as f:
        env = yaml.safe_load(f)
    # the student side: the dependencies and the [lab] extra, not the test or grading tools
    student = project["dependencies"] + project["optional-dependencies"]["lab"]
    wanted = {CONDA_NAMES.get(n, n): spec for n, spec in map(split, student)}
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    from_pypi = [d for d in pip_section if d != "-e ."]  # what conda-forge does not have
    have = {n: spec for n, spec in map(split, conda + from_pypi) if n not in ("python", "pip")}
    assert have == wanted
    assert len(have) == len(conda) + len(from_pypi) - 2  # no package twice (python and pip aside)
    python_spec = next(split(d)[1] for d in conda if split(d)[0] == "python")
    assert python_spec == project["requires-python"]
    assert "-e ." in pip_section
    assert env["channels"] == ["conda-forge"]


@pytest.mark.slow
def test_cli_help_in_both_languages():
    # the command itself once (it starts, and --lang reaches the help), then English in-process:
    # each start of the command imports every subcommand's module, seconds on a busy machine
    out = subprocess.run(
        [sys.executable, "-m", "labkit.cli", "--lang", "ro", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert "rulează" in out.stdout
    from labkit.cli import build_parser
    from labkit.i18n import language

    with language("en"):
        assert "run a Python file" in build_parser().format_help()


def test_readme_commands_exist():
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    for script in ("launch/lab.sh", "launch/test.sh"):
        assert f"bash {script}" in readme
        assert os.path.exists(os.path.join(ROOT, script))
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        assert "bash launch/test.sh" in f.read()
