"""No question is answered by the cells above it (``labkit.course.answers``).

Here, statically and fast: every built notebook of both editions, whose markdown and stored
outputs (the pure cells' tables) are what a student reads before each question. The outputs of
runs are checked where the suite already executes the notebooks: ``tests/test_notebooks.py``'s
papermill run calls the same ``leaks`` on the executed notebook.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from labkit.course import answers
from labkit.grading import registry
from labkit.regress.record import MIME

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(ROOT.glob("notebooks/en/*.ipynb")) + sorted(ROOT.glob("notebooks/ro/*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_question_is_answered_by_an_earlier_cell(path: Path):
    nb = nbformat.read(path, as_version=4)
    assert [str(leak) for leak in answers.leaks(nb)] == []


def _notebook(*cells: nbformat.NotebookNode, lang: str = "en") -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["labkit"] = {"lang": lang, "lesson": "lesson2"}
    nb.cells = list(cells)
    return nb


def _zero1_cell(n: str = "paper_params", gpus: str = "paper_gpus") -> nbformat.NotebookNode:
    source = (
        "def zero1_bytes(n_params, world_size):\n"
        "    ### BEGIN SOLUTION\n"
        "    return (4 + 4) * n_params + 8 * n_params / world_size\n"
        "    ### END SOLUTION\n\n\n"
        f"print(show.fmt(zero1_bytes({n}, {gpus}), 'GB'))"
    )
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="60.9 GB\n")]  # the student's own
    return cell


def _pure(source: str, text: str = "") -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["nbval-check-output"]})
    if text:
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    return cell


CHECK = nbformat.v4.new_code_cell('labkit.check("lesson2.zero1_bytes", zero1_bytes)')


@pytest.mark.parametrize(
    ("lang", "prose"),
    [
        ("en", "Figure 1 of the paper: 60.94 GB per GPU."),
        ("ro", "Figura 1 din articol: 60,94 GB pe GPU."),
        ("en", "| ZERO1 | 60,937,500,000 |"),
        ("en", "In MiB that is 58,114.5 MiB."),
    ],
)
def test_a_formulas_value_at_the_notebooks_arguments_is_found_in_earlier_prose(lang: str, prose: str):
    """The value of the reference at the arguments the notebook calls the function with (from its pure cells),
    in any of the forms the lessons print numbers in, in the edition's own number format."""
    registry.load_questions()
    nb = _notebook(
        _pure("paper_params, paper_gpus = 7.5e9, 64"),
        nbformat.v4.new_markdown_cell(prose),
        _zero1_cell(),
        CHECK,
        lang=lang,
    )
    found = answers.leaks(nb)
    assert [(leak.qid, leak.cell, leak.check_cell) for leak in found] == [("lesson2.zero1_bytes", 1, 3)]


def test_the_students_own_cell_and_other_numbers_are_not_leaks():
    registry.load_questions()
    nb = _notebook(
        _pure("paper_params, paper_gpus = 7.5e9, 64"),
        nbformat.v4.new_markdown_cell("The table: 120, 31.4, 16.6 and 1.9 GB; 609 steps; 60.95 GB is another number."),
        _zero1_cell(),  # prints the answer: the student's own output
        CHECK,
    )
    assert answers.leaks(nb) == []


def test_a_stored_output_of_an_earlier_cell_counts_as_shown():
    """The pure cells' outputs (a formula table the build stored) are read like the markdown."""
    registry.load_questions()
    table = "| strategy | total |\n| ZERO1 (fp32) | 60.94 |\n"
    nb = _notebook(_pure("paper_params, paper_gpus = 7.5e9, 64", table), _zero1_cell(), CHECK)
    assert [leak.cell for leak in answers.leaks(nb)] == [0]


def test_a_mapping_is_answered_by_a_table_row_per_key(monkeypatch: pytest.MonkeyPatch):
    """The old lesson 7 exercise 1: the migration table paired each FSDP1 strategy with its setting."""
    registry.load_questions()
    q = registry.Question("lesson7.old_reshard", answer={"FULL_SHARD": True, "SHARD_GRAD_OP": False}, sealed=True)
    monkeypatch.setitem(registry._QUESTIONS, q.id, q)
    rows = "| FSDP1 | FSDP2 |\n|---|---|\n| `FULL_SHARD` | `reshard_after_forward=True` |\n"
    check = nbformat.v4.new_code_cell('labkit.check("lesson7.old_reshard", reshard)')
    half = _notebook(nbformat.v4.new_markdown_cell(rows), check)
    assert answers.leaks(half) == []  # one key of two: not the answer
    both = _notebook(
        nbformat.v4.new_markdown_cell(rows + "| `SHARD_GRAD_OP` | `reshard_after_forward=False` |\n"), check
    )
    assert [leak.qid for leak in answers.leaks(both)] == [q.id]


