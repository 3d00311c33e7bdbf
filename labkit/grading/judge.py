"""The grader's verdicts: every question judged from what the student handed in, never from a status.

A check's record (``labkit.grading.checks``) carries the notebook's own verdict, which the
grader ignores, and a ``report`` of what was handed in (a ``labkit.wire.grading.Claim``), which it
judges here:

| kind | handed in | judged by |
|---|---|---|
| formula | the function's source (a snapshot) | running it again in the judge's sandbox at the student's unseen points and the grader's own, and comparing with the reference here |
| function | the function's source | running it on the probes (the grader's too), checking each output |
| sealed | the first answer recorded | comparing it with the answer |
| value | the value (and the context it depends on) | computing the answer here, in a context the lesson registered |
| run | the exercise's functions, as the notebook's cells define them | re-running them on the grader's own ranks in the judge's sandbox, with inputs from this grading's seed (``labkit.grading.rerun``) |
| model | a loader: the function that builds the model from a checkpoint | called by the judge on a checkpoint of its own (weights from this grading's seed); the loss of what it returned against the checkpoint's own loss, measured apart |

A record without a report, or whose report is not what its kind needs, scores 0. What a student's
function raised at one of the grader's own points is named by its type only: its message could carry
those points (or anything else the function read) into the report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import nbformat

from labkit.grading import registry
from labkit.grading.checks import judge_record, verdict_of
from labkit.grading.observed import as_verdict
from labkit.grading.snapshot import decode, from_plain
from labkit.wire.errors import OptionError
from labkit.wire.grading import Claim, JudgeResult, JudgeTask, QuestionKind, RecordError, TaskKind

RANKS_SECONDS = 150.0  # one exercise re-run on the grader's ranks (launch included)


@dataclass
class Chosen:
    cell: int
    record: dict[str, Any]
    attempts: int


def choose(records: list[tuple[int, dict[str, Any]]]) -> dict[str, Chosen]:
    """Per question: the record that counts (the last; the first for a sealed question) and the tries."""
    chosen: dict[str, Chosen] = {}
    attempts: Counter[str] = Counter()
    for cell, rec in records:
        qid = rec["id"]
        attempts[qid] += 1
        q = registry.find(qid)
        if not (q is not None and q.sealed and qid in chosen):
            chosen[qid] = Chosen(cell, rec, 0)
    for qid, c in chosen.items():
        c.attempts = attempts[qid]
    return chosen


def claim_of(rec: dict[str, Any]) -> Claim | None:
    """The record's report as a ``Claim``, or None when it is missing or not one."""
    report = rec.get("report")
    if not isinstance(report, dict):
        return None
    if "question" not in report and report.get("kind") in set(QuestionKind):  # a report from before the records
        report = {**report, "kind": Claim.KIND, "question": report["kind"]}
    try:
        return Claim.from_dict(report)
    except RecordError:
        return None


CHECKPOINT_MODEL = {"vocab_size": 384, "dim": 48, "n_layers": 3, "n_heads": 4, "seq_len": 16}  # not the lesson's


