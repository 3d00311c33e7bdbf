"""A run's record: what the ranks measured, as JSON a machine can compare; and a notebook's.

A run's record (``run_record(run)``), per rank: the sampled memory peaks (``rss``,
``tensor_bytes`` on CPU; ``allocated``, ``reserved``, ``peak`` on CUDA), memtrack's bytes by
category at each phase and at the peak (when the cell used ``labkit.memtrack``), every
collective of the cell (calls and payload bytes per kind, ``labkit.ranks.recording``) and
those the cell counted per step itself (``labkit.comm``), the FSDP units the timeline found,
the step times, the values the ranks reported, and any private torch API found missing;
then the run's outcome and ``fingerprint()``.

In a kernel (``%load_ext labkit`` subscribes ``emit``), every run's output carries the record
under ``MIME``: in the display output the run's view ends with (a short warm cell's final
dashboard), or in one of its own with an empty ``text/plain``, so a notebook shows nothing
and nbval, which compares text, sees nothing either; and, when ``LABKIT_RECORD_DIR`` is set,
as ``<run id>.json`` there. ``LABKIT_RECORD=0`` turns both off.

A notebook's record (``notebook_record(executed)``) gathers the run records from an executed
notebook's outputs, with the cell each came from (counted as in the source notebook:
papermill's injected cells are skipped), and every ``labkit.check``'s status.
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from labkit.regress.fingerprint import fingerprint
from labkit.wire import env as envvars
from labkit.wire.protocol import CommTotal, HookMissing, MemCat, Msg, RankEnv, Spans
from labkit.wire.record import RecordError
from labkit.wire.records import Message, messages
from labkit.wire.run_record import NotebookRecord, RunRecord

if TYPE_CHECKING:
    from labkit.launch.run import Run

MIME = "application/vnd.labkit.run+json"
SCHEMA = RunRecord.schema_name()  # "labkit.run/1"
NOTEBOOK_SCHEMA = NotebookRecord.schema_name()  # "labkit.notebook/1"
CHECK_MIME = "application/vnd.labkit.check+json"  # labkit.grading.checks.MIME, read back here
SKIPPED_TAGS = ("injected-parameters", "papermill-error-cell-tag")  # cells papermill adds
SAMPLED = ("rss", "tensor_bytes", "allocated", "reserved", "peak")


def _ranks(run: Run) -> list[int]:
    return sorted(run.ranks)


def _messages(run: Run, kind: Msg) -> dict[int, list[Message]]:
    found = messages(run, kind)
    return {r: found.get(r, []) for r in _ranks(run)}


def _extra_fields(msg: Message, known: tuple[str, ...]) -> dict[str, Any]:
    """The fields a cell added to a tracker's message (``config=``, ``strategy=``...): how it labels the step."""
    return {k: v for k, v in msg.items() if k not in known and (v is None or isinstance(v, (str, int, float, bool)))}


def _counts(counts: Any) -> dict[str, dict[str, int]]:
    """``{kind: {"calls", "bytes"}}`` as ints, from a ``comm`` or ``comm_total`` message's counts (None: none)."""
    return {k: {"calls": int(v.get("calls", 0)), "bytes": int(v.get("bytes", 0))} for k, v in (counts or {}).items()}


def memory_section(run: Run) -> dict[str, Any]:
    peaks = run.peak_memory
    sampled = {str(r): {k: v for k, v in peaks.get(r, {}).items() if k in SAMPLED} for r in _ranks(run)}
    phases: dict[str, list[dict[str, Any]]] = {}
    for r, msgs in _messages(run, Msg.MEMCAT).items():
        phases[str(r)] = [_phase_row(cast(MemCat, m)) for m in msgs]
    categories = {}  # per rank: the largest peak breakdown memtrack sent (its total, by category)
    for rank, rows in phases.items():
        peaks_r = [row["categories"] for row in rows if row["phase"] == "peak"]
        if peaks_r:
            categories[rank] = max(peaks_r, key=lambda c: sum(c.values()))
    return {"sampled_peak": sampled, "categories_at_peak": categories, "phases": phases}


def _phase_row(m: MemCat) -> dict[str, Any]:
    return {
        "step": m.get("step"),
        "phase": m.get("phase"),
        "device": m.get("device"),
        "categories": {k: int(v) for k, v in (m.get("categories") or {}).items()},
        **({"stage": m.get("stage", "")} if m.get("phase") == "peak" else {}),
    }


COMM_KNOWN = ("t", "time", "rank", "counts", "calls", "world_size", "step")
SPANS_KNOWN = ("t", "time", "rank", "spans", "start", "end", "unit_bytes", "units", "step", "flavor", "device")


def comm_section(run: Run) -> dict[str, Any]:
    total, steps = {}, {}
    for r, msgs in _messages(run, Msg.COMM_TOTAL).items():
        if msgs:
            m = cast(CommTotal, msgs[-1])
            total[str(r)] = {
                "counts": _counts(m.get("counts")),
                "at_steps": [
                    {"step": s.get("step"), "counts": _counts(s.get("counts"))} for s in m.get("at_steps", [])
                ],
            }
    for r, msgs in _messages(run, Msg.COMM).items():
        steps[str(r)] = [
            {"step": m.get("step"), "label": _extra_fields(m, COMM_KNOWN), "counts": _counts(m.get("counts"))}
            for m in msgs
        ]
    return {"total": total, "steps": steps}


