"""Memory, shown: plots of the memory model, and tables, bars and live SVG of what
``labkit.memtrack`` measured in the ranks. The numbers come from ``labkit.memory_model``
(formulas) and the "memcat" messages (measurements); this module only draws them.

    from labkit import memory_view
    memory_view.plot_memory_vs_gpus("llama-13b", "H100-80GB")    # model states per GPU vs N
    memory_view.memory_table(run)                                # per rank, phase, category
    memory_view.plot_breakdown(run)                              # the same as stacked bars

matplotlib is imported only inside the plotting functions.
"""

from __future__ import annotations

import html
import zlib
from collections.abc import Sequence
from typing import Any

from labkit.fmt import UNITS, fmt_bytes, fmt_count, fmt_number, markdown_to_html, render_table
from labkit.i18n import t
from labkit.memory import model as mm
from labkit.memory.shapes import config
from labkit.memory.states import GB
from labkit.views import palette
from labkit.wire.protocol import Msg
from labkit.wire.records import CATEGORIES, PHASES, Source, given, messages

COLORS = palette.MEMORY  # Okabe-Ito; each category hatched as well (palette.MEMORY_HATCHES)
HATCHES = palette.MEMORY_HATCHES
PATTERN = "labkit-mem"  # the SVG hatch patterns' id prefix, before each SVG's own


def category_label(c: str) -> str:
    return t(f"memory.cat.{c}")


# ---------------------------------------------------------------------------------------
# The memory model: per-GPU memory and the largest model, against the number of GPUs
# ---------------------------------------------------------------------------------------

DEFAULT_WORLD_SIZES = tuple(2**i for i in range(11))  # 1 .. 1024
MARKERS = palette.MARKERS * 2  # a strategy's line tells itself by its marker too


def plot_memory_vs_gpus(
    model: Any = "llama-13b",
    gpu: str | float = "H100-80GB",
    strategies: Sequence[str] = ("DDP", "ZERO1", "ZERO2", "ZERO3"),
    world_sizes: Sequence[int] = DEFAULT_WORLD_SIZES,
    *,
    peak: bool = False,
    ax: Any = None,
    **kw: Any,
) -> Any:
    """Per-GPU memory against the number of GPUs, one line per strategy, and the GPU's
    capacity as a horizontal line. ``peak=True`` plots :func:`peak_memory` (activations,
    gathered units) instead of the model states alone. Returns the matplotlib Figure."""
    with palette.figure_style():
        return _plot_memory_vs_gpus(model, gpu, strategies, world_sizes, peak, ax, kw)


def _plot_memory_vs_gpus(
    model: Any, gpu: str | float, strategies: Sequence[str], world_sizes: Sequence[int], peak: bool, ax: Any, kw: Any
) -> Any:
    import matplotlib.pyplot as plt

    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(7, 4.2))
    num = float(model) if isinstance(model, (int, float)) else float(config(model).num_params())
    markers = iter(MARKERS)
    for s in strategies:
        if peak:
            ys = [mm.peak_memory(model, s, n, **kw).total / GB for n in world_sizes]
        else:
            ys = [mm.model_states(num, s, n, **kw).model_states / GB for n in world_sizes]
        ax.plot(world_sizes, ys, marker=next(markers), ms=4, label=mm.resolve_strategy(s).name)
    cap = mm.gpu_bytes(gpu) / GB
    ax.axhline(
        cap, color=palette.OKABE_ITO["vermillion"], ls="--", lw=1.2, label=t("views.memory.plot.capacity", gpu=gpu)
    )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(t("views.memory.plot.xlabel"))
    ax.set_ylabel(t("views.memory.plot.ylabel", unit="GB"))
    name = model if isinstance(model, str) else fmt_count(num)
    key = "views.memory.plot.title_peak" if peak else "views.memory.plot.title"
    prec, opt = mm.resolve_precision(kw.get("precision", "bf16")), mm.resolve_optimizer(kw.get("optimizer", "adamw"))
    ax.set_title(t(key, model=name, precision=prec, optimizer=opt))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return fig


def plot_max_model_vs_gpus(
    gpu: str | float = "H100-80GB",
    strategies: Sequence[str] = ("DDP", "ZERO1", "ZERO2", "ZERO3"),
    world_sizes: Sequence[int] = DEFAULT_WORLD_SIZES,
    *,
    ax: Any = None,
    **kw: Any,
) -> Any:
    """The largest model whose states fit one GPU, against the number of GPUs: DDP is a
    flat line (capacity / 16 bytes: 5B parameters on 80 GB), ZeRO-1 and ZeRO-2 level off
    at capacity / 4 and / 2 bytes, ZeRO-3 grows with N. Returns the matplotlib Figure."""
    with palette.figure_style():
        return _plot_max_model_vs_gpus(gpu, strategies, world_sizes, ax, kw)