def tasks(
    questions: list[registry.Question],
    chosen: dict[str, Chosen],
    executed: nbformat.NotebookNode | None = None,
    seed: int = 0,
) -> list[JudgeTask]:
    """What the judge process must run: each formula's and function's snapshot at the grader's points,
    each loader on a checkpoint of the grader's (two tasks: the student's call, then the measure, in a
    child that never ran student code), and each exercise on the ranks re-run from the functions the
    notebook's cells define (``executed``); the checkpoint's weights and the ranks' inputs from ``seed``."""
    out = []
    for q in questions:
        c = chosen.get(q.id)
        claim = claim_of(c.record) if c else None
        if claim is None or claim.unanswered:
            continue
        if q.kind in (QuestionKind.FORMULA, QuestionKind.FUNCTION) and claim.function is not None:
            calls = q.samples(grader=True) if q.kind is QuestionKind.FORMULA else [*q.probes, *q.grader_probes]
            out.append(JudgeTask(q.id, TaskKind.CALLS, function=claim.function, calls=calls))
        elif q.kind is QuestionKind.MODEL and claim.function is not None:
            weights = f"/tmp/labkit-judge-{len(out)}.pt"
            load = JudgeTask(f"{q.id}#load", TaskKind.LOAD, function=claim.function, state=weights,
                             config=CHECKPOINT_MODEL, seed=seed)  # fmt: skip
            out += [load, JudgeTask(q.id, TaskKind.MODEL_LOSS, state=weights, config=CHECKPOINT_MODEL,
                                    batch=list(q.batch), seed=seed)]  # fmt: skip
        elif q.kind is QuestionKind.RUN and executed is not None:
            from labkit.grading import rerun

            if q.id not in rerun.rerun_questions():
                continue
            code = rerun.functions_of(_sources(executed), q.id, before=c.cell if c else None)
            if code is not None:
                ranks = rerun.task(q.id, code, seed)
                out.append(JudgeTask(q.id, TaskKind.RANKS, ranks=ranks, seconds=RANKS_SECONDS))
    return out


PAPERMILL_MARKER_TAG = "papermill-error-cell-tag"  # the banner cells papermill adds after an error


def student_cells(nb: nbformat.NotebookNode) -> Iterator[tuple[int, Any]]:
    """(index in the student's file, cell), skipping the banner cells papermill inserts."""
    i = 0
    for cell in nb.cells:
        if not isinstance(cell, dict):
            continue
        tags = (cell.get("metadata") or {}).get("tags") if isinstance(cell.get("metadata"), dict) else None
        if isinstance(tags, list) and PAPERMILL_MARKER_TAG in tags:
            continue
        yield i, cell
        i += 1


def _sources(nb: nbformat.NotebookNode) -> list[str]:
    """Every cell's source as text (a markdown cell's too, so that indices are the notebook's)."""
    out = []
    for _, cell in student_cells(nb):
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else source
        out.append(text if isinstance(text, str) and cell.get("cell_type") == "code" else "")
    return out


def _failed_call(results: list[Any], seen: int) -> registry.Verdict | None:
    """The first call that raised; its message is shown only for the first ``seen`` calls (the notebook's
    own points, which the student's notebook showed anyway), never for the grader's."""
    for i, r in enumerate(results):
        if isinstance(r, dict) and "$error" in r:
            if r["$error"] == "NotImplementedError":
                return registry.Verdict(False, "grading.check.unanswered")
            shown = f"{r['$error']}: {r.get('message', '')}" if i < seen else str(r["$error"])
            return registry.Verdict(False, "grading.check.crashed", {"error": shown[:300]})
    return None


