"""What the course's questions ask of a student, and how much of the course that is (``registry.Asks``).

- every registered question of the course declares what it asks: a prediction, a mechanism, reasoning,
  arithmetic or a tool (lessons added later included: the count is over every registered question);
- at least two thirds of the course's points are for understanding: predictions, mechanisms written
  on the ranks, and reasoning;
- each kind is what it says: a mechanism is code run on the ranks and judged by what they did;
  reasoning is judged where the notebook cannot show it (a sealed choice, a formula or a function at
  points the notebook never uses); a prediction is written in the student's own cell above its check,
  before a cell that measures it (a run on the ranks, or the simulator), in both editions.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import nbformat
import pytest

from labkit.course import answers
from labkit.grading import registry
from labkit.grading.registry import UNDERSTANDING, Asks
from labkit.wire.grading import QuestionKind

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(ROOT.glob("notebooks/en/*.ipynb")) + sorted(ROOT.glob("notebooks/ro/*.ipynb"))
MIN_UNDERSTANDING = 0.67  # of the course's points: the course teaches FSDP, not its arithmetic
MEASURES = re.compile(r"^%%torchrun|labkit\.torchrun\(|simulate\.simulate\(|predict\.predict\(", re.M)


def course() -> list[registry.Question]:
    registry.load_questions()
    return [q for q in registry.all_questions() if q.lesson.startswith("lesson")]


def shares(questions: list[registry.Question]) -> dict[Asks, float]:
    points = Counter()
    for q in questions:
        points[q.asks] += q.points
    total = sum(points.values())
    return {asks: points[asks] / total for asks in Asks}


def test_every_question_declares_what_it_asks():
    missing = [q.id for q in course() if not isinstance(q.asks, Asks)]
    assert missing == [], f"questions without asks=: {missing}"


def test_two_thirds_of_the_points_are_for_understanding():
    found = shares(course())
    understanding = sum(found[a] for a in UNDERSTANDING)
    table = ", ".join(f"{a.value} {share:.0%}" for a, share in found.items())
    assert understanding >= MIN_UNDERSTANDING, f"understanding {understanding:.1%} < {MIN_UNDERSTANDING:.0%}: {table}"


def test_the_share_counts_points_not_questions():
    """Three one-point lookups outweigh one two-point prediction: the share is of points."""
    q = registry.Question
    made = [q("x.a", 2, asks=Asks.PREDICTION), *(q(f"x.b{i}", 1, asks=Asks.ARITHMETIC) for i in range(3))]
    found = shares(made)
    assert (found[Asks.PREDICTION], found[Asks.ARITHMETIC]) == (0.4, 0.6)
    assert sum(found[a] for a in UNDERSTANDING) < MIN_UNDERSTANDING


def test_asks_is_one_of_the_five_words_and_not_how_it_is_judged():
    assert [a.value for a in Asks] == ["prediction", "mechanism", "reasoning", "arithmetic", "tool"]
    q = registry.Question("x.y", formula=True, asks=Asks.PREDICTION)
    assert (q.kind, q.asks) == (QuestionKind.FORMULA, Asks.PREDICTION)
    with pytest.raises(ValueError):
        Asks("lookup")


@pytest.mark.parametrize("q", [q for q in course() if q.asks is Asks.MECHANISM], ids=lambda q: q.id)
def test_a_mechanism_is_written_on_the_ranks(q: registry.Question):
    assert q.kind is QuestionKind.RUN and q.observe is not None


@pytest.mark.parametrize("q", [q for q in course() if q.asks is Asks.REASONING], ids=lambda q: q.id)
def test_reasoning_is_judged_where_the_notebook_cannot_show_it(q: registry.Question):
    assert q.kind in (QuestionKind.SEALED, QuestionKind.FORMULA, QuestionKind.FUNCTION)


def _checks(nb: nbformat.NotebookNode) -> list[tuple[int, ast.Call]]:
    return [
        (i, c) for i, cell in enumerate(nb.cells) if cell.cell_type == "code" for c in answers.check_calls(cell.source)
    ]


def unmeasured_predictions(nb: nbformat.NotebookNode) -> list[tuple[str, int, int]]:
    """(question, answer cell, check cell) of each prediction not written before what measures it: the
    student's own cell above the check, then a cell that runs ranks or the simulator before the check.
    A multiple choice is recorded at once (its measurement may follow its check), and a prediction
    judged against a run made above it is asked before the tables that show that run (their figures
    are ``answers.leaks``' to find, in the executed notebook)."""
    registry.load_questions()
    wrong = []
    for i, call in _checks(nb):
        q = registry.find(call.args[0].value)
        if q is None or q.asks is not Asks.PREDICTION:
            continue
        asked = answers.asked_at(nb, call, i)
        until = len(nb.cells) if q.sealed else i
        measured = any(MEASURES.search(nb.cells[j].source) for j in range(asked + 1, until))
        reads_a_run = any(k.arg == "run" for k in call.keywords)
        if asked == i or not (measured or reads_a_run):
            wrong.append((q.id, asked, i))
    return wrong


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_prediction_is_written_before_what_measures_it(path: Path):
    assert unmeasured_predictions(nbformat.read(path, as_version=4)) == []


def test_a_prediction_asked_after_its_run_is_found():
    """Lesson 0's first exercise as it was: the all-reduce ran, then the student wrote its result."""
    cells = [
        nbformat.v4.new_code_cell("%%torchrun -n $nproc\ndist.all_reduce(x)"),
        nbformat.v4.new_code_cell(
            "def allreduce_total(world_size):\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION"
        ),
        nbformat.v4.new_code_cell('labkit.check("lesson0.allreduce_sum", allreduce_total)'),
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    assert unmeasured_predictions(nb) == [("lesson0.allreduce_sum", 1, 2)]
    nb.cells = [cells[1], cells[0], cells[2]]
    assert unmeasured_predictions(nb) == []
