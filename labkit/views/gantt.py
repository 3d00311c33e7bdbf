"""Drawing a timeline: a Gantt chart per step, one row per rank and stream (matplotlib).

    from labkit.views import gantt  # also as timeline.plot_timeline / plot_timelines
    gantt.plot_timeline(run)
    gantt.plot_timelines({"BACKWARD_PRE": run_a, "None": run_b})

A simulated result (``labkit.simulate``) draws the same way, titled simulated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from labkit.i18n import t
from labkit.timing.spans import Timeline, held_curve, origin, spans_by_rank
from labkit.views import palette
from labkit.views.runview import rank_label
from labkit.wire.records import RunRecord, Span, Stream

COLORS = palette.TIMELINE  # Okabe-Ito; collectives hatched as well (palette.HATCHES)
LABEL_PT = 8  # the bars' text: legible when printed, and a size WCAG's contrast rule is meant for


LANES = ("compute", "comm", "held")


def plot_timeline(
    run: Timeline,
    ax: Any = None,
    step: int | None = None,
    title: str | None = None,
    simulated: bool = False,
    legend: bool = True,
) -> Any:
    """A Gantt chart of one step: per rank, a compute row, a comm row, and the number of units held."""
    with palette.figure_style():
        return _plot_timeline(run, ax, step, title, simulated, legend)


def _plot_timeline(run: Timeline, ax: Any, step: int | None, title: str | None, simulated: bool, legend: bool) -> Any:
    import matplotlib.pyplot as plt

    by_rank = spans_by_rank(run, step)
    simulated = simulated or any(m.get("simulated") for m in by_rank.values())
    if ax is None:
        fig, ax = plt.subplots(figsize=(10, 1.2 + 0.55 * len(LANES) * len(by_rank)), constrained_layout=True)
        plt.close(fig)  # returned, not shown twice by the inline backend
    t0 = origin(by_rank)
    width = max((s["end"] - t0 for m in by_rank.values() for s in m["spans"]), default=0.0) * 1e3
    ticks, labels = [], []
    for i, r in enumerate(sorted(by_rank)):
        spans = by_rank[r]["spans"]
        for j, lane in enumerate(LANES):
            y = i * (len(LANES) + 0.5) + j
            if lane == "held":
                _draw_held(ax, spans, t0, y)
            for s in spans:
                if _lane(s) == lane and lane != "held":
                    _bar(ax, s, t0, y, label_if_wider=width / 20)
            ticks.append(y)
            labels.append(t(f"views.timeline.lane.{lane}", rank=_label(run, r)))
    ax.set_yticks(ticks, labels, fontsize="small")
    ax.set_ylim(max(ticks) + 0.6, -0.6)
    ax.set_xlabel(t("views.timeline.xlabel"))
    step_shown = next(iter(by_rank.values())).get("step")
    head = title or t("views.timeline.title", step=step_shown if step_shown is not None else "")
    ax.set_title(t("views.timeline.title.simulated", title=head) if simulated else head, fontsize="medium")
    if legend:
        ax.legend(
            handles=_legend_handles(by_rank),
            fontsize=LABEL_PT,
            ncols=4,
            loc="upper center",
            bbox_to_anchor=(0.5, -0.18),
        )
    return ax.figure


def _lane(s: Span) -> str:
    return "held" if s["stream"] == Stream.MEMORY else "comm" if s["stream"] == Stream.COMM else "compute"


def _bar(ax: Any, s: Span, t0: float, y: float, label_if_wider: float) -> None:
    x, w = (s["start"] - t0) * 1e3, max((s["end"] - s["start"]) * 1e3, 1e-3)
    color = COLORS.get(s["kind"], palette.GREY)
    ink = palette.text_on(color)  # black or white, whichever has the contrast (>= 4.5:1) on this bar
    ax.broken_barh([(x, w)], (y - 0.4, 0.8), **_bar_style(s["kind"]))
    if s.get("unit") and s["unit"] != s["kind"] and w >= label_if_wider:
        # the label sits on a box of the bar's own colour: the hatching does not run through the letters
        box = {"facecolor": color, "edgecolor": "none", "pad": 0.6}
        ax.text(
            x + w / 2,
            y,
            _short(s["unit"]),
            ha="center",
            va="center",
            fontsize=LABEL_PT,
            color=ink,
            bbox=box,
            clip_on=True,
        )


def _bar_style(kind: str) -> dict[str, Any]:
    """A bar's colour, and for a collective its hatching in the bar's text colour (a cue besides colour)."""
    color = COLORS.get(kind, palette.GREY)
    hatch = palette.mpl_hatch(palette.HATCHES.get(kind, ""))
    if hatch is None:
        return {"facecolors": color, "edgecolor": "white", "linewidth": 0.3}
    ink = palette.text_on(color)
    return {"facecolors": color, "edgecolor": (*palette.rgb(ink), 0.55), "linewidth": 0.3, "hatch": hatch}


def _draw_held(ax: Any, spans: Sequence[Span], t0: float, y: float) -> None:
    """The number of units whose gathered parameters are in memory, as a filled step curve."""
    curve = held_curve(spans)
    if not curve:
        return
    peak = max(n for _, n in curve)
    xs = [(w - t0) * 1e3 for w, _ in curve]
    ys = [y + 0.4 - 0.8 * n / max(peak, 1) for _, n in curve]
    ax.fill_between(xs, ys, y + 0.4, step="post", color=COLORS["held"], alpha=0.6, linewidth=0)
    ax.text(xs[-1], y, " " + t("views.timeline.peak", n=peak), fontsize=LABEL_PT, va="center")


def _label(run: Timeline, r: int) -> str:
    """The rank as the dashboard names it: ``r``, or ``r (node/local rank)`` on several nodes."""
    if not isinstance(run, RunRecord) or r not in run.ranks:
        return str(r)  # spans without a Run (a simulation, a saved trace, a mapping of messages)
    return rank_label(run, r)


def _legend_handles(by_rank: Mapping[int, dict[str, Any]]) -> list[Any]:
    from matplotlib.patches import Patch

    kinds = {s["kind"] for m in by_rank.values() for s in m["spans"]}
    handles = []
    for k in (k for k in COLORS if k in kinds):
        style = _bar_style(k)
        handles.append(
            Patch(
                facecolor=style["facecolors"],
                edgecolor=style["edgecolor"],
                hatch=style.get("hatch"),
                label=t(f"views.timeline.legend.{k}"),
            )
        )
    return handles


def _short(unit: str) -> str:
    return unit.replace("layers.", "L")


def plot_timelines(runs: Mapping[str, Timeline], step: int | None = None, sharex: bool = True) -> Any:
    """One chart per setting ({label: run}), side by side, on a common time axis."""
    with palette.figure_style():
        return _plot_timelines(runs, step, sharex)


def _plot_timelines(runs: Mapping[str, Timeline], step: int | None, sharex: bool) -> Any:
    import matplotlib.pyplot as plt

    n = len(runs)
    all_ranks = {label: spans_by_rank(r, step) for label, r in runs.items()}
    nranks = max(len(b) for b in all_ranks.values())
    fig, axes = plt.subplots(
        1,
        n,
        figsize=(4.6 * n + 1.2, 1.4 + 0.55 * len(LANES) * nranks),
        sharex=sharex,
        sharey=True,
        constrained_layout=True,
    )
    axes = [axes] if n == 1 else list(axes)
    for ax, (label, run) in zip(axes, runs.items()):
        plot_timeline(run, ax=ax, step=step, title=label, legend=False)
    merged = {i: {"spans": [s for b in all_ranks.values() for m in b.values() for s in m["spans"]]} for i in (0,)}
    fig.legend(handles=_legend_handles(merged), fontsize=LABEL_PT, ncols=7, loc="outside lower center")
    plt.close(fig)
    return fig
