"""Self-study: a learner's own workspace, their progress, and a question's solution once they have tried it.

    bash launch/lab.sh                    # the student edition, in ~/fsdp-labkit-work (or $LABKIT_WORKSPACE)
    labkit.progress()                     # in a notebook: what is done per lesson, and the course's total
    labkit.solution("lesson0.peak_ratio") # its solution, once a check of it ran with an answer
    labkit grade --self                   # the grade the workspace's notebooks would get

The workspace is made once, from the self-study build of the course (``build_self_study``: the student
edition of notebooks/en and notebooks/ro, plus ``solutions.json``), and never written over: a newer
course goes beside it, to ``updates/<version>/``, as nbgitpuller leaves a learner's edits alone.

``solutions.json`` is the only instructor-free source of solutions, and only a self-study build holds
it: the class's ``labkit build-student`` writes none, so a student install has no solution text. An
instructor's checkout has the solution notebooks themselves, which ``solution`` reads when there.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from labkit.grading import registry
from labkit.grading.checks import MIME, fmt_points
from labkit.i18n import LANGS, get_lang, t
from labkit.wire import env as envvars

if TYPE_CHECKING:  # nbformat imports jsonschema, whose format checkers take a second to import: the kernel's
    import nbformat  # %load_ext labkit (watch) needs none of it, so the functions that read notebooks import it

DEFAULT_WORKSPACE = "~/fsdp-labkit-work"
STATE = ".labkit"  # the workspace's own files: edition.json, solutions.json
SOLUTIONS = "solutions.json"
UPDATES = "updates"
SKIPPED = (STATE, ".ipynb_checkpoints")
ATTEMPTED = ("correct", "wrong", "recorded")  # a check with an answer; "unanswered" ran on the stub

_MARKER = re.compile(r"^\s*#+\s*(BEGIN|END) (SOLUTION|HIDDEN TESTS)\s*$")
_ONE_LINE = re.compile(r"\s*#\s*SOLUTION\s*$")


def workspace() -> Path:
    """The learner's workspace: ``LABKIT_WORKSPACE``, else ~/fsdp-labkit-work."""
    return Path(envvars.get("LABKIT_WORKSPACE") or DEFAULT_WORKSPACE).expanduser()


# -- the solutions a self-study build holds -----------------------------------------------------------


def solution_text(source: str) -> str:
    """The code (or text) inside a cell's solution regions, and its one-line answers; hidden tests left out."""
    out: list[str] = []
    region: str | None = None
    for line in source.split("\n"):
        m = _MARKER.match(line)
        if m:
            region = m.group(2) if m.group(1) == "BEGIN" else None
        elif region == "SOLUTION":
            out.append(line)
        elif region is None and _ONE_LINE.search(line):
            out.append(_ONE_LINE.sub("", line))
    return textwrap.dedent("\n".join(out)).strip("\n")


def solutions_of(nb: nbformat.NotebookNode) -> dict[str, str]:
    """{question id: its solution}: the solution cells since the previous check, for each check cell's ids."""
    from labkit.grading.build import CHECK_CALL

    found: dict[str, str] = {}
    pending: list[str] = []
    for cell in nb.cells:
        if cell.cell_type not in ("code", "markdown"):
            continue
        text = solution_text(cell.source)
        if text:
            pending.append(text)
        ids = [m.group(2) for m in CHECK_CALL.finditer(cell.source)] if cell.cell_type == "code" else []
        for qid in ids:
            found.setdefault(qid, "\n\n".join(pending))
        if ids:
            pending = []
    return {qid: text for qid, text in found.items() if text}


def _lang_of(nb: nbformat.NotebookNode, path: Path) -> str:
    lang = (nb.metadata.get("labkit") or {}).get("lang")
    return lang if lang in LANGS else next((p for p in path.parts if p in LANGS), "en")


