"""The grader's verdicts: every question judged from what the student handed in, never from a status.

A check's record (``labkit.grading.checks``) carries the notebook's own verdict, which the
grader ignores, and a ``report`` of what was handed in, which it judges here:

| kind | handed in | judged by |
|---|---|---|
| formula | the function's source (a snapshot) | running it again in the judge's sandbox at the student's unseen points and the grader's own, and comparing with the reference here |
| function | the function's source | running it on the probes (the grader's too), checking each output |
| sealed | the first answer recorded | comparing it with the answer |
| value | the value (and the context it depends on) | computing the answer here from that context |
| run | the id of a run | the verifier, on what labkit's instrumentation on that run's ranks sent to the grader's sink |
| model | the model's weights (a file) | its loss, measured by the judge, against what the ranks observed |

A record without a report, or whose report does not hold what its kind needs, scores 0.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.grading import registry
from labkit.grading.checks import judge_record, verdict_of
from labkit.grading.observed import as_verdict
from labkit.grading.snapshot import decode, from_plain


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


def report_of(rec: dict[str, Any]) -> dict[str, Any] | None:
    report = rec.get("report")
    return report if isinstance(report, dict) else None


def tasks(questions: list[registry.Question], chosen: dict[str, Chosen], models: Path) -> list[dict[str, Any]]:
    """What the judge process must run: each formula's and function's snapshot at the grader's points,
    and each model handed in (its file, copied into ``models`` by the caller)."""
    out = []
    for q in questions:
        c = chosen.get(q.id)
        report = report_of(c.record) if c else None
        if report is None or report.get("unanswered"):
            continue
        if q.kind == "formula" and isinstance(report.get("function"), dict):
            out.append({"key": q.id, "function": report["function"], "calls": q.samples(grader=True)})
        elif q.kind == "function" and isinstance(report.get("function"), dict):
            out.append({"key": q.id, "function": report["function"], "calls": [*q.probes, *q.grader_probes]})
        elif q.kind == "model" and isinstance(report.get("model"), dict):
            model = report["model"]
            name = Path(str(model.get("file", ""))).name
            if name and (models / name).is_file():
                out.append(
                    {"key": q.id, "kind": "model_loss", "state": str(models / name), "config": model.get("config"),
                     "batch": list(q.batch)}
                )  # fmt: skip
    return out


def _failed_call(results: list[Any]) -> registry.Verdict | None:
    for r in results:
        if isinstance(r, dict) and "$error" in r:
            if r["$error"] == "NotImplementedError":
                return registry.Verdict(False, "grading.check.unanswered")
            return registry.Verdict(
                False, "grading.check.crashed", {"error": f"{r['$error']}: {r.get('message', '')}"[:300]}
            )
    return None


def verdict(
    q: registry.Question,
    rec: dict[str, Any],
    results: dict[str, list[Any]],
    observations: dict[str, dict[int, dict[str, Any]]],
    judge_failure: dict[str, Any] | None = None,
) -> registry.Verdict:
    """The grader's verdict on the record that counts for ``q`` (see the module docstring);
    ``judge_failure``: why the judge process returned nothing, for a result that is not there."""
    report = report_of(rec)
    if report is None or report.get("kind") != q.kind:
        return registry.Verdict(False, "grading.judge.no_report")
    if report.get("unanswered"):
        return registry.Verdict(False, "grading.check.unanswered")
    context = {k: _decoded(v) for k, v in (report.get("context") or {}).items()}
    seen = observations.get(str(report.get("context_run")), {})
    if q.kind == "sealed":
        status, key, fields = judge_record(q, from_plain(report.get("value")))
        return registry.Verdict(status == "correct", key, fields)
    if q.kind == "run":
        runs = observations.get(str(report.get("run")))
        return (
            as_verdict(q.observe(runs), q.hint_key)
            if runs and q.observe
            else registry.Verdict(False, "grading.judge.no_run")
        )
    if q.kind in ("formula", "function", "model"):
        if q.kind != "model" and "function" not in report:
            return registry.Verdict(False, "grading.judge.no_source", {"got": report.get("not_function", "?")})
        got = results.get(q.id)
        if got is None and judge_failure:  # the judge process ended before it wrote any result
            key = "grading.judge.timeout" if "seconds" in judge_failure else "grading.judge.died"
            return registry.Verdict(False, key, dict(judge_failure))
        if got is None:
            key = "grading.judge.no_model" if q.kind == "model" else "grading.judge.no_result"
            return registry.Verdict(False, key, {"error": "-"})
        failed = _failed_call(got)
        if failed is not None:
            return failed
        values = [from_plain(v) for v in got]
        if q.kind == "model":
            return as_verdict(q.observe(values[0], seen), q.hint_key) if q.observe else registry.Verdict(False)
        if q.kind == "function":
            probes = [*q.probes, *q.grader_probes]
            for probe, out in zip(probes, values):
                v = as_verdict(q.output_check(probe, out), q.hint_key)
                if not v.correct:
                    return v
            return registry.Verdict(len(values) == len(probes))
        return q.compare_formula(values, q.samples(grader=True))
    value = from_plain(report.get("value"))
    if q.observe is not None:
        return as_verdict(q.observe(value, seen), q.hint_key)
    return verdict_of(q, value, context)


def _decoded(value: Any) -> Any:
    try:
        return decode(value)
    except (ValueError, TypeError, KeyError):
        return None
