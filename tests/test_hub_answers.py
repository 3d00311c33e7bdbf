"""No answers where students log in: ``launch/hub.sh`` refuses a checkout whose answers a student can read, and
the students' Python has no path into the checkout (no hub started: the refusal comes before anything else)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
needs_root = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser"), reason="runs as root (runuser)")


@pytest.fixture
def public_tmp():
    """A folder every user can reach (pytest's own tmp_path is its owner's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="labkit-hub-answers-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _checkout(tmp_path: Path) -> Path:
    """A copy of launch/ beside the folders that hold answers, readable by everyone as a fresh clone is."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "launch", repo / "launch")
    for path in ("labkit/course/questions", "labkit/course/lessons", "notebooks/en", ".git"):
        (repo / path).mkdir(parents=True)
        (repo / path / "secret.txt").write_text("an answer\n")
    for folder in (tmp_path, *repo.rglob("*")):
        os.chmod(folder, 0o755 if folder.is_dir() else 0o644)
    return repo


def _hub(repo: Path) -> subprocess.CompletedProcess:
    cmd = ["bash", str(repo / "launch" / "hub.sh"), "--students", "nobody", "--instructors", "root"]
    # past the check, making the environment fails at once (no Python to make it with)
    env = {**os.environ, "LABKIT_LANG": "en", "LABKIT_VENV": str(repo / "venv"), "PYTHON": "false"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)


@needs_root
def test_hub_refuses_a_checkout_whose_answers_a_student_can_read(public_tmp):
    repo = _checkout(public_tmp)
    done = _hub(repo)
    assert done.returncode != 0 and "nobody can read" in done.stderr and "holds the course's answers" in done.stderr
    assert "chmod -R o-rwx" in done.stderr and str(repo / "labkit/course/questions") in done.stderr
    # a folder that cannot be listed but whose files can be opened by name is still readable
    os.chmod(repo / "labkit/course/questions", 0o711)
    done = _hub(repo)
    assert "labkit/course/questions" in done.stderr.split("can read", 1)[1].split(",")[0], done.stderr
    for path in ("labkit/course/questions", "labkit/course/lessons", "notebooks", ".git"):
        subprocess.run(["chmod", "-R", "o-rwx", str(repo / path)], check=True)
    done = _hub(repo)  # past the check: it fails later, at the environment, which this copy lacks
    assert "holds the course's answers" not in done.stderr, done.stderr


def test_the_students_python_runs_no_editable_install_of_the_checkout(tmp_path):
    """The view's .pth adds the course environment's packages and runs their .pth files, except an editable
    install's, which names the instructor's checkout; the student install comes first. Run as Python's own
    start-up runs a .pth file (``site.addsitedir``)."""
    from labkit.hub.view import write_course_path

    site, install, view = tmp_path / "site", tmp_path / "install", tmp_path / "view"
    (site / "pkg_ok").mkdir(parents=True)
    (install / "labkit").mkdir(parents=True)
    view.mkdir()
    (install / "labkit" / "__init__.py").write_text("WHERE = 'student'\n")
    (site / "extra.pth").write_text("pkg_ok\n")
    (site / "runs.pth").write_text("import os; os.environ['RAN_A_PTH'] = '1'\n")
    (site / "__editable__.fsdp_labkit-0.1.0.pth").write_text(f"import sys; sys.path.insert(0, {str(ROOT)!r})\n")
    write_course_path(str(view), str(site), str(install))
    code = f"import site; site.addsitedir({str(view)!r}); import labkit, os, sys; print(labkit.WHERE)\n"
    code += "print(os.environ.get('RAN_A_PTH')); print(sys.path)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as a student's server starts: no path set
    done = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and "Error processing" not in done.stderr, done.stderr
    where, ran, path = done.stdout.splitlines()
    assert where == "student" and ran == "1" and str(site / "pkg_ok") in path and str(ROOT) + "'" not in path
