"""The question registry: what each ``labkit.check(id, value)`` compares against.

A question has an id ``"<lesson>.<name>"``, points, a bilingual hint, and either
an ``answer`` (a constant, or a function of the check's context) or a ``verify``
function. The course's questions live in ``labkit/grading/questions.py`` and
``labkit/course/questions.py``; an instructor
can add modules of their own with ``LABKIT_QUESTIONS`` (module names or ``.py``
paths, separated by ``os.pathsep``), which both the notebook and the grader load.

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

from labkit.errors import OptionError
from labkit.i18n import LANGS, catalog, t

catalog(
    {
        "check.type.number": {
            "en": "expected a number, got {got}",
            "ro": "se aștepta un număr, s-a primit {got}",
        },
        "check.type.bool": {
            "en": "expected True or False, got {got}",
            "ro": "se aștepta True sau False, s-a primit {got}",
        },
        "check.type.text": {
            "en": "expected a string, got {got}",
            "ro": "se aștepta un șir de caractere, s-a primit {got}",
        },
        "check.type.sequence": {
            "en": "expected a list of {n} items, got {got}",
            "ro": "se aștepta o listă de {n} elemente, s-a primit {got}",
        },
        "check.type.mapping": {
            "en": "expected a dict with the keys {keys}, got {got}",
            "ro": "se aștepta un dict cu cheile {keys}, s-a primit {got}",
        },
        "check.unknown": {
            "en": "no question is registered with the id {qid!r} (see labkit/grading/questions.py)",
            "ro": "nicio întrebare nu este înregistrată cu id-ul {qid!r} (vezi labkit/grading/questions.py)",
        },
        "check.needs": {
            "en": "the check {qid} needs {names}=...: call labkit.check({qid!r}, value, {names}=...)",
            "ro": "verificarea {qid} are nevoie de {names}=...: apelați labkit.check({qid!r}, valoare, {names}=...)",
        },
        "check.questions_module": {
            "en": "cannot load the questions module {name!r} named in LABKIT_QUESTIONS: {error}",
            "ro": "modulul de întrebări {name!r} din LABKIT_QUESTIONS nu poate fi încărcat: {error}",
        },
    }
)

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

    @property
    def lesson(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def hint_key(self) -> str:
        return f"q.{self.id}.hint"

    def hint(self, lang: str | None = None) -> str:
        return t(self.hint_key, lang)

    def judge(self, value: Any, context: Mapping[str, Any]) -> Verdict:
        """Compare the student's value with this question's answer."""
        if self.verify is not None:
            ok = bool(_call(self, self.verify, context, value))
            return Verdict(True) if ok else Verdict(False, self.hint_key)
        expected = _call(self, self.answer, context) if callable(self.answer) else self.answer
        trouble = compare(value, expected, self.rel, self.abs)
        if trouble is None:
            return Verdict(True)
        if trouble.key is not None:  # the wrong kind of value: say so, it gives nothing away
            return trouble
        for wrong, key in self.mistakes:
            if compare(value, wrong, self.rel, self.abs) is None:
                return Verdict(False, key)
        return Verdict(False, self.hint_key)


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
) -> Any:
    """Register a question. With neither ``answer`` nor ``verify``, use it as a decorator:
    the decorated function computes the expected value from the check's context.

    ``mistakes`` maps a common wrong value to its own hint, e.g. ``{12: {"en": "...", "ro": "..."}}``.
    Hints must help without giving the answer away (a test checks that they do not contain it).
    """
    if answer is _UNSET and verify is None:

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            question(qid, points=points, hint=hint, answer=fn, rel=rel, abs=abs, mistakes=mistakes)
            return fn

        return decorate
    if "." not in qid:
        raise ValueError(f"question id {qid!r} must look like '<lesson>.<name>'")
    if qid in _QUESTIONS:
        raise ValueError(f"question {qid!r} is registered twice")
    _check_texts(qid, hint)
    catalog({f"q.{qid}.hint": dict(hint)})
    known = []
    for i, (wrong, texts) in enumerate((mistakes or {}).items()):
        _check_texts(qid, texts)
        catalog({f"q.{qid}.mistake{i}": dict(texts)})
        known.append((wrong, f"q.{qid}.mistake{i}"))
    q = Question(qid, points, answer, verify, rel, abs, tuple(known))
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
        raise OptionError(t("check.unknown", qid=qid)) from None


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


# the course's questions: the grading examples, and the lessons' own (when the course is installed)
COURSE_MODULES = ("labkit.grading.questions", "labkit.course.questions")


def load_questions() -> None:
    """Import the course's questions and any module named in LABKIT_QUESTIONS (once each)."""
    names = [n for n in COURSE_MODULES if _exists(n)]
    names += [n for n in os.environ.get("LABKIT_QUESTIONS", "").split(os.pathsep) if n.strip()]
    for name in names:
        if name in _loaded:
            continue
        _loaded.add(name)  # before importing: a module that imports labkit.check must not loop
        try:
            _import(name.strip())
        except Exception as e:
            _loaded.discard(name)
            raise OptionError(t("check.questions_module", name=name, error=f"{type(e).__name__}: {e}")) from e


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
        raise OptionError(t("check.needs", qid=q.id, names=", ".join(missing)))
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
            return Verdict(False, "check.type.bool", {"got": _kind(value)})
        return None if bool(value) == expected else Verdict(False)
    if isinstance(expected, numbers.Real):
        v = as_number(value)
        if v is None:
            return Verdict(False, "check.type.number", {"got": _kind(value)})
        return None if math.isclose(v, expected, rel_tol=rel, abs_tol=abs) else Verdict(False)
    if isinstance(expected, str):
        if not isinstance(value, str):
            return Verdict(False, "check.type.text", {"got": _kind(value)})
        return None if value.strip().casefold() == expected.strip().casefold() else Verdict(False)
    if isinstance(expected, Mapping):
        keys = ", ".join(map(str, expected))
        if not isinstance(value, Mapping) or set(value) != set(expected):
            return Verdict(False, "check.type.mapping", {"keys": keys, "got": _kind(value)})
        bad = [k for k in expected if compare(value[k], expected[k], rel, abs) is not None]
        return None if not bad else Verdict(False)
    if isinstance(expected, (set, frozenset)):
        if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
            return Verdict(False, "check.type.sequence", {"n": len(expected), "got": _kind(value)})
        return None if set(value) == set(expected) else Verdict(False)
    if isinstance(expected, (list, tuple)):
        if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__") or len(value) != len(expected):
            return Verdict(False, "check.type.sequence", {"n": len(expected), "got": _kind(value)})
        items = list(value)
        bad = [i for i, e in enumerate(expected) if compare(items[i], e, rel, abs) is not None]
        return None if not bad else Verdict(False)
    return None if value == expected else Verdict(False)
