"""The lessons' MyST sources, the course build and the two editions it writes: no kernel, no ranks, seconds.

    .venv/bin/pytest tests/test_course_build.py -q

The committed notebooks must be exactly what ``python -m labkit.course.build`` writes
(so nobody edits one by hand), the two editions must run the same code, exercises and
checks, and no Romanian text may carry a cedilla where Romanian has a comma below. A
source must read back as jupytext writes it (what JupyterLab saves is what is committed).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import jupytext
import nbformat
import pytest

from labkit.course import build, comments, glossary, source
from labkit.course.source import Code, CourseBuildError, Lesson, Markdown
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
    """The same code, cell by cell; only the comments are in the edition's language."""
    en, ro = editions(lesson).values()
    assert [c.cell_type for c in en.cells] == [c.cell_type for c in ro.cells]
    assert [c.id for c in en.cells] == [c.id for c in ro.cells]

    def metadata(cell):  # nbgrader's checksum is of the source, whose comments differ by edition
        nbgrader = {k: v for k, v in cell.metadata.get("nbgrader", {}).items() if k != "checksum"}
        return {**cell.metadata, "nbgrader": nbgrader}

    for a, b in zip(en.cells, ro.cells):
        assert metadata(a) == metadata(b)
        if a.cell_type == "code":
            code_en, code_ro = (comments.code(LANG_LINE.sub("%labkit_lang", c.source)) for c in (a, b))
            assert code_en == code_ro, a.id
            said_en, said_ro = ([x.text for x in comments.comments(c.source)] for c in (a, b))
            assert len(said_en) == len(said_ro), a.id
            for x, y in zip(said_en, said_ro):
                assert x != y or not re.search(r"[a-z]{3}", x), f"{a.id}: {x!r} is not translated"
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


def test_comments_are_translated_in_place_and_every_one_must_be():
    cell = "%%torchrun -n 2\nx = 1  # one\n# two, alone\ns = '# not a comment'\n### BEGIN SOLUTION\ny = 2  # noqa: F841"
    table = {"one": "unu", "two, alone": "doi, singur"}
    ro = comments.translate(cell, table, "here")
    assert ro == cell.replace("# one", "# unu").replace("# two, alone", "# doi, singur")
    assert (
        comments.code(ro)
        == comments.code(cell)
        == "%%torchrun -n 2\nx = 1\n\ns = '# not a comment'\n### BEGIN SOLUTION\ny = 2  # noqa: F841"
    )
    with pytest.raises(comments.CommentError, match="'two, alone' has no Romanian"):
        comments.translate(cell, {"one": "unu"}, "here")
    with pytest.raises(comments.CommentError, match="'three'"):
        comments.translate(cell, {**table, "three": "trei"}, "here")
    with pytest.raises(CourseBuildError, match="an English comment"):
        read(myst(code("x = 1  # an English comment")))
    said = code("x = 1  # an English comment")
    said.metadata["comments_ro"] = {"an English comment": "un comentariu românesc"}
    (cell,) = read(myst(said)).cells[3:]
    assert build.cell_source(cell, "ro") == "x = 1  # un comentariu românesc"
    assert build.cell_source(cell, "en") == "x = 1  # an English comment"


def test_ids_come_from_content_and_survive_an_insertion():
    cells = [Markdown({"en": "# A", "ro": "# A ro"}), Code("x = 1"), Code("y = 2")]
    before = build.cell_ids(Lesson("lessonX", "x", {"en": "X", "ro": "X"}, cells))
    after = build.cell_ids(Lesson("lessonX", "x", {"en": "X", "ro": "X"}, [cells[0], Code("z = 0"), *cells[1:]]))
    assert before == [after[0], after[2], after[3]]
    twice = build.cell_ids(Lesson("lessonX", "x", {"en": "X", "ro": "X"}, [Code("x = 1"), Code("x = 1")]))
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


# -- the MyST source ------------------------------------------------------------------------


def md(en: str, ro: str) -> list[nbformat.NotebookNode]:
    return [
        nbformat.v4.new_markdown_cell(en, metadata={"tags": ["lang-en"]}),
        nbformat.v4.new_markdown_cell(ro, metadata={"tags": ["lang-ro"]}),
    ]


