"""``labkit.check(id, value)``: immediate feedback in the notebook, and a record for the grader.

    labkit.check("lesson1.bytes_per_param", bytes_per_param)
    labkit.check("lesson2.zero1_bytes", zero1_bytes, n_params=n, world_size=4)

The value is passed explicitly; nothing is read from the notebook's globals later.
In a notebook the result shows as a small green or red box, and the same output
carries a plain text line (what papermill and nbval see) and a JSON record under
``MIME``, which is how the grader finds every check in an executed notebook.

The record's status is what the notebook showed; the grader does not believe it. It judges
the record's ``report`` instead (``labkit.grading.judge``): a function's source, which it
runs again in a process of its own at points of its own; a multiple-choice answer; the id
of the run whose ranks labkit observed; a model's weights. A wrong answer's hint gets more
specific with each wrong try in the kernel (``Question.hints``); the report counts the tries.
"""

from __future__ import annotations

import html
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from labkit.fmt import fmt_spec
from labkit.grading import registry
from labkit.grading.observed import run_id
from labkit.i18n import get_lang, t
from labkit.wire.errors import OptionError
from labkit.wire.grading import CheckRecord, Claim
from labkit.wire.records import RunRecord

MIME = "application/vnd.labkit.check+json"


# the edge's colour per status: JupyterLab's theme variable, with a fallback for other frontends.
# The box is a faint tint of it over the notebook's background and its text the theme's: light on
# the dark theme, dark on the light one (>= 4.5:1 in both, tests/browser/test_contrast_browser.py).
_COLORS = {
    "correct": "var(--jp-success-color1, #2e7d32)",
    "wrong": "var(--jp-error-color1, #c62828)",
    "unanswered": "var(--jp-border-color1, #9e9e9e)",
    "recorded": "var(--jp-brand-color1, #1565c0)",
    "deferred": "var(--jp-brand-color1, #1565c0)",
}
_BOX_TEXT = "var(--jp-content-font-color1, #212121)"
_BOX_BACKGROUND = "var(--jp-layout-color0, #ffffff)"


def fmt_points(x: float, lang: str | None = None) -> str:
    """Points as the language writes them (0,5 in Romanian); a CSV passes "en" to keep 0.5."""
    return str(int(x)) if float(x).is_integer() else fmt_spec(x, "g", lang)


@dataclass
class CheckResult:
    """One check: ``status`` is "correct", "wrong", "unanswered", "recorded" (a sealed question,
    judged by the grader from ``value``) or "deferred" (nothing in this install can judge it);
    ``feedback`` is what the notebook shows: a hint, or what is wrong and the hint of this try."""

    id: str
    status: str
    points: float
    max_points: float
    key: str | None = None  # message key of the feedback, so a report can show it in another language
    fields: dict[str, Any] = field(default_factory=dict)
    lang: str = "en"
    value: Any = None  # a sealed question's answer, for the grader to judge
    hint: str | None = None  # with a diagnosis as ``key``: the key of the hint for this try
    report: dict[str, Any] | None = None  # what the grader judges (see the module docstring)
    _shown_at: Any = field(default=None, repr=False, compare=False)

    @property
    def correct(self) -> bool:
        return self.status == "correct"

    def feedback(self, lang: str | None = None) -> str:
        text = t(self.key, lang or self.lang, **self.fields) if self.key else ""
        if self.hint:
            text = f"{text}. {t(self.hint, lang or self.lang)}" if text else t(self.hint, lang or self.lang)
        return text

    def line(self, lang: str | None = None) -> str:
        lang = lang or self.lang
        score = f"{fmt_points(self.points, lang)}/{fmt_points(self.max_points, lang)}"
        text = t(f"grading.check.line.{self.status}", lang, qid=self.id, score=score)
        if self.status == "wrong" and self.key:
            text += f". {t('grading.check.hint', lang)}: {self.feedback(lang)}"
        elif self.status == "unanswered":
            text += f": {self.feedback(lang)}"
        return text

    def __repr__(self) -> str:
        return self.line()

    def __bool__(self) -> bool:
        return self.correct

    def record(self) -> dict[str, Any]:
        """What the grader reads back from the executed notebook (``labkit.wire.grading.CheckRecord``)."""
        return {
            "kind": CheckRecord.KIND,
            "schema": CheckRecord.SCHEMA,
            "id": self.id,
            "status": self.status,
            "correct": self.correct,
            "points": self.points,
            "max_points": self.max_points,
            "key": self.key,
            "fields": self.fields,
            "lang": self.lang,
            "feedback": self.feedback(),
            **({"value": self.value} if self.status == "recorded" else {}),
            **({"hint": self.hint} if self.hint else {}),
        }

    def graded(self) -> dict[str, Any]:
        """The record as the grader reads it back: with the report, which the output carries in its
        metadata (where nbval, which compares a solution notebook's outputs, does not look)."""
        return {**self.record(), **({"report": self.report} if self.report is not None else {})}

    def html(self) -> str:
        edge = _COLORS[self.status]
        # color-mix: a browser without it drops the declaration, and the box is the page's background
        fill = f"color-mix(in srgb, {edge} 12%, {_BOX_BACKGROUND})"
        score = f"{fmt_points(self.points, self.lang)}/{fmt_points(self.max_points, self.lang)}"
        head = html.escape(t(f"grading.check.line.{self.status}", self.lang, qid=self.id, score=score))
        body = ""
        if self.status == "wrong" and self.key:
            body = f"<br><b>{html.escape(t('grading.check.hint', self.lang))}:</b> {html.escape(self.feedback())}"
        elif self.status == "unanswered":
            body = f"<br>{html.escape(self.feedback())}"
        return (
            f'<div class="labkit-check" style="border-left:4px solid {edge};background:{fill};color:{_BOX_TEXT};'
            f'padding:6px 10px;margin:4px 0;font-family:sans-serif">{head}{body}</div>'
        )

    def bundle(self, with_record: bool = True) -> dict[str, Any]:
        data: dict[str, Any] = {"text/plain": self.line(), "text/html": self.html()}
        if with_record:
            data[MIME] = self.record()
        return data

    def _ipython_display_(self) -> None:
        # check() has shown this result already; when it is also the cell's last
        # expression, showing it twice would only repeat the box
        ip = _ipython()
        if ip is not None and self._shown_at == ip.execution_count:
            return
        from IPython.display import display

        display(self.bundle(with_record=False), raw=True)  # a re-display is not a new attempt