def collect_solutions(paths: Iterable[Path]) -> dict[str, dict[str, str]]:
    """{question id: {lang: solution}} from solution notebooks (files, or folders searched recursively)."""
    import nbformat

    out: dict[str, dict[str, str]] = {}
    for path in paths:
        files = sorted(path.rglob("*.ipynb")) if path.is_dir() else [path]
        for f in files:
            if ".ipynb_checkpoints" in f.parts:
                continue
            nb = nbformat.read(f, as_version=4)
            for qid, text in solutions_of(nb).items():
                out.setdefault(qid, {})[_lang_of(nb, f)] = text
    return out


def build_self_study(paths: list[str | Path], out_dir: str | Path, lang: str | None = None) -> list[Path]:
    """The self-study build: the student edition under ``out_dir``, and the solutions in ``out_dir/solutions.json``."""
    from labkit.grading.build import build_student

    written = build_student(paths, out_dir, lang)
    data = {"format": 1, "questions": collect_solutions([Path(p) for p in paths])}
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, indent=1)
    (Path(out_dir) / SOLUTIONS).write_text(text + "\n", encoding="utf-8")
    return written


def edition_version(folder: Path) -> str:
    """The course version of a built edition: the digest of its notebooks' cells (outputs are cleared)."""
    import nbformat

    h = hashlib.sha256()
    for f in sorted(folder.rglob("*.ipynb")):
        h.update(f.relative_to(folder).as_posix().encode())
        for cell in nbformat.read(f, as_version=4).cells:
            h.update(cell.source.encode())
    return h.hexdigest()[:12]


# -- the workspace -----------------------------------------------------------------------------------


def prepare(course: Path, ws: Path) -> str | None:
    """Make the workspace from ``course`` (notebooks/) the first time; later, put a newer edition in
    ``updates/<version>/`` beside the learner's work. Returns the one-line message to show, if any."""
    with tempfile.TemporaryDirectory(prefix="labkit-build-") as tmp:
        built = Path(tmp) / "edition"
        build_self_study([course], built)
        version = edition_version(built)
        state = ws / STATE
        if not (state / "edition.json").exists():
            ws.mkdir(parents=True, exist_ok=True)
            _place(built, ws, version)
            return t("grading.selfstudy.created", folder=ws)
        if json.loads((state / "edition.json").read_text()).get("version") == version:
            return None
        target = ws / UPDATES / version
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(built, target)
        return t("grading.selfstudy.update", folder=target)


def _place(built: Path, ws: Path, version: str) -> None:
    """The first edition: the notebooks into the workspace (none there is replaced), the solutions in .labkit/."""
    state = ws / STATE
    state.mkdir(parents=True, exist_ok=True)
    for f in sorted(built.rglob("*.ipynb")):
        dest = ws / f.relative_to(built)
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dest)
    shutil.copyfile(built / SOLUTIONS, state / SOLUTIONS)
    (state / "edition.json").write_text(json.dumps({"version": version}) + "\n")


def notebooks(ws: Path, updates: bool = True) -> list[Path]:
    """The learner's notebooks in the workspace; with ``updates``, those of the newer editions too
    (a learner who moved on to one works there)."""
    skipped = SKIPPED if updates else (*SKIPPED, UPDATES)
    return [f for f in sorted(ws.rglob("*.ipynb")) if not any(p in skipped for p in f.relative_to(ws).parts)]


# -- what the learner tried ----------------------------------------------------------------------------

_kernel: dict[str, list[str]] = {}  # question id -> the statuses of its checks run in this kernel


def watch(ipython: Any) -> None:
    """Note every check this kernel shows (``%load_ext labkit`` calls it): ``solution`` and ``progress``
    then know of a try before the notebook is saved."""
    pub = getattr(ipython, "display_pub", None)
    if pub is None or getattr(pub, "_labkit_watched", False):
        return
    publish = pub.publish

    def noting(data: Any, *args: Any, **kwargs: Any) -> Any:
        rec = data.get(MIME) if isinstance(data, dict) else None
        if isinstance(rec, dict) and isinstance(rec.get("id"), str):
            _kernel.setdefault(rec["id"], []).append(str(rec.get("status", "")))
        return publish(data, *args, **kwargs)

    pub.publish = noting
    pub._labkit_watched = True


