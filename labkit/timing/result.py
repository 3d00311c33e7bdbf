"""A simulated step (``Result``: the step, its compute, its collectives, exposed and hidden, its
peak of gathered units) and several of them as a table (``table``), labelled simulated.

    from labkit import simulate
    print(simulate.table(simulate.sweep(prof, links=["nvlink4", "ib100"])))

``labkit.timing.simulate`` makes them; ``labkit.timing.predict`` too, from a calibration.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from labkit.fmt import fmt_number, render_table
from labkit.i18n import t
from labkit.timing.links import Link
from labkit.timing.spans import intersect, length, union
from labkit.wire.protocol import Msg, message
from labkit.wire.records import Events, Span, Stream, on
from labkit.wire.setting import Strategy

SHARDED = tuple(s for s in Strategy if s.sharded)
HYBRID = tuple(s for s in Strategy if s.hybrid)  # sharded within a group, replicated across groups

__all__ = ["HYBRID", "SHARDED", "Result", "table"]


@dataclass
class Result:
    """A simulated step. Times in seconds; ``spans`` in ``labkit.timeline``'s format."""

    step_time: float
    compute_time: float
    comm_time: float  # summed collective durations
    exposed_comm: float  # step time with neither compute nor host work: waiting for collectives
    peak_units: int  # most units holding gathered parameters at once
    peak_bytes: float
    spans: list[Span]
    options: dict[str, Any]
    link: Link
    simulated: bool = True
    host_time: float = 0.0  # host overhead replayed (CPU work between ops, see labkit.timing.calibrate)

    @property
    def hidden_comm(self) -> float:
        """Collective time that ran under compute."""
        comm = union([(s["start"], s["end"]) for s in on(self.spans, Stream.COMM)])
        compute = union([(s["start"], s["end"]) for s in on(self.spans, Stream.COMPUTE)])
        return length(intersect(comm, compute))

    @property
    def events(self) -> Events:
        """So that ``timeline.plot_timeline(result)`` and ``to_chrome_trace`` draw it, labelled simulated."""
        msg = message(Msg.SPANS, step=None, start=0.0, end=self.step_time, spans=self.spans, simulated=True)
        return {0: [msg]}

    def __repr__(self) -> str:
        o = self.options
        return t(
            "timing.simulate.repr",
            strategy=o["strategy"],
            prefetch=_prefetch_label(o),
            link=self.link.name,
            step=self.step_time * 1e3,
            compute=self.compute_time * 1e3,
            comm=self.comm_time * 1e3,
            exposed=self.exposed_comm * 1e3,
            peak=self.peak_units,
        )


def _prefetch_label(o: Mapping[str, Any]) -> str:
    if o["strategy"] not in SHARDED:
        return "-"
    label = str(o["backward_prefetch"])
    if o.get("forward_prefetch"):
        label += "+fwd"
    if not o.get("limit_all_gathers", True):
        label += " nolimit"
    return label


def table(results: Sequence[Result], source: str | None = None) -> str:
    """The results as a text table; its first line says they are simulated."""
    cols = ["strategy", "prefetch", "link", "step", "compute", "exposed", "peak"]
    rows = [[t(f"timing.simulate.col.{c}") for c in cols]]
    for r in results:
        rows.append(
            [
                r.options["strategy"],
                _prefetch_label(r.options),
                r.link.name,
                fmt_number(r.step_time * 1e3, 2),
                fmt_number(r.compute_time * 1e3, 2),
                fmt_number(r.exposed_comm * 1e3, 2),
                str(r.peak_units),
            ]
        )
    return render_table(
        rows,
        align="lll" + "r" * 4,
        title=t("timing.simulate.table.note", source=source or t("timing.simulate.table.the_run")),
    )