def _ipython() -> Any:
    mod = sys.modules.get("IPython")
    return mod.get_ipython() if mod is not None else None


_wrong_tries: Counter[str] = Counter()  # per question, in this kernel: how specific the next hint is


def check(question_id: str, value: Any, *, run: RunRecord | None = None, **context: Any) -> CheckResult:
    """Check ``value`` against the question ``question_id``; show and return the result.

    ``run=`` (a ``labkit.Run``) and any other keyword are the context that answers
    depending on the student's own run or parameters are computed from.
    ``...`` as the value means "not answered yet" and scores 0 without a hint.
    """
    q = registry.get(question_id)
    if value is Ellipsis or value is NotImplemented:
        result = _result(q, "unanswered", "grading.check.unanswered")
    elif q.sealed:  # no verdict here: the grader judges the first answer recorded
        result = _result(q, "recorded", value=_plain(value))
    else:
        result = _judged(q, value, {"run": run, **context})
    result.report = claim(q, value, run, context)
    _show(result)
    return result


def claim(q: registry.Question, value: Any, run: RunRecord | None, context: dict[str, Any]) -> dict[str, Any]:
    """What the grader judges this check by: never a status, only what the student handed in."""
    from labkit.grading import snapshot

    fields: dict[str, Any] = {}
    if value is Ellipsis or value is NotImplemented:
        return Claim(q.kind, unanswered=True).to_dict()
    if q.kind in ("formula", "function", "model"):
        try:
            fields["function"] = snapshot.snapshot(value)
        except (snapshot.NotAFunction, OSError, TypeError, SyntaxError):  # not a function, or no source for it
            fields["not_function"] = type(value).__name__
    elif q.kind == "run":
        fields["run"] = run_id(value)
    else:
        try:
            fields["value"] = snapshot.to_plain(value)
        except (TypeError, ValueError):
            fields["value"] = {"$kind": type(value).__name__}
    if run is not None:
        fields["context_run"] = run_id(run)
    encoded = {}
    for name, v in context.items():
        try:
            encoded[name] = snapshot.encode(v)
        except (TypeError, ValueError):
            encoded[name] = {"$kind": type(v).__name__}
    return Claim(q.kind, context=encoded, **fields).to_dict()


def _result(
    q: registry.Question, status: str, key: str | None = None, fields: dict | None = None, value: Any = None
) -> CheckResult:
    points = q.points if status == "correct" else 0
    return CheckResult(q.id, status, points, q.points, key, dict(fields or {}), get_lang(), value)


def verdict_of(q: registry.Question, value: Any, context: dict[str, Any]) -> registry.Verdict:
    """``q.judge``, with what the student's value raised as a verdict ("not answered yet" for the stub)."""
    try:
        return q.judge(value, context)
    except OptionError:
        raise  # the check cell itself is wrong (a missing run=...): the notebook's author must fix it
    except NotImplementedError:  # the student's function still has the stub in it
        return registry.Verdict(False, "grading.check.unanswered")
    except Exception as e:
        return registry.Verdict(False, "grading.check.crashed", {"error": f"{type(e).__name__}: {e}"})


def _judged(q: registry.Question, value: Any, context: dict[str, Any]) -> CheckResult:
    verdict = verdict_of(q, value, context)
    if verdict.correct:
        return _result(q, "correct")
    if verdict.key in ("grading.check.deferred", "grading.check.unanswered"):
        return _result(
            q, verdict.key.rsplit(".", 1)[1], None if verdict.key == "grading.check.deferred" else verdict.key
        )
    _wrong_tries[q.id] += 1
    status, key, hint = q.feedback(verdict, _wrong_tries[q.id])
    result = _result(q, str(status), key, verdict.fields if key == verdict.key else None)
    result.hint = hint
    return result


def solution_result(q: registry.Question, lang: str) -> CheckResult:
    """What a check of ``q`` shows for the solution's answer (the build stores it for nbval)."""
    if q.sealed:
        return CheckResult(q.id, "recorded", 0, q.points, None, {}, lang, _plain(q.answer))
    return CheckResult(q.id, "correct", q.points, q.points, None, {}, lang)


def judge_record(q: registry.Question, value: Any) -> tuple[str, str | None, dict[str, Any]]:
    """The grader's verdict on a sealed question's recorded value: (status, key, fields)."""
    verdict = verdict_of(q, value, {})
    if verdict.correct:
        return "correct", None, {}
    return ("unanswered" if verdict.key == "grading.check.unanswered" else "wrong"), verdict.key, dict(verdict.fields)


def _plain(value: Any) -> Any:
    """A JSON-safe copy of a multiple-choice answer (strings, numbers, booleans, lists, dicts)."""
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    return repr(value)


def _show(result: CheckResult) -> None:
    ip = _ipython()
    if ip is None:  # a plain script, e.g. a lesson exported for torchrun
        print(result.line())
        return
    from IPython.display import display

    metadata = {MIME: {"report": result.report}} if result.report is not None else {}
    display(result.bundle(), metadata=metadata, raw=True)
    result._shown_at = ip.execution_count
