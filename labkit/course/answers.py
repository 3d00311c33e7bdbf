"""Answers shown before their question: a question must not be answered by the cells above it.

A lesson asks a question with ``labkit.check("lessonN.name", value, ...)``. Its answer at the
notebook's own arguments is, for a question with a constant answer, that answer; for a formula,
the reference evaluated at the arguments the notebook calls the student's function with; for a
formula judged against a run (``at_run``), the reference at that run's arguments. ``leaks`` finds
each such answer in the markdown or the outputs of an earlier cell, in the forms a lesson prints a
number (plain, with thousands separators, scaled to any byte unit, with 0 to 3 decimals, in
either edition's format) or states a mapping (a table row with the key and the value).

An answer is also shown where a reader can compute it by copying: the sum of a table's column (lesson
1's bytes per parameter was once the sum of the table above it; a column of three numbers or more, so
that a rank column's "0, 1" is not a sum anyone reads), and, for a formula, the formula itself written in
the prose in the lessons' notation (``4Ψ/N``, ``(2 + 2 + K) Ψ``: ``formula_stated``).

Numbers with fewer than three significant digits are not looked for (a "2" is in every cell). A
multiple-choice letter is named in its own question among the other options, so what counts as showing
it is a statement of it: "the answer is b", "(b) is correct", "răspunsul corect: b", or code above the
question that sets the checked name to it (``answer = "b"`` outside the student's own cell). A built notebook
carries the outputs of its pure cells, so a static check covers the formula tables; the outputs
of runs need an executed notebook (``tests/test_notebooks.py``'s papermill run passes its own).
"""

from __future__ import annotations

import ast
import contextlib
import io
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from labkit import i18n
from labkit.fmt import UNITS, localize
from labkit.wire.records import RunRecord

SCALES = sorted(set(UNITS.values()))
MIN_DIGITS = 3  # significant digits a rendering needs to count as the answer
SOLUTION = "### BEGIN SOLUTION"
RUN_MIME = "application/vnd.labkit.run+json"  # labkit.regress.record.MIME, read back here (course sits below regress)


@dataclass(frozen=True)
class Leak:
    qid: str
    check_cell: int  # the cell that asks
    cell: int  # the earlier cell that shows the answer
    shown: str  # the answer as that cell shows it

    def __str__(self) -> str:
        return f"{self.qid} (cell {self.check_cell}): its answer {self.shown!r} is in cell {self.cell}"


def renderings(value: Any, lang: str) -> set[str]:
    """The forms a lesson prints ``value`` in (numbers only: see the module docstring)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value == 0:
        return set()
    forms = set()
    for scale in SCALES:
        x = abs(value) / scale
        for decimals in range(4):
            for text in (f"{x:.{decimals}f}", f"{x:,.{decimals}f}"):
                if _significant(text) >= MIN_DIGITS and float(text.replace(",", "")) > 0:
                    forms.add(localize(text, lang))
    return forms


def _significant(text: str) -> int:
    digits = re.sub(r"\D", "", text).lstrip("0")
    return len(digits.rstrip("0")) if "." not in text else len(digits)


def found(forms: set[str], text: str) -> str | None:
    """The first of ``forms`` that stands in ``text`` as a number of its own (not part of a longer one)."""
    for form in sorted(forms, key=len, reverse=True):
        if re.search(rf"(?<![\d.,]){re.escape(form)}(?![\d]|[.,]\d)", text):
            return form
    return None


def table_columns(text: str) -> list[list[float]]:
    """The numeric columns of the tables in ``text``: markdown (``| a | b |``) and the plain tables
    ``show.table`` prints (a header, a rule of dashes, rows aligned under it). A column counts where
    every row of it is a number."""
    columns: list[list[float]] = []
    lines = text.splitlines()
    rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines if ln.lstrip().startswith("|")]
    columns += _numeric_columns([r for r in rows if not all(set(c) <= set("-: ") for c in r)][1:])
    for i, rule in enumerate(lines):
        if not re.fullmatch(r"-+(  +-+)*\s*", rule) or i == 0:
            continue
        spans = [m.span() for m in re.finditer(r"-+", rule)]
        body = []
        for ln in lines[i + 1 :]:
            if not ln.strip():
                break
            body.append(
                [ln[a : (spans[k + 1][0] if k + 1 < len(spans) else None)].strip() for k, (a, _) in enumerate(spans)]
            )
        columns += _numeric_columns(body)
    return columns


def _numeric_columns(rows: list[list[str]]) -> list[list[float]]:
    out = []
    for k in range(min((len(r) for r in rows), default=0)):
        cells = [r[k].replace(",", "") for r in rows]
        if all(re.fullmatch(r"-?\d+(\.\d+)?", c) for c in cells):
            out.append([float(c) for c in cells])
    return out


def column_sum(value: Any, text: str) -> str | None:
    """A column of a table in ``text`` (three numbers or more) that adds up to ``value``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value == 0:
        return None
    for column in table_columns(text):
        if len(column) >= 3 and math.isclose(sum(column), value, rel_tol=1e-9):
            return " + ".join(f"{x:g}" for x in column)
    return None