def statuses(ws: Path | None = None) -> dict[str, list[str]]:
    """{question id: the statuses of its checks}: the workspace notebooks' records, then this kernel's."""
    import nbformat

    from labkit.grading.readback import check_records

    found: dict[str, list[str]] = {}
    for f in notebooks(ws or workspace()):
        try:
            nb = nbformat.read(f, as_version=4)
        except (OSError, ValueError):  # a notebook the learner broke: its checks do not count
            continue
        for _, rec in check_records(nb):
            found.setdefault(rec["id"], []).append(rec["status"])
    for qid, got in _kernel.items():
        found.setdefault(qid, []).extend(got)
    return found


def tried(qid: str, ws: Path | None = None) -> bool:
    """Has the learner run a check of ``qid`` with an answer (not the stub's "not answered yet")?"""
    return any(s in ATTEMPTED for s in statuses(ws).get(qid, []))


# -- progress ------------------------------------------------------------------------------------------


@dataclass
class LessonProgress:
    lesson: str
    correct: int = 0
    attempted: int = 0  # answered, not (yet) correct; a multiple-choice answer until the grader judges it
    not_yet: int = 0
    points: float = 0.0
    max_points: float = 0.0
    released: float | None = None  # the class workflow's released grade, when there is one


_COLUMNS = (
    "grading.selfstudy.col.lesson",
    "grading.selfstudy.col.correct",
    "grading.selfstudy.col.attempted",
    "grading.selfstudy.col.not_yet",
    "grading.selfstudy.col.points",
)


@dataclass
class Progress:
    """``labkit.progress()``: a table per lesson, text in papermill and HTML in JupyterLab."""

    lessons: list[LessonProgress] = field(default_factory=list)
    lang: str = "en"

    @property
    def total(self) -> LessonProgress:
        row = LessonProgress(t("grading.selfstudy.total", self.lang))
        for r in self.lessons:
            row.correct, row.attempted, row.not_yet = (
                row.correct + r.correct,
                row.attempted + r.attempted,
                row.not_yet + r.not_yet,
            )
            row.points, row.max_points = row.points + r.points, row.max_points + r.max_points
        return row

    def rows(self) -> list[list[str]]:
        head = [t(key, self.lang) for key in _COLUMNS]
        body = [
            [r.lesson, str(r.correct), str(r.attempted), str(r.not_yet),
             f"{fmt_points(r.points, self.lang)}/{fmt_points(r.max_points, self.lang)}"]
            for r in [*self.lessons, self.total]
        ]  # fmt: skip
        released = [r.released for r in self.lessons]
        if any(x is not None for x in released):  # a class's grades, once the instructor released them
            head.append(t("grading.selfstudy.col.released", self.lang))
            total = sum(x for x in released if x is not None)
            for row, x in zip(body, [*released, total]):
                row.append("-" if x is None else fmt_points(x, self.lang))
        return [head, *body]

    def __str__(self) -> str:
        rows = self.rows()
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)

    def _repr_mimebundle_(self, **_: Any) -> dict[str, str]:
        head, *body = self.rows()
        cells = "".join(f"<th>{html.escape(c)}</th>" for c in head)
        trs = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
        caption = html.escape(t("grading.selfstudy.caption", self.lang))
        table = f"<table class='labkit-progress'><caption>{caption}</caption><tr>{cells}</tr>{trs}</table>"
        return {"text/plain": str(self), "text/html": table}


def released_grades() -> dict[str, float]:
    """{lesson: the grade an instructor released} (``labkit feedback``: ``~/feedback/grades.json``, or the
    exchange service's); ``progress`` shows it beside the learner's own count (``LessonProgress.released``)."""
    from labkit.classroom.client import released_grades as released

    return released()


def progress(ws: str | Path | None = None) -> Progress:
    """What the learner has done per lesson, from the checks recorded in their workspace and in this kernel."""
    seen = statuses(Path(ws) if ws else None)
    released = released_grades()
    lessons: dict[str, LessonProgress] = {}
    for q in registry.all_questions():
        row = lessons.setdefault(q.lesson, LessonProgress(q.lesson, released=released.get(q.lesson)))
        got = seen.get(q.id, [])
        row.max_points += q.points
        if "correct" in got:
            row.correct, row.points = row.correct + 1, row.points + q.points
        elif any(s in ATTEMPTED for s in got):
            row.attempted += 1
        else:
            row.not_yet += 1
    return Progress(sorted(lessons.values(), key=lambda r: r.lesson), get_lang())


