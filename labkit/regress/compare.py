"""``labkit regress compare A B``: what changed between two sweeps (or a sweep and a baseline).

    labkit regress compare baselines/cpu runs/torch-2.15 --markdown report.md --junit report.xml

A and B are sweep folders (``labkit sweep --out``), baseline folders (the same records,
committed), or single ``.record.json`` files. Records are matched by notebook and parameters,
runs by the cell they came from (and their order in it), checks by question. Each metric has
a rule (``rule_of``):

- ``exact``: collective calls and bytes (per kind, per rank; the whole cell and each step the
  cell counted), the timeline's units and sizes, step counts, check statuses, run outcomes,
  missing torch hooks, the notebook's status and cell errors, and the whole numbers, strings
  and flags the ranks reported (``rank.report``: byte counts, unit sizes);
- ``value``: the decimal numbers the ranks reported (losses, checksums): within ``value_tol`` (1%);
- ``memory``: bytes by category and sampled peaks: within ``memory_tol`` (1%) of A, or
  ``memory_floor`` bytes;
- ``time``: median step time per rank: a regression only when B is slower than
  ``(1 + time_tol)`` times A plus ``time_floor`` seconds (loose: times on shared machines wander);
- ``info``: shown, never a regression (process RSS, reserved CUDA memory, wall time, and
  reported values that differ on every run by nature: ``pid``, ``*_dir``, error texts, and the split
  of an FSDP2 row's peak into categories, whose instant moves with the load: ``ASYNC_PEAK``).

A run, check or notebook in A and not in B is a regression; one only in B is reported as new.
The exit status is 1 when anything regressed, and each regression names its metric, its
lesson and its cell.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from labkit.fmt import fmt_bytes, fmt_number, fmt_spec
from labkit.i18n import t
from labkit.regress import messages  # noqa: F401  (registers the regress.* messages)
from labkit.regress.sweep import RECORD_SUFFIX, point_text, slug

# -- the rules -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Tolerances:
    memory_tol: float = 0.01  # relative
    memory_floor: int = 4096  # bytes: a page; below it a change is noise, not a regression
    value_tol: float = 0.01  # relative, for the floats a rank reports (losses, checksums)
    time_tol: float = 3.0  # B may be up to 4x A's median step time...
    time_floor: float = 0.05  # ...plus 50 ms, before it counts


EXACT, MEMORY, TIME, VALUE, INFO = "exact", "memory", "time", "value", "info"
INFO_SAMPLED = ("rss", "reserved")  # the process's and the allocator's: they wander from run to run
# values a rank reports that differ on every run by nature: process ids, temporary folders, host names
VOLATILE_VALUES = ("pid", "host", "hostname", "node")
VOLATILE_SUFFIXES = ("_dir", "_path", "_seconds", "_time")
# FSDP2's collectives are asynchronous on gloo, so the instant of its peak moves with the machine's load,
# and with it the peak's split into categories (lesson 3's fully_shard(blocks), rank 1, two runs of one
# commit: activations at the peak 6,565,892 B and 5,121,028 B): what a rank reports under a fully_shard(...)
# row's peak is shown, not compared; its collectives and bytes moved stay exact
ASYNC_PEAK = ("fully_shard(", ".peak.")


def rule_of(metric: str, value: Any = None) -> str:
    if metric.startswith("values."):
        leaf = metric.rsplit(".", 1)[-1].split("[", 1)[0]
        if leaf in VOLATILE_VALUES or leaf.endswith(VOLATILE_SUFFIXES) or leaf in ("seconds", "time", "error"):
            return INFO
        if all(part in metric for part in ASYNC_PEAK):
            return INFO
        return VALUE if isinstance(value, float) else EXACT
    if metric.startswith("memory."):
        return INFO if metric.rsplit(".", 1)[-1] in INFO_SAMPLED else MEMORY
    if metric == "steps.median":
        return TIME
    if metric in ("wall_time", "seconds"):
        return INFO
    return EXACT


@dataclass
class Metric:
    cell: int | None
    source: str  # the cell's first line
    run: int | None  # the run's order in its cell
    name: str  # e.g. comm.total.all_gather.calls
    rank: str | None
    value: Any
    steps: int | None = None  # the run's step count, to say a change per step

    @property
    def key(self) -> tuple[Any, ...]:
        if self.name.startswith("check."):  # a question is itself, wherever its cell moved
            return (None, None, self.name, self.rank)
        return (self.cell, self.run, self.name, self.rank)


# -- flattening a record into metrics ------------------------------------------------------


def _counts(prefix: str, counts: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    for kind, row in sorted(counts.items()):
        yield f"{prefix}.{kind}.calls", row.get("calls")
        yield f"{prefix}.{kind}.bytes", row.get("bytes")


def _label(row: dict[str, Any], i: int) -> str:
    """A tracker message's place: its order, step and the fields the cell labelled it with."""
    label = ",".join(f"{k}={v}" for k, v in sorted((row.get("label") or {}).items()))
    return f"[{i}:step={row.get('step')}{',' + label if label else ''}]"