# The lessons' notation for a formula in prose: Ψ parameters, N ranks, K bytes of optimizer state per
# parameter (lesson 2: K = 12 for AdamW), the course's argument names in backticks.
NOTATION = {"Ψ": "n_params", "N": "world_size", "K": "12"}
_FORMULA = re.compile(r"[\dΨNK(][\dΨNK+\-·×*/().\s]*[\dΨNK)]")


def formula_stated(reference: Any, args: tuple[str, ...], text: str) -> str | None:
    """Where ``text`` writes the reference formula itself, in the lessons' notation (``4Ψ/N``) or with the
    argument names (``4 * n_params / world_size``): equal to it at several points, not as text."""
    if not args or not set(args) <= set(_POINTS):
        return None
    points = [{a: _POINTS[a][k] for a in args} for k in range(len(_POINTS["n_params"]))]
    try:
        expected = [float(reference(**p)) for p in points]
    except Exception:  # a reference that needs more than numbers: not written as a formula
        return None
    names = "|".join(map(re.escape, args))
    snippets = [m.group(0) for m in _FORMULA.finditer(text) if "Ψ" in m.group(0)]
    snippets += [m.group(1) for m in re.finditer(rf"`([^`]*\b(?:{names})\b[^`]*)`", text)]
    for snippet in snippets:
        if not re.search(r"[\d+\-*/·×]", snippet):  # a name alone (`world_size`) is no formula
            continue
        got = [_evaluate(snippet, p) for p in points]
        if all(g is not None and math.isclose(g, e, rel_tol=1e-9) for g, e in zip(got, expected)):
            return snippet.strip()
    return None


# Where a written formula is compared with the reference: sizes no lesson uses, so that two formulas that
# differ cannot agree at all of them.
_POINTS = {
    "n_params": (7_340_033.0, 1_000_003.0, 65_537.0),
    "world_size": (6.0, 13.0, 128.0),
    "gpus_per_node": (3.0, 13.0, 8.0),
    "root_params": (1_231.0, 77_777.0, 3.0),
    "block_params": (40_961.0, 5.0, 999_999.0),
}
_TOKEN = re.compile(r"\s*(\d+(?:\.\d+)?|[A-Za-z_]\w*|[-+*/()])")


def _evaluate(snippet: str, point: dict[str, float]) -> float | None:
    """The value of a formula as prose writes it (``(2 + 2) Ψ + KΨ / N``, products implicit) at ``point``;
    None where it is not one."""
    source = snippet.replace("·", "*").replace("×", "*")
    source = re.sub(r"[ΨNK]", lambda m: f" {NOTATION[m.group(0)]} ", source)
    tokens, pos = [], 0
    while pos < len(source.rstrip()):
        m = _TOKEN.match(source, pos)
        if m is None:
            return None
        tokens.append(m.group(1))
        pos = m.end()
    operand = lambda tok: tok[0].isalnum() or tok[0] == "_"  # noqa: E731
    joined = []
    for tok in tokens:
        if joined and (operand(joined[-1]) or joined[-1] == ")") and (operand(tok) or tok == "("):
            joined.append("*")  # Ψ after a number, or a bracket after either: a product
        joined.append(tok)
    if any(operand(t) and not t[0].isdigit() and t not in point for t in joined):
        return None
    try:
        value = eval(" ".join(joined), {"__builtins__": {}}, dict(point))  # digits, names, + - * / ( ) only
    except (SyntaxError, ZeroDivisionError, TypeError):
        return None
    return float(value) if isinstance(value, (int, float)) else None


def _letter_patterns(letter: str, name: str | None) -> list[re.Pattern[str]]:
    """The ways a lesson could state that option ``letter`` is the right one (both editions)."""
    # quoted or bracketed, or bare before punctuation: "the answer is a trade-off" does not name option a
    opt = rf"(?:[\"'(`*]+{re.escape(letter)}[\"')`*]+|{re.escape(letter)}(?=\s*(?:[.,;:!?]|$)))"
    said = r"(?:answer|option|choice|răspuns(?:ul)?|varianta|opțiunea)"
    verb = r"(?:is|are|este|e|:|=)"
    right = r"(?:right|correct|true|corect[ăa]?|adevărat[ăa]?|bun[ăa]?)"
    patterns = [
        rf"\b{said}\b(?:\s+{right})?\s*{verb}\s*{opt}",  # the answer is b, răspunsul corect: b
        rf"(?<![\w])[\"'(`*]*{re.escape(letter)}[\"')`*]*\s+{verb}\s+(?:the\s+|cel\s+|cea\s+)?{right}\b",  # (b) is correct
    ]
    if name:
        patterns.append(rf"^\s*{re.escape(name)}\s*=\s*[\"']{re.escape(letter)}[\"']")  # answer = "b" in code
    return [re.compile(p, re.I | re.M) for p in patterns]