# -- solutions -----------------------------------------------------------------------------------------


@dataclass
class Solution:
    """A question's solution as a notebook shows it: a code block in JupyterLab, the code in papermill."""

    qid: str
    code: str

    def __str__(self) -> str:
        return self.code

    def _repr_mimebundle_(self, **_: Any) -> dict[str, str]:
        return {"text/plain": self.code, "text/markdown": f"```python\n{self.code}\n```"}


def _catalogs(ws: Path) -> list[Path]:
    """Where a self-study build's solutions are: the workspace's, then beside an install's catalog."""
    newer = sorted((ws / UPDATES).glob(f"*/{SOLUTIONS}"), key=lambda p: p.stat().st_mtime, reverse=True)
    return [ws / STATE / SOLUTIONS, *newer, Path(__file__).with_name(SOLUTIONS)]


def _solution_notebooks() -> list[Path]:
    """The solution notebooks of an instructor's checkout (notebooks/ beside the package), if there."""
    folder = Path(__file__).resolve().parents[2] / "notebooks"
    return [folder] if folder.is_dir() else []


def find_solution(qid: str, lang: str, ws: Path | None = None) -> str | None:
    """The solution of ``qid`` in ``lang`` (else the other language), from a self-study build or the solution notebooks."""
    for path in _catalogs(ws or workspace()):
        if path.is_file():
            texts = json.loads(path.read_text(encoding="utf-8")).get("questions", {}).get(qid)
            if texts:
                return texts.get(lang) or next(iter(texts.values()))
    texts = collect_solutions(_solution_notebooks()).get(qid) if _solution_notebooks() else None
    return (texts.get(lang) or next(iter(texts.values()))) if texts else None


def solution(qid: str, ws: str | Path | None = None) -> Solution | None:
    """The solution of ``qid``, once the learner has tried it (a check with an answer, in this kernel or
    in their workspace); before that, a message and nothing else."""
    registry.get(qid)  # an unknown id is an error that names the known ones
    folder = Path(ws) if ws else workspace()
    if not tried(qid, folder):
        print(t("grading.selfstudy.try_first", qid=qid))
        return None
    code = find_solution(qid, get_lang(), folder)
    if code is None:
        print(t("grading.selfstudy.no_solution", qid=qid))
        return None
    return Solution(qid, code)


def submission(ws: Path, dest: Path, learner: str = "self") -> list[Path]:
    """The workspace as ``labkit grade`` takes a folder of submissions: per lesson, the learner's notebook
    (en or ro, an update's or their own) with the most answered checks, copied to ``dest/<learner>/``."""
    import nbformat

    from labkit.grading.readback import check_records, lesson_of

    best: dict[str, tuple[int, Path]] = {}
    for f in notebooks(ws):
        try:
            nb = nbformat.read(f, as_version=4)
        except (OSError, ValueError):
            continue
        records = check_records(nb)
        answered = sum(r["status"] in ATTEMPTED for _, r in records)
        lesson = lesson_of(nb, records) or f.stem
        if lesson not in best or answered > best[lesson][0]:
            best[lesson] = (answered, f)
    out = []
    for lesson, (_, f) in sorted(best.items()):
        target = dest / learner / f"{lesson}_{f.parent.name}_{f.name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, target)
        out.append(target)
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m labkit.grading.selfstudy COURSE``: make or update the workspace (launch/lab.sh);
    prints its path on stdout and the one-line message on stderr."""
    args = sys.argv[1:] if argv is None else argv
    ws = workspace()
    message = prepare(Path(args[0]), ws)
    if message:
        print(message, file=sys.stderr)
    print(ws)
    return 0


if __name__ == "__main__":
    sys.exit(main())