def timeline_section(run: Run) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for r, msgs in _messages(run, Msg.SPANS).items():
        rows = []
        for msg in msgs:
            m = cast(Spans, msg)
            kinds: dict[str, int] = {}
            for s in m.get("spans") or []:
                kinds[s.get("kind", "?")] = kinds.get(s.get("kind", "?"), 0) + 1
            rows.append(
                {
                    "step": m.get("step"),
                    "label": _extra_fields(msg, SPANS_KNOWN),
                    "flavor": m.get("flavor"),
                    "units": list(m.get("units") or []),
                    "unit_bytes": {k: int(v) for k, v in (m.get("unit_bytes") or {}).items()},
                    "spans": kinds,
                }
            )
        out[str(r)] = rows
    return out


def steps_section(run: Run) -> dict[str, dict[str, Any]]:
    out = {}
    for r in _ranks(run):
        times = [float(x) for x in run.step_times.get(r, [])]
        out[str(r)] = {
            "count": len(times),
            "times": [round(x, 6) for x in times],
            "median": statistics.median(times) if times else None,
        }
    return out


def error_of(run: Run) -> dict[str, Any] | None:
    if run.error is None:
        return None
    return {"type": type(run.error).__name__, "rank": getattr(run.error, "rank", None)}


def rank_env(run: Run) -> RankEnv | None:
    """The torch, CUDA and NCCL versions the lowest rank reported (``labkit.ranks.recording``)."""
    for msgs in _messages(run, Msg.RANK_ENV).values():
        if msgs:
            return cast(RankEnv, msgs[-1])
    return None


def run_record(run: Run) -> dict[str, Any]:
    """The record of one ended run (see the module docstring), as the JSON object it is written as."""
    return declared_run_record(run).to_dict()


def declared_run_record(run: Run) -> RunRecord:
    """The record of one ended run, declared (``labkit.wire.run_record.RunRecord``)."""
    from labkit.ranks.rank import to_jsonable

    missing = sorted(
        {cast(HookMissing, m).get("hook", "?") for msgs in _messages(run, Msg.HOOK_MISSING).values() for m in msgs}
    )
    env = rank_env(run)
    return RunRecord(
        run_id=run.run_id,
        nproc=run.nproc,
        backend=run.backend,
        ok=bool(run.ok),
        error=error_of(run),
        exit_codes={str(r): c for r, c in run.exit_codes.items()},
        wall_time=round(run.wall_time, 3),
        steps=steps_section(run),
        memory=memory_section(run),
        comm=comm_section(run),
        timeline=timeline_section(run),
        values={str(r): to_jsonable(v) for r, v in run.values.items()},
        missing_hooks=missing,
        fingerprint=fingerprint(dict(env) if env else None),
    )


# -- in the kernel ---------------------------------------------------------------------


def enabled() -> bool:
    return envvars.get("LABKIT_RECORD") != "0"


def emit(run: Run) -> dict[str, Any] | None:
    """Write ``run``'s record to ``$LABKIT_RECORD_DIR``; in a kernel, return it as the mime bundle
    that the run's output carries (``labkit.launch.finished``: the launcher's view shows it)."""
    if not enabled():
        return None
    rec = run_record(run)
    folder = envvars.get("LABKIT_RECORD_DIR")
    if folder:
        os.makedirs(folder, exist_ok=True)
        Path(folder, f"{run.run_id}.json").write_text(json.dumps(rec, indent=1, default=repr))
    from labkit.views.dashboard import in_kernel

    if not in_kernel():
        return None
    return {MIME: json.loads(json.dumps(rec, default=repr))}


def subscribe() -> None:
    """Emit a record after every run of this kernel (``%load_ext labkit`` calls this)."""
    from labkit.launch import finished

    finished.subscribe(emit)


# -- an executed notebook --------------------------------------------------------------


def source_cells(nb: Any) -> list[tuple[int, Any]]:
    """(index in the source notebook, cell) for an executed notebook: papermill's own cells skipped."""
    out, i = [], 0
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if any(tag in tags for tag in SKIPPED_TAGS):
            continue
        out.append((i, cell))
        i += 1
    return out


def first_line(cell: Any) -> str:
    src = cell.get("source", "")
    src = "".join(src) if isinstance(src, list) else src
    return next((line.strip() for line in src.splitlines() if line.strip()), "")[:100]


def notebook_record(
    nb: Any,
    name: str,
    parameters: dict[str, Any] | None = None,
    status: str = "ok",
    seconds: float | None = None,
) -> dict[str, Any]:
    """The record of an executed notebook: its runs (by cell), its checks, its errors, where it ran."""
    runs: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    for i, cell in source_cells(nb):
        n = 0
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if MIME in data:  # written by the notebook's kernel: read as declared, kept as written
                try:
                    RunRecord.from_dict(data[MIME])
                except RecordError as exc:  # named where the comparison shows it, never a KeyError later
                    errors.append({"cell": i, "ename": type(exc).__name__, "evalue": str(exc)[:300]})
                    continue
                runs.append({"cell": i, "source": first_line(cell), "index": n, "record": dict(data[MIME])})
                n += 1
            check = data.get(CHECK_MIME)
            if isinstance(check, dict) and isinstance(check.get("id"), str):
                checks.append({"id": check["id"], "cell": i, "status": check.get("status")})
            if out.get("output_type") == "error":
                errors.append({"cell": i, "ename": out.get("ename", ""), "evalue": str(out.get("evalue", ""))[:300]})
    meta = nb.get("metadata", {}).get("labkit", {})
    fp = next((r["record"].get("fingerprint") for r in runs if r["record"].get("fingerprint")), None)
    return NotebookRecord(
        notebook=name,
        lesson=meta.get("lesson"),
        lang=meta.get("lang"),
        parameters=dict(parameters or {}),
        status=status,
        seconds=round(seconds, 1) if seconds is not None else None,
        fingerprint=fp or fingerprint(),
        runs=runs,
        checks=checks,
        errors=errors,
    ).to_dict()
