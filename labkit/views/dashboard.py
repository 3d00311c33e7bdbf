"""The live view of a run: ipywidgets in a notebook, a text summary everywhere.

All updates happen on the cell's main thread (the launcher's loop calls
``update``), by setting widget traits, batched and throttled to a few per
second: no thread ever touches a widget, and the iopub rate limit is never hit.

The widgets appear once a run has lasted ``SHOW_AFTER`` seconds. A run that ends
sooner (most warm ``%%ranks`` cells take milliseconds) would show its first state
for a blink and then its last: it shows its last at once instead, as one HTML
output with the same header, table, figures and per-rank output. Opening widgets
is most of what such a cell would cost (a comm message per widget, and their
models in the frontend), and a static output also survives in a saved notebook.

With no frontend (papermill, nbval, nbconvert) the widgets are inert, so the
view always ends with a plain-text summary and one static figure, which is
what an executed notebook keeps.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from labkit.fmt import fmt_bytes, fmt_number
from labkit.i18n import get_lang, language, t
from labkit.views import palette, runview
from labkit.views.output import publish
from labkit.wire.errors import RunInterrupted, RunStopped, RunTimeout
from labkit.wire.protocol import ELAPSED, Msg, Status
from labkit.wire.records import RunRecord
from labkit.wire.setting import Display

# JupyterLab's theme variables (light, dark or high contrast), each with a fallback for a
# frontend without them (classic notebook, VS Code): text and lines follow the theme. Text is
# only ever in the theme's text colours (>= 4.5:1 on its backgrounds, light and dark); colours
# that carry meaning (a status, a rank) mark swatches and lines beside the words instead.
TEXT = "var(--jp-ui-font-color1, currentColor)"
MUTED = "var(--jp-ui-font-color2, #757575)"
LINES = "var(--jp-border-color1, #999)"
ERROR = "var(--jp-error-color1, #d55e00)"
# stderr as JupyterLab shows it: the theme's text on its error background (light pink, dark red)
STDERR = "color:var(--jp-content-font-color1, #212121);background:var(--jp-rendermime-error-background, #fdd)"
STATUS_COLORS = {
    Status.STARTING: MUTED,
    Status.RUNNING: f"var(--jp-brand-color1, {palette.OKABE_ITO['blue']})",
    Status.DONE: f"var(--jp-success-color1, {palette.OKABE_ITO['bluish_green']})",
    Status.FAILED: ERROR,
    Status.KILLED: ERROR,
    Status.STOPPED: f"var(--jp-warn-color1, {palette.OKABE_ITO['orange']})",
}
# ipywidgets draws an unselected tab's title in --jp-ui-font-color2 on --jp-layout-color2: 4.4:1 in
# the light theme. The rank tabs' titles take the theme's main text colour instead (in this
# dashboard only), which a browser applies from the widget's HTML as any page style.
TAB_STYLE = (
    "<style>.labkit-dashboard .lm-TabBar-tab, .labkit-dashboard .lm-TabBar-tabLabel "
    "{ color: var(--jp-ui-font-color1) !important; }</style>"
)
RANK_COLORS = palette.SERIES  # Okabe-Ito: lines that stay apart for colour-blind readers too
MANY_RANKS = 8  # above: short tab titles, a scrolled table
TABLE_PERIOD = 0.25  # seconds between table refreshes (4 per second at most)
PLOT_PERIOD = 1.0  # seconds between plot refreshes
SHOW_AFTER = 0.2  # seconds a run lasts before its live widgets open; a shorter one shows only its end
LOG_LINES_SHOWN = 80


def in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and getattr(ip, "kernel", None) is not None


def make_view(run: RunRecord, on_stop: Callable[[], None], *, display: str = Display.AUTO, quiet: bool = False) -> Any:
    """The view of ``run``: widgets in a live kernel, else text. ``display`` and ``quiet`` are the
    run's options (``RunConfig``): auto, widgets, text or none; quiet shows nothing."""
    if quiet or display == Display.NONE:
        return QuietView()
    if display == Display.TEXT or (display == Display.AUTO and not in_kernel()):
        return TextView()
    try:
        import ipywidgets  # noqa: F401  (imported once per kernel; the widgets themselves come later)
    except ImportError:
        return TextView()
    return LiveView(on_stop)


