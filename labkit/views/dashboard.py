"""The live view of a run: ipywidgets in a notebook, a text summary everywhere.

All updates happen on the cell's main thread (the launcher's loop calls
``update``), by setting widget traits, batched and throttled to a few per
second: no thread ever touches a widget, and the iopub rate limit is never hit.

With no frontend (papermill, nbval, nbconvert) the widgets are inert, so the
view always ends with a plain-text summary and one static figure, which is
what an executed notebook keeps.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from labkit.fmt import fmt_bytes
from labkit.i18n import catalog, t
from labkit.views import runview
from labkit.wire.protocol import ELAPSED, Msg, Status

if TYPE_CHECKING:
    from labkit.launch.options import RunConfig
    from labkit.launch.run import Run

catalog(
    {
        "dash.stop": {"en": "Stop", "ro": "Oprește"},
        "dash.stopping": {"en": "Stopping…", "ro": "Se oprește…"},
        "dash.rank": {"en": "rank {rank}", "ro": "rangul {rank}"},
        "dash.header": {
            "en": "<b>{run_id}</b> · {nproc} ranks · {backend} · {wall:.1f} s",
            "ro": "<b>{run_id}</b> · {nproc} ranguri · {backend} · {wall:.1f} s",
        },
        "dash.no_samples": {"en": "no memory samples yet", "ro": "încă nu există eșantioane de memorie"},
        "dash.plot.title": {"en": "memory over time ({what})", "ro": "memoria în timp ({what})"},
    }
)

# JupyterLab's theme variables (light, dark or high contrast), each with a fallback for a
# frontend without them (classic notebook, VS Code): text and lines follow the theme
TEXT = "var(--jp-ui-font-color1, currentColor)"
MUTED = "var(--jp-ui-font-color2, #888)"
LINES = "var(--jp-border-color1, #999)"
ERROR = "var(--jp-error-color1, #d62728)"
STATUS_COLORS = {
    Status.STARTING: MUTED,
    Status.RUNNING: "var(--jp-brand-color1, #1f77b4)",
    Status.DONE: "var(--jp-success-color1, #2ca02c)",
    Status.FAILED: ERROR,
    Status.KILLED: ERROR,
    Status.STOPPED: "var(--jp-warn-color1, #ff7f0e)",
}
# matplotlib's tab10: mid-tones that read on a light and on a dark background
RANK_COLORS = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
]
MANY_RANKS = 8  # above: short tab titles, a scrolled table
TABLE_PERIOD = 0.25  # seconds between table refreshes (4 per second at most)
PLOT_PERIOD = 1.0  # seconds between plot refreshes
LOG_LINES_SHOWN = 80


def in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


def make_view(run: Run, cfg: RunConfig, on_stop: Callable[[], None]) -> Any:
    if cfg.quiet or cfg.display == "none":
        return QuietView()
    if cfg.display == "text" or (cfg.display == "auto" and not in_kernel()):
        return TextView()
    try:
        return WidgetView(run, on_stop)
    except ImportError:
        return TextView()


class QuietView:
    def update(self, run: Run) -> None:
        pass

    def finish(self, run: Run) -> None:
        pass


class TextView(QuietView):
    """No widgets: the summary and one figure at the end."""

    def finish(self, run: Run) -> None:
        print(run.summary(), flush=True)
        # a figure only when there is a curve to see: drawing it costs seconds, a warm cell milliseconds
        if in_kernel() and (any(len(m) > 1 for m in run.memory.values()) or any(run.step_times.values())):
            from IPython.display import display

            display(run.plot())


class WidgetView:
    def __init__(self, run: Run, on_stop: Callable[[], None]) -> None:
        import ipywidgets as w
        from IPython.display import display

        self.w = w
        self._last_table = self._last_plot = 0.0
        self._log_sizes: dict[int, tuple[int, int]] = {}
        self.header = w.HTML()
        self.table = w.HTML()
        self.plot = w.HTML()
        self.membars = w.HTML()  # filled once the cell measures memory by category (labkit.memtrack)
        self.stop = w.Button(description=t("dash.stop"), button_style="danger", icon="stop")
        self.stop.add_class("labkit-stop")
        self._on_stop = on_stop
        self._stop_clicked = self._stop_shown = self._finished = False
        self.stop.on_click(lambda _: self._request_stop())
        self._watch_clicks()
        self.logs = {r: w.HTML() for r in run.ranks}
        self.tabs = w.Tab(children=[self.logs[r] for r in run.ranks])
        for i, r in enumerate(run.ranks):
            self.tabs.set_title(i, tab_title(run, r))
        self.box = w.VBox([w.HBox([self.header, self.stop]), self.table, self.plot, self.membars, self.tabs])
        self.box.add_class("labkit-dashboard")
        display(self.box)
        self._ui = ExitStack()
        self._poll = self._ui_poller()
        self.update(run, force=True)

    def _request_stop(self) -> None:
        """A click on Stop. It may arrive on the kernel's shell-channel thread: only flags are set here."""
        if self._finished or self._stop_clicked:  # a click queued until the cell ended changes nothing
            return
        self._stop_clicked = True
        self._on_stop()

    def _watch_clicks(self) -> None:
        """See the Stop click while the cell blocks the kernel's main thread (ipykernel 7).

        ipykernel 7 handles comm messages on the main thread's event loop, which the running
        cell holds, so ``on_click`` would only fire after the run. Its shell-channel thread,
        though, asks each comm where to route an incoming message (``_reply_subshell_for``)
        before queueing it; wrapping that call on the button's comm sees the click at once.
        The message then goes on as usual. Without the hook (ipykernel 6) jupyter-ui-poll
        delivers the click instead, see ``_ui_poller``.
        """
        comm = getattr(self.stop, "comm", None)
        route = getattr(comm, "_reply_subshell_for", None)
        if route is None:
            return

        def spy(data: Any, default: Any) -> Any:
            content = data.get("content") if isinstance(data, dict) else None
            if isinstance(content, dict) and data.get("method") == "custom" and content.get("event") == "click":
                self._request_stop()
            return route(data, default)

        comm._reply_subshell_for = spy

    def _ui_poller(self) -> Callable[[int], None] | None:
        """Widget clicks wait in the shell queue while a cell runs; jupyter-ui-poll lets us read them.

        It drives ``kernel.do_one_iteration``, which ipykernel 7 no longer has (there it would
        silently do nothing while swapping the kernel's handlers): then ``_watch_clicks`` serves.
        """
        from IPython import get_ipython

        kernel = getattr(get_ipython(), "kernel", None)
        if not hasattr(kernel, "do_one_iteration"):
            return None
        try:
            from jupyter_ui_poll import ui_events

            return self._ui.enter_context(ui_events())
        except Exception:
            return None

    def update(self, run: Run, force: bool = False) -> None:
        now = time.monotonic()
        if self._poll is not None:
            try:
                self._poll(5)
            except Exception:
                self._poll = None
        if self._stop_clicked and not self._stop_shown:  # the click came from another thread: show it here
            self._stop_shown = True
            self.stop.description = t("dash.stopping")
            self.stop.disabled = True
        if not force and now - self._last_table < TABLE_PERIOD:
            return
        self._last_table = now
        with self.box.hold_sync():
            self.header.value = t(
                "dash.header", run_id=run.run_id, nproc=run.nproc, backend=run.backend, wall=run.wall_time
            )
            self.table.value = rank_table_html(run)
            for i, r in enumerate(run.ranks):  # node/local rank, once the hellos say where each rank runs
                self.tabs.set_title(i, tab_title(run, r))
            self._update_logs(run)
            if force or now - self._last_plot >= PLOT_PERIOD:
                self._last_plot = now
                self.plot.value = memory_svg(run)
                self.membars.value = membars_html(run)

    def _update_logs(self, run: Run) -> None:
        for r, log in run.logs.items():
            size = (
                len(log.streams["stdout"]) + log.dropped["stdout"],
                len(log.streams["stderr"]) + log.dropped["stderr"],
            )
            if self._log_sizes.get(r) == size:
                continue
            self._log_sizes[r] = size
            self.logs[r].value = log_html(log)

    def finish(self, run: Run) -> None:
        self._ui.close()
        self.update(run, force=True)
        self._finished = True
        self.stop.disabled = True
        from labkit.wire.errors import RunInterrupted, RunStopped, RunTimeout

        stopped = isinstance(run.error, (RunInterrupted, RunStopped, RunTimeout))
        self.stop.description = t(f"run.status.{'done' if run.ok else 'stopped' if stopped else 'failed'}")
        TextView().finish(run)


