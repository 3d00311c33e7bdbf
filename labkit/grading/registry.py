"""The question registry: what each ``labkit.check(id, value)`` compares against.

A question has an id ``"<lesson>.<name>"``, points, a bilingual hint, and either
an ``answer`` (a constant, or a function of the check's context) or a ``verify``
function. Three kinds need more than "equal to":

- ``formula=True``: the student hands in a *function*; the checker calls it, and the
  reference, at points the notebook never shows (``UNSEEN``), so a number copied from
  the page cannot pass;
- ``takes="run"``: the value is the ``Run`` of the student's own ``%%torchrun`` cell,
  and ``verify`` reads what the ranks measured;
- ``sealed=True`` (multiple choice): the notebook only records the answer; the grader
  judges the *first* answer recorded, so trying every option gains nothing.

``mistakes`` maps a common wrong answer to its own hint: a constant, a function of the
context (a wrong value), or, for formulas, a wrong function.

Which modules register questions: those in ``SOURCES`` (the package ``labkit`` adds the
course's own, so that this module imports no course code) and any named in
``LABKIT_QUESTIONS`` (module names or ``.py`` paths, separated by ``os.pathsep``), which
both the notebook and the grader load.

    question("lesson1.bytes_per_param", answer=16, hint={"en": "...", "ro": "..."})

    @question("lesson2.rank0_bytes", points=2, rel=0.02, hint={...})
    def rank0_bytes(run):            # the expected value, from the student's own run
        return run.values[0]["param_bytes"]

The functions receive only the context names they ask for (``run``, ``world_size``,
...), passed by the notebook as ``labkit.check(id, value, run=run, world_size=4)``.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import math
import numbers
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from labkit.i18n import LANGS, catalog, t
from labkit.wire import env as envvars
from labkit.wire.errors import OptionError

_UNSET: Any = object()


@dataclass(frozen=True)
class Verdict:
    """The outcome of comparing a value: correct, or why not (an i18n key and its fields)."""

    correct: bool
    key: str | None = None  # a message key: a type problem, or the hint to show
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Question:
    id: str
    points: float = 1
    answer: Any = _UNSET  # a constant, or a function of the context that returns the expected value
    verify: Callable[..., bool] | None = None  # (value, **context) -> bool, when "equal to" is not the test
    rel: float = 1e-6  # relative tolerance for numbers
    abs: float = 0.0  # absolute tolerance for numbers
    mistakes: tuple[tuple[Any, str], ...] = ()  # (a known wrong value, the key of its own hint)
    formula: bool = False  # the student's value is a function, compared with ``answer`` at UNSEEN points
    sealed: bool = False  # multiple choice: recorded in the notebook, judged by the grader on the first answer
    takes: str | None = None  # "run": the value must be a Run (the student's own ranks' measurements); "model"
    at_run: Callable[..., tuple[dict[str, Any], float]] | None = None  # a formula, also against the run:
    # (run, other context) -> (its arguments on this run, the value the run measured), compared with ``run_rel``
    run_rel: float = 1e-6

    @property
    def lesson(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def hint_key(self) -> str:
        return f"grading.q.{self.id}.hint"

    def hint(self, lang: str | None = None) -> str:
        return t(self.hint_key, lang)

    def judge(self, value: Any, context: Mapping[str, Any]) -> Verdict:
        """Compare the student's value with this question's answer."""
        if self.takes == "run" and not hasattr(value, "values"):
            return Verdict(False, "grading.check.type.run", {"got": _kind(value)})
        if self.takes == "model" and not hasattr(value, "parameters"):
            return Verdict(False, "grading.check.type.model", {"got": _kind(value)})
        if self.verify is not None:
            ok = bool(_call(self, self.verify, context, value))
            return Verdict(True) if ok else Verdict(False, self.hint_key)
        if self.formula:
            verdict = self._judge_formula(value)
            if verdict.correct and self.at_run is not None and context.get("run") is not None:
                args, measured = _call(self, self.at_run, context)
                if compare(value(**args), measured, self.run_rel) is not None:
                    return Verdict(False, self.hint_key)
            return verdict
        expected = _call(self, self.answer, context) if callable(self.answer) else self.answer
        trouble = compare(value, expected, self.rel, self.abs)
        if trouble is None:
            return Verdict(True)
        if trouble.key is not None:  # the wrong kind of value: say so, it gives nothing away
            return trouble
        for wrong, key in self.mistakes:
            wrong_value = _call(self, wrong, context) if callable(wrong) else wrong
            if compare(value, wrong_value, self.rel, self.abs) is None:
                return Verdict(False, key)
        return Verdict(False, self.hint_key)

    def samples(self) -> list[dict[str, Any]]:
        """The points a formula is checked at: UNSEEN values of the reference's arguments."""
        names = list(inspect.signature(self.answer).parameters)
        return [{n: UNSEEN[n][i] for n in names} for i in range(SAMPLES)]

    def _judge_formula(self, fn: Any) -> Verdict:
        if not callable(fn) or isinstance(fn, type):
            return Verdict(False, "grading.check.type.function", {"got": _kind(fn)})
        points = self.samples()
        names = list(points[0])
        try:
            inspect.signature(fn).bind(**points[0])
        except TypeError:
            return Verdict(False, "grading.check.formula.args", {"names": ", ".join(names)})
        except ValueError:  # a builtin without a signature: just call it
            pass
        got = [fn(**p) for p in points]
        expected = [self.answer(**p) for p in points]
        trouble = compare(got, expected, self.rel, self.abs)
        if trouble is None:
            return Verdict(True)
        if trouble.key is not None:
            return Verdict(False, "grading.check.type.number", {"got": _kind(next(iter(got), None))})
        for wrong, key in self.mistakes:
            if callable(wrong) and compare(got, [wrong(**p) for p in points], self.rel, self.abs) is None:
                return Verdict(False, key)
        return Verdict(False, self.hint_key)