def leaves(x: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, value) for every leaf of nested dicts and lists."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield from leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from leaves(v, f"{path}[{i}]")
    else:
        yield path, x


def without_volatile(values: Any, path: str = "") -> Any:
    """``values`` with the leaves whose rule is ``info`` (process ids, temporary folders) set to None:
    what a baseline keeps of them, since they are never compared."""
    if isinstance(values, dict):
        return {k: without_volatile(v, f"{path}.{k}" if path else str(k)) for k, v in values.items()}
    if isinstance(values, list):
        return [without_volatile(v, f"{path}[{i}]") for i, v in enumerate(values)]
    return None if rule_of(f"values.{path}", values) == INFO else values


def run_metrics(rec: dict[str, Any]) -> Iterator[tuple[str, str | None, Any]]:
    """(metric, rank, value) for everything a run record holds that can be compared."""
    yield "ok", None, rec.get("ok")
    yield "error", None, (rec.get("error") or {}).get("type")
    yield "nproc", None, rec.get("nproc")
    yield "backend", None, rec.get("backend")
    yield "missing_hooks", None, ",".join(rec.get("missing_hooks") or []) or None
    yield "wall_time", None, rec.get("wall_time")
    for r, s in (rec.get("steps") or {}).items():
        yield "steps.count", r, s.get("count")
        yield "steps.median", r, s.get("median")
    mem = rec.get("memory") or {}
    for r, peaks in (mem.get("sampled_peak") or {}).items():
        for k, v in sorted(peaks.items()):
            yield f"memory.sampled_peak.{k}", r, v
    for r, cats in (mem.get("categories_at_peak") or {}).items():
        for k, v in sorted(cats.items()):
            yield f"memory.at_peak.{k}", r, v
    for r, rows in (mem.get("phases") or {}).items():
        for i, row in enumerate(rows):
            where = f"[{i}:step={row.get('step')}].{row.get('phase')}"
            for k, v in sorted((row.get("categories") or {}).items()):
                yield f"memory.phases{where}.{k}", r, v
    comm = rec.get("comm") or {}
    for r, tot in (comm.get("total") or {}).items():
        yield from ((m, r, v) for m, v in _counts("comm.total", tot.get("counts") or {}))
    for r, rows in (comm.get("steps") or {}).items():
        for i, row in enumerate(rows):
            yield from ((m, r, v) for m, v in _counts(f"comm.steps{_label(row, i)}", row.get("counts") or {}))
    for r, values in (rec.get("values") or {}).items():
        yield from ((f"values.{path}", r, v) for path, v in leaves(values))
    for r, rows in (rec.get("timeline") or {}).items():
        for i, row in enumerate(rows):
            where = f"timeline{_label(row, i)}"
            yield f"{where}.flavor", r, row.get("flavor")
            yield f"{where}.units", r, ",".join(row.get("units") or [])
            for unit, size in sorted((row.get("unit_bytes") or {}).items()):
                yield f"{where}.unit_bytes.{unit}", r, size
            for kind, n in sorted((row.get("spans") or {}).items()):
                yield f"{where}.spans.{kind}", r, n


def notebook_metrics(nb: dict[str, Any]) -> list[Metric]:
    out = [Metric(None, "", None, "status", None, nb.get("status"))]
    out.append(Metric(None, "", None, "errors", None, ",".join(f"{e['cell']}:{e['ename']}" for e in nb["errors"])))
    for run in nb.get("runs", []):
        rec = run["record"]
        steps = max((s.get("count") or 0 for s in (rec.get("steps") or {}).values()), default=0)
        for name, rank, value in run_metrics(rec):
            out.append(Metric(run.get("cell"), run.get("source", ""), run.get("index"), name, rank, value, steps))
    for check in nb.get("checks", []):
        out.append(Metric(check.get("cell"), "", None, f"check.{check['id']}", None, check.get("status")))
    return out


# -- loading either side ---------------------------------------------------------------------


def load(path: str | Path) -> dict[tuple[str, str], dict[str, Any]]:
    """{(notebook, point slug): notebook record} from a sweep or baseline folder, or one record file."""
    p = Path(path)
    if p.is_file():
        files = [p]
    elif p.is_dir():
        files = sorted(p.rglob(f"*{RECORD_SUFFIX}"))
    else:
        raise FileNotFoundError(t("regress.compare.no_such", path=str(p)))
    if not files:
        raise FileNotFoundError(t("regress.compare.no_records", path=str(p)))
    out = {}
    for f in files:
        rec = json.loads(f.read_text())
        out[(rec["notebook"], slug(rec.get("parameters") or {}))] = rec
    return out


# -- comparing ---------------------------------------------------------------------------------