def rank_color(r: int, nranks: int) -> str:
    """Rank ``r``'s line colour: tab10 up to 10 ranks, then hues spread evenly (no two ranks alike)."""
    if nranks <= len(RANK_COLORS):
        return RANK_COLORS[r]
    return f"hsl({round(360 * r / nranks)}, 70%, 55%)"


def tab_title(run: Run, r: int) -> str:
    """ "rank 3", or only "3" when there are many tabs to fit in one row."""
    label = runview.rank_label(run, r)
    return label if len(run.ranks) > MANY_RANKS else t("dash.rank", rank=label)


def rank_table_html(run: Run) -> str:
    rows = runview.rows(run)
    cols = ["rank", "status", "mem", "peak", "step", "steps", "log"]
    if any(row["comm"] for row in rows):
        cols.insert(6, "comm")
    head = "".join(f"<th style='text-align:left;padding:2px 8px'>{html.escape(t('run.col.' + c))}</th>" for c in cols)
    body = []
    for row, state in zip(rows, run.ranks.values()):
        color = STATUS_COLORS.get(state.status, TEXT)
        cells = []
        for c in cols:
            style = "padding:2px 8px"
            if c == "status":
                style += f";color:{color};font-weight:bold"
            if c == "log":
                style += ";font-family:monospace;max-width:420px;overflow:hidden;white-space:nowrap"
            cells.append(f"<td class='labkit-{c}' style='{style}'>{html.escape(row[c])}</td>")
        body.append(f"<tr class='labkit-rank' data-rank='{row['rank']}'>{''.join(cells)}</tr>")
    table = f"<table class='labkit-ranks' style='border-collapse:collapse;color:{TEXT}'><tr>{head}</tr>{''.join(body)}</table>"
    if len(rows) > MANY_RANKS:  # many ranks: the table scrolls, the plot and the tabs stay in view
        return f"<div style='max-height:320px;overflow-y:auto'>{table}</div>"
    return table


