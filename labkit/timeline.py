"""Timelines, under the name a notebook types: recorded in a rank (``labkit.ranks.timeline``), read
and cut in the kernel (``labkit.timing.spans``), written for Perfetto (``labkit.timing.trace``) and
drawn (``labkit.views.gantt``).

    from labkit import rank, timeline
    rec = timeline.Recorder(model, optimizer)     # in a rank: spans of compute, collectives, memory
    timeline.summary(run)                         # in the kernel: per rank, compute, collectives, not hidden
    timeline.plot_timeline(run)                   # a Gantt chart, a lane per rank and stream

Each name is imported from its home on first use: a rank's ``timeline.Recorder`` never loads the
plots (matplotlib), the kernel's ``timeline.summary`` never loads torch.
"""

from __future__ import annotations

from labkit import lazy

HOMES: dict[str, tuple[str, ...]] = {
    "labkit.ranks.timeline": ("COMPUTE_KINDS", "Recorder", "cut"),
    "labkit.timing.spans": (
        "Timeline", "held_curve", "intersect", "length", "origin", "peak_held", "span", "spans_by_rank", "summary",
        "union",
    ),
    "labkit.timing.trace": ("FOLDER", "STREAMS", "lanes", "misnested", "save", "to_chrome_trace"),
    "labkit.views.gantt": ("plot_timeline", "plot_timelines"),
}  # fmt: skip
__all__, __getattr__, __dir__ = lazy.names(__name__, HOMES)
