"""A class's whole cycle on the live hub (issue 48): hand in, collect, grade, feedback, the LMS's grades.

``launch/hub.sh --course course.toml`` is started for real, the course file alone saying who logs in:
three students (ana reads Romanian) and an instructor, and two lessons of the tests' fixture, one due
tomorrow and one whose deadline passed an hour ago. In Chromium each student opens their notebook in
JupyterLab and runs ``labkit.submit()`` in a cell of it: the kernel's own hub token reaches the exchange
service through the proxy, and the real JupyterHub says whose it is. ana and ben hand in the first
lesson on time (ben with a wrong answer), cat both, the second a day late. The instructor collects,
grades (on this machine, and as a Slurm array on the suite's live Slurm), releases the feedback; each student
logs in again and reads their own report in ``~/feedback``, and the Moodle and Canvas exports hold the
roster's ids, the points and the late marks.

    sudo .venv/bin/python -m pytest -m browser tests/browser/test_class_cycle.py

Measured on the 2-core machine under load: 171 s for both tests (hub 26 s, three servers 27 s, four
hand-ins 31 s, local grading 20 s, the Slurm array 23 s), so the Slurm half stays in the suite.
"""

from __future__ import annotations

import csv
import io
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hub_driver import Chromium, Student
from jupyterlab_driver import CHROMIUM

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "grading"
QUESTIONS = FIXTURES / "fixture_questions.py"
TIMEOUT = 60  # a fixture notebook runs in seconds; the machine may be busy

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(600)]

# who hands in what: (student, language, {lesson: wrong answer or None})
CLASS = {
    "lkhub-ana": ("ro", {"fixture": None}),
    "lkhub-ben": ("en", {"fixture": "bytes_per_param = 12"}),
    "lkhub-cat": ("en", {"fixture": None, "extra": None}),
}
# what the course's gradebook must say: {student: {lesson: (points, late days or None when not handed in)}}
# fixture is worth 10 points, extra 20; ben got 3 of the fixture's 4 question points; cat's extra is one
# (started) day late, a quarter off
EXPECTED = {
    "lkhub-ana": {"fixture": (10.0, 0), "extra": (0.0, None)},
    "lkhub-ben": {"fixture": (7.5, 0), "extra": (0.0, None)},
    "lkhub-cat": {"fixture": (10.0, 0), "extra": (15.0, 1)},
}
SIS = {"lkhub-ana": "S-0001", "lkhub-ben": "S-0002", "lkhub-cat": "S-0003"}


def course_text(now: datetime) -> str:
    students = "".join(
        f'[[students]]\nid = "{sid}"\nname = "{sid.title()}"\nemail = "{sid}@uni.example"\n'
        f'sis_id = "{SIS[sid]}"\nlanguage = "{lang}"\nsection = "A"\n\n'
        for sid, (lang, _) in CLASS.items()
    )
    return f"""[course]
name = "FSDP, the tests' class"
locale = "ro"
moodle_id = "idnumber"

[late]
per_day = 0.25
cutoff_days = 3

{students}[[instructors]]
id = "lkhub-prof"
email = "prof@uni.example"

[[lessons]]
id = "fixture"
title = "Memory"
deadline = {(now + timedelta(days=1)).isoformat(timespec="seconds")}
points = 10
canvas_id = 7001

[[lessons]]
id = "extra"
title = "Memory, again"
deadline = {(now - timedelta(hours=1)).isoformat(timespec="seconds")}
points = 20
canvas_id = 7002
"""


def lesson_files(folder: Path) -> dict[str, Path]:
    """The two lessons' notebooks: the fixture's solution, and the same under the lesson id ``extra``
    (its questions the fixture's, renamed; written beside)."""
    import nbformat

    (folder / "extra_questions.py").write_text(QUESTIONS.read_text().replace('"fixture.', '"extra.'))
    out = {"fixture": folder / "fixture.ipynb", "extra": folder / "extra.ipynb"}
    shutil.copy(FIXTURES / "memory_solution.ipynb", out["fixture"])
    nb = nbformat.read(FIXTURES / "memory_solution.ipynb", as_version=4)
    for cell in nb.cells:
        cell.source = cell.source.replace('"fixture.', '"extra.')
    nb.metadata["labkit"]["lesson"] = "extra"
    nbformat.write(nb, out["extra"])
    return out


