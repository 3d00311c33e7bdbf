"""The dashboard's HTML, without a browser: theme colours (JupyterLab's dark theme too), and a
run of more than 8 ranks (a colour each, a legend that wraps, a table that scrolls)."""

from __future__ import annotations

import re
import time
import types

import pytest

from labkit.launch.logs import RankLog
from labkit.launch.run import Run
from labkit.views import dashboard, output
from labkit.wire.protocol import Msg, Status


def fake_run(nproc: int, tmp_path) -> Run:
    """A Run filled with the messages ranks send (memory samples, steps, a log line): nothing launched."""
    run = Run("run-view", nproc, "gloo", str(tmp_path))
    t0 = time.time()
    for r in range(nproc):
        run.ingest({"t": Msg.HELLO, "rank": r, "time": t0, "pid": 1000 + r})
        for i in range(4):
            run.ingest({"t": Msg.MEM, "rank": r, "time": t0 + i, "rss": (200 + 10 * r + i) * 2**20})
            run.ingest({"t": Msg.STEP, "rank": r, "time": t0 + i, "i": i, "dt": 0.1})
        (tmp_path / f"rank{r}.err").write_text("a warning\n")
        run.logs[r] = RankLog(r, str(tmp_path))
        run.logs[r].poll()
    return run


def colours(markup: str) -> list[str]:
    return [c.strip() for c in re.findall(r"(?:color|fill|stroke)\s*:\s*([^;'\"]+)", markup)]


@pytest.mark.parametrize("nproc", [2, 12])
def test_text_and_lines_take_the_themes_colours(nproc, tmp_path):
    run = fake_run(nproc, tmp_path)
    markup = dashboard.rank_table_html(run) + dashboard.memory_svg(run) + dashboard.log_html(run.logs[0])
    ranks = {dashboard.rank_color(r, nproc) for r in range(nproc)}
    for c in colours(markup):
        # a theme variable (with a fallback for frontends without them), or a rank's own line colour
        assert c.startswith("var(--jp-") or c in ranks, c
    # SVG text has no colour of its own: it must be given one, or it stays black on a dark theme
    for text in re.findall(r"<text [^>]*>", markup):
        assert "fill:" in text, text


def test_more_than_eight_ranks(tmp_path):
    run = fake_run(12, tmp_path)
    svg = dashboard.memory_svg(run, width=640)
    strokes = re.findall(r"<polyline [^>]*style='stroke:([^']+)'", svg)
    assert len(strokes) == 12 and len(set(strokes)) == 12  # no two ranks share a colour
    legend = [(float(x), float(y)) for x, y in re.findall(r"class='labkit-legend' x='([\d.]+)' y='([\d.]+)'", svg)]
    assert len(legend) == len(set(legend)) == 12
    rows = sorted({y for _, y in legend})
    assert len(rows) >= 2  # wrapped onto a second row rather than drawn off the plot
    step = min(b[0] - a[0] for a, b in zip(sorted(legend), sorted(legend)[1:]) if a[1] == b[1])
    assert all(x + step <= 640 for x, _ in legend)
    plot_top = min(float(y) for y in re.findall(r"<line x1='\d+' y1='([\d.]+)'", svg))
    assert max(rows) < plot_top  # the legend sits above the plot, not over the curves
    table = dashboard.rank_table_html(run)
    assert table.startswith("<div style='max-height:") and table.count("<tr class='labkit-rank'") == 12
    assert [dashboard.tab_title(run, r) for r in (0, 11)] == ["0", "11"]  # 12 tabs fit in one row
    assert dashboard.tab_title(fake_run(2, tmp_path), 1) == dashboard.t("views.dash.rank", rank="1")


def test_steps_as_i_of_n_with_the_time_left(tmp_path, monkeypatch):
    import json

    from labkit.i18n import language
    from labkit.ranks import rank
    from labkit.views import runview

    # the rank side: rank.steps(n) says n with every step (written as JSON lines outside a run)
    monkeypatch.setenv("LABKIT_REPORT_DIR", str(tmp_path))
    monkeypatch.setenv("RANK", "0")
    for _ in rank.steps(10):
        if rank.current_step() == 3:
            break
    sent = [json.loads(x) for x in (tmp_path / "rank0.jsonl").read_text().splitlines()]
    steps = [m for m in sent if m["t"] == Msg.STEP]
    assert [(m["i"], m["n"]) for m in steps] == [(0, 10), (1, 10), (2, 10)]
    with rank.step():  # outside rank.steps(n): no total
        pass
    assert "n" not in json.loads((tmp_path / "rank0.jsonl").read_text().splitlines()[-1])
    rank.reset_steps()

    run = Run("run-steps", 1, "gloo", str(tmp_path))
    run.ingest({"t": Msg.HELLO, "rank": 0, "time": 0.0, "pid": 1})
    for i, dt in enumerate([3.0, 1.0, 1.0, 1.0, 1.0, 1.0]):  # the first step is slow (warm-up)
        run.ingest({"t": Msg.STEP, "rank": 0, "time": 1.0 + i, "i": i, "dt": dt, "n": 100})
    with language("en"):
        assert runview.steps_label(run, 0) == "6/100, 1 min 34 s left"  # 94 steps at the recent 1 s
    with language("ro"):
        assert runview.steps_label(run, 0) == "6/100, mai rămân 1 min 34 s"
    run.ranks[0].status = "done"
    assert runview.steps_label(run, 0) == "6/100"
    assert runview.rows(run)[0]["steps"] == "6/100"