# Where formulas are checked: values of each argument the notebooks never use or print.
# The i-th sample takes the i-th value of every argument the reference function names.
SAMPLES = 4
UNSEEN: dict[str, tuple[Any, ...]] = {
    "n_params": (1_234_567_891, 6_700_000_017, 70_553_706_496, 13_000_000_003),
    "world_size": (3, 24, 1000, 7),
    "gpus_per_node": (4, 16, 8, 2),
    "global_rank": (9, 37, 999, 5),
    "precision": ("bf16", "fp32", "fp16", "fp32"),
    "gpu_bytes": (23e9, 141e9, 47.5e9, 96e9),
    "root_params": (1_234_567, 53_000_011, 2_000_003, 777_777),
    "block_params": (7_654_321, 201_326_593, 12_582_917, 3_333_331),
    "n_blocks": (6, 80, 12, 3),
    "fp32_gathered": (1_234_568, 40_000_004, 7_777_780, 123_456),
    "micro_batch": (3, 1, 16, 5),
    "seq_len": (1000, 8192, 333, 4097),
    "dim": (5120, 96, 8192, 1000),
}
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}


_QUESTIONS: dict[str, Question] = {}
_loaded: set[str] = set()


def question(
    qid: str,
    *,
    points: float = 1,
    hint: Mapping[str, str],
    answer: Any = _UNSET,
    verify: Callable[..., bool] | None = None,
    rel: float = 1e-6,
    abs: float = 0.0,
    mistakes: Mapping[Any, Mapping[str, str]] | None = None,
    formula: bool = False,
    sealed: bool = False,
    takes: str | None = None,
    at_run: Callable[..., tuple[dict[str, Any], float]] | None = None,
    run_rel: float = 1e-6,
) -> Any:
    """Register a question. With neither ``answer`` nor ``verify``, use it as a decorator:
    the decorated function computes the expected value from the check's context.

    ``mistakes`` maps a common wrong value to its own hint, e.g. ``{12: {"en": "...", "ro": "..."}}``;
    a key may be a function: of the context (a wrong value), or for a formula, a wrong formula.
    Hints must help without giving the answer away (a test checks that they do not contain it).
    """
    if answer is _UNSET and verify is None:

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            question(
                qid, points=points, hint=hint, answer=fn, rel=rel, abs=abs, mistakes=mistakes,
                formula=formula, sealed=sealed, takes=takes, at_run=at_run, run_rel=run_rel,
            )  # fmt: skip
            return fn

        return decorate
    if formula and not callable(answer):
        raise ValueError(f"question {qid!r}: a formula question needs a reference function")
    if "." not in qid:
        raise ValueError(f"question id {qid!r} must look like '<lesson>.<name>'")
    if qid in _QUESTIONS:
        raise ValueError(f"question {qid!r} is registered twice")
    _check_texts(qid, hint)
    catalog({f"grading.q.{qid}.hint": dict(hint)})
    known = []
    for i, (wrong, texts) in enumerate((mistakes or {}).items()):
        _check_texts(qid, texts)
        catalog({f"grading.q.{qid}.mistake{i}": dict(texts)})
        known.append((wrong, f"grading.q.{qid}.mistake{i}"))
    q = Question(qid, points, answer, verify, rel, abs, tuple(known), formula, sealed, takes, at_run, run_rel)
    _QUESTIONS[qid] = q
    return q


def _check_texts(qid: str, texts: Mapping[str, str]) -> None:
    missing = [lang for lang in LANGS if not texts.get(lang)]
    if missing:
        raise ValueError(f"question {qid!r}: hint missing in {', '.join(missing)}")


def get(qid: str) -> Question:
    load_questions()
    try:
        return _QUESTIONS[qid]
    except KeyError:
        raise OptionError(t("grading.check.unknown", qid=qid)) from None


def find(qid: str) -> Question | None:
    load_questions()
    return _QUESTIONS.get(qid)


