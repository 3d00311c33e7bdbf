"""The live dashboard in real JupyterLab and Chromium: it renders, updates, fails and stops.

One server and one browser serve the whole module (starting them is most of the
cost). The first test opens lesson 0 (a copy of ``notebooks/en/00_setup.ipynb``)
and runs its dashboard cell; the others run cells of ``dashboard_fixture.ipynb``.
Cells are run as a student runs them, with a click and Shift+Enter, and the
dashboard is read from the DOM.

    .venv/bin/pytest -m browser tests/browser
    LABKIT_UPDATE_SCREENSHOTS=1 .venv/bin/pytest -m browser tests/browser   # also refresh docs/screenshots/
"""

from __future__ import annotations

import os
import re
import signal
import time

import pytest
from jupyterlab_driver import CHROMIUM, Browser, JupyterLab, Notebook, marked_processes

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LESSON = os.path.join(ROOT, "notebooks", "en", "00_setup.ipynb")
FIXTURE = os.path.join(HERE, "dashboard_fixture.ipynb")
SCREENSHOTS = os.path.join(ROOT, "docs", "screenshots")
LESSON_STEPS = 10  # the lesson's parameter `steps`, raised from 3 so that the run lasts ~5 s

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]  # a busy 2-core machine is slow


def steps_done(row: dict[str, str]) -> int:
    """The steps column: "7", or "7/10, 2 s left" inside rank.steps(n)."""
    return int(row["steps"].split("/")[0] or 0)


def t_en(key: str, **fields: object) -> str:
    from labkit.i18n import t

    return t(key, lang="en", **fields)


class Lab:
    """The server, the browser's page, and the notebook now open in it."""

    def __init__(self, server: JupyterLab, page, shots: str) -> None:
        self.server, self.page, self.shots = server, page, shots
        self.nb: Notebook | None = None

    def open(self, path: str, setup) -> Notebook:
        """Open the copy of ``path`` (unless it is open already) and run ``setup(nb)`` once."""
        name = os.path.basename(path)
        if self.nb is None or self.nb.name != name:
            self.nb = self.server.open(self.page, name)
            setup(self.nb)
        return self.nb

    def screenshot(self, locator, name: str) -> str:
        os.makedirs(self.shots, exist_ok=True)
        path = os.path.join(self.shots, name)
        locator.screenshot(path=path, animations="disabled")
        with open(path, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        return path


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium); launch/test.sh installs it")
    pytest.importorskip(
        "playwright.sync_api", reason="pip install playwright (the Python package; no browser download)"
    )
    shots = SCREENSHOTS if os.environ.get("LABKIT_UPDATE_SCREENSHOTS") == "1" else str(tmp_path_factory.mktemp("shots"))
    server = JupyterLab([LESSON, FIXTURE], env={"LABKIT_LANG": "en"})
    with server:
        with Browser(server.marker, height=1800) as page:  # tall: a whole cell fits in a screenshot
            yield Lab(server, page, shots)
        assert not [p for p in server.leftovers() if "chrom" in _cmdline(p)], "chromium is still running"
    assert server.outlived == [], "a kernel, a rank or chromium outlived the server's shutdown"
    assert marked_processes(server.marker) == []


@pytest.fixture(autouse=True)
def no_rank_left(lab):
    """After each test: no rank (nor torchrun) of this server's kernels is alive."""
    yield
    left = ranks_left(lab.server)
    for pid in left:  # so that the next test starts clean even when this one failed
        os.kill(pid, signal.SIGKILL)
    assert left == [], "rank processes outlived the cell"


def ranks_left(server: JupyterLab, wait: float = 10.0) -> list[int]:
    # find_run_processes(None) sees every labkit rank of this user; keep those our server started
    # (other test sessions may run ranks on the same machine)
    from labkit.launch.group import find_run_processes

    deadline = time.monotonic() + wait
    while True:
        ours = set(server.leftovers())
        left = [p for p in find_run_processes(None) if p in ours]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def watch(nb: Notebook, i: int, timeout: float = 180.0, on_sample=None) -> list[list[dict[str, str]]]:
    """Read the rank table of cell ``i`` about 4 times a second until the cell finishes."""
    nb.wait_rows(i)
    samples = []
    deadline = time.monotonic() + timeout
    while nb.running(i):
        assert time.monotonic() < deadline, f"cell {i} still running after {timeout:.0f} s"
        rows = nb.rank_rows(i)
        samples.append(rows)
        if on_sample is not None:
            on_sample(rows)
        time.sleep(0.2)
    nb.wait_done(i, timeout=10)
    return samples