# -- a short run, a long run: what the kernel is sent ---------------------------------------


class FakePub:
    """The parts of ipykernel's display publisher that ``dashboard.publish`` touches."""

    def __init__(self) -> None:
        self.flushes = 0

    def _flush_streams(self) -> None:
        self.flushes += 1


class FakeStream:
    def __init__(self, pending: bool) -> None:
        self._flush_pending = pending


@pytest.fixture
def kernel_like(monkeypatch):
    """A kernel as the dashboard sees one: displays recorded, the publisher's flushes counted."""
    pub, shown = FakePub(), []

    class Shell:
        display_pub = pub

    def display(obj, raw=False):
        pub._flush_streams()  # what ipykernel's publisher does first
        shown.append(obj)

    monkeypatch.setattr(dashboard, "in_kernel", lambda: True)
    monkeypatch.setattr("IPython.get_ipython", lambda: Shell())
    monkeypatch.setattr("IPython.display.display", display)
    # the kernel's streams, as the dashboard reads them (pytest's capture owns the real sys.stdout)
    monkeypatch.setattr(output, "sys", types.SimpleNamespace(stdout=FakeStream(False), stderr=FakeStream(False)))
    return pub, shown


def test_a_run_over_before_the_widgets_open_shows_its_end_in_one_output(tmp_path, kernel_like, monkeypatch):
    pub, shown = kernel_like
    run = fake_run(2, tmp_path)
    run.step_times = {0: [], 1: []}  # no curve: no matplotlib figure
    run.memory = {0: run.memory[0][:1], 1: run.memory[1][:1]}
    for state in run.ranks.values():  # as a warm cell ends: every rank answered
        state.status, state.exit_code = Status.DONE, 0
    now = time.monotonic()
    monkeypatch.setattr(
        dashboard.time, "monotonic", lambda: now
    )  # the clock stands still: a loaded machine can't pass SHOW_AFTER
    view = dashboard.make_view(run, lambda: None)
    assert isinstance(view, dashboard.LiveView)
    view.update(run)  # within SHOW_AFTER: nothing opened, nothing sent
    assert view.widgets is None and shown == []
    view.finish(run, {"application/x-extra": {"a": 1}})
    ((bundle,),) = [shown]
    assert set(bundle) == {"application/x-extra", "text/html", "text/plain"}, "one output carries it all"
    assert bundle["text/plain"] == dashboard.runview.summary(run)  # what text readers (papermill) keep
    page = bundle["text/html"]
    assert page.startswith("<div class='labkit-dashboard'>") and page.count("<tr class='labkit-rank'") == 2
    assert "labkit-memplot" in page and page.count("<details class='labkit-log'") == 2  # each rank's output
    assert dashboard.t("views.run.status.done") in page
    assert pub.flushes == 0, "nothing was printed: no wait on the kernel's output thread"


def test_a_longer_run_opens_the_live_widgets(tmp_path, kernel_like, monkeypatch):
    pytest.importorskip("ipywidgets")
    pub, shown = kernel_like
    run = fake_run(2, tmp_path)
    view = dashboard.make_view(run, lambda: None)
    monkeypatch.setattr(dashboard.time, "monotonic", lambda: time.monotonic_ns() / 1e9 + dashboard.SHOW_AFTER)
    monkeypatch.setattr(dashboard.WidgetView, "_ui_poller", lambda self: None)
    view.update(run)
    assert view.widgets is not None
    assert "application/vnd.jupyter.widget-view+json" in shown[0]


def test_publish_flushes_when_printed_text_waits(kernel_like, monkeypatch):
    pub, shown = kernel_like
    output.sys.stdout = FakeStream(True)
    output.publish({"text/plain": "x"})
    assert pub.flushes == 1 and shown == [{"text/plain": "x"}]  # printed text goes out before the display
    assert "_flush_streams" not in pub.__dict__, "the publisher is left as it was"
