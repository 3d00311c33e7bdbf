"""A class JupyterHub, live, in Chromium: two students, two languages, both spawners.

``launch/hub.sh`` is started for real (JupyterHub, configurable-http-proxy from npm, PAM users
made for the test): ana logs in and picks Română, ben picks English (and JupyterLab's dark theme);
each opens lesson 0's student edition, types the exercises' answers, runs every cell, sees the
dashboard and the checks, and saves the notebook into ``submit/``. The instructor finds both
submissions where ``labkit grade`` reads them. Then the hub stops, and nothing is left: no
process of the hub or the students, no Slurm job, no cgroup.

    sudo .venv/bin/python -m pytest -m browser tests/browser/test_hub_browser.py
    LABKIT_UPDATE_SCREENSHOTS=1 ...   # also refresh docs/screenshots/hub-*.png
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
from hub_driver import Chromium, Student, wait_all
from jupyterlab_driver import CHROMIUM

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHOTS = os.path.join(ROOT, "docs", "screenshots")
LESSON = "00_setup.ipynb"

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(600)]


# what the instructor runs: the submissions as labkit grade finds them, from ~/submissions
FIND = (
    "import json, os; from pathlib import Path; from labkit.grading.collect import find_submissions;"
    "found = find_submissions(Path(os.path.expanduser('~/submissions')));"
    "print(json.dumps({k: [n for _, n in v] for k, v in found.items()}))"
)


def student_python(folder: str) -> str:
    """The Python the hub gave the students (a view of .venv when its own is not theirs to run)."""
    view = os.path.join(folder, "state", "python", "bin", "python")
    return view if os.path.exists(view) else sys.executable


def t(key: str, lang: str, **fields: object) -> str:
    from labkit.i18n import t as message

    return message(key, lang, **fields)


def solutions(lang: str) -> dict[str, str]:
    """The solution edition's exercise cells, by cell id: what a student who got it right types."""
    import nbformat

    nb = nbformat.read(os.path.join(ROOT, "notebooks", lang, LESSON), as_version=4)
    return {c.id: c.source for c in nb.cells if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source}


def contrast(page, selector: str) -> float:
    """The lowest WCAG contrast ratio between the text of ``selector`` and what is behind it."""
    return page.evaluate(
        """sel => {
        const rgb = s => (s.match(/[\\d.]+/g) || []).map(Number);
        const lum = ([r, g, b]) => [r, g, b].map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
                                      .reduce((a, v, i) => a + v * [0.2126, 0.7152, 0.0722][i], 0);
        const back = el => { for (; el; el = el.parentElement) { const c = rgb(getComputedStyle(el).backgroundColor);
                              if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c.slice(0, 3); } return [255, 255, 255]; };
        let worst = 99;
        for (const el of document.querySelectorAll(sel)) {
            if (!el.textContent.trim()) continue;
            const a = lum(rgb(getComputedStyle(el).color).slice(0, 3)), b = lum(back(el));
            worst = Math.min(worst, (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05));
        }
        return worst; }""",
        selector,
    )


def lab_settings(user: str, dark: bool) -> None:
    """The student's own JupyterLab settings: every cell in the page (the test reads them all),
    and for ben the dark theme, as he would leave it."""
    pw = pwd.getpwnam(user)
    base = os.path.join(pw.pw_dir, ".jupyter", "lab", "user-settings", "@jupyterlab")
    files = {"notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"}}
    if dark:
        files["apputils-extension/themes.jupyterlab-settings"] = {"theme": "JupyterLab Dark"}
    for rel, values in files.items():
        os.makedirs(os.path.dirname(os.path.join(base, rel)), exist_ok=True)
        with open(os.path.join(base, rel), "w") as f:
            json.dump(values, f)
    subprocess.run(["chown", "-R", f"{user}:", os.path.join(pw.pw_dir, ".jupyter")], check=True)


def server_parent(pid: int, uid: int) -> int | None:
    """The parent of ``pid`` if it is ``uid``'s single-user server (by its command line), else None
    (also when it has exited meanwhile)."""
    try:
        if os.stat(f"/proc/{pid}").st_uid != uid:
            return None
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"singleuser" not in f.read():
                return None
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])  # the field after the state
    except (OSError, ValueError, IndexError):
        return None