def give(user: str, source: Path) -> None:
    """The lesson's notebook in the student's home, theirs (as a course's first login copies it)."""
    pw = pwd.getpwnam(user)
    target = os.path.join(pw.pw_dir, source.name)
    shutil.copy(source, target)
    os.chown(target, pw.pw_uid, pw.pw_gid)


def labkit_cmd(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    """A ``labkit`` command as the instructor runs it on the hub's machine (root: the exchange is root's)."""
    run = subprocess.run(
        [sys.executable, "-m", "labkit.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "LABKIT_LANG": "en", **(env or {})},
    )
    assert run.returncode == 0, f"labkit {' '.join(args)}:\n{run.stdout}\n{run.stderr}"
    return run.stdout + run.stderr


def t(key: str, lang: str, **fields: object) -> str:
    from labkit.i18n import t as message

    return message(key, lang, **fields)


def hand_in(s: Student, source: Path, wrong: str | None) -> str:
    """Open the notebook in JupyterLab, answer (wrongly, if told), write ``labkit.submit()`` in a new cell at
    the end, save (File > Save, Ctrl+S) and run that cell, as the course tells a student; its output."""
    from jupyterlab_driver import Notebook

    page = s.page
    page.goto(f"{s.hub_url}/user/{s.name}/lab/tree/{source.name}?reset")
    s.nb = Notebook(page, str(source))
    if wrong:
        s.nb.set_source(next(i for i, c in enumerate(s.nb.cells_src) if "bytes_per_param = 2 + 2" in c.source), wrong)
    cells = page.locator(".jp-Notebook .jp-Cell")
    cells.last.click()
    page.keyboard.press("Escape")
    page.keyboard.press("b")  # a new cell below
    index = cells.count() - 1
    page.keyboard.press("Enter")
    page.keyboard.insert_text("import labkit\nlabkit.submit()")
    page.keyboard.press("Escape")
    page.keyboard.press("Control+s")
    # saved: the tab loses its dirty mark (a cell edited since it ran keeps its own, which is not this)
    page.wait_for_function("() => !document.querySelector('.lm-DockPanel-tabBar .lm-TabBar-tab.jp-mod-dirty')",
                           timeout=30_000)  # fmt: skip
    page.keyboard.press("Shift+Enter")
    s.nb.wait_done(index, 60)
    return s.nb.output_text(index)


@dataclass
class Cycle:
    folder: Path
    state: Path
    course: Path
    hub: object
    browser: object
    users: dict


@pytest.fixture(scope="module")
def cycle(request):
    from labkit.testing import hub as live

    try:
        live.check_possible()
    except live.HubUnavailable as why:
        pytest.skip(str(why))
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download)")
    folder = Path(tempfile.mkdtemp(prefix="labkit-class-"))
    failed = request.session.testsfailed
    users = live.make_users([n.removeprefix(live.PREFIX) for n in CLASS], ["prof"])
    hub = None
    timings: dict[str, float] = {}
    try:
        course = folder / "class.toml"
        course.write_text(course_text(datetime.now(UTC)))
        lessons = lesson_files(folder)
        for sid, (_, mine) in CLASS.items():
            for lesson in mine:
                give(sid, lessons[lesson])
        t0 = time.monotonic()
        hub = live.start_hub(str(folder), users, course=str(course))
        timings["hub started"] = time.monotonic() - t0
        with Chromium(hub.marker) as browser:
            students = {
                sid: Student(browser, hub.url, sid, users[sid].password, lang) for sid, (lang, _) in CLASS.items()
            }
            try:
                t0 = time.monotonic()
                for s in students.values():
                    s.login()
                for s in students.values():
                    s.wait_server()
                timings["three logged in, servers up"] = time.monotonic() - t0
                t0 = time.monotonic()
                for sid, s in students.items():
                    for lesson, wrong in CLASS[sid][1].items():
                        out = hand_in(s, Path(pwd.getpwnam(sid).pw_dir) / lessons[lesson].name, wrong)
                        late = EXPECTED[sid][lesson][1]
                        said = t("classroom.submit.late" if late else "classroom.submit.on_time", s.lang,
                                 lesson=lesson, when="@", sha="@", days=late or 0)  # fmt: skip
                        head, middle, _ = said.split("@")  # the receipt, in the student's language
                        assert head in out and middle in out, f"{sid} {lesson}: {out}"
                timings["four notebooks handed in"] = time.monotonic() - t0
            except BaseException:
                for s in students.values():
                    s.page.screenshot(path=str(folder / f"failed-{s.name}.png"))
                print(f"screenshots in {folder}; the hub's log ends:\n{hub.log()}")
                raise
            yield Cycle(folder, folder / "state", course, hub, browser, users)
    finally:
        if hub is not None:
            hub.stop()
            print("timings:", {k: round(v, 1) for k, v in timings.items()})
            assert hub.leftovers() == [], "a process of the hub or of a student outlived the hub"
        live.remove_users(users)
    if request.session.testsfailed == failed:
        shutil.rmtree(folder, ignore_errors=True)  # kept when a test failed: its screenshots and logs


def check_exchange_is_private(c: Cycle) -> None:
    """What the service filed is out of every student's reach: not ben's folder, not his notebook."""
    inbound = c.state / "exchange" / "inbound"
    ben = next((inbound / "lkhub-ben" / "fixture").glob("*.ipynb"))
    for what in (["ls", str(inbound)], ["ls", str(inbound / "lkhub-ben")], ["cat", str(ben)]):
        peek = subprocess.run(["runuser", "-u", "lkhub-ana", "--", *what], capture_output=True, text=True)
        assert peek.returncode != 0 and "Permission denied" in peek.stderr, (what, peek.stdout)


def collected(c: Cycle) -> Path:
    """``labkit collect`` as the instructor (lkhub-prof, no root: the hub opens the exchange's inbound/ to the
    instructors' group), with the Python the hub gives its users, into their home."""
    prof = pwd.getpwnam("lkhub-prof")
    subs = Path(prof.pw_dir) / "submissions-collected"
    if not subs.exists():
        python = c.state / "python" / "bin" / "python"
        args = ["collect", "--exchange", str(c.state / "exchange"), "--course", str(c.course), "--out", str(subs)]
        run = subprocess.run(["runuser", "-u", prof.pw_name, "--", str(python), "-m", "labkit.cli", *args],
                             capture_output=True, text=True, timeout=120, cwd=prof.pw_dir,
                             env={"PATH": os.environ["PATH"], "HOME": prof.pw_dir, "LABKIT_LANG": "en"})  # fmt: skip
        assert run.returncode == 0, run.stdout + run.stderr
        assert sum(": received " in line for line in run.stdout.splitlines()) == 4 and "1 day late" in run.stdout, (
            run.stdout
        )
    return subs


def grade(c: Cycle, out: Path, *more: str, env: dict[str, str] | None = None) -> str:
    extra = c.folder / "extra_questions.py"
    return labkit_cmd("grade", str(collected(c)), "--out", str(out), "--timeout", str(TIMEOUT), "--course",
                      str(c.course), "--questions", str(QUESTIONS), "--questions", str(extra), *more, env=env)  # fmt: skip


def check_exports(c: Cycle, out: Path) -> None:
    """Moodle's import matches on the ID number (``moodle_id``), Canvas' on SIS ids; both hold each lesson's
    points in the course and the late marks."""
    moodle_csv, canvas_csv = c.folder / f"{out.name}-moodle.csv", c.folder / f"{out.name}-canvas.csv"
    labkit_cmd("export", str(out), "--course", str(c.course), "--moodle", str(moodle_csv), "--canvas", str(canvas_csv))
    moodle = list(csv.DictReader(io.StringIO(moodle_csv.read_text())))
    assert [r["ID number"] for r in moodle] == [SIS[s] for s in CLASS]
    canvas = list(csv.DictReader(io.StringIO(canvas_csv.read_text())))
    assert canvas[0]["Memory (7001)"] == "10" and canvas[0]["Memory, again (7002)"] == "20"  # Points Possible
    canvas = canvas[1:]
    assert [(r["SIS User ID"], r["SIS Login ID"]) for r in canvas] == [(SIS[s], s) for s in CLASS]
    for sid, m, cv in zip(CLASS, moodle, canvas, strict=True):
        lang = CLASS[sid][0]
        for lesson, title, column in (
            ("fixture", "Memory", "Memory (7001)"),
            ("extra", "Memory, again", "Memory, again (7002)"),
        ):
            points, late = EXPECTED[sid][lesson]
            assert float(m[title]) == float(cv[column]) == points, (sid, lesson, m, cv)
            mark = (
                ""
                if late == 0
                else t("classroom.export.missing", lang)
                if late is None
                else t("classroom.export.late", lang, days=late)
            )
            assert m[f"Feedback: {title}"] == mark, (sid, m)
        assert ("late 1 day" in cv["Notes"]) == (sid == "lkhub-cat"), cv


def report_in_lab(c: Cycle, sid: str, title: str) -> str:
    """The student logs in again (their server still runs) and opens ``~/feedback/report.md`` in JupyterLab;
    the text JupyterLab shows, once it shows ``title``."""
    s = Student(c.browser, c.hub.url, sid, c.users[sid].password, CLASS[sid][0])
    page = s.page
    try:
        page.goto(f"{c.hub.url}/hub/login")
        page.fill("#username_input", sid)
        page.fill("#password_input", c.users[sid].password)
        page.click("#login_submit")
        page.wait_for_url(f"**/user/{sid}/lab**", timeout=120_000)
        page.goto(f"{c.hub.url}/user/{sid}/lab/tree/feedback/report.md?reset")
        page.wait_for_function(
            "t => (document.querySelector('#jp-main-dock-panel') || {innerText: ''}).innerText.includes(t)",
            arg=title,
            timeout=60_000,
        )
        return page.locator("#jp-main-dock-panel").inner_text()
    except BaseException:
        page.screenshot(path=str(c.folder / f"failed-feedback-{sid}.png"))
        print(f"screenshot in {c.folder}; the hub's log ends:\n{c.hub.log()}")
        raise
    finally:
        s.context.close()


def test_the_class_hands_in_is_graded_and_reads_its_feedback(cycle):
    c = cycle
    check_exchange_is_private(c)
    reports = c.folder / "reports"
    t0 = time.monotonic()
    grade(c, reports, "--jobs", "2")
    print(f"graded 4 submissions locally in {time.monotonic() - t0:.1f} s")
    labkit_cmd("feedback", str(reports), "--exchange", str(c.state / "exchange"), "--course", str(c.course))
    check_exports(c, reports)
    for sid, (lang, _) in CLASS.items():
        text = report_in_lab(c, sid, t("grading.report.title", lang, student=sid))
        others = [o for o in CLASS if o != sid]
        assert not any(o in text for o in others), text
        released = c.state / "exchange" / "feedback" / sid
        # each notebook ran clean, its labkit.submit() cell included (under the grader it hands nothing in)
        assert {n["status"] for n in json.loads((released / "report.json").read_text())["notebooks"]} == {"ok"}
        got = json.loads((released / "grades.json").read_text())["lessons"]
        assert {k: v["points"] for k, v in got.items()} == {
            k: p for k, (p, late) in EXPECTED[sid].items() if late is not None
        }
    # one student cannot read another's feedback
    peek = subprocess.run(["runuser", "-u", "lkhub-ana", "--", "cat", str(c.state / "exchange" / "feedback" / "lkhub-ben" / "report.md")],
                          capture_output=True, text=True)  # fmt: skip
    assert peek.returncode != 0 and "Permission denied" in peek.stderr


@pytest.mark.slurm
def test_the_class_graded_as_a_slurm_array_gives_the_same_grades(cycle):
    from labkit.testing import slurm

    try:
        slurm.install()
        cluster = slurm.start_cluster(tempfile.mkdtemp(prefix="labkit-cslurm-"))  # short: munge's socket path
    except slurm.SlurmUnavailable as why:
        pytest.skip(f"no local Slurm: {why}")
    try:
        reports = cycle.folder / "reports-slurm"
        env = {"SLURM_CONF": cluster.env["SLURM_CONF"], "PATH": cluster.env["PATH"], slurm.MARK_VAR: cluster.mark}
        t0 = time.monotonic()
        said = grade(cycle, reports, "--slurm", env=env)
        print(f"graded 4 submissions as a Slurm array in {time.monotonic() - t0:.1f} s")
        assert "Slurm job" in said, said
        assert len(json.loads((reports / ".slurm" / "tasks.json").read_text())["tasks"]) == 4
        check_exports(cycle, reports)
        assert cluster.active_jobs() == []
    finally:
        killed = cluster.stop()
        shutil.rmtree(cluster.folder, ignore_errors=True)
    assert not killed, f"processes outlived the Slurm daemons: {killed}"
