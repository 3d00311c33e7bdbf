"""Lesson 9's exercise on the ranks, ``parallelize(model, mesh)`` (``labkit.grading.rerun_lesson9``), without
launching a rank: what the grader takes from each edition, the inputs it makes, its verdicts on made-up
outputs, and the notebook's check on made-up observations. Right and wrong answers run through the grader's
own ranks in ``tests/test_grading_fairness.py`` (its ``CORPUS``), like every lesson's exercise.

    .venv/bin/pytest tests/test_lesson9_exercise.py -q
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

from labkit.grading import rerun, rerun_lesson9
from labkit.grading.build import BEGIN_SOLUTION, END_SOLUTION, student_notebook
from labkit.i18n import t

ROOT = Path(__file__).resolve().parents[1]
QID = "lesson9.compose"
NOTEBOOK = "09_composing_parallelisms.ipynb"
REGION = re.compile(rf"^([ \t]*){re.escape(BEGIN_SOLUTION)}\n(.*?)^[ \t]*{re.escape(END_SOLUTION)}\n?", re.M | re.S)


def cells(lang: str = "en") -> tuple[list[str], int, int]:
    """(the notebook's code cell sources, the exercise cell's index, its check's index)."""
    nb = nbformat.read(ROOT / "notebooks" / lang / NOTEBOOK, as_version=4)
    sources = [c.source for c in nb.cells if c.cell_type == "code"]
    check = next(i for i, c in enumerate(sources) if f'labkit.check("{QID}", labkit.last_run)' in c)
    exercise = next(i for i in reversed(range(check)) if sources[i].startswith("%%torchrun"))
    return sources, exercise, check


def handed_in(body: str | None, lang: str = "en") -> str:
    """The functions the grader takes from a notebook whose solution region holds ``body`` (None: the solution)."""
    sources, exercise, check = cells(lang)

    def one(m: re.Match) -> str:
        text = m.group(2) if body is None else body
        indent = "" if body is None else m.group(1)
        return "\n".join(indent + line for line in text.rstrip("\n").split("\n")) + "\n"

    sources[exercise] = REGION.sub(one, sources[exercise])
    code = rerun.functions_of(sources, QID, before=check)
    assert code is not None
    return code


def test_the_exercise_is_in_the_graders_table():
    assert QID in rerun.rerun_questions()
    assert rerun.EXERCISES[QID].functions == ("parallelize",) and rerun.EXERCISES[QID].world == 4


def test_both_editions_hand_in_the_same_code_and_the_student_edition_a_stub():
    assert ast.dump(ast.parse(handed_in(None, "ro"))) == ast.dump(ast.parse(handed_in(None)))
    nb = nbformat.read(ROOT / "notebooks" / "en" / NOTEBOOK, as_version=4)
    student = student_notebook(nb, NOTEBOOK)
    sources = [c.source for c in student.cells if c.cell_type == "code"]
    check = next(i for i, c in enumerate(sources) if f'labkit.check("{QID}", labkit.last_run)' in c)
    code = rerun.functions_of(sources, QID, before=check)
    assert code is not None and "raise NotImplementedError()" in code and "parallelize_module(block" not in code


def test_the_inputs_give_each_row_of_the_mesh_one_batch():
    shared, per_rank = rerun.inputs_of(QID, 11)
    assert (shared["dp"], shared["tp"]) == (2, 2)
    assert per_rank[0]["batch"] == per_rank[1]["batch"] and per_rank[2]["batch"] == per_rank[3]["batch"]
    assert per_rank[0]["batch"] != per_rank[2]["batch"]
    assert rerun.inputs_of(QID, 11) == (shared, per_rank), "a function of the seed alone"


def test_made_up_shards_are_judged_by_the_parallelism_they_lack():
    """Outputs that would come from FSDP alone, or from no FSDP: judged here without launching a rank."""
    shared, inputs = rerun.inputs_of(QID, 5)
    model = rerun_lesson9._model(shared)
    sizes = {name: p.numel() for name, p in model.named_parameters()}
    for divide, key in (
        (lambda name, n: n // 2, "tp_missing"),
        (lambda name, n: n // (1 if "ffn" not in name else 2), "dp_missing"),
    ):
        local = {name: divide(name, n) for name, n in sizes.items()}
        outputs = {r: {"loss": 1.0, "local": local, "after": {}} for r in range(4)}
        verdict = rerun.verdict(QID, 5, {"outputs": outputs, "calls": {}})
        assert not verdict.correct and verdict.key == f"grading.exercise.compose.{key}", verdict
        for lang in ("en", "ro"):
            assert "{" not in t(verdict.key, lang, **verdict.fields)


def observation(model_numel: int, reference_numel: int, losses: list[float], flavor: str = "fsdp2") -> dict:
    trace = [{"k": "out", "m": "TransformerLM", "id": i, "loss": x, "grad": False} for i, x in enumerate(losses)]
    return {
        "ok": True,
        "trace": trace,
        "globals": {
            "model": {"module": {"flavor": flavor, "numel": model_numel}},
            "reference": {"module": {"flavor": "plain", "numel": reference_numel}},
        },
    }


@pytest.mark.parametrize(
    ("obs", "key"),
    [
        (observation(73_888, 196_928, [6.29, 6.29]), None),
        (observation(98_464, 196_928, [6.29, 6.29]), "grading.exercise.compose.no_tp"),
        (observation(73_888, 196_928, [6.29, 6.29], "plain"), "grading.exercise.compose.not_fsdp2"),
        (observation(73_888, 196_928, [6.29, 6.41]), "grading.exercise.loss_changed"),
        (observation(73_888, 196_928, [6.29]), "grading.exercise.compose.losses"),
    ],
    ids=["right", "fsdp only", "no fsdp", "another function", "no reference loss"],
)
def test_the_notebooks_check_reads_what_labkit_observed(obs, key):
    verdict = rerun_lesson9.compose({r: obs for r in range(4)})
    assert verdict.correct is (key is None) and (key is None or verdict.key == key), verdict
