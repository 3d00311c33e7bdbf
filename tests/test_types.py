"""The type checker over the kernel<->rank contract and its readers, at zero errors.

    .venv/bin/python -m pytest tests/test_types.py -q

mypy (pinned in the ``test`` extra) runs over the modules ``[tool.mypy]`` in pyproject.toml names:
``labkit/wire`` and every module that writes or reads its messages and records. There a payload's
field that its ``TypedDict`` does not declare, or a record's that its class does not, is an error,
not a ``None`` at run time. Its cache (``.mypy_cache``) makes a run after the first take seconds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# what [tool.mypy] must cover at least: the records' definitions and the modules issue 46 named
COVERED = (
    "labkit/wire",
    "labkit/ranks/rank.py",
    "labkit/ranks/recording.py",
    "labkit/ranks/torch_hooks.py",
    "labkit/launch/run.py",
    "labkit/launch/forkserver.py",
    "labkit/launch/prefork.py",
    "labkit/regress/record.py",
)


def mypy_config() -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["mypy"]


def test_the_checked_set_covers_the_records_and_their_readers():
    files = mypy_config()["files"]
    assert set(COVERED) <= set(files), sorted(set(COVERED) - set(files))
    assert all((ROOT / f).exists() for f in files), "a module [tool.mypy] names is gone"


def test_mypy_finds_no_error():
    pytest.importorskip("mypy", reason="mypy is not installed: pip install -e '.[test]' (the test extra pins it)")
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert out.returncode == 0, "mypy, over pyproject.toml's [tool.mypy] files:\n" + out.stdout + out.stderr
