"""The timeline as a Chrome/Perfetto trace that loads without dropped slices, written beside the notebook.

    from labkit.timing import trace
    path = trace.save(run)                      # ./labkit-traces/<run id>.json, beside the notebook
    trace.to_chrome_trace(run)                  # the dict, to look at or test

Perfetto (and chrome://tracing) draw each thread track as a stack of slices: a slice must end
before the next one on its track begins, or lie wholly inside it. A timeline breaks that
rule wherever two spans of one stream overlap without nesting: DDP's bucket all-reduces,
FSDP2's asynchronous all-gathers, and above all the ``held`` spans (several units hold their
gathered parameters at once). Perfetto then drops the slices that do not fit (its import
stats count them as misnested). So:

* each stream gets as many tracks as it needs at once ("comm", "comm 2", ...): a span goes to
  the first track of its stream whose last slice has ended (interval partitioning), so no two
  slices on a track overlap at all;
* "units held" is a counter track (``ph: "C"``), the number of units whose gathered parameters
  are allocated, and each unit's holding is an async slice (``ph: "b"``/``"e"``, one id per
  holding) on the "held" track group, which Perfetto lays out itself;
* times are whole nanoseconds written in µs, so that rounding cannot make two slices touch
  that did not.

The file is JSON as ``chrome://tracing`` and ``ui.perfetto.dev`` (Open trace file) read it.
It is written under the kernel's working folder, which Jupyter sets to the notebook's folder,
so the student finds it beside the notebook, not in a temporary folder that goes away.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from labkit.timing.spans import Timeline, held_curve, origin, spans_by_rank
from labkit.wire.protocol import Msg
from labkit.wire.records import messages

STREAMS = ("compute", "comm", "host", "memory")  # track order within a rank
FOLDER = "labkit-traces"


def _ns(seconds: float) -> int:
    return int(round(seconds * 1e9))


def _us(ns: int) -> float:
    return ns / 1000.0


def lanes(spans: Sequence[dict[str, Any]], t0: float) -> list[tuple[int, int, int, dict[str, Any]]]:
    """``(lane, start ns, end ns, span)``: each span on the first lane free at its start (no two overlap on a lane)."""
    ends: list[int] = []  # per lane, where its last slice ends
    out = []
    for s in sorted(spans, key=lambda s: (s["start"], s["end"])):
        a, b = _ns(s["start"] - t0), _ns(s["end"] - t0)
        b = max(a, b)
        lane = next((i for i, end in enumerate(ends) if end <= a), len(ends))
        if lane == len(ends):
            ends.append(b)
        else:
            ends[lane] = b
        out.append((lane, a, b, s))
    return out


def _rank_name(r: int, hello: Mapping[str, Any] | None) -> str:
    if hello and hello.get("node"):
        return f"rank {r} ({hello['node']}/{hello.get('local_rank', '?')})"
    return f"rank {r}"


def _hellos(run: Timeline) -> dict[int, dict[str, Any]]:
    """Each rank's hello (where it ran), when the source is a run or its events; plain spans have none."""
    found = messages(run, Msg.HELLO)
    return {r: dict(ms[0]) for r, ms in found.items() if ms}


