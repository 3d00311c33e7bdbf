"""Reading a recorded timeline: the ``spans`` messages per rank, units held, a summary,
and the interval arithmetic the simulator shares (the Chrome/Perfetto trace: ``labkit.timing.trace``).

A span is a dict ``{unit, kind, start, end, stream, ...}`` (``labkit.wire.records.Span``);
``stream`` is a ``Stream``: ``compute``, ``comm``, ``memory`` (a unit's gathered parameters
held) or ``host`` (simulated CPU overhead). ``labkit.timeline`` records them; ``labkit.views.gantt``
draws them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from labkit.i18n import t
from labkit.wire.protocol import TYPE, Msg
from labkit.wire.records import Source, Span, Stream, events_of, messages, on
from labkit.wire.records import span as span  # labkit.timeline.span, as before

Timeline = Source | Mapping[int, Sequence[Span]]  # a run, its events, or plain spans per rank


def spans_by_rank(run: Timeline, step: int | None = None) -> dict[int, dict[str, Any]]:
    """Per rank, the ``spans`` message of ``step`` (default: the last one recorded).

    ``run``: a ``Run`` or a simulated step (``simulate.Result``), its events {rank: [messages]},
    or {rank: [spans]} of plain span dicts (tests, a saved trace).
    """
    events = events_of(run)  # type: ignore[arg-type]
    recorded = messages(events, Msg.SPANS)
    out: dict[int, dict[str, Any]] = {}
    for r, evs in events.items():
        evs = list(evs)
        if evs and TYPE not in evs[0] and "kind" in evs[0]:  # plain spans
            out[int(r)] = {"step": step, "spans": evs}
            continue
        msgs = recorded[int(r)]
        if not msgs:
            continue
        chosen = msgs[-1] if step is None else next((m for m in msgs if m.get("step") == step), None)
        if chosen is None:
            raise KeyError(t("timing.spans.no_step", step=step, steps=[m.get("step") for m in msgs]))
        out[int(r)] = chosen
    if not out:
        raise ValueError(t("timing.spans.no_spans"))
    return out


def origin(by_rank: Mapping[int, dict[str, Any]]) -> float:
    starts = [s["start"] for m in by_rank.values() for s in m["spans"]]
    starts += [m["start"] for m in by_rank.values() if isinstance(m.get("start"), (int, float))]
    return min(starts) if starts else 0.0


def held_curve(spans: Sequence[dict[str, Any]]) -> list[tuple[float, int]]:
    """(time, number of units held) at each change, from the ``held`` spans."""
    edges = sorted(
        [(s["start"], 1) for s in spans if s["kind"] == "held"] + [(s["end"], -1) for s in spans if s["kind"] == "held"]
    )
    out, n = [], 0
    for when, d in edges:
        n += d
        out.append((when, n))
    return out


def peak_held(spans: Sequence[dict[str, Any]]) -> int:
    return max((n for _, n in held_curve(spans)), default=0)


def summary(run: Timeline, step: int | None = None) -> dict[int, dict[str, float]]:
    """Per rank: step span, compute time, collective time, and how much collective time no compute hid."""
    out = {}
    for r, msg in spans_by_rank(run, step).items():
        spans = msg["spans"]
        compute = union([(s["start"], s["end"]) for s in on(spans, Stream.COMPUTE)])
        comm = union([(s["start"], s["end"]) for s in on(spans, Stream.COMM)])
        start = msg.get("start", min(s["start"] for s in spans))
        end = msg.get("end", max(s["end"] for s in spans))
        out[r] = {
            "step_s": end - start,
            "compute_s": length(compute),
            "comm_s": length(comm),
            "exposed_comm_s": length(comm) - length(intersect(comm, compute)),
            "peak_units_held": float(peak_held(spans)),
        }
    return out


def union(intervals: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def intersect(xs: Sequence[tuple[float, float]], ys: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    out, i, j = [], 0, 0
    while i < len(xs) and j < len(ys):
        a, b = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        if a < b:
            out.append((a, b))
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return out


def length(intervals: Sequence[tuple[float, float]]) -> float:
    return math.fsum(b - a for a, b in intervals)