def check_limits(hub, user: str) -> None:
    """The student's server is in their cgroups, with the hub's limits, and labkit's rank cap is set."""
    from labkit.hub import limits
    from labkit.hub.settings import parse_bytes

    uid = pwd.getpwnam(user).pw_uid
    found = {p: parent for p in hub.leftovers() if (parent := server_parent(p, uid)) is not None}
    # a child the server is forking shows the server's command line until it execs (seen once, in
    # CI): the server is the one whose parent is not one of them
    (server,) = [p for p, parent in found.items() if parent not in found]
    env = dict(x.split("=", 1) for x in open(f"/proc/{server}/environ").read().split("\0") if "=" in x)
    assert env["LABKIT_MAX_RANKS"] == "4" and env["LABKIT_LANG"] == "ro"
    if not limits.is_v2():
        groups = limits.of_process(server)
        assert groups["memory"] == groups["cpu"] == groups["pids"] == f"/labkit-hub/{user}"
        with open(f"/sys/fs/cgroup/memory/labkit-hub/{user}/memory.limit_in_bytes") as f:
            assert int(f.read()) == parse_bytes("4G")
        with open(f"/sys/fs/cgroup/cpu/labkit-hub/{user}/cpu.cfs_quota_us") as f:
            assert int(f.read()) == 2 * limits.PERIOD


@pytest.fixture
def shots(tmp_path):
    folder = SHOTS if os.environ.get("LABKIT_UPDATE_SCREENSHOTS") == "1" else str(tmp_path / "shots")
    os.makedirs(folder, exist_ok=True)

    def shot(target, name: str) -> None:
        target.screenshot(path=os.path.join(folder, name), animations="disabled")

    return shot


def cluster_for(spawner: str, folder: str):
    if spawner != "slurm":
        return None, {}
    from labkit.testing import slurm

    try:
        slurm.install()
        cluster = slurm.start_cluster(os.path.join(folder, "slurm"), nodes=2, cpus=3)
    except slurm.SlurmUnavailable as why:
        pytest.skip(f"no local Slurm: {why}")
    env = {
        **cluster.env,
        "LABKIT_HUB_ENV_KEEP": slurm.MARK_VAR,
        "LABKIT_HUB_SERVER_IP": "127.0.0.1",  # the nodes are this host
        "LABKIT_HUB_CPUS": "1",  # a server takes one CPU: with both on n1, a 2-node cell still fits
        "LABKIT_HUB_SLURM_MEMORY": "",  # the test nodes declare no memory to ask for
    }
    return cluster, env


def flow(hub, spawner, users, ana, ben, shots, timings) -> None:
    """Both students: log in, answer, run every cell, see the dashboard and checks, submit."""
    t0 = time.monotonic()
    ana.login(shot=shots if spawner == "local" else None)
    ben.login()  # both servers start at once, as in a class
    for s in (ana, ben):
        s.wait_server()
    timings["both logged in, servers up"] = time.monotonic() - t0
    if spawner == "local":
        check_limits(hub, "lkhub-ana")
    for s in (ana, ben):
        s.goto_lesson(LESSON)
    for s in (ana, ben):
        s.open_lesson(LESSON, pwd.getpwnam(s.name).pw_dir)
        assert s.answer(solutions(s.lang)) == 4
    t0 = time.monotonic()
    ana.run_all()
    ben.run_all()
    wait_all([ana, ben], timeout=300)
    timings["lesson 0, every cell, both at once"] = time.monotonic() - t0
    dash = ana.nb.index(next(c.id for c in ana.nb.cells_src if "rank.steps(steps)" in c.source))
    for s in (ana, ben):
        rows = s.nb.rank_rows(dash)
        assert [r["steps"] for r in rows] == ["3/3", "3/3"], rows
        checks = [s.nb.output_text(i) for i, c in enumerate(s.nb.cells_src) if c.source.startswith("labkit.check(")]
        correct, recorded = (
            t(f"grading.check.line.{k}", s.lang, qid="", score="").split(":")[1].split("(")[0]
            for k in ("correct", "recorded")
        )
        assert [correct in x for x in checks] == [True, True, True, False], checks  # in the student's language
        assert recorded in checks[-1]  # the last answer is graded when submitted, after the first answer
        text = s.page.locator(".jp-Notebook").inner_text()
        assert "Traceback" not in text and "NotImplementedError" not in text
        assert "official Jupyter news" not in s.page.content()
    assert contrast(ben.page, ".labkit-dashboard td, .labkit-dashboard th") >= 3.0  # dark theme, readable
    if spawner == "slurm":  # ben's server is a 1-node job; his own cell asks Slurm for two nodes
        out = ben.run_new_cell(
            "%%torchrun --nnodes 2 --slurm -n 1 --backend gloo --timeout 150\n"
            "import os\nfrom labkit import rank\nrank.report(node=os.environ['SLURMD_NODENAME'])\n"
        )
        assert "(n1/0)" in out and "(n2/0)" in out and "all ranks finished" in out, out
    if spawner == "local":
        shots(ana.nb.cell(dash), "hub-student-ro-dashboard.png")
        shots(ben.nb.cell(dash), "hub-student-en-dark-dashboard.png")
    for s in (ana, ben):
        s.save_as(f"submit/{LESSON}")
    deadline = time.monotonic() + 30  # the server writes the file: wait for it, not for the page
    for s in (ana, ben):
        handed_in = os.path.join(hub.folder, "state", "submissions", s.name, LESSON)
        while not os.path.exists(handed_in):
            assert time.monotonic() < deadline, f"{s.name}'s submission did not arrive"
            time.sleep(0.2)