def membars_html(run: Run) -> str:
    """Stacked per-category bars from each rank's latest ``memcat`` message; empty without any."""
    latest = {r: m for r in run.ranks if (m := run.last_message(r, Msg.MEMCAT)) is not None}
    if not latest:
        return ""
    from labkit.views.memory import breakdown_html

    return breakdown_html(latest)


def log_html(log: Any) -> str:
    out = [html.escape(x) for x in log.text("stdout").splitlines()[-LOG_LINES_SHOWN:]]
    err = [
        f"<span style='color:{ERROR}'>{html.escape(x)}</span>"
        for x in log.text("stderr").splitlines()[-LOG_LINES_SHOWN:]
    ]
    body = "\n".join(out + err)
    return f"<pre style='max-height:240px;overflow:auto;font-size:11px;margin:0;color:{TEXT}'>{body}</pre>"


def memory_svg(run: Run, width: int = 640, height: int = 180) -> str:
    """Memory of every rank over time as inline SVG: cheap to redraw, no flicker, no matplotlib."""
    key, what = runview.main_memory(run)
    series = {r: [(s[ELAPSED], s[key]) for s in samples if key in s] for r, samples in run.memory.items()}
    points = [p for s in series.values() for p in s]
    if not points:
        return f"<div style='color:{MUTED}'>{t('dash.no_samples')}</div>"
    t0 = min(p[0] for p in points)  # from the first sample: torch's import time is not the run's
    series = {r: [(x - t0, y) for x, y in pts] for r, pts in series.items()}
    t_max = max(max(p[0] for p in points) - t0, 1e-3)
    y_max = max(max(p[1] for p in points), 1)
    # the legend: one entry per rank, as many per row as fit, rows added above the plot
    labels = {r: t("dash.rank", rank=runview.rank_label(run, r)) for r in series}
    entry_w = 12 + 6 * max((len(x) for x in labels.values()), default=6)
    per_row = max(1, (width - 60) // entry_w)
    legend_h = 14 * ((len(series) + per_row - 1) // per_row)
    height += legend_h - 12
    pad_l, pad_b, top = 60, 20, legend_h + 8
    plot_w, plot_h = width - pad_l - 10, height - pad_b - top
    lines = []
    for i, (r, pts) in enumerate(series.items()):
        color = rank_color(r, len(run.ranks))
        lx, ly = pad_l + entry_w * (i % per_row), 12 + 14 * (i // per_row)
        lines.append(
            f"<text class='labkit-legend' x='{lx}' y='{ly}' font-size='10' style='fill:{color}'>{html.escape(labels[r])}</text>"
        )
        if not pts:
            continue
        coords = " ".join(f"{pad_l + x / t_max * plot_w:.1f},{top + plot_h - y / y_max * plot_h:.1f}" for x, y in pts)
        lines.append(f"<polyline fill='none' style='stroke:{color}' stroke-width='1.5' points='{coords}'/>")
    text = f"font-size='10' style='fill:{TEXT}'"
    axes = (
        f"<line x1='{pad_l}' y1='{top + plot_h}' x2='{pad_l + plot_w}' y2='{top + plot_h}' style='stroke:{LINES}'/>"
        f"<line x1='{pad_l}' y1='{top}' x2='{pad_l}' y2='{top + plot_h}' style='stroke:{LINES}'/>"
        f"<text x='2' y='{top + 8}' {text}>{html.escape(fmt_bytes(y_max))}</text>"
        f"<text x='2' y='{top + plot_h}' {text}>0</text>"
        f"<text x='{pad_l + plot_w - 40}' y='{height - 4}' {text}>{t_max:.1f} s</text>"
        f"<text x='{pad_l + 4}' y='{height - 4}' {text}>{html.escape(t('dash.plot.title', what=what))}</text>"
    )
    return f"<svg class='labkit-memplot' width='{width}' height='{height}'>{axes}{''.join(lines)}</svg>"