class QuietView:
    def update(self, run: RunRecord) -> None:
        pass

    def finish(self, run: RunRecord, extra: dict[str, Any] | None = None) -> None:
        """The run is over: show ``extra`` (what ``labkit.launch.finished``'s subscribers add), if any."""
        show(extra)


def show(extra: dict[str, Any] | None) -> None:
    """``extra``, a mime bundle, as an output of its own that text readers see as empty."""
    if extra and in_kernel():
        publish({**extra, "text/plain": ""})


class TextView(QuietView):
    """No widgets: the summary and one figure at the end."""

    def finish(self, run: RunRecord, extra: dict[str, Any] | None = None) -> None:
        # in a kernel, no flush: the kernel sends the cell's output before it says the cell is done,
        # and a flush here is one more wait on its output thread
        print(runview.summary(run), flush=not in_kernel())
        figure(run)
        show(extra)


def figure(run: RunRecord) -> None:
    """The static figure, in a kernel, when there is a curve to see: drawing it costs a good part
    of a second, a warm cell milliseconds."""
    if in_kernel() and (any(len(m) > 1 for m in run.memory.values()) or any(run.step_times.values())):
        from IPython.display import display

        display(runview.plot(run))


class LiveView:
    """The dashboard in a kernel: the live widgets once the run has lasted ``SHOW_AFTER`` seconds,
    or, for a run that ended sooner, its final state as one static output (``final_html``)."""

    def __init__(self, on_stop: Callable[[], None]) -> None:
        self._on_stop = on_stop
        self._open_at = time.monotonic() + SHOW_AFTER
        self.widgets: WidgetView | None = None

    def update(self, run: RunRecord) -> None:
        if self.widgets is None:
            if time.monotonic() < self._open_at:
                return
            self.widgets = WidgetView(run, self._on_stop)
        self.widgets.update(run)

    def finish(self, run: RunRecord, extra: dict[str, Any] | None = None) -> None:
        if self.widgets is not None:
            self.widgets.finish(run, extra)
            return
        # one output: the dashboard for the browser, the summary for text readers (what
        # TextView prints), the subscribers' bundles; each display waits on the kernel's output thread
        with language(get_lang()):
            publish({**(extra or {}), "text/html": final_html(run), "text/plain": runview.summary(run)})
        figure(run)


_SHARED: dict[str, Any] = {}  # the default Layout and styles every dashboard widget of this kernel uses


def shared_defaults(w: Any) -> dict[str, Any]:
    """One default ``Layout``, ``HTMLStyle`` and ``ButtonStyle`` for every dashboard of the kernel.

    Each ipywidget otherwise makes a Layout and a style model of its own, even when it keeps the
    defaults: two more models per widget, each a comm message to open (two thirds of what a
    dashboard sent). Nothing here changes them, so one of each serves all; they are made again
    if they were closed (``Widget.close_all()``).
    """
    if not _SHARED or any(m.comm is None for m in _SHARED.values()):
        from ipywidgets.widgets.widget_string import HTMLStyle  # not among ipywidgets' top-level names

        _SHARED.update(layout=w.Layout(), html=HTMLStyle(), button=w.ButtonStyle())
    return _SHARED


