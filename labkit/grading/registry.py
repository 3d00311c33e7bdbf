"""The question registry: what each ``labkit.check(id, value)`` compares against.

A question has an id ``"<lesson>.<name>"``, points, bilingual hints, and what to judge by:

- an ``answer``: a constant, or a function of the check's context (the reference);
- ``formula=True``: the student hands in a *function*, compared with the reference function
  at points the notebook never shows (``labkit.grading.points``);
- ``takes="run"`` and ``observe=``: an exercise on the ranks; the value is the ``Run`` of the
  student's ``%%torchrun`` cell, and ``observe`` (``labkit.grading.exercises``) reads what labkit
  observed its ranks do, never what the cell reported;
- ``takes="model"``, ``batch=`` and ``observe=``: a model handed in, judged by its loss on one
  ``synthetic_batch`` against what the ranks observed;
- ``probes=`` and ``output_check=``: a function tried on arguments, each output checked for a
  property (several answers may be right);
- ``sealed=True`` (multiple choice): the notebook only records the answer; the grader judges
  the *first* answer recorded, so trying every option gains nothing;
- ``verify=``: a function ``(value, **context) -> bool``, for questions of your own.

Each question also says what it asks of the student, ``asks=`` (``Asks``): a prediction made before
the cell that measures it, a mechanism written on the ranks, reasoning (a choice, or a formula at
points the notebook never shows), arithmetic on what the lesson states, or driving a tool. How it is
judged (``Question.kind``) is a separate matter: a formula may be a prediction or arithmetic.

``mistakes`` maps a common wrong answer to its own hint: a constant, a function of the
context (a wrong value), or, for formulas, a wrong function. ``hints`` adds hints that the
notebook shows after further wrong tries, each more specific, none with solution code.

Where the questions come from: the modules in ``SOURCES`` (the package ``labkit`` adds the
course's own, so that this module imports no course code) and any named in
``LABKIT_QUESTIONS`` (module names or ``.py`` paths, separated by ``os.pathsep``). In a
student's install (``labkit build-student``) the course's modules are not there: the
questions come from its catalog instead, which holds no reference, only salted hashes of the
reference values (``labkit.grading.hashed``), and the grader judges what the notebook cannot.

    question("lesson1.bytes_per_param", answer=16, hint={"en": "...", "ro": "..."})

    @question("lesson2.rank0_bytes", points=2, rel=0.02, hint={...})
    def rank0_bytes(run):            # the expected value, from the student's own run
        return run.values[0]["param_bytes"]

The functions receive only the context names they ask for (``run``, ``world_size``,
...), passed by the notebook as ``labkit.check(id, value, run=run, world_size=4)``.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from labkit.grading import hashed, sources
from labkit.grading.compare import Verdict, as_number, compare, kind
from labkit.grading.observed import as_verdict, observations_of
from labkit.grading.points import DTYPE_BYTES, SAMPLES, UNSEEN, grader_points, samples
from labkit.i18n import LANGS, catalog, t
from labkit.wire.errors import OptionError
from labkit.wire.grading import QuestionKind, QuestionStatus
from labkit.wire.record import Word

__all__ = [
    "DTYPE_BYTES", "SAMPLES", "UNSEEN", "Asks", "Question", "Verdict", "as_number", "compare", "grader_points",
    "question",
]  # fmt: skip


class Asks(Word):
    """What a question asks of the student (``Question.asks``); not how it is judged (``Question.kind``).
    The first three are understanding, and a test requires them to carry most of the course's points."""

    PREDICTION = "prediction"  # asked before the cell that measures it, judged against the formula or the run
    MECHANISM = "mechanism"  # code written on the ranks that does what FSDP does, judged by what the ranks did
    REASONING = "reasoning"  # a choice, or a formula at points the notebook never shows, from how FSDP works
    ARITHMETIC = "arithmetic"  # a formula from numbers or rules the lesson states above it
    TOOL = "tool"  # driving an API or one of labkit's tools, the hint naming the calls


UNDERSTANDING = (Asks.PREDICTION, Asks.MECHANISM, Asks.REASONING)

_UNSET: Any = object()
UNSET = _UNSET  # a question without a reference ``answer`` (an exercise, or any question in a student install)