# -- the notebooks ----------------------------------------------------------------


def lesson_cells(nb: Notebook) -> dict[str, int]:
    """Lesson 0's parameters cell, its `%load_ext labkit` cell, and its dashboard cell (steps in a loop)."""
    code = [(i, c.source) for i, c in enumerate(nb.cells_src) if c.cell_type == "code"]
    found = {
        "params": next((i for i, c in enumerate(nb.cells_src) if "parameters" in c.metadata.get("tags", [])), None),
        "load": next((i for i, src in code if "%load_ext labkit" in src), None),
        "dashboard": next((i for i, src in code if src.startswith("%%torchrun") and "rank.steps(" in src), None),
    }
    missing = [k for k, v in found.items() if v is None]
    assert not missing, f"{LESSON} has no {missing} cell: this test runs the lesson's own dashboard cell"
    return found


def lesson_setup(nb: Notebook) -> None:
    cells = lesson_cells(nb)
    params = nb.cells_src[cells["params"]].source
    raised = re.sub(r"(?m)^steps = \d+$", f"steps = {LESSON_STEPS}", params)
    assert raised != params, f"the lesson's parameters cell sets no `steps = N`:\n{params}"
    nb.set_source(cells["params"], raised)
    nb.run_and_wait(cells["params"], timeout=60)
    nb.run_and_wait(cells["load"], timeout=120)


def fixture_setup(nb: Notebook) -> None:
    nb.run_and_wait(nb.index("load"), timeout=120)


# -- the tests --------------------------------------------------------------------


def test_lesson_dashboard_shows_every_rank_updates_live_and_ends_with_summary(lab):
    nb = lab.open(LESSON, lesson_setup)
    cells = lesson_cells(nb)
    i = cells["dashboard"]
    # a `%%torchrun -n 2` run: the cell says `-n $nproc`, the parameters cell `nproc = 2`
    assert nb.cells_src[i].source.startswith("%%torchrun -n $nproc")
    assert re.search(r"(?m)^nproc = 2$", nb.cells_src[cells["params"]].source)
    nb.run(i)
    running = t_en("views.run.status.running")
    shot = []

    def mid_run_screenshot(rows):
        steps = [steps_done(r) for r in rows]
        if not shot and all(r["status"] == running for r in rows) and min(steps) >= 3:
            shot.append(lab.screenshot(nb.cell(i), "dashboard-running.png"))

    samples = watch(nb, i, on_sample=mid_run_screenshot)

    assert samples, "the dashboard was never seen while the cell ran"
    assert all([r["rank"] for r in rows] == ["0", "1"] for rows in samples), "one row per rank, in order"
    for r in (0, 1):
        live = [rows[r] for rows in samples if rows[r]["status"] == running]
        mems = {row["mem"] for row in live if row["mem"]}
        steps = {row["step"] for row in live if row["step"]}
        assert len(mems) >= 2, f"rank {r}: memory never changed while running: {mems}; seen: {samples[::5]}"
        assert len(steps) >= 2, f"rank {r}: the last step never changed while running: {steps}; seen: {samples[::5]}"
    assert shot, f"no moment with both ranks running and 3 steps done: nothing to screenshot; seen: {samples[::5]}"

    final = nb.rank_rows(i)
    assert [r["status"] for r in final] == [t_en("views.run.status.done")] * 2, final
    assert [r["steps"] for r in final] == [f"{LESSON_STEPS}/{LESSON_STEPS}"] * 2, final
    assert all(f"step {LESSON_STEPS - 1}" in r["log"] for r in final), final
    out = nb.output_text(i)
    assert re.search(r"Run run-\S+: 2 ranks, backend gloo, [\d.]+ s, all ranks finished", out), out
    img = nb.cell(i).locator(".jp-OutputArea-output img").last  # the static summary figure
    img.wait_for(timeout=10_000)
    assert img.evaluate("el => el.complete && el.naturalWidth > 200 && el.naturalHeight > 100")
    assert nb.cell(i).locator(".labkit-memplot polyline").count() == 2, "one memory line per rank"


