"""The course build and the two editions it writes: no kernel, no ranks, a few seconds.

    .venv/bin/pytest tests/test_course_build.py -q

The committed notebooks must be exactly what ``python -m labkit.course.build`` writes
(so nobody edits one by hand), the two editions must run the same code, exercises and
checks, and no Romanian text may carry a cedilla where Romanian has a comma below.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest

from labkit.course import build, glossary
from labkit.course.cells import Code, Lesson, Markdown, check, code, exercise, md, parameters, setup
from labkit.grading import registry
from labkit.grading.build import check_ids, student_notebook
from labkit.i18n import all_messages

ROOT = Path(__file__).resolve().parents[1]
LESSONS = build.lessons()
MY_LESSONS = ("lesson0", "lesson1", "lesson2", "lesson3")
CEDILLA = re.compile(
    "[\u015e\u015f\u0162\u0163]"
)  # S-cedilla s-cedilla T-cedilla t-cedilla: Turkish letters, not Romanian ones
LANG_LINE = re.compile(r"^%labkit_lang \w+$", re.M)


def editions(lesson: Lesson) -> dict[str, nbformat.NotebookNode]:
    return {
        lang: nbformat.read(ROOT / "notebooks" / lang / f"{lesson.file}.ipynb", as_version=4) for lang in ("en", "ro")
    }


@pytest.fixture(scope="module", params=LESSONS, ids=lambda lesson: lesson.id)
def lesson(request: pytest.FixtureRequest) -> Lesson:
    return request.param


def test_the_course_has_its_first_four_lessons():
    assert [lesson.id for lesson in LESSONS][:4] == list(MY_LESSONS)
    assert len({lesson.file for lesson in LESSONS}) == len(LESSONS)


def test_committed_files_equal_a_fresh_build(lesson):
    assert build.stale(only=[lesson.id]) == [], "run: python -m labkit.course.build"


def test_build_check_fails_on_a_hand_edited_notebook(tmp_path):
    build.build(tmp_path, only=["lesson0"])
    path = tmp_path / "notebooks" / "en" / "00_setup.ipynb"
    assert build.main(["--root", str(tmp_path), "--lesson", "lesson0", "--check"]) == 0
    path.write_text(path.read_text(encoding="utf-8").replace("Lesson 0", "Lesson zero"), encoding="utf-8")
    assert build.stale(tmp_path, only=["lesson0"]) == [path]
    assert build.main(["--root", str(tmp_path), "--lesson", "lesson0", "--check"]) == 1
    assert (tmp_path / "docs" / "glossary.md").read_text(encoding="utf-8") == glossary.glossary_markdown()


def test_build_course_subcommand(capsys):
    import argparse

    parser = argparse.ArgumentParser(prog="labkit")
    build.register(parser.add_subparsers(dest="command"))  # what labkit.cli does with each contributed module
    args = parser.parse_args(["build-course", "--check", "--lesson", "lesson0"])
    assert args.func(args) == 0
    assert "up to date" in capsys.readouterr().out


def test_code_cells_are_the_same_in_both_editions(lesson):
    en, ro = editions(lesson).values()
    assert [c.cell_type for c in en.cells] == [c.cell_type for c in ro.cells]
    assert [c.id for c in en.cells] == [c.id for c in ro.cells]
    for a, b in zip(en.cells, ro.cells):
        assert a.metadata == b.metadata
        if a.cell_type == "code":
            assert LANG_LINE.sub("%labkit_lang", a.source) == LANG_LINE.sub("%labkit_lang", b.source), a.id
        else:
            assert a.source != b.source or not a.source.strip(), f"{a.id}: a markdown cell was not translated"
    langs = [re.findall(r"^%labkit_lang (\w+)$", c.source, re.M) for c in en.cells + ro.cells if c.cell_type == "code"]
    assert sorted(x for found in langs for x in found) == ["en", "ro"], "one %labkit_lang line per edition"


def test_notebook_metadata_ids_and_outputs(lesson):
    for lang, nb in editions(lesson).items():
        assert nb.nbformat == 4 and nb.nbformat_minor >= 5
        assert nb.metadata.kernelspec.name == "python3"
        assert nb.metadata.labkit.lesson == lesson.id and nb.metadata.labkit.lang == lang
        ids = [c.id for c in nb.cells]
        assert len(set(ids)) == len(ids)
        for c in nb.cells:
            if c.cell_type != "code":
                continue
            if c.outputs:  # only what nbval compares: the checks' feedback and the pure cells' tables
                assert "nbval-check-output" in c.metadata.get("tags", []), c.id
                assert c.execution_count is not None, "nbval would ignore this cell's stored output"
            else:
                assert c.execution_count is None


def test_ids_come_from_content_and_survive_an_insertion():
    cells = [md("# A", "# A ro"), code("x = 1"), code("y = 2")]
    before = build.cell_ids(Lesson("lessonX", "x", {"en": "X", "ro": "X"}, cells))
    after = build.cell_ids(Lesson("lessonX", "x", {"en": "X", "ro": "X"}, [cells[0], code("z = 0"), *cells[1:]]))
    assert before == [after[0], after[2], after[3]]
    twice = build.cell_ids(Lesson("lessonX", "x", {"en": "X", "ro": "X"}, [code("x = 1"), code("x = 1")]))
    assert len(set(twice)) == 2


def test_one_parameters_cell_with_the_papermill_names(lesson):
    nb = editions(lesson)["en"]
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    names = {t.id for node in ast.parse(nb.cells[tagged[0]].source).body for t in node.targets}
    assert {"nproc", "backend", "model_size", "steps"} <= names
    first_run = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "torchrun" in c.source), None)
    assert first_run is None or tagged[0] < first_run


def test_solution_markers_are_balanced_and_the_student_edition_builds(lesson):
    for lang, nb in editions(lesson).items():
        text = "\n".join(c.source for c in nb.cells)
        assert text.count("### BEGIN SOLUTION") == text.count("### END SOLUTION") >= 1
        student = student_notebook(nb, f"{lesson.file} ({lang})")  # raises on unbalanced or lost checks
        assert "### BEGIN SOLUTION" not in "\n".join(c.source for c in student.cells)
        assert check_ids(student) == check_ids(nb)


def test_every_question_of_the_lesson_is_checked_and_every_check_is_a_question(lesson):
    checked = set(check_ids(editions(lesson)["en"]))
    registered = {q.id for q in registry.lesson_questions(lesson.id)}
    assert checked == registered, "the grader counts every registered question of the lesson"


def test_check_cells_carry_the_feedback_of_a_correct_answer(lesson):
    for lang, nb in editions(lesson).items():
        records = [
            o.data["application/vnd.labkit.check+json"]
            for c in nb.cells
            for o in c.get("outputs", [])
            if "application/vnd.labkit.check+json" in o.get("data", {})
        ]
        assert [r["id"] for r in records] == check_ids(nb)
        # multiple choice is sealed: the notebook only records the answer, the grader judges it
        expected = ["recorded" if registry.get(r["id"]).sealed else "correct" for r in records]
        assert [r["status"] for r in records] == expected and all(r["lang"] == lang for r in records)


def test_pure_cells_are_run_by_the_build_and_must_be_deterministic():
    def lesson(*cells):
        return Lesson("lessonX", "x", {"en": "X", "ro": "X"}, [parameters(n=3), setup(), *cells])

    nb = build.notebook(lesson(code("print(n * 2)", pure=True)), "en")
    assert nb.cells[-1].outputs[0].text == "6\n"
    with pytest.raises(build.CourseBuildError, match="pure cell failed"):
        build.notebook(lesson(code("print(run.values)", pure=True)), "en")  # a run's result is not pure
    with pytest.raises(build.CourseBuildError, match="expression"):
        build.notebook(lesson(code("n * 2", pure=True)), "en")
    with pytest.raises(build.CourseBuildError, match="stderr"):
        build.notebook(lesson(code("import sys; print('x', file=sys.stderr)", pure=True)), "en")


def test_exercise_and_check_helpers_make_nbgrader_cells():
    cell = exercise("w = 2", solution="x = w * 3", after="print(x)")
    assert cell.source.splitlines() == ["w = 2", "### BEGIN SOLUTION", "x = w * 3", "### END SOLUTION", "print(x)"]
    assert check('labkit.check("lesson0.allreduce_sum", 3, world_size=2)').checks
    with pytest.raises(build.CourseBuildError, match="without labkit.check"):
        build.notebook(Lesson("lessonX", "x", {"en": "X", "ro": "X"}, [Code("print(1)", checks=True)]), "en")


# -- Romanian ---------------------------------------------------------------------------


def romanian_texts() -> dict[str, str]:
    """Every Romanian text of the course: notebooks, glossary, lesson sources, labkit's ro messages."""
    texts = {str(p): p.read_text(encoding="utf-8") for p in sorted((ROOT / "notebooks" / "ro").glob("*.ipynb"))}
    texts["docs/glossary.md"] = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    for lesson in LESSONS:
        for i, cell in enumerate(lesson.cells):
            if isinstance(cell, Markdown):
                texts[f"{lesson.id} cell {i}"] = cell.text["ro"]
    for key, term in glossary.GLOSSARY.items():
        texts[f"glossary {key}"] = " ".join((term.ro, term.ro_note, *term.forms))
    registry.load_questions()
    for key, entry in all_messages().items():
        texts[f"message {key}"] = entry.get("ro", "")
    return texts