class WidgetView:
    """The live dashboard. Every widget is made with its first value, so opening it is one message
    per widget and nothing more; later updates send only what changed, at most a few per second."""

    def __init__(self, run: RunRecord, on_stop: Callable[[], None]) -> None:
        with language(get_lang()):  # the language found once, not once per message
            self._build(run, on_stop)

    def _html(self, value: str = "") -> Any:
        d = shared_defaults(self.w)
        return self.w.HTML(value=value, layout=d["layout"], style=d["html"])

    def _build(self, run: RunRecord, on_stop: Callable[[], None]) -> None:
        import ipywidgets as w
        from IPython.display import display

        self.w = w
        d = shared_defaults(w)
        html = self._html
        self._last_table = self._last_plot = time.monotonic()
        self._log_sizes: dict[int, tuple[int, int]] = {}
        self.header = html(header_html(run))
        # the rank table, the memory plot and the per-category bars (once the cell measures memory by
        # category, labkit.memtrack) in one widget: one model to open, one message per refresh
        self._figures = figures_html(run)
        self.body = html(TAB_STYLE + body_html(run, self._figures))
        self.stop = w.Button(
            description=t("views.dash.stop"),
            button_style="danger",
            icon="stop",
            layout=d["layout"],
            style=d["button"],
            _dom_classes=("labkit-stop",),
        )
        self._on_stop = on_stop
        self._stop_clicked = self._stop_shown = self._finished = False
        self.stop.on_click(lambda _: self._request_stop())
        self._watch_clicks()
        self.logs: dict[int, Any] = {}  # one tab per rank with its output, from the first line a rank prints
        self.tabs: Any = None
        top = w.HBox([self.header, self.stop], layout=d["layout"])
        self.box = w.VBox([top, self.body], layout=d["layout"], _dom_classes=("labkit-dashboard",))
        self._update_logs(run)
        # the widget's own text form is its repr, built over every child's value (the whole table and
        # plot, cut to 110 characters): a line that says what it is serves nbconvert and papermill better
        text = t("views.dash.text", run_id=run.run_id, nproc=run.nproc, backend=run.backend)
        view = {"version_major": 2, "version_minor": 0, "model_id": self.box.model_id}  # as ipywidgets displays it
        display({"application/vnd.jupyter.widget-view+json": view, "text/plain": text}, raw=True)
        self._ui = ExitStack()
        self._poll = self._ui_poller()

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

    def update(self, run: RunRecord, force: bool = False) -> None:
        with language(get_lang()):
            self._update(run, force)

    def _update(self, run: RunRecord, force: bool = False) -> None:
        now = time.monotonic()
        if self._poll is not None:
            try:
                self._poll(5)
            except Exception:
                self._poll = None
        if self._stop_clicked and not self._stop_shown:  # the click came from another thread: show it here
            self._stop_shown = True
            with self.stop.hold_sync():
                self.stop.description = t("views.dash.stopping")
                self.stop.disabled = True
        if not force and now - self._last_table < TABLE_PERIOD:
            return
        self._last_table = now
        # a trait set to the value it has sends nothing (traitlets compares), so unchanged parts cost no message
        self.header.value = header_html(run)
        if force or now - self._last_plot >= PLOT_PERIOD:  # the figures are redrawn once a second
            self._last_plot = now
            self._figures = figures_html(run)
        self.body.value = TAB_STYLE + body_html(run, self._figures)
        if self.tabs is not None:
            titles = tuple(tab_title(run, r) for r in run.ranks)  # node/local rank, once the hellos say
            if titles != tuple(self.tabs.titles):
                self.tabs.titles = titles
        self._update_logs(run)

    def _update_logs(self, run: RunRecord) -> None:
        sizes = {r: _log_size(log) for r, log in run.logs.items()}
        if self.tabs is None:
            if not any(any(size) for size in sizes.values()):
                return  # no rank has printed anything yet: no tabs (a silent warm cell opens none)
            self.logs = {r: self._html() for r in run.ranks}
            titles = [tab_title(run, r) for r in run.ranks]
            self.tabs = self.w.Tab(
                children=[self.logs[r] for r in run.ranks], titles=titles, layout=shared_defaults(self.w)["layout"]
            )
            self.box.children = (*self.box.children, self.tabs)
        for r, log in run.logs.items():
            if self._log_sizes.get(r) == sizes[r]:
                continue
            self._log_sizes[r] = sizes[r]
            self.logs[r].value = log_html(log)

    def finish(self, run: RunRecord, extra: dict[str, Any] | None = None) -> None:
        self._ui.close()
        with language(get_lang()):
            self._update(run, force=True)
            self._finished = True
            with self.stop.hold_sync():  # one message for both
                self.stop.disabled = True
                self.stop.description = end_label(run)
            TextView().finish(run, extra)


def end_label(run: RunRecord) -> str:
    """What the Stop button says once the run is over: done, stopped or failed."""
    stopped = isinstance(run.error, (RunInterrupted, RunStopped, RunTimeout))
    return t(f"views.run.status.{'done' if run.ok else 'stopped' if stopped else 'failed'}")


