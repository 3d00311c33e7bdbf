"""A lesson's source: one MyST markdown file (jupytext's ``md:myst``), read into a ``Lesson``.

``labkit/course/lessons/NN_name.md`` is lesson N: its id is ``lessonN`` (``02_zero3_sharding.md``
is ``lesson2``, the prefix of its question ids), its notebooks ``notebooks/{en,ro}/NN_name.ipynb``.
JupyterLab with jupytext opens the file as a notebook and runs it; ``labkit.course.build`` writes
the two editions from it. What the build reads:

- **prose**: every markdown cell is tagged ``lang-en`` or ``lang-ro``, and each English cell is
  followed by its Romanian twin. The first pair starts with the lesson's ``# title``.
- **code**: one cell for both editions. The setup cell's ``%labkit_lang en`` line becomes the
  edition's language; the comments are English, and the cell's ``comments_ro`` metadata maps
  each to its Romanian (``labkit.course.comments``); everything else is copied as written.
- **tags**: ``parameters`` (papermill's cell of defaults), ``pure`` (deterministic and rank-free:
  the build runs it and stores its output, which nbval then checks), nbval's own tags, which pass
  through. A cell that calls ``labkit.check("lessonN.name", ...)`` is a check: the build stores the
  feedback of a correct answer, which nbval checks too.
- **solutions**: nbgrader's markers, a comment line each, around the solution; the student edition
  (``labkit build-student``) puts a stub in their place::

      ### BEGIN SOLUTION
      bytes_per_param = 2 + 2 + 4 + 4 + 4
      ### END SOLUTION

- **front matter**: ``labkit: {terms: [...]}``, the glossary keys the lesson introduces (a table of
  them ends each edition); jupytext's own header, kept by its ``notebook_metadata_filter``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from labkit.course import comments
from labkit.course.comments import META_KEY
from labkit.i18n import t
from labkit.wire.errors import LabkitError

LANGS = ("en", "ro")
LESSONS = Path(__file__).resolve().parent / "lessons"
FORMAT = "md:myst"
CHECK_TAG = "nbval-check-output"  # nbval compares the outputs of cells with this tag, even in lax mode
PURE, PARAMETERS = "pure", "parameters"
LANG_TAGS = {f"lang-{lang}": lang for lang in LANGS}
LANGUAGE_LINE = re.compile(r"^%labkit_lang \w+$", re.M)
LANGUAGE_TEMPLATE = "%labkit_lang {lang}"  # the setup cell's line, whichever edition it is written for
CHECK_CALL = re.compile(r"""labkit\.check\(\s*(['"])([\w.\-]+)\1""")
ONE_LINE_SOLUTION = re.compile(r"#\s*SOLUTION\s*$", re.M)  # otter's form, which the lessons do not use
FILE_NAME = re.compile(r"(\d+)_\w+")


class CourseBuildError(LabkitError):
    """A lesson source that cannot become a notebook."""


@dataclass(frozen=True)
class Markdown:
    text: dict[str, str]  # {"en": ..., "ro": ...}


@dataclass(frozen=True)
class Code:
    source: str  # the setup cell's language line is LANGUAGE_TEMPLATE
    tags: tuple[str, ...] = ()  # as the notebooks carry them
    pure: bool = False  # deterministic and rank-free: the build runs it and stores its output for nbval
    checks: bool = False  # holds labkit.check() calls: the build stores the correct answer's feedback
    language_line: bool = False  # the setup cell, whose %labkit_lang line names the edition's language
    comments: dict[str, dict[str, str]] = field(default_factory=dict)  # {"ro": {English comment: Romanian}}
    line: int = field(default=0, compare=False)  # the source file's line of the cell's first line (from 1)


Cell = Markdown | Code


@dataclass(frozen=True)
class Lesson:
    id: str  # "lesson1": metadata.labkit.lesson, and the prefix of its question ids
    file: str  # "01_ddp_memory_wall": the source's name, and the notebooks' in notebooks/en and notebooks/ro
    title: dict[str, str]
    cells: list[Cell] = field(default_factory=list)
    terms: tuple[str, ...] = ()  # glossary keys this lesson introduces (see labkit.course.glossary)
    path: Path | None = None  # the source it was read from


def files(folder: Path = LESSONS) -> list[Path]:
    """The lesson sources in ``folder``, in lesson order."""
    found = [p for p in folder.glob("*.md") if FILE_NAME.fullmatch(p.stem)]
    return sorted(found, key=lambda p: int(FILE_NAME.fullmatch(p.stem).group(1)))  # type: ignore[union-attr]


def read(path: Path) -> Lesson:
    """The lesson in the MyST file ``path``."""
    return reads(path.read_text(encoding="utf-8"), path)


def reads(text: str, path: Path) -> Lesson:
    """The lesson in MyST ``text``, as if read from ``path`` (which names it and its lesson)."""
    import jupytext  # the course build's dependency, not the kernel's

    return parse(jupytext.reads(text, fmt=FORMAT), path, text)


def parse(nb: nbformat.NotebookNode, path: Path, text: str = "") -> Lesson:
    """A jupytext notebook of the lesson's source -> the lesson; every problem names the file and the cell.

    ``text``, the source itself, gives each code cell its line in the file (for the lint's findings).
    """
    m = FILE_NAME.fullmatch(path.stem)
    if not m:
        raise CourseBuildError(t("course.src.name", path=path))
    lines = code_lines(text, [c.source for c in nb.cells if c.cell_type == "code"])
    cells: list[Cell] = []
    pending: tuple[str, str] | None = None  # (where, English text) of a cell waiting for its Romanian twin
    for n, cell in enumerate(nb.cells, 1):
        where = t("course.src.where", file=path.name, cell=n, start=cell.source.split("\n", 1)[0][:60])
        tags = list(cell.metadata.get("tags", []))
        translated = {lang: cell.metadata.get(META_KEY.format(lang=lang)) for lang in LANGS if lang != "en"}
        translated = {lang: table for lang, table in translated.items() if table is not None}
        if translated and (
            cell.cell_type != "code" or not all(isinstance(table, dict) for table in translated.values())
        ):
            raise CourseBuildError(t("course.src.comment_meta", where=where))
        if cell.cell_type == "markdown":
            langs = [LANG_TAGS[tag] for tag in tags if tag in LANG_TAGS]
            if len(langs) != 1:
                raise CourseBuildError(t("course.src.lang_tag", where=where, tags=tags))
            if langs == ["en"] and pending is None:
                pending = (where, cell.source)
            elif langs == ["ro"] and pending is not None:
                cells.append(Markdown({"en": pending[1], "ro": cell.source}))
                pending = None
            else:
                raise CourseBuildError(t("course.src.twin", where=where))
            continue
        if pending is not None:
            raise CourseBuildError(t("course.src.no_twin", where=pending[0]))
        if cell.cell_type != "code":
            raise CourseBuildError(t("course.src.cell_type", where=where, kind=cell.cell_type))
        cells.append(code_cell(cell.source, tags, where, lines.pop(0), translated))
    if pending is not None:
        raise CourseBuildError(t("course.src.no_twin", where=pending[0]))
    terms = tuple((nb.metadata.get("labkit") or {}).get("terms") or ())
    from labkit.course.glossary import GLOSSARY

    unknown = [key for key in terms if key not in GLOSSARY]
    if unknown:
        raise CourseBuildError(t("course.src.terms", file=path.name, terms=", ".join(unknown)))
    return Lesson(f"lesson{int(m.group(1))}", path.stem, title(cells, path), cells, terms, path)


def code_lines(text: str, sources: list[str]) -> list[int]:
    """Each code cell's first line in the MyST ``text``: the first place after its fence where its lines are."""
    lines, found, at = text.split("\n"), [], 0
    for source in sources:
        body = source.split("\n")
        at = next((i for i in range(at, len(lines)) if lines[i].startswith("```{code-cell}")), len(lines))
        start = next((i for i in range(at + 1, len(lines)) if lines[i : i + len(body)] == body), None)
        found.append(start + 1 if start is not None else 0)  # 0: not located (the text was not given)
        at = (start or at) + 1
    return found


def code_cell(
    source: str, tags: list[str], where: str, line: int = 0, translated: dict[str, dict[str, str]] | None = None
) -> Code:
    if ONE_LINE_SOLUTION.search(source):
        raise CourseBuildError(t("course.src.one_line", where=where))
    pure = PURE in tags or PARAMETERS in tags  # papermill's defaults: the pure cells after them use them
    checks = CHECK_CALL.search(source) is not None
    kept = [tag for tag in tags if tag != PURE]
    if (PURE in tags or checks) and CHECK_TAG not in kept:
        kept.append(CHECK_TAG)
    language_line = LANGUAGE_LINE.search(source) is not None
    if language_line:
        source = LANGUAGE_LINE.sub(LANGUAGE_TEMPLATE, source, count=1)
    translated = {lang: {str(k): str(v) for k, v in table.items()} for lang, table in (translated or {}).items()}
    for lang in LANGS[1:]:  # every edition but the English one: its comments, checked now, not at build time
        try:
            comments.translate(source, translated.get(lang, {}), where)
        except comments.CommentError as e:
            raise CourseBuildError(str(e)) from e
    return Code(
        source, tuple(kept), pure=pure, checks=checks, language_line=language_line, comments=translated, line=line
    )


def title(cells: list[Cell], path: Path) -> dict[str, str]:
    """The first prose pair's ``# heading``, in each language."""
    first = next((c for c in cells if isinstance(c, Markdown)), None)
    heads = {lang: (first.text[lang].split("\n", 1)[0] if first else "") for lang in LANGS}
    if not all(h.startswith("# ") for h in heads.values()):
        raise CourseBuildError(t("course.src.title", file=path.name))
    return {lang: h[2:].strip() for lang, h in heads.items()}
