"""Self-study in real JupyterLab and Chromium: ``bash launch/lab.sh`` on a fresh home, lesson 0 done as a
learner would, and the work found again after the lab restarts.

The learner answers two questions in the student edition (no ranks are started: a formula and the
multiple-choice question), runs ``labkit.progress()`` and sees them counted, asks for a solution they
have not tried (refused) and for one they have (shown), saves, stops the lab and starts it again: the
workspace is not rebuilt, their answers are still in it, and a new kernel's ``labkit.progress()`` reads them.

    .venv/bin/pytest -m browser tests/browser/test_selfstudy_browser.py
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from jupyterlab_driver import CHROMIUM, LAB_SETTINGS, MARKER, START_TIMEOUT, Browser, Notebook, marked_processes

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "launch" / "lab.sh"
SUM = "def allreduce_total(world_size):\n    return world_size * (world_size + 1) / 2"

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabSh:
    """``bash launch/lab.sh`` in a home of its own; started on enter, its session stopped on exit."""

    def __init__(self, home: Path, marker: str) -> None:
        self.home, self.token, self.port = home, secrets.token_hex(16), 0
        self.why = "no answer yet"
        self.env = {
            **os.environ,
            "HOME": str(home),
            "PYTHONPATH": str(ROOT),  # this checkout's labkit, in lab.sh's helper and in the kernel
            "LABKIT_LANG": "en",
            "JUPYTER_TOKEN": self.token,
            "JUPYTER_CONFIG_DIR": str(home / "config"),
            "JUPYTER_DATA_DIR": str(home / "data"),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
            "IPYTHONDIR": str(home / "ipython"),
            MARKER: marker,
        }
        self.env.pop("LABKIT_WORKSPACE", None)
        self.env.pop("LABKIT_LAB_DIR", None)
        for rel, values in LAB_SETTINGS.items():
            path = home / "settings" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def __enter__(self) -> LabSh:
        self.port = free_port()  # a port of its own each start: the last one's may still be closing
        self.env["LABKIT_LAB_PORT"] = str(self.port)
        self.log = self.home / f"lab-{time.monotonic_ns()}.log"
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                ["bash", str(LAB)], env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + START_TIMEOUT * 2  # the first start builds the workspace
        while time.monotonic() < deadline and self.proc.poll() is None:
            if re.search(rf"the lab is at http://127\.0\.0\.1:{self.port}/lab", self.text()) and self._answers():
                return self
            time.sleep(0.5)
        self.stop()
        pytest.fail(f"lab.sh did not start ({self.why}):\n" + self.text()[-3000:])

    def _answers(self) -> bool:
        import urllib.request

        try:
            urllib.request.urlopen(f"{self.url}api/status?token={self.token}", timeout=5).close()
            return True
        except OSError as e:
            self.why = f"{type(e).__name__}: {e}"
            return False

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(timeout=wait)
                return
            except ProcessLookupError:
                return
            except subprocess.TimeoutExpired:
                continue

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def open(self, page, rel: str) -> Notebook:
        page.goto(f"{self.url}lab/tree/{rel}?reset&token={self.token}")
        return Notebook(page, str(self.home / "fsdp-labkit-work" / rel))


def run_new_cell(nb: Notebook, code: str) -> str:
    """A cell added at the notebook's end, ``code`` typed in and run with Shift+Enter: its output."""
    n = nb.page.locator(".jp-Notebook .jp-Cell").count()
    nb.cell(n - 1).click()
    nb.page.keyboard.press("Escape")
    nb.page.keyboard.press("b")  # a new cell below, selected
    nb.page.wait_for_function("n => document.querySelectorAll('.jp-Notebook .jp-Cell').length === n", arg=n + 1)
    nb.page.keyboard.press("Enter")
    nb.page.keyboard.insert_text(code)
    nb.page.keyboard.press("Shift+Enter")
    nb.wait_done(n, timeout=120)
    return nb.output_text(n)


def cell_index(path: Path, start: str) -> int:
    """The index of the notebook's first cell whose source starts with ``start`` (the lessons' cells move)."""
    cells = json.loads(path.read_text())["cells"]
    return next(i for i, c in enumerate(cells) if "".join(c["source"]).startswith(start))


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed")
def test_a_learner_does_lesson0_in_their_workspace_and_finds_it_after_a_restart(tmp_path):
    marker = secrets.token_hex(8)
    home = tmp_path / "home"
    home.mkdir()
    ws = home / "fsdp-labkit-work"
    lab = LabSh(home, marker)
    mine = ws / "en" / "00_setup.ipynb"
    with lab, Browser(marker) as page:
        assert "your workspace is" in lab.text()
        assert (ws / "ro" / "00_setup.ipynb").is_file() and (ws / ".labkit" / "solutions.json").is_file()
        assert "raise NotImplementedError()" in mine.read_text()  # the student edition, no solution in it
        formula, check = (
            cell_index(mine, "def allreduce_total("),
            cell_index(mine, 'labkit.check("lesson0.allreduce_sum"'),
        )
        mcq = cell_index(mine, 'labkit.check("lesson0.step_gradient"')
        nb = lab.open(page, "en/00_setup.ipynb")
        nb.run_and_wait(3)  # %load_ext labkit
        nb.set_source(formula, SUM)  # a formula: the lesson's runs between need ranks, the learner skips them
        nb.run_and_wait(formula)
        nb.run_and_wait(check)
        assert "lesson0.allreduce_sum" in nb.output_text(check)
        nb.set_source(mcq - 1, 'answer = "b"')
        nb.run_and_wait(mcq - 1)
        nb.run_and_wait(mcq)

        table = run_new_cell(nb, "labkit.progress()")
        row = next(line.split() for line in table.splitlines() if line.split()[:1] == ["lesson0"])
        assert row[1:3] == ["1", "1"], table  # one correct, one multiple choice answered
        refused = run_new_cell(nb, 'labkit.solution("lesson0.peak_ratio")')
        assert "Try lesson0.peak_ratio first" in refused
        shown = run_new_cell(nb, 'labkit.solution("lesson0.step_gradient")')
        assert 'answer = "b"' in shown

        page.keyboard.press("Control+s")
        deadline = time.monotonic() + 30
        while "application/vnd.labkit.check+json" not in mine.read_text() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert "application/vnd.labkit.check+json" in mine.read_text()
    kept = mine.read_text()
    assert "world_size * (world_size + 1) / 2" in kept and 'answer = \\"b\\"' in kept

    with lab, Browser(marker) as page:  # the lab again: the workspace kept, nothing rebuilt over it
        assert "your workspace is" not in lab.text() and "newer edition" not in lab.text()
        assert mine.read_text() == kept
        nb = lab.open(page, "en/00_setup.ipynb")
        assert "world_size * (world_size + 1) / 2" in nb.cell(formula).inner_text()
        nb.run_and_wait(3)
        table = run_new_cell(nb, "labkit.progress()")  # a new kernel: read from the saved notebook
        row = next(line.split() for line in table.splitlines() if line.split()[:1] == ["lesson0"])
        assert row[1:3] == ["1", "1"], table
    deadline = time.monotonic() + 10
    while marked_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marked_processes(marker) == []