def _plot_max_model_vs_gpus(
    gpu: str | float, strategies: Sequence[str], world_sizes: Sequence[int], ax: Any, kw: Any
) -> Any:
    import matplotlib.pyplot as plt

    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(7, 4.2))
    for s, marker in zip(strategies, MARKERS):
        fits = [mm.max_params_that_fit(s, n, gpu, **kw) / 1e9 for n in world_sizes]
        ax.plot(world_sizes, fits, marker=marker, ms=4, label=s)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(t("views.memory.plot.xlabel"))
    ax.set_ylabel(t("views.memory.plot.max_ylabel"))
    prec, opt = mm.resolve_precision(kw.get("precision", "bf16")), mm.resolve_optimizer(kw.get("optimizer", "adamw"))
    ax.set_title(t("views.memory.plot.max_title", gpu=gpu, precision=prec, optimizer=opt))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return fig


# ---------------------------------------------------------------------------------------
# What memtrack measured: tables, bars and live SVG from the "memcat" messages
# ---------------------------------------------------------------------------------------


def latest(run: Source, step: int | None = None) -> dict[int, dict[str, dict[str, Any]]]:
    """``{rank: {phase: message}}`` for the last measured step (or ``step``) of each rank."""
    out: dict[int, dict[str, dict[str, Any]]] = {}
    for r, msgs in sorted(messages(run, Msg.MEMCAT, **given(step=step)).items()):
        if not msgs:
            continue
        last = msgs[-1].get("step")
        out[r] = {m["phase"]: m for m in msgs if m.get("step") == last}
    return out


class MemoryTable:
    """Per rank and phase, bytes by category. ``str()`` is plain text; notebooks show HTML."""

    def __init__(self, data: dict[int, dict[str, dict[str, int]]], units: str = "MiB") -> None:
        self.data = data  # rank -> phase -> category -> bytes
        self.units = units

    def rows(self) -> list[list[str]]:
        div = UNITS[self.units]
        head = [t("views.memtrack.col.rank"), t("views.memtrack.col.phase")] + [category_label(c) for c in CATEGORIES]
        rows = [head + [t("views.memtrack.col.total")]]
        for r, phases in self.data.items():
            for phase in PHASES:
                cats = phases.get(phase)
                if cats is None:
                    continue
                values = [cats.get(c, 0) for c in CATEGORIES]
                rows.append(
                    [str(r), t(f"views.memtrack.phase.{phase}")]
                    + [fmt_number(v / div, 2) for v in values + [sum(values)]]
                )
        return rows

    def _align(self) -> str:
        return "ll" + "r" * (len(CATEGORIES) + 1)

    def to_markdown(self) -> str:
        return f"({self.units})\n\n" + render_table(self.rows(), "markdown", self._align())

    def __str__(self) -> str:
        if not self.data:
            return t("views.memtrack.none")
        return f"({self.units})\n" + render_table(self.rows(), "text", self._align())

    __repr__ = __str__

    def _repr_html_(self) -> str:
        if not self.data:
            return f"<div>{html.escape(t('views.memtrack.none'))}</div>"
        return f"<div>({self.units})</div>" + markdown_to_html(render_table(self.rows(), "markdown", self._align()))


def memory_table(run: Source, step: int | None = None, units: str = "MiB") -> MemoryTable:
    """Per rank, per category: the peak and the end of each phase of the last measured step.

    ``run`` is a ``labkit.Run`` or its ``events`` dict (rank -> messages)."""
    data = {r: {p: dict(m["categories"]) for p, m in phases.items()} for r, phases in latest(run, step).items()}
    return MemoryTable(data, units)


def plot_breakdown(run: Source, step: int | None = None, units: str = "MiB") -> Any:
    """Stacked bars by category: for each rank, one bar per phase and one for the peak."""
    with palette.figure_style():
        return _plot_breakdown(run, step, units)