def test_no_cedilla_in_any_romanian_text():
    bad = {where: CEDILLA.findall(text) for where, text in romanian_texts().items() if CEDILLA.search(text)}
    assert bad == {}, "use ș ț (comma below, U+0219/U+021B), never \u015f \u0163"


def test_the_romanian_edition_uses_romanian_letters():
    for path in sorted((ROOT / "notebooks" / "ro").glob("*.ipynb")):
        text = path.read_text(encoding="utf-8")
        assert all(ch in text for ch in "ăâîșț"), path.name


def test_romanian_lessons_introduce_their_terms_with_the_english_beside_them(lesson):
    ro = re.sub(r"\s+", " ", "\n".join(c.text["ro"] for c in lesson.cells if isinstance(c, Markdown)))
    missing = []
    for key in lesson.terms:
        term = glossary.GLOSSARY[key]
        forms = (term.ro, *term.forms)
        alternatives = "|".join(map(re.escape, forms))
        pattern = rf"(?:{alternatives})\**\s*\({re.escape(term.en)}\)"
        if not re.search(pattern, ro, re.I):
            missing.append(f"{term.ro} ({term.en})")
    assert missing == [], f"{lesson.id}: introduce these, Romanian first, English in parentheses: {missing}"


def test_each_lesson_ends_with_its_terms_in_both_languages(lesson):
    if not lesson.terms:
        pytest.skip("this lesson lists no glossary terms")
    for nb in editions(lesson).values():
        last = nb.cells[-1].source
        for key in lesson.terms:
            assert glossary.GLOSSARY[key].ro in last and glossary.GLOSSARY[key].en in last