# the second tier, on both spawners: the first drives the live hub in Chromium through the class cycle
# (tests/browser/test_class_cycle.py: students of two languages log in, run cells, hand in, read feedback)
@pytest.mark.extended
@pytest.mark.parametrize("spawner", ["local", pytest.param("slurm", marks=pytest.mark.slurm)])
def test_two_students_two_languages(spawner, shots):
    from labkit.testing import hub as live

    try:
        live.check_possible()
    except live.HubUnavailable as why:
        pytest.skip(str(why))
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api", reason="pip install playwright (no browser download)")
    folder = tempfile.mkdtemp(prefix="labkit-hub-")
    users = live.make_users(["ana", "ben"], ["prof"])
    cluster, env = cluster_for(spawner, folder)
    hub = None
    timings = {}
    try:
        t0 = time.monotonic()
        hub = live.start_hub(folder, users, spawner=spawner, env=env)
        timings["hub started"] = time.monotonic() - t0
        lab_settings("lkhub-ana", dark=False)
        lab_settings("lkhub-ben", dark=True)
        with Chromium(hub.marker) as browser:
            ana = Student(browser, hub.url, "lkhub-ana", users["lkhub-ana"].password, "ro")
            ben = Student(browser, hub.url, "lkhub-ben", users["lkhub-ben"].password, "en")
            try:
                flow(hub, spawner, users, ana, ben, shots, timings)
            except BaseException:
                for s in (ana, ben):  # what each student saw when it failed
                    s.page.screenshot(path=os.path.join(folder, f"failed-{s.name}.png"))
                print(f"screenshots in {folder}; the hub's log ends:\n{hub.log()}")
                for s in (ana, ben):  # each server's own log (Slurm's output file), gone with the users
                    for log in sorted(glob.glob(os.path.join(pwd.getpwnam(s.name).pw_dir, ".labkit-hub-*.log"))):
                        with open(log, errors="replace") as f:
                            print(f"{log} ends:\n" + "".join(f.readlines()[-60:]))
                raise
        # the instructor reads both submissions where labkit grade looks for them
        prof = pwd.getpwnam("lkhub-prof")
        found = subprocess.run(
            [
                "runuser",
                "-u",
                prof.pw_name,
                "--",
                hub.env.get("LABKIT_HUB_PYTHON") or student_python(folder),
                "-c",
                FIND,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=prof.pw_dir,
            env={"PATH": os.environ["PATH"], "HOME": prof.pw_dir},
        )
        assert found.returncode == 0, found.stderr
        assert json.loads(found.stdout) == {"lkhub-ana": [LESSON], "lkhub-ben": [LESSON]}, found.stderr
        # ... and one student cannot read the other's
        other = os.path.join(folder, "state", "submissions", "lkhub-ben", LESSON)
        peek = subprocess.run(["runuser", "-u", "lkhub-ana", "--", "cat", other], capture_output=True, text=True)
        assert peek.returncode != 0 and "Permission denied" in peek.stderr
    finally:
        if hub is not None:
            t0 = time.monotonic()
            hub.stop()
            timings["hub stopped"] = time.monotonic() - t0
            print("timings:", {k: round(v, 1) for k, v in timings.items()})
            assert hub.leftovers() == [], "a process of the hub or of a student outlived the hub"
            for name in users:
                # A process that ended but was orphaned stays a zombie until init reaps it: dead, holding
                # nothing but its pid. Wait for init; what is still alive after that is a leftover.
                deadline, alive = time.monotonic() + 15, ["?"]
                while alive and time.monotonic() < deadline:
                    left = subprocess.run(["ps", "-u", name, "-o", "pid=,stat=,args="], capture_output=True, text=True)
                    alive = [
                        line
                        for line in left.stdout.splitlines()
                        if line.split()[1:2] != [] and "Z" not in line.split()[1]
                    ]
                    if not left.stdout.strip():
                        break
                    time.sleep(0.5)
                assert alive == [], f"{name} still has: {alive}"
        if cluster is not None:
            assert cluster.active_jobs() == [], "a student's Slurm job outlived the hub"
            cluster.stop()
        live.remove_users(users)
    shutil.rmtree(folder, ignore_errors=True)  # kept only when the test failed: its screenshots and logs
