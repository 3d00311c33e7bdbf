"""Build the course: one source per lesson, a notebook per language.

    python -m labkit.course.build            # writes notebooks/en/*.ipynb, notebooks/ro/*.ipynb, docs/glossary.md
    python -m labkit.course.build --check    # exit 1 if a committed file differs from a fresh build
    labkit build-course [--check]            # the same, from the labkit command

Each lesson is one MyST file, ``labkit/course/lessons/NN_name.md`` (found by that name, so a
new lesson needs no registration; what it holds: ``labkit.course.source``). The build keeps
each edition's prose, runs the pure cells, lints every code cell with ruff (a lesson that fails
is not written) and writes the notebooks. They carry no outputs and no execution counts, with
two exceptions that exist for nbval: a ``labkit.check`` cell carries the feedback a correct
answer gets, and a ``pure`` cell (deterministic, no ranks: a formula table) carries the output
the build got by running it. Both are tagged ``nbval-check-output``, so ``pytest --nbval-lax``
fails when a solution notebook stops scoring full marks or a formula's table changes.

Cell ids are made from the cell's content (the English text for markdown), so an
edit changes the id of that cell only and both editions share their ids.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import io
import sys
from pathlib import Path
from typing import Any

import nbformat

from labkit import i18n
from labkit.course import comments, lint, source
from labkit.course.glossary import glossary_markdown, terms_table
from labkit.course.source import CHECK_CALL, LANGS, LANGUAGE_TEMPLATE, Code, CourseBuildError, Lesson, Markdown
from labkit.grading.build import mark_for_nbgrader
from labkit.i18n import t

ROOT = Path(__file__).resolve().parents[2]
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


# -- lessons ---------------------------------------------------------------------


def lessons(folder: Path = source.LESSONS) -> list[Lesson]:
    """Every lesson source in ``folder`` (``NN_name.md``), read, in lesson order."""
    return [source.read(path) for path in source.files(folder)]


def cell_source(cell: Code, lang: str) -> str:
    """The cell as edition ``lang`` has it: the setup cell's language line names that language, and
    the comments are in that language (the code is the same)."""
    text = cell.source
    if lang != LANGS[0]:
        text = comments.translate(text, cell.comments.get(lang, {}), f"cell {cell.line}")
    return text.replace(LANGUAGE_TEMPLATE, LANGUAGE_TEMPLATE.format(lang=lang)) if cell.language_line else text


def cell_ids(lesson: Lesson) -> list[str]:
    """Stable ids from content: ``md-…`` from the English text, ``code-…`` from the source."""
    ids, seen = [], set()
    for cell in lesson.cells:
        kind, content = ("md", cell.text["en"]) if isinstance(cell, Markdown) else ("code", cell.source)
        base = f"{kind}-{hashlib.sha1(content.encode()).hexdigest()[:8]}"
        cid, n = base, 2
        while cid in seen:  # the same text twice in a lesson
            cid, n = f"{base}-{n}", n + 1
        seen.add(cid)
        ids.append(cid)
    return ids


# -- outputs for nbval -------------------------------------------------------------


def check_outputs(source: str, lang: str) -> list[dict[str, Any]]:
    """The display_data each ``labkit.check`` in ``source`` shows for a correct answer."""
    from labkit.course import questions  # noqa: F401 - registers the course's questions
    from labkit.grading import registry
    from labkit.grading.checks import solution_result

    outputs = []
    for m in CHECK_CALL.finditer(source):
        result = solution_result(registry.get(m.group(2)), lang)
        outputs.append(nbformat.v4.new_output("display_data", data=result.bundle(), metadata={}))
    return outputs


def pure_outputs(lesson: Lesson, lang: str) -> dict[int, list[dict[str, Any]]]:
    """Run the lesson's pure cells in order, in one namespace, as the kernel would; their outputs.

    Pure cells see only the parameters and each other: a pure cell that needs a run's
    result fails here, which is the point (its output would not be deterministic).
    """
    namespace: dict[str, Any] = {"__name__": "__main__"}
    outputs: dict[int, list[dict[str, Any]]] = {}
    with i18n.language(lang):  # afterwards, exactly what was chosen before
        for i, cell in enumerate(lesson.cells):
            if not isinstance(cell, Code) or not (cell.pure or cell.language_line):
                continue
            source = cell.source
            if cell.language_line:  # the setup cell: its Python lines (imports) are what pure cells use
                source = "\n".join(line for line in source.splitlines() if not line.startswith("%"))
            out, err = io.StringIO(), io.StringIO()
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    shown = run_cell(source, f"<{lesson.id} cell {i}>", namespace)
            except Exception as e:
                raise CourseBuildError(
                    t("course.pure_failed", lesson=lesson.id, edition=lang, cell=i, error=f"{type(e).__name__}: {e}")
                ) from e
            if shown is not None:  # the kernel would show its repr, which nbval would compare
                raise CourseBuildError(t("course.pure_expr", lesson=lesson.id, cell=i))
            if err.getvalue():
                raise CourseBuildError(
                    t("course.pure_stderr", lesson=lesson.id, edition=lang, cell=i, text=err.getvalue())
                )
            text = out.getvalue()
            if cell.pure:
                outputs[i] = [nbformat.v4.new_output("stream", name="stdout", text=text)] if text else []
    return outputs


def run_cell(source: str, filename: str, namespace: dict[str, Any]) -> Any:
    """Run a cell as IPython does: every statement, then the value of a final expression (or None)."""
    tree = ast.parse(source)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, filename, "exec"), namespace)
    if last is None:
        return None
    return eval(compile(ast.Expression(last.value), filename, "eval"), namespace)


# -- notebooks ----------------------------------------------------------------------


def notebook(lesson: Lesson, lang: str) -> nbformat.NotebookNode:
    """One edition of one lesson."""
    nb = nbformat.v4.new_notebook()
    nb.nbformat, nb.nbformat_minor = 4, 5
    nb.metadata = {
        "kernelspec": dict(KERNELSPEC),
        "language_info": {"name": "python"},
        "labkit": {"lesson": lesson.id, "lang": lang, "title": lesson.title[lang]},
    }
    pure = pure_outputs(lesson, lang)
    ordinal = 0  # the execution count a top-to-bottom run gives each code cell
    for i, (cell, cid) in enumerate(zip(lesson.cells, cell_ids(lesson))):
        if isinstance(cell, Markdown):
            nb.cells.append(nbformat.v4.new_markdown_cell(cell.text[lang], id=cid))
            continue
        ordinal += 1
        meta = {"tags": list(cell.tags)} if cell.tags else {}
        new = nbformat.v4.new_code_cell(cell_source(cell, lang), id=cid, metadata=meta)
        if cell.checks:
            new.outputs = check_outputs(cell.source, lang)
            if not new.outputs:
                raise CourseBuildError(t("course.no_check", lesson=lesson.id, cell=i))
        elif i in pure:
            new.outputs = pure[i]
        if new.outputs:  # nbval refuses a stored output whose cell has no execution count
            new.execution_count = ordinal
        nb.cells.append(new)
    if lesson.terms:
        text = terms_table(lesson.terms, lang)
        nb.cells.append(nbformat.v4.new_markdown_cell(text, id=f"md-terms-{lesson.id}"))
    mark_for_nbgrader(nb)  # formgrader can be used beside labkit grade (docs/grading.md, section 7)
    nbformat.validate(nb)
    return nb


def render(nb: nbformat.NotebookNode) -> str:
    return nbformat.writes(nb) + "\n"


def course_files(root: Path = ROOT, only: list[str] | None = None) -> dict[Path, str]:
    """Every file the build writes, and its content; ``only``: the notebooks of these lesson ids."""
    files = {}
    chosen = [lesson for lesson in lessons() if not only or lesson.id in only]
    lint_code_cells(chosen)
    for lesson in chosen:
        for lang in LANGS:
            files[root / "notebooks" / lang / f"{lesson.file}.ipynb"] = render(notebook(lesson, lang))
    files[root / "docs" / "glossary.md"] = glossary_markdown()
    return files


def lint_code_cells(lessons: list[Lesson]) -> None:
    """A lesson whose code cells ruff finds fault with (an undefined name, a syntax error) is not written."""
    if not lint.available():
        print(t("course.lint_missing"), file=sys.stderr)
        return
    found = lint.problems(lessons)
    if found:
        raise CourseBuildError(t("course.lint", problems="\n".join(f"  {line}" for line in found)))


def build(root: Path = ROOT, only: list[str] | None = None) -> list[Path]:
    files = course_files(root, only)
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    return list(files)


def stale(root: Path = ROOT, only: list[str] | None = None, files: dict[Path, str] | None = None) -> list[Path]:
    """The files whose committed content is not what a fresh build (or ``files``, one already made) writes."""
    files = course_files(root, only) if files is None else files
    return [path for path, text in files.items() if not path.exists() or path.read_text(encoding="utf-8") != text]


# -- command line -------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--check", action="store_true", help=t("course.help.check"))
    p.add_argument("--root", default=str(ROOT), help=t("course.help.root"))
    p.add_argument("--lesson", action="append", default=None, help=t("course.help.lesson"))


def run_cli(args: argparse.Namespace) -> int:
    root = Path(args.root)
    if args.check:
        files = course_files(root, args.lesson)  # once: a build runs every pure cell and ruff
        bad = stale(root, files=files)
        if bad:
            print(t("course.stale", files="\n".join(f"  {p}" for p in bad)), file=sys.stderr)
            return 1
        print(t("course.fresh", n=len(files)))
        return 0
    print(t("course.wrote", n=len(build(root, args.lesson)), root=root))
    return 0


def register(subparsers: Any) -> argparse.ArgumentParser:
    """``labkit build-course``."""
    p = subparsers.add_parser("build-course", help=t("course.help"), description=t("course.help"))
    add_arguments(p)
    p.set_defaults(func=run_cli)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labkit.course.build", description=t("course.help"))
    add_arguments(parser)
    return run_cli(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
