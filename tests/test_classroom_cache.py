"""Grading at class scale (issue 48): a regrade of an unchanged class runs no notebook, a changed submission
regrades only it, and ``--student`` / ``--lesson`` choose what runs. Counted in sandbox runs, not time: every
notebook's run (and any judge's) is one ``box.run``.

    .venv/bin/pytest tests/test_classroom_cache.py -q     (about 30 s: the fixture lesson's kernels)
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import nbformat
import pytest

from labkit.grading import sandbox
from labkit.grading.cli import main

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures" / "grading"
SOLUTION = FIXTURES / "memory_solution.ipynb"
QUESTIONS = FIXTURES / "fixture_questions.py"


class Counting:
    """A sandbox that counts what it runs (each notebook, each judge)."""

    def __init__(self, box) -> None:
        self.box, self.name, self.runs = box, box.name, 0

    def run(self, *args, **kwargs):
        self.runs += 1
        return self.box.run(*args, **kwargs)


@pytest.fixture
def grade(monkeypatch):
    made: list[Counting] = []
    real = sandbox.find

    def counting(no_sandbox: bool = False):
        made.append(Counting(real(no_sandbox)))
        return made[-1]

    monkeypatch.setattr(sandbox, "find", counting)
    monkeypatch.setenv("LABKIT_LANG", "en")
    monkeypatch.delenv("LABKIT_QUESTIONS", raising=False)

    def run(subs: Path, out: Path, *more: str) -> int:
        env = dict(os.environ)
        try:
            assert main(["grade", str(subs), "--out", str(out), "--timeout", "20", "--questions", str(QUESTIONS),
                         *more]) == 0  # fmt: skip
        finally:
            os.environ.clear()
            os.environ.update(env)
        return made[-1].runs

    return run


def gradebook(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "gradebook.csv") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


@pytest.mark.slow
def test_unchanged_class_runs_nothing_and_a_changed_submission_only_itself(grade, tmp_path):
    subs, out = tmp_path / "submissions", tmp_path / "reports"
    for student in ("ana", "bob"):
        (subs / student).mkdir(parents=True)
        nbformat.write(nbformat.read(SOLUTION, as_version=4), subs / student / "fixture.ipynb")
    first = grade(subs, out)
    assert first == 2  # a sandbox per notebook (the fixture's values need no judge's sandbox)
    before = gradebook(out)
    assert before["ana"]["fixture"] == before["bob"]["fixture"] == "4"

    assert grade(subs, out) == 0  # unchanged: every score read back
    assert gradebook(out) == before
    report = json.loads((out / "ana" / "report.json").read_text())
    assert report["notebooks"][0]["status"] == "ok" and os.path.isfile(report["notebooks"][0]["executed"])

    wrong = nbformat.read(SOLUTION, as_version=4)
    i = next(i for i, c in enumerate(wrong.cells) if "bytes_per_param = 2 + 2" in c.source)
    wrong.cells[i].source = "bytes_per_param = 12"
    nbformat.write(wrong, subs / "bob" / "fixture.ipynb")
    assert grade(subs, out) == 1  # bob's notebook, nothing of ana's
    after = gradebook(out)
    assert after["ana"] == before["ana"] and after["bob"]["fixture"] == "3"

    assert grade(subs, out, "--no-cache", "--student", "ana") == 1  # the filter: ana alone runs
    only = gradebook(out)
    assert only["ana"] == before["ana"]
    assert "bob" not in only  # --no-cache: bob's kept score is not read either, so bob is not in this grading
    assert grade(subs, out, "--lesson", "lesson9") == 0  # nothing of that lesson: the kept scores only
    assert gradebook(out) == after
