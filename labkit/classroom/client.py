"""A student's side of the exchange: hand in a notebook, and fetch the feedback released to them.

    labkit.submit()                         # in a notebook: this notebook, as last saved
    labkit submit lesson1.ipynb             # from a terminal
    labkit.classroom.client.fetch_feedback()   # ~/feedback: the reports released to this student

On a hub, ``LABKIT_EXCHANGE_URL`` is the exchange service (``labkit.classroom.service``) and the student's
JupyterHub token (``JUPYTERHUB_API_TOKEN``, which their server and kernels have) says who they are.
Without a hub, ``LABKIT_EXCHANGE`` names an exchange folder written directly (one machine, one person:
the instructor trying the course, or a learner on their own), stamped by this process's clock.
"""

from __future__ import annotations

import getpass
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from labkit.classroom.exchange import MAX_NOTEBOOK, Exchange, ExchangeError, Receipt, receipt_text
from labkit.i18n import t
from labkit.wire import env as envvars

FEEDBACK_DIR = "feedback"  # in the student's home
GRADES = "grades.json"  # the grades released, per lesson (labkit.progress() shows them)


def _service() -> tuple[str, str] | None:
    url = envvars.get("LABKIT_EXCHANGE_URL")
    if not url:
        return None
    token = os.environ.get("JUPYTERHUB_API_TOKEN", "")
    if not token:
        raise ExchangeError(t("classroom.submit.no_token"))
    return url.rstrip("/") + "/", token


def _ask(method: str, url: str, token: str, data: bytes | None = None, timeout: float = 60) -> bytes:
    request = urllib.request.Request(url, data=data, method=method, headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.read()
    except urllib.error.HTTPError as e:
        try:
            why = json.loads(e.read(1 << 16)).get("error", "")
        except ValueError:
            why = ""
        raise ExchangeError(t("classroom.submit.refused", code=e.code, why=why or e.reason)) from None
    except urllib.error.URLError as e:
        raise ExchangeError(t("classroom.submit.unreachable", url=url, why=e.reason)) from None


def this_notebook() -> Path | None:
    """The notebook this kernel runs, as Jupyter told it (``__session__``, ``JPY_SESSION_NAME``)."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        name = shell.user_ns.get("__session__") if shell is not None else None
    except ImportError:
        name = None
    name = name or os.environ.get("JPY_SESSION_NAME")
    return Path(name) if name and str(name).endswith(".ipynb") else None


def send(path: str | Path | None = None, lesson: str | None = None) -> Receipt:
    """Hand in the notebook at ``path`` (this notebook, as last saved, by default); the exchange's receipt."""
    path = Path(path) if path is not None else this_notebook()
    if path is None:
        raise ExchangeError(t("classroom.submit.which"))
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ExchangeError(t("classroom.submit.read", path=path, why=os.strerror(e.errno or 0))) from None
    if len(data) > MAX_NOTEBOOK:
        raise ExchangeError(t("classroom.exchange.large", mib=MAX_NOTEBOOK >> 20))
    service = _service()
    if service is not None:
        url, token = service
        query = urllib.parse.urlencode({"name": path.name, **({"lesson": lesson} if lesson else {})})
        got = json.loads(_ask("POST", f"{url}submit?{query}", token, data))
        return Receipt(**got)
    folder = envvars.get("LABKIT_EXCHANGE")
    if not folder:
        raise ExchangeError(t("classroom.submit.nowhere"))
    return Exchange(folder, _course()).receive(getpass.getuser(), data, path.name, lesson)


def _course() -> Any:
    from labkit.classroom.course import load

    path = envvars.get("LABKIT_COURSE")
    return load(path) if path else None


class Submitted:
    """What ``labkit.submit()`` shows in the notebook: the receipt, in the student's language (None: the
    notebook is being graded, and nothing was handed in)."""

    def __init__(self, receipt: Receipt | None) -> None:
        self.receipt = receipt

    def __repr__(self) -> str:
        return receipt_text(self.receipt) if self.receipt is not None else t("classroom.submit.grading")


def submit(path: str | Path | None = None, lesson: str | None = None) -> Submitted:
    """``labkit.submit()``: hand in this notebook (as last saved: save it first), and say when it was received.
    The cell is in the notebook handed in, so ``labkit grade`` runs it too: there it hands nothing in (it
    has no exchange to reach) and says so, rather than fail a cell of every report (seen on the live hub)."""
    if envvars.get("LABKIT_GRADING"):
        return Submitted(None)
    return Submitted(send(path, lesson))


def fetch_feedback(dest: str | Path | None = None) -> list[Path]:
    """The feedback released to this student, copied into ``dest`` (``~/feedback``); the files written.
    On the one-server hub ``~/feedback`` is the exchange's folder itself, and nothing is copied."""
    dest = Path(dest) if dest is not None else Path.home() / FEEDBACK_DIR
    service = _service()
    written = []
    if service is not None:
        url, token = service
        names = json.loads(_ask("GET", f"{url}feedback", token, timeout=10))  # labkit.progress() waits for it
        if dest.is_symlink():  # the hub's own link: already there
            return []
        dest.mkdir(parents=True, exist_ok=True)
        for name in names:
            if "/" in name or name.startswith("."):
                continue
            target = dest / name
            if target.is_symlink():
                target.unlink()
            target.write_bytes(_ask("GET", f"{url}feedback/{urllib.parse.quote(name)}", token, timeout=10))
            written.append(target)
    return written


def released_grades(folder: str | Path | None = None) -> dict[str, float]:
    """{lesson: points} released to this student (``grades.json`` in ``~/feedback``, fetched when the
    exchange service is known); {} when nothing was released."""
    folder = Path(folder) if folder is not None else Path.home() / FEEDBACK_DIR
    if not (folder / GRADES).is_file():
        try:
            if _service() is not None:
                fetch_feedback(folder)
        except ExchangeError:
            return {}
    try:
        grades = json.loads((folder / GRADES).read_text())
    except (OSError, ValueError):
        return {}
    lessons = grades.get("lessons", {}) if isinstance(grades, dict) else {}
    return {k: float(v["points"]) for k, v in lessons.items() if isinstance(v, dict) and "points" in v}
