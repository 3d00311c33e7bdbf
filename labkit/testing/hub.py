"""A live class hub for the tests: system users with passwords, ``launch/hub.sh`` started and stopped.

    users = make_users(["ana", "ben"], ["prof"])      # lkhub-ana ... with random passwords
    hub = start_hub(folder, users, spawner="local")   # bash launch/hub.sh, answering on 127.0.0.1
    session = hub.login(users["lkhub-ana"])           # a logged-in requests-like session
    hub.stop(); remove_users(users)

Users are real (useradd, chpasswd: PAM checks them); their names start with ``lkhub-`` and
``remove_users`` deletes them and their homes. Everything the hub starts carries a marker in
its environment, so ``hub.leftovers()`` finds any process left after the stop, under any uid.
Only as root on Linux with useradd and npm (or configurable-http-proxy); else ``HubUnavailable``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field

from labkit.testing import processes

PREFIX = "lkhub-"
MARK_VAR = "LABKIT_HUB_TEST"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class HubUnavailable(RuntimeError):
    """The hub cannot run here; the message says why (the tests skip with it)."""


def check_possible() -> None:
    if os.geteuid() != 0:
        raise HubUnavailable("the class hub runs each student's server under their uid: it needs root")
    for tool in ("useradd", "chpasswd", "userdel", "runuser"):
        if shutil.which(tool) is None:
            raise HubUnavailable(f"{tool} is missing")
    if shutil.which("configurable-http-proxy") is None and shutil.which("npm") is None:
        cached = os.path.expanduser("~/.cache/labkit-hub/npm/node_modules/.bin/configurable-http-proxy")
        if not os.path.exists(cached):
            raise HubUnavailable("neither configurable-http-proxy nor npm (to install it) is here")
    if not os.access(os.path.join(ROOT, ".venv", "bin", "jupyterhub-singleuser"), os.X_OK):
        raise HubUnavailable("jupyterhub is not in .venv (bash launch/setup-env.sh installs the hub extra)")


@dataclass
class User:
    name: str
    password: str
    uid: int


def make_users(students: list[str], instructors: list[str]) -> dict[str, User]:
    """System users ``lkhub-<name>`` with random passwords (removed first if left by an earlier run)."""
    import pwd

    users = {}
    for short in students + instructors:
        name = PREFIX + short
        subprocess.run(["userdel", "--remove", name], capture_output=True)
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True, capture_output=True)
        password = secrets.token_urlsafe(12)
        subprocess.run(["chpasswd"], input=f"{name}:{password}\n", text=True, check=True, capture_output=True)
        users[name] = User(name, password, pwd.getpwnam(name).pw_uid)
    return users


def user_processes(uid: int) -> list[int]:
    """PIDs of the live processes of ``uid`` (a test user's: nobody else runs as it)."""
    found = []
    for pid in (int(n) for n in os.listdir("/proc") if n.isdigit()):
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                found.append(pid)
        except OSError:
            continue
    return found


def kill_user_processes(uid: int) -> None:
    for pid in user_processes(uid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def remove_users(users: dict[str, User]) -> None:
    for name, user in users.items():
        kill_user_processes(user.uid)
        subprocess.run(["userdel", "--remove", "--force", name], capture_output=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Hub:
    folder: str
    url: str
    proc: subprocess.Popen
    marker: str
    log_path: str
    env: dict[str, str] = field(default_factory=dict)

    def log(self, chars: int = 6000) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()[-chars:]

    def leftovers(self) -> list[int]:
        return processes.with_env(MARK_VAR, self.marker)

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM, as an admin stops a hub: JupyterHub stops every server (and Slurm job), then the proxy."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


PROTECTED = ("labkit/course/questions", "labkit/course/lessons", "notebooks", ".git")  # as launch/hub.sh checks


def protect_checkout() -> None:
    """What ``launch/hub.sh`` requires before it starts: no other user can read the answers in this checkout."""
    for path in PROTECTED:
        subprocess.run(["chmod", "-R", "o-rwx", os.path.join(ROOT, path)], check=False)


def start_hub(
    folder: str,
    users: dict[str, User],
    spawner: str = "local",
    env: dict[str, str] | None = None,
    timeout: float = 120,
    course: str | None = None,
) -> Hub:
    """``bash launch/hub.sh`` for these users (the ``*prof`` ones instructors), answering on 127.0.0.1; with
    ``course``, ``--course FILE`` alone says who logs in (its students and instructors are these users)."""
    import urllib.request

    students = [u for u in users if not u.endswith("prof")]
    instructors = [u for u in users if u.endswith("prof")]
    protect_checkout()
    port, marker = free_port(), secrets.token_hex(8)
    os.makedirs(folder, exist_ok=True)
    os.chmod(folder, 0o711)
    hub_env = {**os.environ, **(env or {}), MARK_VAR: marker, "LABKIT_LANG": "en"}
    hub_env["LABKIT_HUB_ENV_KEEP"] = ",".join(filter(None, [hub_env.get("LABKIT_HUB_ENV_KEEP"), MARK_VAR]))
    cmd = ["bash", os.path.join(ROOT, "launch", "hub.sh"), "--dir", os.path.join(folder, "state"), "--port", str(port)]
    if course is None:
        cmd += ["--students", ",".join(students), "--instructors", ",".join(instructors)]
    else:
        cmd += ["--course", course]
    if spawner == "slurm":
        cmd.append("--slurm")
    log_path = os.path.join(folder, "hub.log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, env=hub_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    hub = Hub(folder, f"http://127.0.0.1:{port}", proc, marker, log_path, hub_env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"launch/hub.sh exited with {proc.returncode}:\n{hub.log()}")
        try:
            with urllib.request.urlopen(hub.url + "/hub/api/", timeout=5) as r:
                if r.status == 200:
                    return hub
        except OSError:
            time.sleep(0.3)
    hub.stop()
    raise TimeoutError(f"the hub did not answer in {timeout:.0f} s:\n{hub.log()}")
