"""A Python every student can run, seeing the course environment's packages.

The students' servers, kernels and ranks run under their own uids, so the course environment's
Python must be executable by them. A virtual environment made from a pyenv or a home-folder
Python is not (its interpreter lives under ``/root``): then this makes a *view*, a venv of a
system Python of the same version whose one ``.pth`` file adds the course environment's
site-packages (readable by all). Same CPython version, same ABI: torch's compiled modules load.

    python -m labkit.hub.view /srv/labkit-hub/python     # prints the Python the servers run
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


def make_view(dest: str) -> str:
    """The Python for the students: this one if they can run it, else a view in ``dest``."""
    if runnable_by_others(sys.executable):
        return sys.executable
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    bases = [c.format(v=version) for c in CANDIDATES if os.path.exists(c.format(v=version))]
    base = next((b for b in bases if runnable_by_others(b)), None)
    if base is None:
        raise SystemExit(
            t("hub.view.no_python", version=version, places=", ".join(c.format(v=version) for c in CANDIDATES))
        )
    python = os.path.join(dest, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([base, "-m", "venv", "--without-pip", dest], check=True)
    site = sysconfig.get_paths()["purelib"]
    pth = os.path.join(dest, "lib", f"python{version}", "site-packages", "labkit-course.pth")
    with open(pth, "w") as f:
        f.write(f"import site; site.addsitedir({site!r})\n")  # .pth files in the course's site-packages run too
    return python


if __name__ == "__main__":
    print(make_view(sys.argv[1]))