def _plot_breakdown(run: Source, step: int | None, units: str) -> Any:
    import matplotlib.pyplot as plt

    div = UNITS[units]
    data = memory_table(run, step).data
    fig, ax = plt.subplots(figsize=(max(5.0, 0.8 * sum(len(p) for p in data.values())), 4))
    ticks, labels, x = [], [], 0.0
    for r, phases in data.items():
        for phase in (p for p in PHASES if p in phases):
            bottom = 0.0
            for c in CATEGORIES:
                v = phases[phase].get(c, 0) / div
                ax.bar(x, v, bottom=bottom, width=0.8, label=category_label(c) if not ticks else None, **_bar_style(c))
                bottom += v
            ticks.append(x)
            labels.append(f"{t('views.memtrack.rank', rank=r)}\n{t(f'views.memtrack.phase.{phase}')}")
            x += 1
        x += 0.5  # a gap between ranks
    ax.set_xticks(ticks, labels, fontsize=8)
    ax.set_ylabel(units)
    ax.set_title(t("views.memtrack.plot.title", unit=units))
    if ticks:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _bar_style(c: str) -> dict[str, Any]:
    """A category's colour and hatching (in the colour's own text colour, half strong)."""
    ink = palette.text_on(COLORS[c])
    return {
        "color": COLORS[c],
        "edgecolor": (*palette.rgb(ink), 0.55),
        "linewidth": 0.4,
        "hatch": palette.mpl_hatch(HATCHES[c]),
    }


def breakdown_html(latest_memcat_by_rank: dict[int, dict[str, Any]], width: int = 520) -> str:
    """Stacked horizontal bars, one per rank, as inline SVG for the live dashboard (no matplotlib).

    Takes the latest "memcat" message of each rank; the bars share one scale. Each category has
    its colour and its hatching; a screen reader reads the title and, per rank, each category's bytes."""
    if not latest_memcat_by_rank:
        return f"<div style='color:var(--jp-ui-font-color2, #757575)'>{html.escape(t('views.memtrack.none'))}</div>"
    totals = {r: sum((m.get("categories") or {}).values()) for r, m in latest_memcat_by_rank.items()}
    top = max(max(totals.values()), 1)
    pad_l, bar_h, gap = 70, 16, 6
    text = "style='fill:var(--jp-ui-font-color1, currentColor)'"  # the theme's text colour, dark themes too
    edge = "style='stroke:var(--jp-ui-font-color1, currentColor)' stroke-opacity='0.6' stroke-width='0.5'"
    height = len(totals) * (bar_h + gap) + 32
    # the hatch patterns' ids, this SVG's own: the same bars give the same HTML (no needless widget update)
    prefix = f"{PATTERN}-{zlib.crc32(repr(sorted(latest_memcat_by_rank.items())).encode()):08x}"
    parts, said = [], []
    for i, (r, msg) in enumerate(sorted(latest_memcat_by_rank.items())):
        y, x = 4 + i * (bar_h + gap), float(pad_l)
        label = f"{t('views.memtrack.rank', rank=r)} · {t('views.memtrack.phase.' + str(msg.get('phase', 'peak')))}"
        parts.append(f"<text x='0' y='{y + 12}' font-size='10' {text}>{html.escape(label[:14])}</text>")
        cats = msg.get("categories") or {}
        said.append(
            f"{label}: {fmt_bytes(totals[r])} (" + ", ".join(_said(c, cats[c]) for c in CATEGORIES if cats.get(c)) + ")"
        )
        for c in CATEGORIES:
            v = cats.get(c, 0)
            w = v / top * (width - pad_l - 80)
            if w > 0:
                fill = palette.svg_fill(c, COLORS, HATCHES, prefix)
                parts.append(
                    f"<rect x='{x:.1f}' y='{y}' width='{w:.1f}' height='{bar_h}' fill='{fill}' {edge}>"
                    f"<title>{html.escape(_said(c, v))}</title></rect>"
                )
                x += w
        parts.append(
            f"<text x='{x + 4:.1f}' y='{y + 12}' font-size='10' {text}>{html.escape(fmt_bytes(totals[r]))}</text>"
        )
    ly, lx = height - 12, 0
    for c in CATEGORIES:  # the legend: a swatch as large as two tiles of the hatching, and the name
        name = html.escape(category_label(c))
        fill = palette.svg_fill(c, COLORS, HATCHES, prefix)
        parts.append(f"<rect x='{lx}' y='{ly - 10}' width='12' height='12' fill='{fill}' {edge}/>")
        parts.append(f"<text x='{lx + 15}' y='{ly}' font-size='10' {text}>{name}</text>")
        lx += 20 + 6 * len(name)
    title = t("views.memtrack.svg.title")
    return (
        f"<svg class='labkit-membars' role='img' aria-label='{html.escape(title + '. ' + '; '.join(said), quote=True)}' "
        f"width='{max(width, lx)}' height='{height}'><title>{html.escape(title)}</title>"
        f"{palette.svg_patterns(COLORS, HATCHES, prefix)}{''.join(parts)}</svg>"
    )


def _said(c: str, v: int) -> str:
    return f"{category_label(c)}: {fmt_bytes(v)}"
