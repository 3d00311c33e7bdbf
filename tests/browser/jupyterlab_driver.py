"""JupyterLab in a temporary home, driven by Debian's Chromium through Playwright.

    with JupyterLab([notebook_path]) as lab, Browser(lab.marker) as page:
        nb = lab.open(page, "notebook.ipynb")
        nb.run_and_wait(2)
        print(nb.rank_rows(2), nb.output_text(2))

Everything the server writes (config, settings, runtime files, the notebook copies)
lives in one temporary folder, so a test never touches the user's Jupyter setup
or the repository's notebooks. The server, its kernels and the ranks they start
carry a marker in their environment: after the test, ``leftovers()`` finds any
of them still alive.
"""

from __future__ import annotations

import glob
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any

from labkit.testing import processes

CHROMIUM = "/usr/bin/chromium"
# headless and quiet: no GPU, no update checks, no sync, no first-run dialogs, no network but 127.0.0.1
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
MARKER = "LABKIT_BROWSER_TEST"
START_TIMEOUT = 90.0  # seconds; the server and the kernel start slowly on a busy 2-core machine

# JupyterLab user settings: every cell in the DOM (no virtual scrolling, so a cell far down
# can be found), and no "Jupyter news" or update prompt over the notebook.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
}

# the language-server extension is of no use here and slows the start down
SERVER_CONFIG = {"ServerApp": {"jpserver_extensions": {"jupyter_lsp": False}}}


def marked_processes(marker: str) -> list[int]:
    """PIDs of our processes whose environment holds ``LABKIT_BROWSER_TEST=marker``."""
    return processes.with_env(MARKER, marker)


