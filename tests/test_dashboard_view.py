"""The dashboard's HTML, without a browser: theme colours (JupyterLab's dark theme too), and a
run of more than 8 ranks (a colour each, a legend that wraps, a table that scrolls)."""

from __future__ import annotations

import re
import time

import pytest

from labkit.launch.logs import RankLog
from labkit.launch.run import Run
from labkit.views import dashboard
from labkit.wire.protocol import Msg


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