@dataclass
class Finding:
    notebook: str
    lesson: str | None
    point: str
    cell: int | None
    source: str
    run: int | None
    metric: str
    rank: str | None
    a: Any
    b: Any
    rule: str
    verdict: str  # regression | changed (within tolerance, or info) | new | missing
    detail: str = ""
    slug: str = ""  # the parameters as in file names

    def where(self) -> str:
        if self.cell is None:
            return t("regress.compare.notebook_level")
        run = "" if self.run is None else t("regress.compare.run_n", n=self.run + 1)
        return t("regress.compare.cell", cell=self.cell, source=self.source, run=run).strip()


def judge(m: str, a: Any, b: Any, tol: Tolerances, steps: int | None) -> tuple[str, str]:
    """(verdict, detail) for one metric present on both sides."""
    rule = rule_of(m, a)
    if a == b:
        return "same", ""
    if rule == INFO or a is None or b is None or not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return ("changed" if rule == INFO else "regression"), ""
    diff = b - a
    rel = diff / a if a else float("inf")
    pct = ("+" if rel >= 0 else "") + fmt_number(rel * 100, 1) + "%" if a else ""
    if rule == EXACT:
        per_step = ""
        if steps and steps > 1 and m.startswith("comm.total") and diff % steps == 0:
            per_step = t("regress.compare.per_step", n=fmt_spec(diff // steps, "+g"), steps=steps)
        return "regression", ", ".join(x for x in (fmt_spec(diff, "+g"), pct, per_step) if x)
    if rule == VALUE:
        return ("regression" if abs(diff) > tol.value_tol * abs(a) else "changed"), pct
    if rule == MEMORY:
        allowed = max(tol.memory_tol * abs(a), tol.memory_floor)
        detail = f"{fmt_bytes(diff)} {pct}".strip() if diff >= 0 else f"-{fmt_bytes(-diff)} {pct}".strip()
        return ("regression" if abs(diff) > allowed else "changed"), detail
    # TIME: slower beyond the loose bound regresses; faster is only reported
    slower = b > a * (1 + tol.time_tol) + tol.time_floor
    return ("regression" if slower else "changed"), f"×{fmt_number(b / a, 2)}" if a else ""


def compare(
    a: dict[tuple[str, str], dict[str, Any]],
    b: dict[tuple[str, str], dict[str, Any]],
    tol: Tolerances,
    only_b: bool = False,
) -> list[Finding]:
    """Every difference between A and B. ``only_b``: the notebooks and parameters B ran, only (A may be a
    whole baseline and B a part of it); within them, a run or check A has and B lacks still counts."""
    findings = []
    for key in sorted(set(b) if only_b else set(a) | set(b)):
        name, point_slug = key
        ra, rb = a.get(key), b.get(key)
        base = ra or rb
        point = point_text(base.get("parameters") or {})
        lesson = base.get("lesson")
        if rb is None or ra is None:
            verdict = "missing" if rb is None else "new"
            findings.append(
                Finding(
                    name, lesson, point, None, "", None, "notebook", None, None, None, EXACT, verdict, "", point_slug
                )
            )
            continue
        ma = {m.key: m for m in notebook_metrics(ra)}
        mb = {m.key: m for m in notebook_metrics(rb)}
        runs_a = {(m.cell, m.run) for m in ma.values() if m.run is not None}
        runs_b = {(m.cell, m.run) for m in mb.values() if m.run is not None}
        for k in list(ma) + [k for k in mb if k not in ma]:
            x, y = ma.get(k), mb.get(k)
            m = x or y
            common = dict(notebook=name, lesson=lesson, point=point, cell=m.cell, source=m.source, run=m.run,
                          slug=point_slug)  # fmt: skip
            if m.run is not None and ((m.cell, m.run) not in runs_a or (m.cell, m.run) not in runs_b):
                if m.name == "ok":  # a whole run only one side has: one finding, not one per metric
                    verdict = "missing" if (m.cell, m.run) not in runs_b else "new"
                    findings.append(Finding(**common, metric="run", rank=None, a=getattr(x, "value", None),
                                            b=getattr(y, "value", None), rule=EXACT, verdict=verdict))  # fmt: skip
                continue
            if x is None or y is None:
                verdict = "missing" if y is None else "new"
                findings.append(
                    Finding(**common, metric=m.name, rank=m.rank, a=getattr(x, "value", None),
                            b=getattr(y, "value", None), rule=rule_of(m.name, m.value), verdict=verdict)
                )  # fmt: skip
                continue
            verdict, detail = judge(m.name, x.value, y.value, tol, x.steps)
            if verdict != "same":
                findings.append(
                    Finding(**common, metric=m.name, rank=m.rank, a=x.value, b=y.value, rule=rule_of(m.name, x.value),
                            verdict=verdict, detail=detail)
                )  # fmt: skip
    return findings


def regressions(findings: list[Finding]) -> list[Finding]:
    """What fails the comparison: regressions, and whatever A had that B lost."""
    return [f for f in findings if f.verdict in ("regression", "missing") and f.rule != INFO]