class JupyterLab:
    """A JupyterLab server on 127.0.0.1 with a random token, serving copies of ``notebooks``.

    ``env`` is added to the environment of the server, so of its kernels and their ranks.
    """

    def __init__(self, notebooks: list[str], env: dict[str, str] | None = None) -> None:
        self.extra_env = dict(env or {})
        self.home = tempfile.mkdtemp(prefix="labkit-browser-")
        self.root = os.path.join(self.home, "root")
        os.makedirs(self.root)
        for path in notebooks:
            shutil.copy(path, self.root)
        self.token = secrets.token_hex(24)
        self.marker = secrets.token_hex(8)
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.outlived: list[int] = []  # PIDs that stop() found alive after the shutdown, and killed

    def env(self) -> dict[str, str]:
        h = self.home
        env = dict(os.environ)
        env.update(
            JUPYTER_PREFER_ENV_PATH="1",  # the kernel is this venv's python, with labkit in it
            JUPYTER_CONFIG_DIR=f"{h}/config",
            JUPYTER_DATA_DIR=f"{h}/data",
            JUPYTER_RUNTIME_DIR=f"{h}/runtime",
            JUPYTERLAB_SETTINGS_DIR=f"{h}/settings",
            JUPYTERLAB_WORKSPACES_DIR=f"{h}/workspaces",
            IPYTHONDIR=f"{h}/ipython",
            PYTHONUNBUFFERED="1",
        )
        env.update(self.extra_env)
        env[MARKER] = self.marker
        return env

    def _write_settings(self) -> None:
        os.makedirs(os.path.join(self.home, "config"))
        with open(os.path.join(self.home, "config", "jupyter_server_config.json"), "w") as f:
            json.dump(SERVER_CONFIG, f)
        for rel, values in LAB_SETTINGS.items():
            path = os.path.join(self.home, "settings", rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                json.dump(values, f)

    def __enter__(self) -> JupyterLab:
        self._write_settings()
        cmd = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            "--ServerApp.port=0",  # a free port; read back from the runtime file
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            "--ServerApp.terminals_enabled=False",
            "--LabApp.news_url=None",  # no "Jupyter news" prompt, no fetch
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
        if os.geteuid() == 0:  # CI containers run as root; the server refuses without this
            cmd.append("--allow-root")
        self.log_path = os.path.join(self.home, "server.log")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                cmd, env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        try:
            self.url = self._wait_started()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_started(self) -> str:
        pattern = os.path.join(self.home, "runtime", f"jpserver-{self.proc.pid}.json")
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with code {self.proc.returncode}:\n{self.log_tail()}")
            for path in glob.glob(pattern):
                try:
                    with open(path) as f:
                        info = json.load(f)
                except (OSError, ValueError):  # written but not yet complete
                    continue
                if self._answers(info["url"]):
                    return info["url"]
            time.sleep(0.2)
        raise TimeoutError(f"jupyter lab did not start in {START_TIMEOUT:.0f} s:\n{self.log_tail()}")

    def _answers(self, url: str) -> bool:
        try:
            self.api(url, "api/status")
            return True
        except OSError:
            return False

    def api(self, url: str, path: str, method: str = "GET") -> Any:
        req = urllib.request.Request(url + path, method=method, headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def log_tail(self, chars: int = 4000) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Shut the server down (its kernels with it), then kill whatever still carries our marker."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.api(self.url, "api/shutdown", method="POST")
            except OSError:
                pass
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        deadline = time.monotonic() + 5  # a kernel's children (torchrun, ranks) may end just after it
        while marked_processes(self.marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.outlived = marked_processes(self.marker)  # should be empty; the test checks it
        for pid in self.outlived:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self.home, ignore_errors=True)

    def leftovers(self) -> list[int]:
        """Processes started by this server (kernels, torchrun, ranks) still alive."""
        return marked_processes(self.marker)

    def open(self, page: Any, name: str) -> Notebook:
        """Open ``name`` (a file in the root) in ``page``, and wait for its kernel."""
        # ?reset: a fresh workspace, so the notebook opened before is not restored beside this one
        page.goto(f"{self.url}lab/tree/{name}?reset&token={self.token}")
        return Notebook(page, os.path.join(self.root, name))


class Notebook:
    """One open notebook tab: run cells by index, read their prompts and outputs."""

    def __init__(self, page: Any, path: str) -> None:
        import nbformat

        self.page = page
        self.name = os.path.basename(path)
        self.cells_src = nbformat.read(path, as_version=4).cells
        page.wait_for_function(
            "n => document.querySelectorAll('.jp-Notebook .jp-Cell').length === n",
            arg=len(self.cells_src),
            timeout=START_TIMEOUT * 1000,
        )
        # the kernel is up once the status bar says so (before that, Shift+Enter is dropped)
        page.locator(".jp-StatusBar-TextItem", has_text="| Idle").first.wait_for(timeout=START_TIMEOUT * 1000)

    def index(self, cell_id: str) -> int:
        return next(i for i, c in enumerate(self.cells_src) if c.get("id") == cell_id)

    def cell(self, i: int) -> Any:
        return self.page.locator(".jp-Notebook .jp-Cell").nth(i)

    def prompt(self, i: int) -> str:
        return self.cell(i).locator(".jp-InputPrompt").inner_text().strip()

    def set_source(self, i: int, text: str) -> None:
        """Replace the code of cell ``i``, typed into its editor (no auto-indent, no auto-close)."""
        self.cell(i).locator(".jp-InputArea-editor").click()
        self.page.keyboard.press("Control+A")
        self.page.keyboard.insert_text(text)
        self.page.keyboard.press("Escape")  # back to command mode

    def run(self, i: int) -> None:
        """Select cell ``i`` and press Shift+Enter, as a student does; returns once it started.

        The prompt is marked first: a cell that runs quicker than a frame ([*] never drawn) in a kernel
        whose count is where the saved notebook's was (a restarted kernel's first cell, [1] again)
        would otherwise leave the prompt as it was. JupyterLab rewrites the prompt at every run."""
        before = "[run?]:"
        self.page.evaluate(
            "([i, mark]) => { document.querySelectorAll('.jp-Notebook .jp-Cell')[i]"
            ".querySelector('.jp-InputPrompt').textContent = mark; }",
            [i, before],
        )
        self.cell(i).locator(".jp-InputArea-editor").click()
        self.page.keyboard.press("Shift+Enter")
        self.page.wait_for_function(
            "([i, before]) => document.querySelectorAll('.jp-Notebook .jp-Cell')[i]"
            ".querySelector('.jp-InputPrompt').textContent.trim() !== before",
            arg=[i, before],
            timeout=10_000,
        )

    def running(self, i: int) -> bool:
        return "*" in self.prompt(i)

    def wait_done(self, i: int, timeout: float = 120.0) -> None:
        self.page.wait_for_function(
            "i => /\\[\\d+\\]/.test(document.querySelectorAll('.jp-Notebook .jp-Cell')[i]"
            ".querySelector('.jp-InputPrompt').textContent)",
            arg=i,
            timeout=timeout * 1000,
        )

    def run_and_wait(self, i: int, timeout: float = 120.0) -> None:
        self.run(i)
        self.wait_done(i, timeout)

    def output_text(self, i: int) -> str:
        return self.cell(i).locator(".jp-OutputArea").inner_text()

    def wait_rows(self, i: int, timeout: float = 60.0) -> None:
        """Until the dashboard of cell ``i`` has drawn its table (the first rows appear)."""
        self.cell(i).locator("tr.labkit-rank").first.wait_for(timeout=timeout * 1000)

    def rank_rows(self, i: int) -> list[dict[str, str]]:
        """The dashboard's table in cell ``i``, one dict per ``tr.labkit-rank``."""
        return (
            self.cell(i)
            .locator("tr.labkit-rank")
            .evaluate_all(
                """rows => rows.map(r => {
                const cell = c => (r.querySelector('.labkit-' + c) || {textContent: ''}).textContent.trim();
                return {rank: r.dataset.rank, status: cell('status'), mem: cell('mem'), peak: cell('peak'),
                        step: cell('step'), steps: cell('steps'), log: cell('log')};
            })"""
            )
        )


class Browser:
    """Debian's Chromium, headless, one page, closed on exit.

    It carries the server's ``marker`` too, so a Chromium left running shows up in ``leftovers()``.
    """

    def __init__(self, marker: str, width: int = 1280, height: int = 1000) -> None:
        self.marker, self.size = marker, {"width": width, "height": height}

    def __enter__(self) -> Any:
        from playwright.sync_api import sync_playwright

        self._pw = sync_playwright().start()
        try:
            env = dict(os.environ)
            env[MARKER] = self.marker
            self._browser = self._pw.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, env=env, timeout=START_TIMEOUT * 1000
            )
            self.page = self._browser.new_page(viewport=self.size)
            # leaving a notebook with edits asks "leave the page?": yes (edits only touch the copy)
            self.page.on("dialog", lambda dialog: dialog.accept())
        except BaseException:
            self._pw.stop()
            raise
        return self.page

    def __exit__(self, *exc: object) -> None:
        try:
            self._browser.close()
        finally:
            self._pw.stop()