def final_html(run: RunRecord) -> str:
    """The dashboard of an ended run as one piece of HTML: what the widgets show at the end (the
    header, the spent Stop button's word, the table, the figures) and each rank's output, folded."""
    badge = (
        f"<span class='labkit-end' style='padding:2px 10px;border:1px solid {LINES};border-radius:2px;"
        f"color:{MUTED}'>{html.escape(end_label(run))}</span>"
    )
    top = f"<div style='display:flex;align-items:center;gap:12px;color:{TEXT}'><span>{header_html(run)}</span>{badge}</div>"
    logs = "".join(
        f"<details class='labkit-log' data-rank='{r}'><summary style='color:{TEXT}'>"
        f"{html.escape(tab_title(run, r))}</summary>{log_html(log)}</details>"
        for r, log in run.logs.items()
        if any(_log_size(log))
    )
    return f"<div class='labkit-dashboard'>{top}{body_html(run, figures_html(run))}{logs}</div>"


def _log_size(log: Any) -> tuple[int, int]:
    return (
        len(log.streams["stdout"]) + log.dropped["stdout"],
        len(log.streams["stderr"]) + log.dropped["stderr"],
    )


def header_html(run: RunRecord) -> str:
    return t("views.dash.header", run_id=run.run_id, nproc=run.nproc, backend=run.backend, wall=run.wall_time)


def figures_html(run: RunRecord) -> str:
    return f"<div>{memory_svg(run)}</div>" + (f"<div>{bars}</div>" if (bars := membars_html(run)) else "")


def body_html(run: RunRecord, figures: str) -> str:
    return f"<div>{rank_table_html(run)}</div>{figures}"


def rank_color(r: int, nranks: int) -> str:
    """Rank ``r``'s line colour: Okabe-Ito up to 8 ranks, then hues spread evenly (no two ranks alike)."""
    if nranks <= len(RANK_COLORS):
        return RANK_COLORS[r]
    return f"hsl({round(360 * r / nranks)}, 70%, 55%)"


def tab_title(run: RunRecord, r: int) -> str:
    """ "rank 3", or only "3" when there are many tabs to fit in one row."""
    label = runview.rank_label(run, r)
    return label if len(run.ranks) > MANY_RANKS else t("views.dash.rank", rank=label)


def rank_table_html(run: RunRecord) -> str:
    rows = runview.rows(run)
    cols = ["rank", "status", "mem", "peak", "step", "steps", "log"]
    if any(row["comm"] for row in rows):
        cols.insert(6, "comm")
    head = "".join(
        f"<th style='text-align:left;padding:2px 8px'>{html.escape(t('views.run.col.' + c))}</th>" for c in cols
    )
    body = []
    for row, state in zip(rows, run.ranks.values()):
        cells = []
        for c in cols:
            style, mark = "padding:2px 8px", ""
            if c == "status":
                style += ";font-weight:bold"
                mark = status_mark(STATUS_COLORS.get(state.status, TEXT))
            if c == "log":
                style += ";font-family:monospace;max-width:420px;overflow:hidden;white-space:nowrap"
            cells.append(f"<td class='labkit-{c}' style='{style}'>{mark}{html.escape(row[c])}</td>")
        body.append(f"<tr class='labkit-rank' data-rank='{row['rank']}'>{''.join(cells)}</tr>")
    table = f"<table class='labkit-ranks' style='border-collapse:collapse;color:{TEXT}'><tr>{head}</tr>{''.join(body)}</table>"
    if len(rows) > MANY_RANKS:  # many ranks: the table scrolls, the plot and the tabs stay in view
        return f"<div style='max-height:320px;overflow-y:auto'>{table}</div>"
    return table


def status_mark(color: str) -> str:
    """A dot in the status's colour before its word: the word says it, the colour helps the eye.
    The dot has no text: its colour fills it (``currentColor``), and no text is ever in it."""
    return (
        "<span aria-hidden='true' style='display:inline-block;width:0.65em;height:0.65em;border-radius:50%;"
        f"margin-right:5px;vertical-align:baseline;color:{color};background:currentColor'></span>"
    )


def membars_html(run: RunRecord) -> str:
    """Stacked per-category bars from each rank's latest ``memcat`` message; empty without any."""
    latest = {r: m for r in run.ranks if (m := run.last_message(r, Msg.MEMCAT)) is not None}
    if not latest:
        return ""
    from labkit.views.memory import breakdown_html

    return breakdown_html(latest)