@dataclass(frozen=True)
class Question:
    id: str
    points: float = 1
    answer: Any = _UNSET  # a constant, or a function of the context that returns the expected value
    verify: Callable[..., bool] | None = None  # (value, **context) -> bool, when "equal to" is not the test
    rel: float = 1e-6  # relative tolerance for numbers
    abs: float = 0.0  # absolute tolerance for numbers
    mistakes: tuple[tuple[Any, str], ...] = ()  # (a known wrong value, the key of its own hint)
    formula: bool = False  # the student's value is a function, compared with ``answer`` at unseen points
    sealed: bool = False  # multiple choice: recorded in the notebook, judged by the grader on the first answer
    takes: str | None = None  # "run": the value must be a Run (the student's own ranks' measurements); "model"
    at_run: Callable[..., tuple[dict[str, Any], float]] | None = None  # a formula, also against the run:
    # (run, other context) -> (its arguments on this run, the value the run measured), compared with ``run_rel``
    run_rel: float = 1e-6
    observe: Callable[..., Any] | None = None  # a verifier of what labkit observed on the ranks
    probes: tuple[dict[str, Any], ...] = ()  # a function question: the arguments its function is tried on
    output_check: Callable[[dict[str, Any], Any], Any] | None = None  # (probe, output) -> Verdict or bool
    batch: tuple[int, ...] = ()  # takes="model": synthetic_batch(cfg, *batch) is where its loss is measured
    args: tuple[str, ...] = ()  # a formula's arguments (the reference's, or the catalog's in a student install)
    levels: int = 1  # hints: q.<id>.hint, then q.<id>.hint2 ... after further wrong tries
    grader_probes: tuple[dict[str, Any], ...] = ()  # probes only the grader tries (never in a student install)
    contexts: tuple[dict[str, Any], ...] = ()  # a value question: contexts a student install can check it in
    hashed: Mapping[str, Any] | None = field(default=None, compare=False)  # a student install: the sealed answers
    # a value the notebook judges against the student's own run (``observe``): how the grader judges it,
    # from the value alone (the notebook's runs are no evidence to it); a test checks it against a real run
    reference: Callable[[Any], bool] | None = None
    asks: Asks | None = None  # what it asks of the student (a test requires every course question to say)

    @property
    def lesson(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def kind(self) -> QuestionKind:
        """How the grader judges it (``labkit.wire.grading.QuestionKind``)."""
        if self.sealed:
            return QuestionKind.SEALED
        if self.takes in ("run", "model"):
            return QuestionKind(self.takes)
        if self.formula:
            return QuestionKind.FORMULA
        return QuestionKind.FUNCTION if self.probes else QuestionKind.VALUE

    def needs(self) -> list[str]:
        """The context names a value question's answer cannot be computed without."""
        if not callable(self.answer):
            return []
        return [
            p.name
            for p in inspect.signature(self.answer).parameters.values()
            if p.default is p.empty and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        ]

    @property
    def hint_key(self) -> str:
        return f"grading.q.{self.id}.hint"

    def hint_for(self, wrong_tries: int) -> str:
        """The hint after ``wrong_tries`` wrong answers: the first, then more specific ones."""
        level = max(1, min(wrong_tries, self.levels))
        return self.hint_key if level == 1 else f"{self.hint_key}{level}"

    def hint(self, lang: str | None = None) -> str:
        return t(self.hint_key, lang)

    def feedback(self, verdict: Verdict, wrong_tries: int) -> tuple[QuestionStatus, str | None, str | None]:
        """The one rule for what a verdict shows, in the notebook and in the grader's report alike:
        (status, message key, hint key). A wrong answer with nothing more to say than the hint gets the
        hint for this try; a diagnosis of what is wrong (an exercise's) gets that try's hint beside it."""
        if verdict.correct:
            return QuestionStatus.CORRECT, None, None
        if verdict.key == "grading.check.unanswered":
            return QuestionStatus.UNANSWERED, verdict.key, None
        if verdict.key == self.hint_key:
            return QuestionStatus.WRONG, self.hint_for(wrong_tries), None
        if verdict.key and verdict.key.startswith("grading.exercise."):
            return QuestionStatus.WRONG, verdict.key, self.hint_for(wrong_tries)
        return QuestionStatus.WRONG, verdict.key, None

    def judge(self, value: Any, context: Mapping[str, Any]) -> Verdict:
        """Compare the student's value with this question's answer (in the notebook)."""
        if self.takes == "run":
            if not hasattr(value, "values") or not hasattr(value, "events"):
                return Verdict(False, "grading.check.type.run", {"got": kind(value)})
            if self.observe is not None:
                return as_verdict(self.observe(observations_of(value)), self.hint_key)
        if self.takes == "model":  # a loader: (checkpoint_dir, cfg) -> the model, tried on the run's checkpoint
            if not callable(value) or isinstance(value, type):
                return Verdict(False, "grading.check.type.function", {"got": kind(value)})
            model = _call(self, lambda checkpoint_dir, cfg: value(checkpoint_dir, cfg), context)
            if not hasattr(model, "parameters"):
                return Verdict(False, "grading.check.type.model", {"got": kind(model)})
            loss = model_loss(model, self.batch)
            return as_verdict(self.observe(loss, observations_of(context.get("run"))) if self.observe else False,
                              self.hint_key)  # fmt: skip
        if self.verify is not None:
            return as_verdict(_call(self, self.verify, context, value), self.hint_key)
        if self.probes:
            return self._judge_outputs(value)
        if self.observe is not None:  # a value judged against what the ranks of the context's run did
            return as_verdict(self.observe(value, observations_of(context.get("run"))), self.hint_key)
        if self.formula:
            verdict = self._judge_formula(value)
            if verdict.correct and self.at_run is not None and context.get("run") is not None:
                args, measured = _call(self, self.at_run, context)
                if compare(value(**args), measured, self.run_rel) is not None:
                    return Verdict(False, self.hint_key)
            return verdict
        if self.answer is _UNSET:
            return self._judge_hashed([value], self._case(context))
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

    def samples(self, grader: bool = False) -> list[dict[str, Any]]:
        """The points a formula is checked at: unseen values of its arguments (and the grader's own)."""
        return samples(list(self.args), grader)

    def _judge_formula(self, fn: Any) -> Verdict:
        if not callable(fn) or isinstance(fn, type):
            return Verdict(False, "grading.check.type.function", {"got": kind(fn)})
        points = self.samples()
        names = list(points[0])
        try:
            inspect.signature(fn).bind(**points[0])
        except TypeError:
            return Verdict(False, "grading.check.formula.args", {"names": ", ".join(names)})
        except ValueError:  # a builtin without a signature: just call it
            pass
        got = [fn(**p) for p in points]
        if self.answer is _UNSET:
            return self._judge_hashed(got, "")
        return self.compare_formula(got, points)

    def compare_formula(self, got: list[Any], points: list[dict[str, Any]]) -> Verdict:
        """The function's values ``got`` at ``points`` against the reference's (and the known wrong formulas')."""
        expected = [self.answer(**p) for p in points]
        trouble = compare(got, expected, self.rel, self.abs)
        if trouble is None:
            return Verdict(True)
        if trouble.key is not None:
            return Verdict(False, "grading.check.type.number", {"got": kind(next(iter(got), None))})
        for wrong, key in self.mistakes:
            if callable(wrong) and compare(got, [wrong(**p) for p in points], self.rel, self.abs) is None:
                return Verdict(False, key)
        return Verdict(False, self.hint_key)

    def _judge_outputs(self, fn: Any) -> Verdict:
        from labkit.grading.snapshot import argument

        if not callable(fn) or isinstance(fn, type):
            return Verdict(False, "grading.check.type.function", {"got": kind(fn)})
        for probe in self.probes:
            out = fn(**{k: argument(v) for k, v in probe.items()})
            verdict = as_verdict(self.output_check(probe, out) if self.output_check else False, self.hint_key)
            if not verdict.correct:
                return verdict
        return Verdict(True)

    def _case(self, context: Mapping[str, Any]) -> str | None:
        """The sealed case that matches the check's context (a value question in a student install)."""
        cases = (self.hashed or {}).get("cases", {})
        key = case_key(self.hashed.get("needs", []) if self.hashed else [], context)
        return key if key in cases else None

    def _judge_hashed(self, got: list[Any], case: str | None) -> Verdict:
        """Judge with the sealed answers of a student install (``labkit.grading.hashed``)."""
        data = self.hashed or {}
        sealed = data.get("cases", {}).get(case) if case is not None else None
        if sealed is None:
            return Verdict(False, "grading.check.deferred")
        salt, mine = data["salt"], []
        for i, (value, ref) in enumerate(zip(got, sealed["points"])):
            found = hashed.student_digests(value, ref, self.rel, self.abs, salt, f"{self.id}|{case}|{i}")
            if isinstance(found, Verdict):
                return found if found.key else Verdict(False, self.hint_key)
            mine.append(found)
        if all(hashed.matches(d, ref) for d, ref in zip(mine, sealed["points"])):
            return Verdict(True)
        for (_, key), wrong in zip(self.mistakes, sealed.get("mistakes", [])):
            if wrong and all(hashed.matches(d, ref) for d, ref in zip(mine, wrong)):
                return Verdict(False, key)
        return Verdict(False, self.hint_key)


def case_key(needs: Sequence[str], context: Mapping[str, Any]) -> str:
    """A value question's sealed case: the context names its answer needs, with their values."""
    import json

    try:
        return json.dumps({n: context.get(n) for n in needs}, sort_keys=True)
    except (TypeError, ValueError):
        return "?"


def model_loss(model: Any, batch: Sequence[int]) -> float:
    """A model's loss on ``synthetic_batch(model.cfg, *batch)``."""
    import torch

    from labkit.models.transformer import synthetic_batch

    with torch.no_grad():
        return float(model(*synthetic_batch(model.cfg, *batch)).item())


_QUESTIONS: dict[str, Question] = {}
_loaded: set[str] = set()


def question(
    qid: str,
    *,
    points: float = 1,
    hint: Mapping[str, str],
    hints: Sequence[Mapping[str, str]] = (),
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
    observe: Callable[..., Any] | None = None,
    probes: Sequence[dict[str, Any]] = (),
    grader_probes: Sequence[dict[str, Any]] = (),
    output_check: Callable[[dict[str, Any], Any], Any] | None = None,
    batch: Sequence[int] = (),
    contexts: Sequence[dict[str, Any]] = (),
    reference: Callable[[Any], bool] | None = None,
    asks: Asks | None = None,
) -> Any:
    """Register a question. With neither ``answer``, ``verify`` nor ``observe``, use it as a decorator:
    the decorated function computes the expected value from the check's context.

    ``mistakes`` maps a common wrong value to its own hint, e.g. ``{12: {"en": "...", "ro": "..."}}``;
    a key may be a function: of the context (a wrong value), or for a formula, a wrong formula.
    ``hints`` are shown after further wrong tries, each more specific than the last. ``contexts``: for an
    answer that is a function of the check's context, the contexts a student's install gets its hashes for.
    Hints must help without giving the answer away (a test checks that they do not contain it).
    ``asks``: what the question asks of the student (``Asks``); every course question declares it.
    """
    options = dict(
        points=points, hint=hint, hints=hints, rel=rel, abs=abs, mistakes=mistakes, formula=formula, sealed=sealed,
        takes=takes, at_run=at_run, run_rel=run_rel, observe=observe, probes=probes, grader_probes=grader_probes,
        output_check=output_check, batch=batch, contexts=contexts, reference=reference, asks=asks,
    )  # fmt: skip
    if answer is _UNSET and verify is None and observe is None and not probes:

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            question(qid, answer=fn, verify=verify, **options)
            return fn

        return decorate
    if formula and not callable(answer):
        raise ValueError(f"question {qid!r}: a formula question needs a reference function")
    if "." not in qid:
        raise ValueError(f"question id {qid!r} must look like '<lesson>.<name>'")
    if qid in _QUESTIONS:
        raise ValueError(f"question {qid!r} is registered twice")
    levels = [hint, *hints]
    for i, texts in enumerate(levels, 1):
        _check_texts(qid, texts)
        catalog({f"grading.q.{qid}.hint" if i == 1 else f"grading.q.{qid}.hint{i}": dict(texts)})
    known = []
    for i, (wrong, texts) in enumerate((mistakes or {}).items()):
        _check_texts(qid, texts)
        catalog({f"grading.q.{qid}.mistake{i}": dict(texts)})
        known.append((wrong, f"grading.q.{qid}.mistake{i}"))
    args = tuple(inspect.signature(answer).parameters) if formula else ()
    q = Question(
        qid, points, answer, verify, rel, abs, tuple(known), formula, sealed, takes, at_run, run_rel, observe,
        tuple(probes), output_check, tuple(batch), args, len(levels), tuple(grader_probes), tuple(contexts),
        reference=reference, asks=Asks(asks) if asks is not None else None,
    )  # fmt: skip
    _QUESTIONS[qid] = q
    return q


def add(q: Question) -> None:
    """Register a question made elsewhere (a student install's catalog); its texts must be in the i18n catalog."""
    if q.id in _QUESTIONS:
        raise ValueError(f"question {q.id!r} is registered twice")
    _QUESTIONS[q.id] = q


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


def load_questions() -> None:
    """Load the questions, once (``labkit.grading.sources``): a module that fails is a clear error."""
    try:
        sources.load(_from_catalog)
    except sources.SourceError as e:
        name, error = e.args
        raise OptionError(t("grading.check.questions_module", name=name, error=error)) from e


def _from_catalog(entry: dict[str, Any]) -> None:
    """One question of a student install's catalog (``labkit.grading.student``): no reference in it."""
    catalog(entry["texts"])
    resolve = _resolve
    q = Question(
        entry["id"], entry["points"], rel=entry["rel"], abs=entry["abs"], sealed=entry["sealed"],
        formula=entry["formula"], takes=entry["takes"], args=tuple(entry["args"]), levels=entry["levels"],
        mistakes=tuple((None, key) for key in entry["mistakes"]), observe=resolve(entry["observe"]),
        output_check=resolve(entry["output_check"]), probes=tuple(entry["probes"]), batch=tuple(entry["batch"]),
        hashed=entry["hashed"],
    )  # fmt: skip
    add(q)


def _resolve(name: str | None) -> Any:
    """``"module:function"`` of a verifier the student install ships (labkit.grading.exercises)."""
    if not name:
        return None
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)


def call_with(q: Question, fn: Callable[..., Any], context: Mapping[str, Any], *args: Any) -> Any:
    """Call ``fn(*args, **context)`` with only the context names it takes (a missing one: OptionError)."""
    return _call(q, fn, context, *args)


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
