"""The class hub's promises that need no browser, on real users of this machine (root only).

One student's ranks, channel and run folder are out of another's reach: ben tries, while ana's
ranks run. And a student's first login gets the student edition in their language, and nothing
of the solutions.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time

import pytest

from labkit.hub import homes
from labkit.hub.settings import HubSettings
from labkit.testing import hub as live

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ben's attempts on ana's run, each an (action, target) the script below tries
PROBE = r"""
import json, os, signal, socket, sys
target = json.loads(sys.argv[1])
out = {}
def attempt(name, fn):
    try:
        fn()
        out[name] = "allowed"
    except PermissionError:
        out[name] = "denied"
    except OSError as e:
        out[name] = f"{type(e).__name__}: {e}"
attempt("list the run folders", lambda: os.listdir(target["root"]))
attempt("read a rank's log", lambda: open(os.path.join(target["run"], "rank0.out")).read())
attempt("connect to the channel", lambda: socket.socket(socket.AF_UNIX).connect(os.path.join(target["run"], "ch.sock")))
for pid in target["ranks"]:
    attempt(f"signal rank pid {pid}", lambda: os.kill(pid, signal.SIGTERM))
    attempt(f"read rank pid {pid}'s environment (the token)", lambda: open(f"/proc/{pid}/environ").read())
    attempt(f"read rank pid {pid}'s memory", lambda: open(f"/proc/{pid}/mem", "rb").read(1))
attempt("list the home", lambda: os.listdir(target["home"]))
print(json.dumps(out))
"""

CELL = "import time\nfrom labkit import rank\nrank.report(r=rank.rank())\ntime.sleep(120)\n"


@pytest.fixture(scope="module")
def students(tmp_path_factory):
    try:
        live.check_possible()
    except live.HubUnavailable as why:
        pytest.skip(str(why))
    from labkit.hub.view import make_view

    folder = tempfile.mkdtemp(prefix="labkit-view-")  # not under pytest's 0700 folder: the students run it
    os.chmod(folder, 0o755)
    python = make_view(os.path.join(folder, "python"))
    users = live.make_users(["ana", "ben"], [])
    yield users, python
    live.remove_users(users)
    shutil.rmtree(folder, ignore_errors=True)


def as_user(user: str, *cmd: str, **kw) -> subprocess.Popen:
    home = pwd.getpwnam(user).pw_dir
    env = {"PATH": os.environ["PATH"], "HOME": home, "LABKIT_LANG": "en"}
    return subprocess.Popen(["runuser", "-u", user, "--", *cmd], env=env, cwd=home, **kw)


def hub_settings(folder: str, users) -> HubSettings:
    """A hub's settings with a tiny student edition (the build itself has tests of its own)."""
    settings = HubSettings(state_dir=os.path.join(folder, "state"), students=tuple(users), instructors=())
    for lang in ("en", "ro"):
        os.makedirs(os.path.join(settings.editions, lang), exist_ok=True)
        with open(os.path.join(settings.editions, lang, "00_setup.ipynb"), "w") as f:
            f.write(f'{{"lang": "{lang}"}}')
    homes.ensure_instructors_group(settings)
    return settings


def test_one_students_ranks_are_out_of_anothers_reach(students, tmp_path):
    users, python = students
    ana, ben = users["lkhub-ana"], users["lkhub-ben"]
    homes.prepare_home(ana.name, "en", hub_settings(str(tmp_path), users))  # as ana's first login does
    code = f"import labkit; labkit.torchrun({CELL!r}, nproc=2, display='none', timeout=150)"
    run = as_user(ana.name, python, "-c", code, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        root = f"/tmp/labkit-{ana.uid}"
        deadline, ranks, folder = time.monotonic() + 120, [], None
        while time.monotonic() < deadline and len(ranks) < 3:  # torchrun's agent and the two ranks forked from it
            assert run.poll() is None, run.stdout.read().decode()
            time.sleep(0.5)
            runs = [os.path.join(root, d) for d in os.listdir(root)] if os.path.isdir(root) else []
            folder = next((d for d in runs if os.path.exists(os.path.join(d, "ch.sock"))), None)
            ranks = [int(p) for p in os.listdir("/proc") if p.isdigit() and _owner(p) == ana.uid and _in_a_run(p)]
        assert folder and len(ranks) == 3, "ana's two ranks did not start"
        oct_mode = os.stat(root).st_mode & 0o777
        assert oct_mode == 0o700
        target = {"root": root, "run": folder, "ranks": ranks, "home": pwd.getpwnam(ana.name).pw_dir}
        probe = as_user(ben.name, python, "-c", PROBE, json.dumps(target), stdout=subprocess.PIPE)
        tried = json.loads(probe.communicate(timeout=60)[0])
        assert tried and all(v == "denied" for v in tried.values()), {k: v for k, v in tried.items() if v != "denied"}
        assert run.poll() is None, "ana's run is unharmed"
    finally:
        run.kill()
        run.wait()
        live.kill_user_processes(ana.uid)


def _owner(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _in_a_run(pid: str) -> bool:
    """The agent and its forked ranks carry the run's id (a fork's /proc environ is its agent's)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return any(x.startswith(b"LABKIT_RUN_ID=") for x in f.read().split(b"\0"))
    except OSError:
        return False


def test_first_login_copies_the_student_edition_in_the_students_language(students, tmp_path):
    users, _ = students
    user = "lkhub-ben"  # ben's first login here (ana's home was prepared in English above)
    settings = hub_settings(str(tmp_path), users)
    home = pwd.getpwnam(user).pw_dir
    assert homes.prepare_home(user, "ro", settings) == "fsdp-course/ro"
    lesson = os.path.join(home, "fsdp-course", "ro", "00_setup.ipynb")
    assert json.load(open(lesson)) == {"lang": "ro"} and os.stat(lesson).st_uid == users[user].uid
    assert not os.path.exists(os.path.join(home, "fsdp-course", "en"))  # only the language asked for
    with open(lesson, "w") as f:
        f.write("my own work")
    homes.prepare_home(user, "ro", settings)  # the next login leaves it alone
    assert open(lesson).read() == "my own work"
    assert os.stat(home).st_mode & 0o777 == 0o700
    submit = os.path.realpath(os.path.join(home, "submit"))
    assert submit == os.path.join(settings.submissions, user) and os.stat(submit).st_mode & 0o7777 == 0o2770
