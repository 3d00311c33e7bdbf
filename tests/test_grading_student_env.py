"""The students' environment, built as the hub builds it, holds no answer; its checks still give feedback.

``labkit build-student notebooks --out DIST`` (the student notebooks, and the student's wheel of
labkit), then ``launch/setup-student-env.sh DIST DEST`` (a virtual environment with that wheel, the
notebooks beside it). Then, in every file of DEST:

- no solution: no text of any solution region of the solution notebooks, in either language;
- no reference: no body of a reference function of the course's questions, and none of their
  modules importable; no lesson source (the MyST lessons hold every solution, the exercises' on the
  ranks inline);
- no reference value: none of the reference values of a formula at its unseen points, nor at the
  grader's, in any of the ways Python writes a number; multiple choice has no answer in any form;

and in its Python, a check of a formula says correct for the right function and names a known
mistake, from the hashes alone.

    .venv/bin/pytest tests/test_grading_student_env.py -q
"""

from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from labkit.grading import registry
from labkit.grading.build import BEGIN_SOLUTION, END_SOLUTION
from labkit.grading.cli import main

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(ROOT.glob("notebooks/*/*.ipynb"))
REGION = re.compile(rf"^[ \t]*{re.escape(BEGIN_SOLUTION)}\n(.*?)^[ \t]*{re.escape(END_SOLUTION)}", re.M | re.S)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def normalized(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    base = tmp_path_factory.mktemp("hub")
    dist, dest = base / "dist", base / "dest"
    assert main(["build-student", str(ROOT / "notebooks"), "--out", str(dist)]) == 0
    env = {**os.environ, "LABKIT_SKIP_TORCH": "1", "PIP_NO_DEPS": "1", "PIP_NO_INDEX": "1", "PYTHON": sys.executable}
    done = subprocess.run(
        ["bash", str(ROOT / "launch" / "setup-student-env.sh"), str(dist), str(dest)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "no answers" in done.stdout
    files = {p: p.read_bytes().decode("utf-8", errors="replace") for p in dest.rglob("*") if p.is_file()}
    labkit_files = {p: text for p, text in files.items() if "/labkit/" in str(p) or p.suffix == ".ipynb"}
    assert any(p.name == "catalog.json" for p in labkit_files) and any(p.suffix == ".ipynb" for p in labkit_files)
    return SimpleNamespace(dist=dist, dest=dest, files=labkit_files, python=dest / "venv" / "bin" / "python")


def test_no_solution_is_in_the_students_environment(hub):
    regions = set()
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            regions |= {normalized(m.group(1)) for m in REGION.finditer(cell.source)}
    # shorter ones ("return world_size", "answer = 'b'") are common code: the build tests check them away
    regions = {r for r in regions if len(r) >= 20}
    assert len(regions) > 20
    texts = {p: normalized(t) for p, t in hub.files.items()}
    found = [(str(p), r[:60]) for r in regions for p, t in texts.items() if r in t]
    assert found == []
    assert not any(p.name.startswith("lesson") and p.suffix == ".py" for p in hub.files)
    # no lesson source: the MyST lessons (and their snippets) hold every solution, the rank exercises' inline
    sources = [p for p in hub.files if "/labkit/course/" in str(p) and p.suffix == ".md"]
    assert sources == [] and not any("/labkit/course/lessons/" in str(p) for p in hub.files)


def test_no_reference_is_in_the_students_environment(hub):
    registry.load_questions()
    bodies = []
    for q in registry.all_questions():
        for fn in (q.answer, q.observe, q.verify):
            if callable(fn) and fn.__module__.startswith("labkit.course.questions"):
                source = textwrap.dedent(inspect.getsource(fn))
                body = source.split(":\n", 1)[1] if source.lstrip().startswith(("def", "@")) else source
                bodies.append(normalized(re.sub(r'^\s*""".*?"""', "", body, flags=re.S)))
    bodies = [b for b in bodies if len(b) >= 20]
    assert len(bodies) > 15
    texts = [normalized(t) for t in hub.files.values()]
    assert [b[:60] for b in bodies if any(b in t for t in texts)] == []


def number_forms(x: float) -> set[str]:
    forms = {repr(x), f"{x:g}", f"{x:.6g}", f"{x:.10g}", f"{x:e}", json.dumps(x)}
    if float(x).is_integer():
        forms |= {str(int(x)), f"{int(x):_}", f"{int(x):,}"}
    return {f for f in forms if len(f.replace(".", "").replace("-", "").lstrip("0")) >= 6}


def numbers_in(text: str) -> set[str]:
    return {t.rstrip(".,") for t in re.findall(r"-?\d[\d_,.]*(?:e[-+]?\d+)?", text)}


def test_no_reference_value_is_in_the_students_environment(hub):
    registry.load_questions()
    forms: dict[str, str] = {}
    for q in registry.all_questions():
        if q.formula:
            for point in q.samples(grader=True):
                values = q.answer(**point)
                for v in values if isinstance(values, list) else [values]:
                    forms.update(dict.fromkeys(number_forms(v), q.id))
    assert len(forms) > 100
    tokens = set()  # every number written in the environment's files, as it is written (one pass over them)
    for text in hub.files.values():
        tokens |= numbers_in(text)
    assert {f: qid for f, qid in forms.items() if f in tokens} == {}
    planted = sorted(forms)[::7]  # the scan finds them where they are written, in prose or code
    assert all(f in numbers_in(f"x = {f}, then ({f}). {f}") for f in planted)
    catalog = json.loads(next(t for p, t in hub.files.items() if p.name == "catalog.json"))
    for entry in catalog["questions"]:
        if entry["sealed"]:  # multiple choice: not even a hash of the answer
            assert entry["hashed"] is None and "answer" not in json.dumps(entry).lower().replace("answers", "")


def test_the_students_checks_still_give_feedback(hub):
    code = """
import importlib.util, json
import labkit
from labkit.grading import registry
out = {"modules": [m for m in ("labkit.course.questions", "labkit.course.lessons")
                   if importlib.util.find_spec(m) is not None]}
out["with_answer"] = [q.id for q in registry.all_questions() if q.answer is not registry.UNSET]
def zero1_bytes(n_params, world_size):
    return 8 * n_params + 8 * n_params / world_size
out["right"] = labkit.check("lesson2.zero1_bytes", zero1_bytes).status
out["mistake"] = labkit.check("lesson2.zero1_bytes", lambda n_params, world_size: 16 * n_params / world_size).key
out["mcq"] = labkit.check("lesson0.step_gradient", "b").status
out["file"] = labkit.__file__
print(json.dumps(out))
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the venv alone, as a student's kernel has it
    done = subprocess.run([str(hub.python), "-c", code], capture_output=True, text=True, timeout=120, cwd="/", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["modules"] == [] and out["with_answer"] == []
    assert out["right"] == "correct" and out["mistake"] == "grading.q.lesson2.zero1_bytes.mistake1"
    assert out["mcq"] == "recorded" and str(hub.dest) in out["file"]