def verdict(
    q: registry.Question,
    rec: dict[str, Any],
    results: dict[str, JudgeResult],
    judge_failure: dict[str, Any] | None = None,
    seed: int = 0,
) -> registry.Verdict:
    """The grader's verdict on the record that counts for ``q`` (see the module docstring);
    ``judge_failure``: why the judge process returned nothing, for a result that is not there."""
    claim = claim_of(rec)
    if claim is None or claim.question != q.kind:
        return registry.Verdict(False, "grading.judge.no_report")
    if claim.unanswered:
        return registry.Verdict(False, "grading.check.unanswered")
    if q.kind is QuestionKind.SEALED:
        status, key, fields = judge_record(q, from_plain(claim.value))
        return registry.Verdict(status == "correct", key, fields)
    if q.kind is QuestionKind.VALUE:
        return _value(q, claim)
    if q.kind in (QuestionKind.FORMULA, QuestionKind.FUNCTION, QuestionKind.MODEL) and claim.function is None:
        return registry.Verdict(False, "grading.judge.no_source", {"got": claim.not_function or "?"})
    got = results.get(q.id)
    if got is None:
        if judge_failure:  # the judge process ended before it answered anything
            key = "grading.judge.timeout" if "seconds" in judge_failure else "grading.judge.died"
            return registry.Verdict(False, key, dict(judge_failure))
        if q.kind is QuestionKind.RUN:  # no task was made: the notebook defines no functions for it
            from labkit.grading import rerun

            return rerun.no_functions(q.id)
        key = "grading.judge.no_model" if q.kind is QuestionKind.MODEL else "grading.judge.no_result"
        return registry.Verdict(False, key, {"error": "-"})
    if got.how.startswith("timeout"):  # its child ran past its time (``timeout 20 s``)
        return registry.Verdict(False, "grading.judge.timeout", {"seconds": got.how.split()[1]})
    if got.how:  # its child died: how (an exit status, a signal), never what it printed
        return registry.Verdict(False, "grading.judge.died", {"how": got.how})
    if q.kind is QuestionKind.RUN:
        from labkit.grading import rerun

        return rerun.verdict(q.id, seed, got.values[0] if got.values else {})
    if q.kind is QuestionKind.MODEL:
        loaded = results.get(f"{q.id}#load")
        failed = _failed_call(loaded.values, 0) if loaded is not None else None
        return failed or _model(q, got.values)
    seen = len(q.samples()) if q.kind is QuestionKind.FORMULA else len(q.probes)
    failed = _failed_call(got.values, seen)
    if failed is not None:
        return failed
    values = [from_plain(v) for v in got.values]
    if q.kind is QuestionKind.FUNCTION:
        probes = [*q.probes, *q.grader_probes]
        for probe, out in zip(probes, values):
            v = as_verdict(q.output_check(probe, out) if q.output_check else False, q.hint_key)
            if not v.correct:
                return v
        return registry.Verdict(len(values) == len(probes))
    return q.compare_formula(values, q.samples(grader=True))


def _model(q: registry.Question, values: list[Any]) -> registry.Verdict:
    """A loader's model: the loss of the weights it returned against the checkpoint's own (both measured by the
    judge, in a child that ran no student code); ``[{"$error": ...}]`` when it returned no model's weights."""
    failed = _failed_call(values, 0)
    if failed is not None:
        return failed
    if len(values) != 2 or not all(isinstance(v, (int, float)) for v in values):
        return registry.Verdict(False, "grading.judge.no_model", {"error": "-"})
    want, got = (float(v) for v in values)
    if abs(got - want) <= 1e-5 * abs(want):
        return registry.Verdict(True)
    return registry.Verdict(False, "grading.exercise.reloaded", {"got": f"{got:.6f}", "want": f"{want:.6f}"})


def _value(q: registry.Question, claim: Claim) -> registry.Verdict:
    """A value, judged in the check's context: only a context the lesson registered (``contexts=``), where
    it registered any; a missing or unknown one scores 0 with a message, never stops the grading."""
    context = {k: _decoded(v) for k, v in claim.context.items()}
    value = from_plain(claim.value)
    missing = [name for name in q.needs() if context.get(name) is None]
    if missing:  # called without a context its answer needs (the student install said "checked when you hand in")
        return registry.Verdict(False, "grading.judge.no_context", {"names": ", ".join(missing)})
    if q.contexts and not any(all(context.get(k) == v for k, v in case.items()) for case in q.contexts):
        names = sorted({k for case in q.contexts for k in case})
        return registry.Verdict(False, "grading.judge.context", {"names": ", ".join(names)})
    if q.observe is not None:  # the notebook judged it against its own run, which is no evidence to the grader
        if q.reference is None:
            return registry.Verdict(False, "grading.judge.no_run", {"error": "-"})
        return registry.Verdict(True) if q.reference(value) else registry.Verdict(False, q.hint_key)
    try:
        return verdict_of(q, value, context)
    except OptionError:  # the check was called without a context its answer needs
        return registry.Verdict(False, "grading.judge.no_context", {"names": ", ".join(q.needs())})


def _decoded(value: Any) -> Any:
    try:
        return decode(value)
    except (ValueError, TypeError, KeyError):
        return None