def to_chrome_trace(run: Timeline, path: str | None = None, step: int | None = None) -> dict[str, Any]:
    """The recorded step (default: the last) of every rank, as a trace: one process per rank."""
    by_rank = spans_by_rank(run, step)
    t0 = origin(by_rank)
    hellos = _hellos(run)
    events: list[dict[str, Any]] = []
    async_id = 0
    for r, msg in sorted(by_rank.items()):
        events.append({"ph": "M", "name": "process_name", "pid": r, "args": {"name": _rank_name(r, hellos.get(r))}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": r, "args": {"sort_index": r}})
        spans = msg["spans"]
        slices = [s for s in spans if s["kind"] != "held"]
        tid_of: dict[tuple[str, int], int] = {}
        by_stream: dict[str, list[dict[str, Any]]] = {}
        for s in slices:
            by_stream.setdefault(s["stream"], []).append(s)
        order = [st for st in STREAMS if st in by_stream] + sorted(set(by_stream) - set(STREAMS))
        for stream in order:
            for lane, a, b, s in lanes(by_stream[stream], t0):
                key = (stream, lane)
                if key not in tid_of:
                    tid = tid_of[key] = len(tid_of)
                    name = stream if lane == 0 else f"{stream} {lane + 1}"
                    events.append({"ph": "M", "name": "thread_name", "pid": r, "tid": tid, "args": {"name": name}})
                    events.append(
                        {"ph": "M", "name": "thread_sort_index", "pid": r, "tid": tid, "args": {"sort_index": tid}}
                    )
                events.append(
                    {
                        "name": f"{s['kind']} {s['unit']}".strip(),
                        "cat": s["kind"],
                        "ph": "X",
                        "pid": r,
                        "tid": tid_of[key],
                        "ts": _us(a),
                        "dur": _us(b - a),
                        "args": {k: v for k, v in s.items() if k not in ("start", "end", "stream")},
                    }
                )
        held = [s for s in spans if s["kind"] == "held"]
        for s in held:  # each holding as an async slice: overlapping holdings are what async tracks are for
            async_id += 1
            common = {"name": f"held {s['unit']}".strip(), "cat": "held", "pid": r, "id": async_id}
            events.append({**common, "ph": "b", "ts": _us(_ns(s["start"] - t0))})
            events.append({**common, "ph": "e", "ts": _us(max(_ns(s["end"] - t0), _ns(s["start"] - t0)))})
        for when, n in held_curve(held):
            events.append({"ph": "C", "name": "units held", "pid": r, "ts": _us(_ns(when - t0)), "args": {"units": n}})
    simulated = any(m.get("simulated") for m in by_rank.values())
    trace = {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"simulated": simulated}}
    if path is not None:
        with open(path, "w") as f:
            json.dump(trace, f)
    return trace


def save(run: Timeline, name: str | None = None, folder: str | None = None, step: int | None = None) -> str:
    """Write the trace beside the notebook (``./labkit-traces/NAME.json``); returns its path."""
    folder = folder or os.path.join(os.getcwd(), FOLDER)
    os.makedirs(folder, exist_ok=True)
    name = name or getattr(run, "run_id", None) or "simulated"
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(name)).strip("._") or "trace"
    path = os.path.join(folder, name if name.endswith(".json") else f"{name}.json")
    to_chrome_trace(run, path, step)
    return path


def misnested(trace: Mapping[str, Any]) -> list[str]:
    """Slices a trace viewer would drop: on one (pid, tid), an ``X`` slice that starts inside
    another and ends after it. Also async ``b``/``e`` pairs that do not match. Empty: none."""
    problems = []
    tracks: dict[tuple[Any, Any], list[tuple[int, int, str]]] = {}
    opened: dict[tuple[Any, Any, Any], int] = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X":
            # in integer nanoseconds, as a trace viewer reads µs: a float ts + dur may end 1e-12 past the next start
            a, d = round(e["ts"] * 1000), round(e["dur"] * 1000)
            tracks.setdefault((e["pid"], e.get("tid")), []).append((a, a + d, e["name"]))
        elif e.get("ph") in ("b", "e"):
            key = (e["pid"], e.get("cat"), e["id"])
            opened[key] = opened.get(key, 0) + (1 if e["ph"] == "b" else -1)
            if opened[key] < 0:
                problems.append(f"async end before begin: {e['name']}")
    problems += [f"async begin never ended: {k}" for k, n in opened.items() if n]
    for key, slices in tracks.items():
        stack: list[tuple[int, int, str]] = []
        for a, b, name in sorted(slices, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1][1] <= a:
                stack.pop()
            if stack and b > stack[-1][1]:
                problems.append(f"{key}: {name} [{a}, {b}] crosses {stack[-1][2]} [{stack[-1][0]}, {stack[-1][1]}]")
                continue
            stack.append((a, b, name))
    return problems