def log_html(log: Any) -> str:
    out = [html.escape(x) for x in log.text("stdout").splitlines()[-LOG_LINES_SHOWN:]]
    err = [
        f"<span class='labkit-stderr' style='{STDERR}'>{html.escape(x)}</span>"
        for x in log.text("stderr").splitlines()[-LOG_LINES_SHOWN:]
    ]
    body = "\n".join(out + err)
    return f"<pre style='max-height:240px;overflow:auto;font-size:11px;margin:0;color:{TEXT}'>{body}</pre>"


def memory_svg(run: RunRecord, width: int = 640, height: int = 180) -> str:
    """Memory of every rank over time as inline SVG: cheap to redraw, no flicker, no matplotlib."""
    key, what = runview.main_memory(run)
    series = {r: [(s[ELAPSED], s[key]) for s in samples if key in s] for r, samples in run.memory.items()}
    points = [p for s in series.values() for p in s]
    if not points:
        return f"<div style='color:{MUTED}'>{t('views.dash.no_samples')}</div>"
    t0 = min(p[0] for p in points)  # from the first sample: torch's import time is not the run's
    series = {r: [(x - t0, y) for x, y in pts] for r, pts in series.items()}
    t_max = max(max(p[0] for p in points) - t0, 1e-3)
    y_max = max(max(p[1] for p in points), 1)
    # the legend: one entry per rank, as many per row as fit, rows added above the plot
    labels = {r: t("views.dash.rank", rank=runview.rank_label(run, r)) for r in series}
    entry_w = 28 + 6 * max((len(x) for x in labels.values()), default=6)
    per_row = max(1, (width - 78) // entry_w)  # 60 to the plot, 18 from a swatch to its name
    legend_h = 14 * ((len(series) + per_row - 1) // per_row)
    height += legend_h - 12
    pad_l, pad_b, top = 60, 20, legend_h + 8
    plot_w, plot_h = width - pad_l - 10, height - pad_b - top
    text = f"font-size='10' style='fill:{TEXT}'"
    lines = []
    for i, (r, pts) in enumerate(series.items()):
        color = rank_color(r, len(run.ranks))
        lx, ly = pad_l + entry_w * (i % per_row), 12 + 14 * (i // per_row)
        # the legend: a short stroke of the rank's colour, then its name in the theme's text colour
        lines.append(f"<rect x='{lx}' y='{ly - 5}' width='14' height='3' style='fill:{color}'/>")
        lines.append(f"<text class='labkit-legend' x='{lx + 18}' y='{ly}' {text}>{html.escape(labels[r])}</text>")
        if not pts:
            continue
        coords = " ".join(f"{pad_l + x / t_max * plot_w:.1f},{top + plot_h - y / y_max * plot_h:.1f}" for x, y in pts)
        lines.append(f"<polyline fill='none' style='stroke:{color}' stroke-width='1.5' points='{coords}'/>")
    title = t("views.dash.plot.title", what=what)
    axes = (
        f"<line x1='{pad_l}' y1='{top + plot_h}' x2='{pad_l + plot_w}' y2='{top + plot_h}' style='stroke:{LINES}'/>"
        f"<line x1='{pad_l}' y1='{top}' x2='{pad_l}' y2='{top + plot_h}' style='stroke:{LINES}'/>"
        f"<text x='2' y='{top + 8}' {text}>{html.escape(fmt_bytes(y_max))}</text>"
        f"<text x='2' y='{top + plot_h}' {text}>0</text>"
        f"<text x='{pad_l + plot_w - 40}' y='{height - 4}' {text}>{fmt_number(t_max, 1)} s</text>"
        f"<text x='{pad_l + 4}' y='{height - 4}' {text}>{html.escape(title)}</text>"
    )
    said = "; ".join(
        t("views.dash.plot.rank", rank=labels[r], now=fmt_bytes(pts[-1][1]), peak=fmt_bytes(max(y for _, y in pts)))
        for r, pts in series.items()
        if pts
    )
    return (
        f"<svg class='labkit-memplot' role='img' aria-label='{html.escape(f'{title}. {said}', quote=True)}' "
        f"width='{width}' height='{height}'><title>{html.escape(title)}</title>{axes}{''.join(lines)}</svg>"
    )
