"""``labkit regress compare A B``: the command, its one-line regressions, its Markdown and JUnit reports.

What is compared and by which rule is ``labkit.regress.compare``; this module says it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from labkit.fmt import fmt_bytes, fmt_number, fmt_spec
from labkit.i18n import t
from labkit.regress import messages  # noqa: F401  (registers the regress.* messages)
from labkit.regress.compare import TIME, Finding, Tolerances, compare, load, regressions, rule_of


def show(value: Any, metric: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if metric.startswith("memory.") or metric.endswith(".bytes") or ".unit_bytes." in metric:
        return f"{fmt_bytes(value)} ({int(value)})"
    if rule_of(metric) == TIME:
        return f"{fmt_number(value * 1000, 1)} ms"
    return fmt_spec(value, "g") if isinstance(value, float) else str(value)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(findings: list[Finding], a_path: str, b_path: str, fp_a: dict | None, fp_b: dict | None) -> str:
    from labkit.regress.fingerprint import differences

    bad = regressions(findings)
    lines = [f"# {t('regress.compare.title')}", "", f"- A: `{a_path}`", f"- B: `{b_path}`"]
    if fp_a and fp_b:
        for key, x, y in differences(fp_a, fp_b):
            lines.append(f"- {key}: {_cell(x)} → {_cell(y)}")
    lines += ["", t("regress.compare.verdict_bad", n=len(bad)) if bad else t("regress.compare.verdict_ok"), ""]
    head = [
        t(f"regress.compare.col.{c}") for c in ("lesson", "parameters", "where", "metric", "rank", "a", "b", "change")
    ]
    for title, rows in (
        (t("regress.compare.regressions"), bad),
        (t("regress.compare.changes"), [f for f in findings if f not in bad]),
    ):
        if not rows:
            continue
        lines += [f"## {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for f in rows:
            change = f.detail or t(f"regress.compare.verdict.{f.verdict}")
            lines.append(
                "| "
                + " | ".join(
                    _cell(x)
                    for x in (
                        f"{f.lesson or ''} ({f.notebook})",
                        f.point,
                        f.where(),
                        f"{f.metric} [{f.rule}]",
                        f.rank if f.rank is not None else "",
                        show(f.a, f.metric),
                        show(f.b, f.metric),
                        change,
                    )
                )
                + " |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def junit(findings: list[Finding], compared: list[tuple[str, str]]) -> str:
    """One test case per notebook and parameters: failed when any of its metrics regressed."""
    from xml.sax.saxutils import quoteattr

    bad = regressions(findings)
    cases = []
    for name, point_slug in compared:
        mine = [f for f in bad if f.notebook == name and f.slug == point_slug]
        case = f"  <testcase classname={quoteattr('labkit.regress.' + name)} name={quoteattr(point_slug)}"
        if mine:
            text = "\n".join(line(f) for f in mine)
            msg = quoteattr(line(mine[0]))
            cases.append(f"{case}>\n    <failure message={msg}>{escape(text)}</failure>\n  </testcase>")
        else:
            cases.append(case + "/>")
    failures = sum(1 for c in cases if "<failure" in c)
    head = f'<testsuite name="labkit.regress" tests="{len(cases)}" failures="{failures}" errors="0">'
    return '<?xml version="1.0" encoding="utf-8"?>\n' + head + "\n" + "\n".join(cases) + "\n</testsuite>\n"


def escape(text: str) -> str:
    from xml.sax.saxutils import escape as xml_escape

    return xml_escape(text)


def line(f: Finding) -> str:
    """One regression in one line: metric, lesson, cell, rank, A -> B."""
    rank = t("regress.compare.rank", rank=f.rank) if f.rank is not None else ""
    verdict = f.detail or t(f"regress.compare.verdict.{f.verdict}")
    return t(
        "regress.compare.line",
        metric=f.metric,
        lesson=f.lesson or f.notebook,
        notebook=f.notebook,
        point=f.point,
        where=f.where(),
        rank=rank,
        a=show(f.a, f.metric),
        b=show(f.b, f.metric),
        change=verdict,
    )


def first_fingerprint(records: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any] | None:
    return next((r.get("fingerprint") for r in records.values() if r.get("fingerprint")), None)


def run_compare(
    a_path: str,
    b_path: str,
    tol: Tolerances,
    md_path: str | None = None,
    junit_path: str | None = None,
    only_b: bool = False,
) -> tuple[int, list[Finding], str]:
    """Compare; write the reports asked for; (exit status, findings, Markdown)."""
    a, b = load(a_path), load(b_path)
    findings = compare(a, b, tol, only_b)
    md = markdown(findings, a_path, b_path, first_fingerprint(a), first_fingerprint(b))
    if md_path:
        Path(md_path).write_text(md)
    if junit_path:
        Path(junit_path).write_text(junit(findings, sorted(set(b) if only_b else set(a) | set(b))))
    return (1 if regressions(findings) else 0), findings, md


def cmd_compare(args: Any) -> int:
    import sys

    tol = Tolerances(args.memory_tol, args.memory_floor, args.value_tol, args.time_tol, args.time_floor)
    try:
        code, findings, _ = run_compare(args.a, args.b, tol, args.markdown, args.junit, args.only_b)
    except (FileNotFoundError, json.JSONDecodeError, KeyError) as err:
        print(t("regress.compare.unreadable", error=str(err)), file=sys.stderr)
        return 2
    bad = regressions(findings)
    for f in bad:
        print(line(f))
    changed = len(findings) - len(bad)
    print(t("regress.compare.verdict_bad", n=len(bad)) if bad else t("regress.compare.verdict_ok"))
    if changed:
        print(t("regress.compare.within", n=changed))
    return code


def add_arguments(p: Any) -> None:
    d = Tolerances()
    p.add_argument("a", help=t("regress.compare.help.a"))
    p.add_argument("b", help=t("regress.compare.help.b"))
    p.add_argument("--markdown", default=None, help=t("regress.compare.help.markdown"))
    p.add_argument("--junit", default=None, help=t("regress.compare.help.junit"))
    p.add_argument("--only-b", action="store_true", help=t("regress.compare.help.only_b"))
    p.add_argument("--memory-tol", type=float, default=d.memory_tol, help=t("regress.compare.help.memory_tol"))
    p.add_argument("--memory-floor", type=int, default=d.memory_floor, help=t("regress.compare.help.memory_floor"))
    p.add_argument("--value-tol", type=float, default=d.value_tol, help=t("regress.compare.help.value_tol"))
    p.add_argument("--time-tol", type=float, default=d.time_tol, help=t("regress.compare.help.time_tol"))
    p.add_argument("--time-floor", type=float, default=d.time_floor, help=t("regress.compare.help.time_floor"))