def lesson_questions(lesson: str) -> list[Question]:
    """The questions of one lesson, in the order they were registered."""
    load_questions()
    return [q for q in _QUESTIONS.values() if q.lesson == lesson]


def all_questions() -> list[Question]:
    load_questions()
    return list(_QUESTIONS.values())


# modules that register questions; the package ``labkit`` adds the course's (see labkit/__init__.py)
SOURCES: list[str] = []


def add_source(module: str) -> None:
    """Load ``module``'s questions too (by name, imported on the first check)."""
    if module not in SOURCES:
        SOURCES.append(module)


def load_questions() -> None:
    """Import the registered sources and any module named in LABKIT_QUESTIONS (once each)."""
    import labkit  # the package names the course's question modules, so grading imports no course code

    names = [n for n in (*getattr(labkit, "QUESTION_SOURCES", ()), *SOURCES) if _exists(n)]
    names += [n for n in (envvars.get("LABKIT_QUESTIONS") or "").split(os.pathsep) if n.strip()]
    for name in names:
        if name in _loaded:
            continue
        _loaded.add(name)  # before importing: a module that imports labkit.check must not loop
        try:
            _import(name.strip())
        except Exception as e:
            _loaded.discard(name)
            raise OptionError(t("grading.check.questions_module", name=name, error=f"{type(e).__name__}: {e}")) from e


def _exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its package is not there either
        return False


def _import(name: str) -> None:
    if not name.endswith(".py"):
        importlib.import_module(name)
        return
    path = os.path.abspath(name)
    mod_name = "labkit_questions_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"not a Python file: {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


# -- comparing values ------------------------------------------------------------


def _call(q: Question, fn: Callable[..., Any], context: Mapping[str, Any], *args: Any) -> Any:
    """Call ``fn(*args, **context)`` with only the context names it takes."""
    params = list(inspect.signature(fn).parameters.values())[len(args) :]
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return fn(*args, **{k: v for k, v in context.items() if v is not None})
    given, missing = {}, []
    for p in params:
        if context.get(p.name) is not None:
            given[p.name] = context[p.name]
        elif p.default is p.empty:
            missing.append(p.name)
    if missing:
        raise OptionError(t("grading.check.needs", qid=q.id, names=", ".join(missing)))
    return fn(*args, **given)


def as_number(value: Any) -> float | int | None:
    """A plain number from an int, float, numpy scalar or one-element tensor; None otherwise."""
    if isinstance(value, bool) or isinstance(value, (str, bytes)):
        return None
    if isinstance(value, numbers.Real):
        return value  # type: ignore[return-value]
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", 0) == 0:  # numpy scalars, 0-d tensors
        try:
            v = item()
        except (TypeError, ValueError, RuntimeError):
            return None
        return v if isinstance(v, numbers.Real) and not isinstance(v, bool) else None
    return None


def _kind(value: Any) -> str:
    return type(value).__name__


def compare(value: Any, expected: Any, rel: float = 1e-6, abs: float = 0.0) -> Verdict | None:
    """None if ``value`` matches ``expected``; else a Verdict, with a key when the kind is wrong."""
    if isinstance(expected, bool):
        if not isinstance(value, bool) and type(value).__name__ != "bool_":  # numpy.bool_ too
            return Verdict(False, "grading.check.type.bool", {"got": _kind(value)})
        return None if bool(value) == expected else Verdict(False)
    if isinstance(expected, numbers.Real):
        v = as_number(value)
        if v is None:
            return Verdict(False, "grading.check.type.number", {"got": _kind(value)})
        return None if math.isclose(v, expected, rel_tol=rel, abs_tol=abs) else Verdict(False)
    if isinstance(expected, str):
        if not isinstance(value, str):
            return Verdict(False, "grading.check.type.text", {"got": _kind(value)})
        return None if value.strip().casefold() == expected.strip().casefold() else Verdict(False)
    if isinstance(expected, Mapping):
        keys = ", ".join(map(str, expected))
        if not isinstance(value, Mapping) or set(value) != set(expected):
            return Verdict(False, "grading.check.type.mapping", {"keys": keys, "got": _kind(value)})
        bad = [k for k in expected if compare(value[k], expected[k], rel, abs) is not None]
        return None if not bad else Verdict(False)
    if isinstance(expected, (set, frozenset)):
        if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
            return Verdict(False, "grading.check.type.sequence", {"n": len(expected), "got": _kind(value)})
        return None if set(value) == set(expected) else Verdict(False)
    if isinstance(expected, (list, tuple)):
        if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__") or len(value) != len(expected):
            return Verdict(False, "grading.check.type.sequence", {"n": len(expected), "got": _kind(value)})
        items = list(value)
        bad = [i for i, e in enumerate(expected) if compare(items[i], e, rel, abs) is not None]
        return None if not bad else Verdict(False)
    return None if value == expected else Verdict(False)