def test_rank_error_is_shown_naming_rank_1(lab):
    nb = lab.open(FIXTURE, fixture_setup)
    i = nb.index("fail")
    nb.run(i)
    watch(nb, i)

    rows = nb.rank_rows(i)
    assert rows[1]["status"].startswith(t_en("views.run.status.failed")), (rows, nb.output_text(i))
    assert not rows[0]["status"].startswith(t_en("views.run.status.failed")), "rank 0 only stopped because of rank 1"
    error = nb.cell(i).locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").last
    text = error.inner_text()
    line = next(n for n, x in enumerate(nb.cells_src[i].source.splitlines(), 1) if "raise ValueError" in x)
    assert f"RankError: rank 1 failed at step 2 (cell line {line})" in text, text  # the line as the cell shows it
    assert "ValueError: rank 1 gave up on purpose" in text, text
    lab.screenshot(nb.cell(i), "dashboard-failed.png")


def test_stop_button_ends_a_long_run_and_leaves_no_rank(lab):
    nb = lab.open(FIXTURE, fixture_setup)
    i = nb.index("long")
    nb.run(i)
    cell = nb.cell(i)
    nb.wait_rows(i)
    deadline = time.monotonic() + 120
    while min(steps_done(r) for r in nb.rank_rows(i)) < 3:  # both ranks well into the loop
        assert nb.running(i) and time.monotonic() < deadline, nb.rank_rows(i)
        time.sleep(0.2)
    assert ranks_left(lab.server, wait=0), "the ranks should be alive before the click"

    clicked = time.monotonic()
    cell.locator("button.labkit-stop").click()
    nb.wait_done(i, timeout=30)
    took = time.monotonic() - clicked

    print(f"Stop: the cell ended {took:.1f} s after the click")
    assert took < 15, f"the run took {took:.1f} s to stop"
    assert ranks_left(lab.server, wait=5) == [], "a rank survived the Stop button"
    rows = nb.rank_rows(i)
    assert [r["status"] for r in rows] == [t_en("views.run.status.stopped")] * 2, rows
    assert steps_done(rows[0]) < 1000
    assert "RunStopped: " + t_en("launch.stopped") in nb.output_text(i)
    assert cell.locator("button.labkit-stop").is_disabled()

    # the kernel is free again and saw the same run
    j = nb.index("after_stop")
    nb.run_and_wait(j, timeout=30)
    assert "after stop: ['stopped', 'stopped']" in nb.output_text(j)


def test_memory_breakdown_and_prefetch_timeline_render(lab):
    nb = lab.open(FIXTURE, fixture_setup)
    i = nb.index("fsdp")
    nb.run(i)
    watch(nb, i, timeout=300)
    assert [r["status"] for r in nb.rank_rows(i)] == [t_en("views.run.status.done")] * 2, nb.output_text(i)
    bars = nb.cell(i).locator(".labkit-dashboard svg.labkit-membars")  # the dashboard's own per-category bars
    assert bars.count() == 1 and bars.locator("rect").count() > 4, nb.output_text(i)
    lab.screenshot(nb.cell(i).locator(".labkit-dashboard"), "dashboard-breakdown.png")

    j = nb.index("breakdown")
    nb.run_and_wait(j, timeout=60)
    table = nb.cell(j).locator(".jp-OutputArea-output table")
    assert table.count() == 1, nb.output_text(j)
    text = table.inner_text()
    for phase in ("after forward", "after backward", "peak"):
        assert phase in text, text
    assert_figure(nb, j)
    lab.screenshot(nb.cell(j).locator(".jp-OutputArea"), "memory-breakdown.png")

    k = nb.index("timeline")
    nb.run_and_wait(k, timeout=60)
    assert_figure(nb, k)
    lab.screenshot(nb.cell(k).locator(".jp-OutputArea"), "prefetch-timeline.png")


def assert_figure(nb: Notebook, i: int) -> None:
    imgs = nb.cell(i).locator(".jp-OutputArea-output img")
    assert imgs.count() == 1, f"one figure expected in cell {i}: {nb.output_text(i)}"
    assert imgs.first.evaluate("el => el.complete && el.naturalWidth > 200 && el.naturalHeight > 100")