def letter_stated(letter: str, text: str, name: str | None = None) -> str | None:
    """Where ``text`` says that option ``letter`` is the answer (see the module docstring), else None."""
    for pattern in _letter_patterns(letter, name):
        m = pattern.search(text)
        if m:
            return m.group(0).strip()
    return None


def mapping_rows(answer: Mapping[str, Any], text: str) -> str | None:
    """A line of ``text`` that pairs every key with its value is the mapping answered; one per key is enough."""
    rows = []
    for key, value in answer.items():
        line = next(
            (
                ln
                for ln in text.splitlines()
                if re.search(rf"\b{re.escape(str(key))}\b", ln)
                and re.search(rf"\b{re.escape(repr(value))}\b", ln)
                and not any(re.search(rf"\b{re.escape(str(o))}\b", ln) for o in answer if o != key)
            ),
            None,
        )
        if line is None:
            return None
        rows.append(line.strip())
    return " / ".join(rows)


def cell_text(cell: Any) -> str:
    """What a reader sees of a cell: its markdown, or its outputs."""
    if cell.cell_type == "markdown":
        return cell.source
    parts = []
    for out in cell.get("outputs", []):
        if "text" in out:
            parts.append(out["text"])
        for mime in ("text/plain", "text/markdown", "text/html"):
            data = out.get("data", {}).get(mime)
            if data:
                parts.append(data if isinstance(data, str) else "".join(data))
    return "\n".join(parts)


def check_calls(source: str) -> Iterator[ast.Call]:
    """Every ``labkit.check(...)`` call in a code cell."""
    try:
        tree = ast.parse("\n".join(ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))))
    except SyntaxError:
        return
    for node in ast.walk(tree):
        f = node.func if isinstance(node, ast.Call) else None
        if (
            isinstance(f, ast.Attribute)
            and f.attr == "check"
            and isinstance(f.value, ast.Name)
            and f.value.id == "labkit"
        ):
            yield node  # type: ignore[misc]


def namespace(nb: Any) -> dict[str, Any]:
    """The names the notebook's parameters, setup imports and pure cells define, as the build runs them."""
    from labkit.course.build import run_cell

    ns: dict[str, Any] = {"__name__": "__main__"}
    with i18n.language(nb.metadata.get("labkit", {}).get("lang", "en")):
        for cell in nb.cells:
            tags = cell.metadata.get("tags", [])
            wanted = {"parameters", "injected-parameters", "nbval-check-output"}
            if cell.cell_type != "code" or not (wanted & set(tags) or "%labkit_lang" in cell.source):
                continue
            if "labkit.check(" in cell.source:
                continue
            source = "\n".join(ln for ln in cell.source.splitlines() if not ln.startswith("%"))
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                try:
                    run_cell(source, "<answers>", ns)
                except Exception:  # a cell that needs a run: its names stay unknown
                    pass
    return ns


def _calls_to(nb: Any, name: str) -> Iterator[ast.Call]:
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse("\n".join(ln for ln in cell.source.splitlines() if not ln.lstrip().startswith("%")))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
                yield node


def _parameters(nb: Any, name: str) -> list[str] | None:
    for cell in nb.cells:
        if cell.cell_type == "code" and f"def {name}(" in cell.source:
            tree = ast.parse("\n".join(ln for ln in cell.source.splitlines() if not ln.lstrip().startswith("%")))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef) and node.name == name:
                    return [a.arg for a in node.args.args]
    return None


def answers(nb: Any, call: ast.Call, ns: dict[str, Any], run: RunRecord | None = None) -> list[Any]:
    """The answers of one check at the notebook's own arguments (those that can be known); ``run``: the run
    the check is given, where the notebook was executed."""
    from labkit.grading import registry

    q = registry.find(call.args[0].value) if call.args and isinstance(call.args[0], ast.Constant) else None
    if q is None or q.answer is registry.UNSET or len(call.args) < 2:
        return []
    if not q.formula:
        if callable(q.answer):
            context = {}
            for kw in call.keywords:
                with contextlib.suppress(Exception):
                    context[kw.arg] = eval(compile(ast.Expression(kw.value), "<check>", "eval"), dict(ns))
            try:
                return [registry.call_with(q, q.answer, context)]
            except Exception:  # the answer needs a run this notebook has not made here
                return []
        return [q.answer]
    found_values = []
    fn = call.args[1]
    names = _parameters(nb, fn.id) if isinstance(fn, ast.Name) else None
    if names:
        for use in _calls_to(nb, fn.id):
            try:
                values = [eval(compile(ast.Expression(a), "<call>", "eval"), dict(ns)) for a in use.args]
                kwargs = dict(zip(names, values))
                kwargs.update(
                    {kw.arg: eval(compile(ast.Expression(kw.value), "<call>", "eval"), dict(ns)) for kw in use.keywords}
                )
                found_values.append(q.answer(**kwargs))
            except Exception:  # arguments only a run gives
                continue
    if q.at_run is not None and run is not None:
        with contextlib.suppress(Exception):
            args, _ = q.at_run(run)
            found_values.append(q.answer(**args))
    return found_values