def test_glossary_entries_are_complete_and_sorted_in_romanian_order():
    for key, term in glossary.GLOSSARY.items():
        assert term.en and term.ro and term.ro_note and term.en_note, key
    text = glossary.glossary_markdown()
    rows = [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows == sorted(rows, key=glossary._ro_sort_key)
    assert glossary._ro_sort_key("ș") > glossary._ro_sort_key("s") and glossary._ro_sort_key(
        "ț"
    ) < glossary._ro_sort_key("u")


def course_romanian_texts() -> dict[str, str]:
    """The course's own Romanian: lesson prose, the glossary and the lessons' table labels."""
    texts = {where: text for where, text in romanian_texts().items() if not where.startswith("message ")}
    for key, entry in all_messages().items():
        if key.startswith("course."):
            texts[f"message {key}"] = entry.get("ro", "")
    return texts


def test_romanian_gathers_with_a_colecta_and_sums_with_a_insuma():
    # "a aduna" means both to gather and to add up: the course says "a colecta" for an all-gather's
    # gathering and "a însuma" for a sum, as the glossary's entries do.
    bad = {where: re.findall(r"\w*adun\w*", text, re.I) for where, text in course_romanian_texts().items()}
    assert {where: words for where, words in bad.items() if words} == {}


def test_romanian_calls_a_device_mesh_a_grid_not_a_network():
    bad = [
        where for where, text in course_romanian_texts().items() if re.search(r"rețe\w* (?:de dispozitive|2-?D)", text)
    ]
    assert bad == [], "a device mesh is a «grilă de dispozitive»: «rețea» is the network between nodes"


def test_english_text_does_not_repeat_a_term_in_parentheses(lesson):
    en = "\n".join(c.text["en"] for c in lesson.cells if isinstance(c, Markdown))
    repeated = [
        m.group(0)
        for m in re.finditer(r"\*\*([^*()\n]+?)\s*\(([^()\n]+)\)\*\*", en)
        if m.group(1).lower().rstrip("s") == m.group(2).lower().rstrip("s")
    ]
    assert repeated == [], f"{lesson.id}: the Romanian edition's 'term (English term)' leaked into English: {repeated}"