def test_a_measured_answer_in_an_earlier_runs_table_is_found():
    """An executed notebook: lesson 5's prediction from the fp32 figure, asked after a table that shows the bf16
    figure it is judged against (the run's record gives the arguments)."""
    registry.load_questions()
    record = {"nproc": 2, "values": {"0": {"fp32": {"memory": {"params_unsharded": 524_288}},
                                           "bf16": {"memory": {"params_unsharded": 262_144}}}}}  # fmt: skip
    run_cell = nbformat.v4.new_code_cell("%%torchrun -n 2\nrank.report(...)")
    run_cell.outputs = [nbformat.v4.new_output("display_data", data={MIME: record, "text/plain": ""})]
    assign = nbformat.v4.new_code_cell("precision = labkit.last_run\nshow.table(rows)")
    assign.outputs = [nbformat.v4.new_output("display_data", data={"text/plain": "| bf16 | 256.0 KiB |"})]
    ask = nbformat.v4.new_code_cell(
        "def bf16_gathered(fp32_gathered):\n    ### BEGIN SOLUTION\n    return fp32_gathered / 2\n    ### END SOLUTION"
    )
    check = nbformat.v4.new_code_cell('labkit.check("lesson5.bf16_gathered", bf16_gathered, run=precision)')
    nb = _notebook(run_cell, assign, ask, check)
    assert answers.run_records(nb)[0][1].values[0]["bf16"]["memory"]["params_unsharded"] == 262_144
    assert [(leak.qid, leak.cell) for leak in answers.leaks(nb)] == [("lesson5.bf16_gathered", 1)]
    before = _notebook(run_cell, nbformat.v4.new_code_cell("precision = labkit.last_run"), ask, check, assign)
    assert answers.leaks(before) == []  # asked first, shown after: a prediction


def test_a_prediction_is_asked_where_it_is_defined_not_where_it_is_checked():
    """Lessons 2 and 7: the student writes the prediction, the run shows the measured figure, the check compares
    them. The figure sits between the definition and the check, after the question: no leak. Above the
    definition it would be one."""
    registry.load_questions()
    table = nbformat.v4.new_markdown_cell("Measured: 60.94 GB per GPU.")
    nb = _notebook(_pure("paper_params, paper_gpus = 7.5e9, 64"), _zero1_cell(), table, CHECK)
    assert answers.asked_at(nb, next(answers.check_calls(CHECK.source)), 3) == 1
    assert answers.leaks(nb) == []
    shown_first = _notebook(_pure("paper_params, paper_gpus = 7.5e9, 64"), table, _zero1_cell(), CHECK)
    assert [(leak.cell, leak.check_cell) for leak in answers.leaks(shown_first)] == [(1, 3)]


def test_the_run_a_check_reads_is_the_one_its_name_was_set_from():
    first, second = SimpleNamespace(values={0: 1}), SimpleNamespace(values={0: 2})
    nb = _notebook(
        nbformat.v4.new_code_cell("%%torchrun"),
        nbformat.v4.new_code_cell("a = labkit.last_run"),
        nbformat.v4.new_code_cell("%%torchrun"),
        nbformat.v4.new_code_cell('labkit.check("x.y", f, run=a)\nlabkit.check("x.z", g, run=labkit.last_run)'),
    )
    records = [(0, first), (2, second)]
    calls = list(answers.check_calls(nb.cells[3].source))
    assert answers.run_of(nb, calls[0], 3, records) is first
    assert answers.run_of(nb, calls[1], 3, records) is second


@pytest.mark.parametrize(
    ("text", "leaked"),
    [
        ("The answer is b.", True),
        ("Răspunsul corect: (b).", True),
        ("**b** is correct: the collective averages them.", True),
        ("a. its own gradient\nb. the mean of the ranks' gradients\nc. rank 0's gradient", False),
        ("The answer is a trade-off between memory and time.", False),
    ],
)
def test_a_letter_is_shown_when_a_cell_above_says_it_is_the_answer(text: str, leaked: bool):
    """A multiple-choice letter: its options name every letter, so only a statement that one is right counts."""
    registry.load_questions()
    ask = nbformat.v4.new_code_cell('answer = ...\n### BEGIN SOLUTION\nanswer = "b"\n### END SOLUTION')
    check = nbformat.v4.new_code_cell('labkit.check("lesson0.step_gradient", answer)')
    nb = _notebook(nbformat.v4.new_markdown_cell(text), ask, check)
    assert [leak.cell for leak in answers.leaks(nb)] == ([0] if leaked else [])


