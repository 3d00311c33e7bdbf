"""labkit's HTML is readable in JupyterLab's light and dark themes: every visible text it renders
has a WCAG AA contrast (4.5:1) against what is behind it, as Chromium computes the colours.

One server: the light theme first, then the theme setting is written dark and the page reloaded,
as a student who picks Settings > Theme > JupyterLab Dark would see it. In each, a notebook shows
the dashboard of a run (both ways it is shown: the live widgets and the one static output of a
short run, built from a Run filled with the messages ranks send, so no rank is started) and a
check box of every status. The kernel must also find the theme for its figures (labkit.views.palette).

    .venv/bin/pytest -m browser tests/browser/test_contrast_browser.py
"""

from __future__ import annotations

import json
import os

import nbformat
import pytest
from jupyterlab_driver import CHROMIUM, Browser, JupyterLab

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

THEMES = {"light": "JupyterLab Light", "dark": "JupyterLab Dark"}
THEME_FILE = os.path.join("@jupyterlab", "apputils-extension", "themes.jupyterlab-settings")
AA_TEXT = 4.5

# the cells: the theme the kernel finds; a run's dashboard (widgets, then the static output); checks
THEME_CELL = 'from labkit.views import palette\nprint("kernel theme:", palette.theme())'
DASHBOARD_CELL = """\
import tempfile, time
from pathlib import Path

from labkit.launch.logs import RankLog
from labkit.launch.run import Run
from labkit.views import dashboard
from labkit.views.output import publish
from labkit.wire.protocol import Msg

folder = Path(tempfile.mkdtemp())
run = Run("run-contrast", 3, "gloo", str(folder))
t0 = time.time()
for r in range(3):
    run.ingest({"t": Msg.HELLO, "rank": r, "time": t0, "pid": 1000 + r})
    for i in range(4):
        run.ingest({"t": Msg.MEM, "rank": r, "time": t0 + i, "rss": (200 + 10 * r + i) * 2**20})
        run.ingest({"t": Msg.STEP, "rank": r, "time": t0 + i, "i": i, "dt": 0.1, "n": 4})
    cats = {"params": 4, "params_unsharded": 8, "grads": 4, "optimizer": 8, "activations": 6, "other": 2}
    run.ingest({"t": Msg.MEMCAT, "rank": r, "step": 1, "phase": "peak", "categories": {c: v * 2**20 for c, v in cats.items()}})
    (folder / f"rank{r}.out").write_text(f"step {r} done\\n")
    (folder / f"rank{r}.err").write_text("a warning on stderr\\n")
    run.logs[r] = RankLog(r, str(folder))
    run.logs[r].poll()
run.ingest({"t": Msg.DONE, "rank": 0})
run.ingest({"t": Msg.ERROR, "rank": 1, "text": "ValueError"})
view = dashboard.WidgetView(run, lambda: None)
view.finish(run)  # as a run's end leaves it: the table, the figures, the tabs, the summary and its figure
publish({"text/html": dashboard.final_html(run), "text/plain": ""})
"""
CHECKS_CELL = """\
from IPython.display import display

from labkit.grading.checks import CheckResult

for status in ("correct", "wrong", "unanswered", "recorded", "deferred"):
    key = {"wrong": "grading.check.crashed", "unanswered": "grading.check.unanswered"}.get(status)
    display(CheckResult("lesson9.contrast", status, 1 if status == "correct" else 0, 1, key, {"error": "ValueError: x"}, "en"))
"""