def code(text: str, *tags: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(text, metadata={"tags": list(tags)} if tags else {})


def myst(*cells: nbformat.NotebookNode, terms: tuple[str, ...] = ()) -> str:
    """A lesson source as jupytext writes it (and JupyterLab saves it): a title, a parameters cell, a setup cell."""
    nb = nbformat.v4.new_notebook()
    nb.metadata = {
        "kernelspec": dict(build.KERNELSPEC),
        "language_info": {"name": "python", "pygments_lexer": "ipython3"},
        "labkit": {"terms": list(terms)},
        "jupytext": {"notebook_metadata_filter": "labkit"},
    }
    nb.cells = [
        *md("# Lesson 9: a test", "# Lecția 9: un test"),
        code("n = 3", "parameters"),
        code("%load_ext labkit\n%labkit_lang en\nimport labkit"),
        *cells,
    ]
    return jupytext.writes(nb, fmt=source.FORMAT)


def read(text: str, name: str = "09_test.md") -> Lesson:
    return source.reads(text, Path(name))


def test_a_source_reads_into_a_lesson_with_each_cell_once():
    lesson = read(myst(*md("Some *prose*.", "Niște *proză*."), code("print(n * 2)", "pure")))
    assert (lesson.id, lesson.file, lesson.title) == (
        "lesson9",
        "09_test",
        {"en": "Lesson 9: a test", "ro": "Lecția 9: un test"},
    )
    title, parameters, setup, prose, pure = lesson.cells
    assert prose == Markdown({"en": "Some *prose*.", "ro": "Niște *proză*."})
    assert parameters == Code("n = 3", ("parameters",), pure=True)  # papermill's tag; run by the build, not compared
    assert setup.language_line and setup.source.splitlines()[1] == "%labkit_lang {lang}"
    assert pure == Code("print(n * 2)", ("nbval-check-output",), pure=True)
    check = read(myst(code('labkit.check("lesson9.x", 3)'))).cells[-1]
    assert check.checks and check.tags == ("nbval-check-output",)  # a check is known by its call
    kept = read(myst(code("print(1)", "nbval-ignore-output"))).cells[-1]
    assert kept.tags == ("nbval-ignore-output",) and not kept.pure  # nbval's own tags pass through
    assert [build.cell_source(setup, lang).splitlines()[1] for lang in ("en", "ro")] == [
        "%labkit_lang en",
        "%labkit_lang ro",
    ]


@pytest.mark.parametrize(
    "cells, name, error",
    [
        ([nbformat.v4.new_markdown_cell("no tag")], "09_test.md", "lang-en or lang-ro"),
        ([md("a", "b")[0], code("x = 1")], "09_test.md", "without its lang-ro twin"),
        ([md("a", "b")[1]], "09_test.md", "followed by its lang-ro twin"),
        ([*md("a", "b")[:1], *md("c", "d")], "09_test.md", "followed by its lang-ro twin"),
        ([nbformat.v4.new_raw_cell("raw")], "09_test.md", "a raw cell"),
        ([code("x = 16  # SOLUTION")], "09_test.md", "### BEGIN SOLUTION"),
        ([], "lesson9.md", "NN_name.md"),
    ],
    ids=["untagged", "no-twin", "ro-first", "two-en", "raw", "one-line-solution", "file-name"],
)
def test_a_source_that_breaks_a_rule_is_refused_with_its_file_and_cell(cells, name, error):
    with pytest.raises(CourseBuildError, match=re.escape(error)) as caught:
        read(myst(*cells), name)
    assert name in str(caught.value)


def test_terms_must_be_glossary_keys_and_the_title_a_heading():
    assert read(myst(terms=("rank",))).terms == ("rank",)
    with pytest.raises(CourseBuildError, match="not_a_term"):
        read(myst(terms=("rank", "not_a_term")))
    text = myst().replace("# Lesson 9: a test", "Lesson 9, no heading")
    with pytest.raises(CourseBuildError, match="title"):
        read(text)


def test_sources_read_back_as_jupytext_writes_them(lesson):
    """What JupyterLab saves is what is committed: a source survives a round trip through a kernel's metadata."""
    text = lesson.path.read_text(encoding="utf-8")
    nb = jupytext.reads(text, fmt=source.FORMAT)
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.2", "pygments_lexer": "ipython3"}
    for cell in nb.cells:  # what running the cells in the lab adds
        cell.metadata.update(trusted=True, execution={"iopub.status.busy": "2026-01-01T00:00:00Z"})
    again = jupytext.writes(nb, fmt=source.FORMAT)
    version = re.compile(r"^    jupytext_version: .*$", re.M)  # the jupytext that saved it
    assert version.sub("", again) == version.sub("", text)
    assert source.read(lesson.path) == lesson


def test_each_lesson_has_an_exercise_on_the_ranks_inline(lesson):
    """The rank exercises live in their lesson: a %%torchrun cell with a solution, checked from its run."""
    cells = [c for c in lesson.cells if isinstance(c, Code)]
    ranks = [i for i, c in enumerate(cells) if c.source.startswith("%%torchrun") and "### BEGIN SOLUTION" in c.source]
    assert ranks, lesson.id
    assert any("labkit.last_run" in c.source for c in cells[ranks[0] + 1 :] if c.checks)


def test_pure_cells_are_run_by_the_build_and_must_be_deterministic():
    nb = build.notebook(read(myst(code("print(n * 2)", "pure"))), "en")
    assert nb.cells[-1].outputs[0].text == "6\n"
    with pytest.raises(CourseBuildError, match="pure cell failed"):
        build.notebook(read(myst(code("print(run.values)", "pure"))), "en")  # a run's result is not pure
    with pytest.raises(CourseBuildError, match="expression"):
        build.notebook(read(myst(code("n * 2", "pure"))), "en")
    with pytest.raises(CourseBuildError, match="stderr"):
        build.notebook(read(myst(code("import sys; print('x', file=sys.stderr)", "pure"))), "en")


def test_a_check_cell_needs_its_call():
    with pytest.raises(CourseBuildError, match="without labkit.check"):
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
    """The course's own Romanian: lesson prose, the glossary, the lessons' table labels and the questions' hints."""
    texts = {where: text for where, text in romanian_texts().items() if not where.startswith("message ")}
    for key, entry in all_messages().items():  # romanian_texts() loaded the questions: their hints are here
        if key.startswith(("course.", "grading.q.")):
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


def test_lesson3_measures_with_a_stated_fallback_until_exercise_1_is_answered(capsys):
    """The student edition's measurement cell needs my_min_num_params: unanswered, it is 1e6, and the cell says so."""
    lesson = next(x for x in LESSONS if x.id == "lesson3")
    nb = student_notebook(build.notebook(lesson, "en"), "lesson3", "en")
    namespace: dict = {"__name__": "__main__"}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if cell.source.startswith("%%torchrun"):
            break
        exec("\n".join(line for line in cell.source.splitlines() if not line.startswith("%")), namespace)
    assert namespace["my_min_num_params"] == 1_000_000
    assert "exercise 1 is not answered yet" in capsys.readouterr().out


def test_student_text_says_the_starting_example_not_the_seed():
    for lesson in LESSONS:
        for cell in lesson.cells:
            text = cell.text["en"] if isinstance(cell, Markdown) else cell.source
            assert "the seed's" not in text, lesson.id


def test_min_num_params_is_graded_on_a_large_vocabulary_too():
    """An unseen model whose embedding and head outgrow a block: the size policy gives them units of their
    own, and the grader's check wants them (a threshold that keeps them out cannot keep the blocks in)."""
    from labkit.course.questions import lesson3
    from labkit.grading import exercises
    from labkit.grading.wrap import meta_model, size_policy_units

    def numel(module):
        return sum(p.numel() for p in module.parameters())

    large = [c for c in lesson3.UNSEEN_CONFIGS if c["vocab_size"] * c["dim"] > numel(meta_model(c).layers[0])]
    assert large
    model = meta_model(large[0])
    rule = max(numel(part) for part in model.layers[0].children()) + 1  # the lesson's solution
    blocks = [f"layers.{i}" for i in range(len(model.layers))]
    assert size_policy_units(model, rule) == sorted(["root", *blocks, "tok_embeddings", "output"])
    probe = {"model": {"$model": large[0]}}
    assert exercises.policy_units(probe, rule).correct
    assert not exercises.policy_units(probe, numel(model.tok_embeddings) + 1).correct  # blocks no longer units


def test_a_lesson_that_names_its_own_notebook_names_it_right(lesson):
    """Lesson 7 reads its own notebook back (the export cell); after the lessons were renumbered it looked for
    the old name, and failed wherever JupyterLab did not name the file for it (papermill from another folder)."""
    names = {m for c in lesson.cells if isinstance(c, Code) for m in re.findall(r"\b\d\d_\w+\.ipynb\b", c.source)}
    assert names <= {lesson.path.stem + ".ipynb"}, names


def test_a_sentence_the_kernel_prints_goes_through_the_catalog(lesson):
    """The code is the same in both editions, so a sentence a kernel cell prints must come from the catalog
    (``show.say``), not from a string in the code, or the Romanian edition prints English. (Code on the ranks,
    ``%%torchrun`` cells, is the student's own example code and prints what it says.)"""
    printed = re.compile(r"print\(\s*f?(?:\"([^\"]*)\"|'([^']*)')")  # the string printed, either quote

    def words(ln: str) -> bool:
        text = "".join(m.group(1) or m.group(2) or "" for m in printed.finditer(ln))
        return bool(re.search(r"[A-Za-z]{2,} [A-Za-z]{2,}", re.sub(r"\{[^{}]*\}", " ", text)))

    bad = [
        ln.strip()
        for c in lesson.cells
        if isinstance(c, Code) and not c.source.startswith("%%")
        for ln in c.source.splitlines()
        if words(ln)
    ]
    assert bad == [], bad