def test_code_above_the_question_that_sets_the_answer_is_a_leak():
    registry.load_questions()
    ask = nbformat.v4.new_code_cell('### BEGIN SOLUTION\nanswer = "b"\n### END SOLUTION')
    check = nbformat.v4.new_code_cell('labkit.check("lesson0.step_gradient", answer)')
    nb = _notebook(nbformat.v4.new_code_cell('answer = "b"  # left in by mistake'), ask, check)
    assert [(leak.cell, leak.shown) for leak in answers.leaks(nb)] == [(0, 'answer = "b"')]


def test_a_tables_column_that_adds_up_to_the_answer_is_a_leak():
    """Lesson 1's bytes per parameter, once asked below the table whose column it is the sum of."""
    registry.load_questions()
    table = (
        "what                 fp32 (bytes)  mixed precision (bytes)\n"
        "-------------------  ------------  -----------------------\n"
        "weights                         4                        2\n"
        "gradients                       4                        2\n"
        "fp32 master weights             0                        4\n"
        "Adam m                          4                        4\n"
        "Adam v                          4                        4\n"
    )
    ask = nbformat.v4.new_code_cell(
        "def mixed_state_bytes(n_params):\n    ### BEGIN SOLUTION\n    return 16 * n_params\n    ### END SOLUTION\n\n\n"
        "bytes_per_param = mixed_state_bytes(1)"
    )
    check = nbformat.v4.new_code_cell('labkit.check("lesson1.bytes_per_param", mixed_state_bytes)')
    below = _notebook(_pure("components = ...", table), ask, check)
    assert [(leak.qid, leak.cell) for leak in answers.leaks(below)] == [("lesson1.bytes_per_param", 0)]
    above = _notebook(ask, _pure("components = ...", table), check)
    assert answers.leaks(above) == []
    assert answers.table_columns("| a | b |\n|---|---|\n| x | 1 |\n| y | 2 |\n| z | 3.5 |") == [[1.0, 2.0, 3.5]]
    assert answers.column_sum(6.5, "| a | b |\n|---|---|\n| x | 1 |\n| y | 2 |\n| z | 3.5 |") == "1 + 2 + 3.5"
    assert answers.column_sum(3, "| rank |\n|---|\n| 1 |\n| 2 |") is None  # two numbers: not a sum one reads


@pytest.mark.parametrize(
    ("prose", "stated"),
    [
        ("Each rank then allocates 4Ψ/N bytes of parameters, never 4Ψ.", "4Ψ/N"),
        ("Fiecare rang alocă atunci 4 Ψ / N octeți.", "4 Ψ / N"),
        ("A rank holds `4 * n_params / world_size` bytes.", "4 * n_params / world_size"),
        ("Each rank then allocates only its own rows, never all 4Ψ bytes.", None),
        ("Stage 3 holds (2 + 2 + K) Ψ / N per rank.", None),  # 16Ψ/N: another formula
        ("The number of ranks is `world_size`.", None),  # a name alone is no formula
    ],
)
def test_a_formula_written_in_the_prose_above_is_a_leak(prose: str, stated: str | None):
    """Lesson 7 once stated the answer to its own prediction, 4Ψ/N, a section above it."""
    registry.load_questions()
    q = registry.get("lesson7.rank_bytes")
    assert answers.formula_stated(q.answer, q.args, prose) == stated
    ask = nbformat.v4.new_code_cell(
        "### BEGIN SOLUTION\ndef rank_bytes(n_params, world_size):\n    return 4 * n_params / world_size\n### END SOLUTION"
    )
    check = nbformat.v4.new_code_cell('labkit.check("lesson7.rank_bytes", rank_bytes, run=fsdp2, n_params=n_params)')
    nb = _notebook(nbformat.v4.new_markdown_cell(prose), ask, check)
    assert [leak.shown for leak in answers.leaks(nb)] == ([stated] if stated else [])
    after = _notebook(ask, nbformat.v4.new_markdown_cell(prose), check)
    assert answers.leaks(after) == []  # explained after the student wrote it: no leak


def test_a_name_defined_twice_is_asked_where_it_was_last_defined():
    """Lesson 4 asks two multiple-choice questions in ``answer``: each is asked in the nearest cell above its check."""
    first = nbformat.v4.new_code_cell('### BEGIN SOLUTION\nanswer = "L1"\n### END SOLUTION')
    second = nbformat.v4.new_code_cell('### BEGIN SOLUTION\nanswer = "c"\n### END SOLUTION')
    check = nbformat.v4.new_code_cell('labkit.check("lesson4.slow_link_order", answer)')
    nb = _notebook(first, nbformat.v4.new_code_cell('labkit.check("lesson4.prefetched_unit", answer)'), second, check)
    assert answers.asked_at(nb, next(answers.check_calls(check.source)), 3) == 2