# Every element under labkit's own containers with text of its own, shown: its colour (SVG text: its
# fill), alpha-blended over the background behind it (the ancestors' backgrounds, composited down to
# the first opaque one, else the page's), and the WCAG ratio of the two.
MEASURE = """sel => {
    const parse = s => {
        let m = s.match(/^color\\(srgb ([\\d.e-]+) ([\\d.e-]+) ([\\d.e-]+)(?: \\/ ([\\d.e-]+))?\\)/);
        if (m) return [m[1] * 255, m[2] * 255, m[3] * 255, m[4] === undefined ? 1 : +m[4]];
        m = s.match(/^rgba?\\(([\\d.]+),? ([\\d.]+),? ([\\d.]+)(?:,? \\/? ?([\\d.]+))?\\)/);
        if (m) return [+m[1], +m[2], +m[3], m[4] === undefined ? 1 : +m[4]];
        return null;  // none, transparent keywords come back as rgba(0, 0, 0, 0)
    };
    const over = (top, below) => [0, 1, 2].map(i => top[3] * top[i] + (1 - top[3]) * below[i]);
    const lum = c => c.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
                      .reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i], 0);
    const pageBack = parse(getComputedStyle(document.body).backgroundColor) || [255, 255, 255, 1];
    const behind = el => {
        const layers = [];
        for (; el; el = el.parentElement) {
            const c = parse(getComputedStyle(el).backgroundColor);
            if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
        }
        let color = pageBack[3] >= 1 ? pageBack.slice(0, 3) : [255, 255, 255];
        if (layers.length && layers[layers.length - 1][3] >= 1) color = layers.pop().slice(0, 3);
        while (layers.length) color = over(layers.pop(), color);
        return color;
    };
    const out = [];
    for (const root of document.querySelectorAll(sel)) {
        for (const el of [root, ...root.querySelectorAll('*')]) {
            const own = [...el.childNodes].filter(n => n.nodeType === 3).map(n => n.textContent).join('').trim();
            if (!own || !el.getClientRects().length) continue;
            const st = getComputedStyle(el);
            if (st.visibility === 'hidden' || st.display === 'none') continue;
            if (el.closest('button:disabled')) continue;  // an inactive control: WCAG exempts it
            const svg = el instanceof SVGElement;
            const ink = parse(svg ? st.fill : st.color);
            if (!ink) continue;
            const back = behind(svg ? el.ownerSVGElement.parentElement : el);
            const fore = over(ink, back);
            const a = lum(fore), b = lum(back);
            out.push({text: own.slice(0, 40), tag: el.tagName.toLowerCase(), cls: String(el.className.baseVal ?? el.className),
                      color: fore.map(Math.round), background: back.map(Math.round),
                      ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)});
        }
    }
    return out;
}"""


def contrast_notebook(folder: str) -> str:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in (THEME_CELL, DASHBOARD_CELL, CHECKS_CELL)]
    path = os.path.join(folder, "contrast.ipynb")
    nbformat.write(nb, path)
    return path


def set_theme(server: JupyterLab, theme: str) -> None:
    """Write the theme setting as JupyterLab saves it; the server reads it on the next page load."""
    path = os.path.join(server.home, "settings", THEME_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"theme": THEMES[theme]}, f)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium); launch/test.sh installs it")
    pytest.importorskip(
        "playwright.sync_api", reason="pip install playwright (the Python package; no browser download)"
    )
    notebook = contrast_notebook(str(tmp_path_factory.mktemp("contrast")))
    lab = JupyterLab([notebook], env={"LABKIT_LANG": "en"})
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("LABKIT_THEME", raising=False)  # the kernel finds the theme from JupyterLab's setting alone
        with lab, Browser(lab.marker, height=2400) as page:
            yield lab, page
    assert lab.outlived == [], "a kernel or chromium outlived the server's shutdown"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_every_text_labkit_renders_has_aa_contrast(server, theme, tmp_path):
    lab, page = server
    set_theme(lab, theme)
    nb = lab.open(page, "contrast.ipynb")
    light = page.evaluate("() => document.body.dataset.jpThemeLight")
    assert light == ("true" if theme == "light" else "false"), f"JupyterLab did not load the {theme} theme"
    for i in range(3):
        nb.run_and_wait(i, timeout=120)
    assert f"kernel theme: {theme}" in nb.output_text(0)  # the figures' look follows the setting
    nb.cell(1).locator(".labkit-dashboard .labkit-membars").first.wait_for(timeout=60_000)
    nb.cell(1).locator(".labkit-dashboard .labkit-stderr").first.wait_for(timeout=60_000)
    nb.cell(2).locator(".labkit-check").nth(4).wait_for(timeout=30_000)
    page.evaluate("() => document.querySelectorAll('.labkit-dashboard details').forEach(d => d.open = true)")
    measured = page.evaluate(MEASURE, ".labkit-dashboard, .labkit-check")
    nb.cell(1).screenshot(path=str(tmp_path / f"dashboard-{theme}.png"))

    kinds = {(m["tag"], m["cls"].split(" ")[0]) for m in measured}
    assert len(measured) >= 40, measured  # the table, the plot's and the bars' text, the logs, 5 checks
    for needed in (
        ("text", "labkit-legend"),
        ("div", "labkit-check"),
        ("span", "labkit-stderr"),
        ("td", "labkit-status"),
    ):
        assert needed in kinds, (needed, sorted(kinds))
    low = [m for m in measured if m["ratio"] < AA_TEXT]
    assert not low, f"{theme}: text under {AA_TEXT}:1\n" + "\n".join(
        f"{m['ratio']:.2f} {m['tag']}.{m['cls']} {m['text']!r} {m['color']} on {m['background']}" for m in low
    )
