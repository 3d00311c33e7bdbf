"""No English sentence in what the Romanian edition's code cells print (labkit.course.english).

The detector on sample lines, then on the outputs the built Romanian notebooks store (their pure
cells: formula tables, the checks' feedback). The outputs of runs need an executed notebook:
tests/test_notebooks.py's papermill run of each Romanian notebook applies the same check.

.venv/bin/pytest tests/test_ro_english.py -q
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from labkit.course import english
from labkit.grading import registry

ROOT = Path(__file__).resolve().parents[1]

ENGLISH = [
    "all ranks finished",
    "7.5B parameters on 64 ranks, per rank (GB)",
    "| strategy | parameters | gradients | optimizer state | total |",
    "convention zero: 16 bytes per parameter, at most 5,000,000,000 parameters on one GPU under DDP",
    "the run went past its timeout of 30 s; ranks still running: 0, 1",
    "peak memory of rank 0 is 12.5 MiB",
]
NOT_ENGLISH = [
    "toate rangurile au terminat",
    "7,5 mld. de parametri pe 64 de ranguri, per rang (GB)",
    "rangul 0: loss 2,3125",  # one English word: a value's name
    "fragmentare (sharding): fiecare rang ține 1/N din parametri",  # a term introduced beside its Romanian
    "FULL_SHARD  SHARD_GRAD_OP  NO_SHARD",  # constants
    "all_gather  reduce_scatter  14  28",  # collectives' names and numbers
    "labkit.check('lesson1.bytes_per_param', 16) -> model.parameters()",  # code
    "{'loss': 2.5, 'step': 3, 'grad_norm': 0.25}",  # a dict's repr
    "/tmp/labkit/run-1/rank0.log",
    "--backend gloo --nproc 2",
    "",
    "-------  ------  -----",
]


@pytest.fixture(scope="module", autouse=True)
def hints():
    registry.load_questions()  # the vocabularies read every message, the hints included


@pytest.mark.parametrize("line", ENGLISH)
def test_an_english_line_is_found(line):
    assert english.is_english(line), english.prose_words(line)


@pytest.mark.parametrize("line", NOT_ENGLISH)
def test_romanian_code_and_numbers_are_not_english(line):
    assert not english.is_english(line), english.prose_words(line)


def test_html_output_is_read_as_its_text():
    html = "<div class='labkit-check'><b>✓ lesson1.x</b>: the answer is recorded and graded when you hand in</div>"
    assert english.english_lines(html) == ["✓ lesson1.x: the answer is recorded and graded when you hand in"]
    assert english.english_lines("<div style='color:red'><b>✓ corect</b> (1/1)</div>") == []


def test_english_outputs_names_the_cell():
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("the markdown is not output"),
        nbformat.v4.new_code_cell(
            "print(x)", outputs=[nbformat.v4.new_output("stream", text="rangul 0 gata\nall ranks finished\n")]
        ),
        nbformat.v4.new_code_cell(
            "t", outputs=[nbformat.v4.new_output("execute_result", data={"text/plain": "'the x'"})]
        ),
    ]
    assert english.english_outputs(nb) == ["cell 1: all ranks finished"]


def test_the_english_edition_reads_as_english():
    # the detector's sensitivity: the same cells' stored outputs in English are found
    found = [english.english_outputs(nbformat.read(p, as_version=4)) for p in sorted(ROOT.glob("notebooks/en/*.ipynb"))]
    assert sum(map(len, found)) > 15 and sum(1 for f in found if f) >= 4


@pytest.mark.parametrize("path", sorted(ROOT.glob("notebooks/ro/*.ipynb")), ids=lambda p: p.stem)
def test_the_romanian_notebooks_store_no_english_output(path):
    assert english.english_outputs(nbformat.read(path, as_version=4)) == []