def run_records(nb: Any) -> list[tuple[int, Any]]:
    """Each run an executed notebook's outputs record (``labkit.regress.record``), with its cell, as the run
    the questions read: ``values`` by rank and ``nproc``."""
    from types import SimpleNamespace

    found = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            rec = out.get("data", {}).get(RUN_MIME)
            if isinstance(rec, dict):
                values = {int(r): v for r, v in (rec.get("values") or {}).items()}
                found.append((i, SimpleNamespace(values=values, nproc=rec.get("nproc"), ok=rec.get("ok"))))
    return found


def run_of(nb: Any, call: ast.Call, check_cell: int, records: list[tuple[int, Any]]) -> Any:
    """The run a check is given: ``run=labkit.last_run``, or ``run=name`` where a cell set ``name = labkit.last_run``."""
    kw = next((k for k in call.keywords if k.arg == "run"), None)
    if kw is None or not records:
        return None
    until = check_cell
    if isinstance(kw.value, ast.Name):
        assigned = re.compile(rf"^{re.escape(kw.value.id)} = labkit\.last_run\b", re.M)
        until = next((j for j in range(check_cell, -1, -1) if assigned.search(nb.cells[j].source)), -1)
    elif ast.unparse(kw.value) != "labkit.last_run":
        return None
    before = [run for i, run in records if i < until]
    return before[-1] if before else None


def asked_at(nb: Any, call: ast.Call, check_cell: int) -> int:
    """The cell where the student answers: the solution cell above the check that defines the name it checks
    (``def name(`` or ``name =``), else the check itself. A prediction is asked there, before the run that
    the check then compares it with: that run's outputs come after the question, not before it."""
    arg = call.args[1] if len(call.args) > 1 else None
    if not isinstance(arg, ast.Name):
        return check_cell
    defines = re.compile(rf"^(def {re.escape(arg.id)}\(|{re.escape(arg.id)}\s*=)", re.M)
    cells = [j for j in range(check_cell) if SOLUTION in nb.cells[j].source and defines.search(nb.cells[j].source)]
    return cells[-1] if cells else check_cell  # the nearest: lesson 4 asks two questions in an ``answer``


def leaks(nb: Any, ns: dict[str, Any] | None = None) -> list[Leak]:
    """Every question of ``nb`` whose answer a cell above the one that asks it (``asked_at``) shows in its
    markdown or outputs (an executed notebook: with its runs' outputs, and the answers of questions judged
    against a run)."""
    ns = namespace(nb) if ns is None else ns
    records = run_records(nb)
    lang = nb.metadata.get("labkit", {}).get("lang", "en")
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for call in check_calls(cell.source):
            asked = asked_at(nb, call, i)
            for answer in answers(nb, call, ns, run_of(nb, call, i, records)):
                forms = renderings(answer, lang)
                name = call.args[1].id if isinstance(call.args[1], ast.Name) else None
                for j in range(asked):
                    if SOLUTION in nb.cells[j].source:  # the student's own cell: its output is their answer
                        continue
                    text = cell_text(nb.cells[j])
                    if isinstance(answer, Mapping):
                        shown = mapping_rows(answer, text)
                    elif isinstance(answer, str):
                        code = nb.cells[j].source if nb.cells[j].cell_type == "code" else ""
                        shown = letter_stated(answer, text + "\n" + code, name)
                    else:
                        shown = found(forms, text) or column_sum(answer, text)
                    if shown:
                        out.append(Leak(call.args[0].value, i, j, shown))
                        break
            out += _formula_in_prose(nb, call, i, asked)
    return out


def _formula_in_prose(nb: Any, call: ast.Call, check_cell: int, asked: int) -> list[Leak]:
    """A formula question whose reference the markdown above the question writes out (``formula_stated``)."""
    from labkit.grading import registry

    q = registry.find(call.args[0].value) if call.args and isinstance(call.args[0], ast.Constant) else None
    if q is None or not q.formula or not callable(q.answer):
        return []
    for j in range(asked):
        cell = nb.cells[j]
        shown = formula_stated(q.answer, q.args, cell.source) if cell.cell_type == "markdown" else None
        if shown:
            return [Leak(q.id, check_cell, j, shown)]
    return []
