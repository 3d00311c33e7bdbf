"""A Python every student can run, seeing the course environment's packages, and labkit WITHOUT
the answers.

The students' servers, kernels and ranks run under their own uids, so the course environment's
Python must be executable by them. A virtual environment made from a pyenv or a home-folder
Python is not (its interpreter lives under ``/root``): then this makes a *view*, a venv of a
system Python of the same version whose one ``.pth`` file adds the course environment's
site-packages (readable by all). Same CPython version, same ABI: torch's compiled modules load.

The students' labkit is the student install (``labkit.grading.student.write_install``: no lesson
sources, no references, salted hashes for the checks). With one given, the view is always made,
and its ``.pth`` puts that install ahead of the course environment on ``sys.path``: the
environment's own labkit (an editable checkout, found by a finder that comes after the path)
is never imported by a student's kernel or ranks.

    python -m labkit.hub.view /srv/labkit-hub/python [STUDENT_INSTALL]   # prints the Python the servers run
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig

from labkit.i18n import t

CANDIDATES = ("/usr/bin/python{v}", "/usr/local/bin/python{v}")


def runnable_by_others(python: str) -> bool:
    """Whether an unprivileged user (``nobody``) can start ``python``."""
    done = subprocess.run(["runuser", "-u", "nobody", "--", python, "-c", ""], capture_output=True, timeout=60)
    return done.returncode == 0


def make_view(dest: str, student_install: str | None = None) -> str:
    """The Python for the students: this one if they can run it and no student install is given,
    else a view in ``dest`` (with ``student_install`` first on its path)."""
    if student_install is None and runnable_by_others(sys.executable):
        return sys.executable
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    bases = [c.format(v=version) for c in CANDIDATES if os.path.exists(c.format(v=version))]
    base = next((b for b in [sys.executable, *bases] if runnable_by_others(b)), None)
    if base is None:
        raise SystemExit(
            t("hub.view.no_python", version=version, places=", ".join(c.format(v=version) for c in CANDIDATES))
        )
    python = os.path.join(dest, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([base, "-m", "venv", "--without-pip", dest], check=True)
    site = sysconfig.get_paths()["purelib"]
    packages = os.path.join(dest, "lib", f"python{version}", "site-packages")
    write_course_path(packages, site, student_install)
    return python


MODULE = "labkit_course_path"  # the view's own module, imported by its one .pth line


def write_course_path(packages: str, site: str, student_install: str | None) -> None:
    """The view's ``.pth`` file and the module it imports (``.pth`` lines run inside ``site``'s own function,
    where a loop of several statements does not fit on one line): the course environment's site-packages
    on the path, with the ``.pth`` files there run too, and the student install ahead of it all; with a student
    install, not an editable install's ``.pth`` (it names the instructor's checkout, and would import labkit
    from there). Without one (the tests' view), the course environment's own labkit is the one imported."""
    install = os.path.abspath(student_install) if student_install else None
    code = f"""\"\"\"labkit's course environment for the students' Python (written by labkit.hub.view).\"\"\"
import os
import site
import sys

COURSE = {site!r}
STUDENTS = {install!r}  # the students' labkit: then an editable install's .pth (the checkout) is not run
sys.path.append(COURSE)
for name in sorted(os.listdir(COURSE)):
    if name.endswith(".pth") and not (STUDENTS and name.startswith("__editable__")):
        site.addpackage(COURSE, name, set())
if STUDENTS:
    sys.path.insert(0, STUDENTS)
"""
    with open(os.path.join(packages, f"{MODULE}.py"), "w") as f:
        f.write(code)
    with open(os.path.join(packages, "labkit-course.pth"), "w") as f:
        f.write(f"import {MODULE}\n")


if __name__ == "__main__":
    print(make_view(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
