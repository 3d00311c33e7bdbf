"""Students in a class JupyterHub, driven in Debian's Chromium: log in, pick a language, open a
lesson, answer its exercises, run every cell, save a copy into ``submit/``.

    with Chromium(marker) as browser:
        ana = Student(browser, hub.url, "lkhub-ana", password, "ro")
        ana.login()                     # the hub's login page, then the language form
        nb = ana.open_lesson("00_setup.ipynb", home)
        ana.answer(nb, solutions)       # types each exercise's solution into its cell
        ana.run_all()                   # Run > Run All Cells, as a student does

Each student has a browser context of their own (cookies apart), so two are logged in at once.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from jupyterlab_driver import CHROMIUM, CHROMIUM_ARGS, MARKER, START_TIMEOUT, Notebook


class Chromium:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __enter__(self) -> Any:
        from playwright.sync_api import sync_playwright

        self._pw = sync_playwright().start()
        env = {**os.environ, MARKER: self.marker}
        try:
            self.browser = self._pw.chromium.launch(
                executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, env=env, timeout=START_TIMEOUT * 1000
            )
        except BaseException:
            self._pw.stop()
            raise
        return self.browser

    def __exit__(self, *exc: object) -> None:
        try:
            self.browser.close()
        finally:
            self._pw.stop()


class Student:
    def __init__(self, browser: Any, hub_url: str, name: str, password: str, lang: str) -> None:
        self.hub_url, self.name, self.password, self.lang = hub_url, name, password, lang
        self.context = browser.new_context(viewport={"width": 1280, "height": 1600})
        self.page = self.context.new_page()
        self.page.on("dialog", lambda dialog: dialog.accept())
        self.nb: Notebook | None = None

    def login(self, shot: Any = None) -> None:
        """The hub's login form, then the spawn form's language; returns as the server starts
        (``wait_server`` waits for JupyterLab: two students' servers start at once)."""
        page = self.page
        page.goto(f"{self.hub_url}/hub/login")
        page.fill("#username_input", self.name)
        page.fill("#password_input", self.password)
        if shot:
            shot(page, "hub-login.png")
        page.click("#login_submit")
        page.wait_for_selector("#labkit-lang", timeout=60_000)  # the language form
        page.select_option("#labkit-lang", self.lang)
        if shot:
            shot(page, "hub-language.png")
        page.get_by_role("button", name="Start").click()

    def wait_server(self) -> None:
        self.page.wait_for_url(f"**/user/{self.name}/lab/**", timeout=START_TIMEOUT * 2000)

    def goto_lesson(self, name: str) -> None:
        """Open the lesson's URL (``open_lesson`` then waits for its cells and kernel)."""
        self.page.goto(f"{self.hub_url}/user/{self.name}/lab/tree/fsdp-course/{self.lang}/{name}?reset")

    def open_lesson(self, name: str, home: str) -> Notebook:
        self.nb = Notebook(self.page, os.path.join(home, "fsdp-course", self.lang, name))
        return self.nb

    def answer(self, solutions: dict[str, str]) -> int:
        """Type the solution of every exercise cell (by id) over its stub; how many were answered."""
        done = 0
        for i, cell in enumerate(self.nb.cells_src):
            if cell.get("id") in solutions and "NotImplementedError" in "".join(cell.source):
                self.nb.set_source(i, solutions[cell["id"]])
                done += 1
        return done

    def run_all(self) -> None:
        page = self.page
        page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
        page.get_by_role("menuitem", name="Run", exact=True).click()  # the pack leaves the menu's own name
        # a Romanian student's JupyterLab speaks Romanian (the language pack, chosen at first login)
        page.get_by_role("menuitem", name=re.compile(r"^(Run All Cells|Execută Toate Celulele)$")).click()

    def done(self) -> bool:
        """Every code cell ran (a number in its prompt) and none is running."""
        return self.page.evaluate(
            """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
                 .every(p => /\\[\\d+\\]/.test(p.textContent))"""
        )

    def run_new_cell(self, code: str, timeout: float = 180) -> str:
        """A cell of the student's own at the end of the notebook, run; its output's text."""
        page = self.page
        cells = page.locator(".jp-Notebook .jp-Cell")
        cells.last.click()
        page.keyboard.press("Escape")
        page.keyboard.press("b")  # a new cell below, as a student inserts one
        index = cells.count() - 1
        page.keyboard.press("Enter")
        page.keyboard.insert_text(code)
        page.keyboard.press("Shift+Enter")
        self.nb.wait_done(index, timeout)
        return self.nb.output_text(index)

    def save_as(self, path: str) -> None:
        """File > Save Notebook As…, the new path typed in the dialog, as a student submits."""
        page = self.page
        page.get_by_role("menuitem", name="File", exact=True).click()
        page.get_by_role("menuitem", name="Save Notebook As…").click()
        field = page.locator(".jp-Dialog input").first
        field.fill(path)
        page.keyboard.press("Enter")
        page.wait_for_function("p => document.title.includes(p)", arg=os.path.basename(path), timeout=30_000)


def wait_all(students: list[Student], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    pending = list(students)
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"cells still running for {[s.name for s in pending]}")
        pending = [s for s in pending if not s.done()]
        time.sleep(1.0)
