"""Submit and collect (issue 48): a student hands a notebook to the exchange service with their JupyterHub
token; the server stamps it with its own clock and files a read-only snapshot; late marks follow the
course file; ``collect`` takes per student and lesson the latest on-time submission (or the late one the
policy accepts) into the layout ``labkit grade`` reads, and follows no link.

The hub is stood in for by its one API call the service makes (``GET /hub/api/user`` with a token), on a
port of this machine; the service is the real one, over HTTP.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from labkit.classroom import client
from labkit.classroom.course import parse
from labkit.classroom.exchange import Exchange, ExchangeError, choose, collect
from labkit.classroom.service import make_server
from labkit.grading.collect import collect as grading_collect
from labkit.i18n import language

TOKENS = {"tok-ana": "ana", "tok-ben": "ben", "tok-cid": "cid"}


def course_text(now: datetime, prefer: str = "on_time") -> str:
    soon, past = (now + timedelta(hours=1)).isoformat(), (now - timedelta(hours=36)).isoformat()
    students = "".join(f'[[students]]\nid = "{s}"\n\n' for s in ("ana", "ben", "cid"))
    return f"""
[course]
name = "test"
[late]
per_day = 0.1
cutoff_days = 3
prefer = "{prefer}"
{students}
[[lessons]]
id = "fixture"
deadline = {soon}
points = 10
[[lessons]]
id = "lesson1"
deadline = {past}
points = 10
"""


def notebook(lesson: str = "fixture", text: str = "x = 1") -> bytes:
    nb = new_notebook(cells=[new_code_cell(text), new_code_cell(f'labkit.check("{lesson}.q", x)')])
    return nbformat.writes(nb).encode()


class FakeHubApi(BaseHTTPRequestHandler):
    """The hub's ``GET /hub/api/user``: the model of the token's owner, 403 for any other token."""

    def do_GET(self) -> None:
        token = self.headers.get("Authorization", "").removeprefix("token ")
        name = TOKENS.get(token)
        if self.path != "/hub/api/user" or name is None:
            self.send_response(403)
            self.end_headers()
            return
        body = json.dumps({"kind": "user", "name": name, "admin": False}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def service(tmp_path):
    hub = ThreadingHTTPServer(("127.0.0.1", 0), FakeHubApi)
    course = parse(course_text(datetime.now(UTC)))
    root = tmp_path / "exchange"
    api = f"http://127.0.0.1:{hub.server_address[1]}/hub/api"
    server = make_server(root, course, api, 0, prefix="/services/exchange/")
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (hub, server)]
    for th in threads:
        th.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/services/exchange/"
    yield url, root, course
    for s in (hub, server):
        s.shutdown()
        s.server_close()


def as_student(monkeypatch, url: str, token: str) -> None:
    monkeypatch.setenv("LABKIT_EXCHANGE_URL", url)
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", token)


def test_submit_is_stamped_by_the_server_and_filed_read_only(service, monkeypatch, tmp_path):
    url, root, _ = service
    work = tmp_path / "ana-home" / "lesson.ipynb"
    work.parent.mkdir()
    work.write_bytes(notebook())
    os.utime(work, (0, 0))  # the student's own clock says 1970: it counts for nothing
    as_student(monkeypatch, url, "tok-ana")
    before = datetime.now(UTC)
    receipt = client.send(work)
    after = datetime.now(UTC)
    assert receipt.student == "ana" and receipt.lesson == "fixture" and receipt.name == "lesson.ipynb"
    assert before <= receipt.when <= after and not receipt.late
    snapshot = root / receipt.file
    assert snapshot.read_bytes() == work.read_bytes()
    assert stat.S_IMODE(snapshot.stat().st_mode) == 0o444
    assert stat.S_IMODE((root / "inbound" / "ana").stat().st_mode) & 0o022 == 0  # nobody else writes there
    work.write_bytes(notebook(text="x = 2"))  # edited after handing in: the snapshot is what was sent
    assert snapshot.read_bytes() != work.read_bytes()
    second = client.send(work)
    assert second.file != receipt.file and snapshot.exists()  # a new snapshot beside, never over the first
    assert [r.sha256 for r in Exchange(root).receipts("ana")] == [receipt.sha256, second.sha256]
    with language("en"):
        assert "on time" in repr(client.Submitted(second)) and "server time" in repr(client.Submitted(second))
    # the graded copy runs its labkit.submit() cell too: under labkit grade it hands nothing in, and says so
    monkeypatch.setenv("LABKIT_GRADING", "1")
    with language("en"):
        assert repr(client.submit(work)) == "Not handed in again: this notebook is being graded."
    assert len(Exchange(root).receipts("ana")) == 2


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_another_account_cannot_reach_the_inbound_nor_write_a_snapshot(tmp_path):
    import shutil
    import tempfile

    top = Path(tempfile.mkdtemp(prefix="labkit-exchange-"))  # 0700: opened below for the test only
    try:
        os.chmod(top, 0o755)
        ex = Exchange(top / "exchange", parse(course_text(datetime.now(UTC))))
        receipt = ex.receive("ana", notebook(), "a.ipynb")
        snapshot, folder = top / "exchange" / receipt.file, (top / "exchange" / receipt.file).parent

        def as_nobody(command: str, *paths: Path) -> int:
            return subprocess.run(["sh", "-c", command, "sh", *map(str, paths)], user="nobody",
                                  capture_output=True).returncode  # fmt: skip

        inbound = top / "exchange" / "inbound"
        # inbound/ is closed: no other account lists it or reads a snapshot (on the live hub a student read
        # another's notebook through it before)
        assert as_nobody('ls "$1"', inbound) != 0 and as_nobody('test -r "$1"', snapshot) != 0
        os.chmod(inbound, 0o755)  # opened (the hub opens it to its instructors' group): the modes still refuse
        assert as_nobody('test -r "$1"', snapshot) == 0  # reachable: the refusals below are the modes
        assert as_nobody('echo x >> "$1"', snapshot) != 0
        assert as_nobody('echo x > "$1"/new.ipynb', folder) != 0
        assert as_nobody('mv "$1" "$1.moved"', snapshot) != 0
        ex.receive("ben", notebook(), "b.ipynb")  # an exchange opened to everyone is closed at its next receipt
        assert inbound.stat().st_mode & 0o777 == 0o750
    finally:
        shutil.rmtree(top)


def _saved(folder: Path, data: bytes, name: str = "lesson.ipynb") -> Path:
    path = folder / name
    path.write_bytes(data)
    return path


def test_the_service_knows_students_by_their_token_only(service, monkeypatch, tmp_path):
    url, root, _ = service
    path = _saved(tmp_path, notebook())
    as_student(monkeypatch, url, "forged")
    with pytest.raises(ExchangeError, match="403"):
        client.send(path)
    # a student cannot name another student, nor a time: the query's extra fields mean nothing
    import urllib.request

    request = urllib.request.Request(
        f"{url}submit?name=x.ipynb&student=ben&received=2000-01-01T00:00:00%2B00:00",
        data=path.read_bytes(), method="POST", headers={"Authorization": "token tok-ana"},
    )  # fmt: skip
    got = json.loads(urllib.request.urlopen(request).read())
    assert got["student"] == "ana" and not got["received"].startswith("2000")
    assert not (root / "inbound" / "ben").exists()


def test_late_marks_follow_the_course_file(service, monkeypatch, tmp_path):
    url, _, _ = service
    as_student(monkeypatch, url, "tok-ben")
    late = client.send(_saved(tmp_path, notebook("lesson1")))
    assert (late.late_days, late.factor, late.accepted) == (2, 0.8, True)  # 36 h after: two started days
    with language("en"):
        assert "2 days late" in repr(client.Submitted(late))
    for bad, words in ((b"{not json", "not a notebook"), (notebook("lesson9"), "no lesson lesson9")):
        with language("en"), pytest.raises(ExchangeError, match=words):
            client.send(_saved(tmp_path, bad, "bad.ipynb"))


def test_collect_takes_the_latest_on_time_submission(tmp_path):
    now = datetime.now(UTC)
    course = parse(course_text(now))
    ex = Exchange(tmp_path / "exchange", course)
    deadline = course.lesson("fixture").deadline
    t = [deadline - timedelta(hours=2), deadline - timedelta(hours=1), deadline + timedelta(hours=3)]
    for i, when in enumerate(t):  # ana: two on time, then a late one
        ex.receive("ana", notebook(text=f"x = {i}"), "a.ipynb", now=when)
    ex.receive("ben", notebook(text="x = 7"), "b.ipynb", now=deadline + timedelta(days=1, hours=1))  # late only
    ex.receive("cid", notebook(text="x = 9"), "c.ipynb", now=deadline + timedelta(days=4))  # past the cutoff
    out = tmp_path / "submissions"
    got = collect(ex, out)
    chosen = {r.student: r for r in got.chosen}
    assert "x = 1" in (out / "ana" / "fixture.ipynb").read_text()  # the latest on time, not the late one
    assert not chosen["ana"].late
    assert (chosen["ben"].late_days, chosen["ben"].factor) == (2, 0.8)
    assert "cid" not in chosen and got.refused[0][0] == "cid/fixture"
    assert json.loads((out / "ben" / "fixture.receipt.json").read_text())["late_days"] == 2
    found = grading_collect(out)  # the layout labkit grade reads
    assert sorted(found.notebooks) == ["ana", "ben"] and not found.refused
    latest = choose(ex.receipts(), parse(course_text(now, prefer="latest")))
    assert "x = 2" in ex.snapshot(next(r for r in latest.chosen if r.student == "ana")).decode()


def test_collect_follows_no_link_and_notices_a_changed_snapshot(tmp_path):
    course = parse(course_text(datetime.now(UTC)))
    ex = Exchange(tmp_path / "exchange", course)
    receipt = ex.receive("ana", notebook(), "a.ipynb")
    folder = tmp_path / "exchange" / "inbound" / "ana" / "fixture"
    elsewhere = tmp_path / "forged.json"
    elsewhere.write_text(json.dumps({**json.loads((folder / Path(receipt.file).with_suffix(".json").name)
                                                  .read_text()), "received": "2099-01-01T00:00:00+00:00"}))  # fmt: skip
    (folder / "z.json").symlink_to(elsewhere)
    (tmp_path / "exchange" / "inbound" / "ben").symlink_to(folder.parent)  # a linked student folder
    assert [r.student for r in ex.receipts()] == ["ana"] and ex.receipts()[0].received == receipt.received
    snapshot = tmp_path / "exchange" / receipt.file
    snapshot.chmod(0o644)
    snapshot.write_bytes(notebook(text="x = 99"))
    with pytest.raises(ExchangeError, match="changed"):
        collect(ex, tmp_path / "out")


def test_feedback_is_served_to_its_student_only(service, monkeypatch, tmp_path):
    url, root, course = service
    ex = Exchange(root, course)
    (ex.feedback_folder("ana") / "report.md").write_text("# ana's report\n")
    (ex.feedback_folder("ana") / "grades.json").write_text(json.dumps({"lessons": {"fixture": {"points": 7.5}}}))
    as_student(monkeypatch, url, "tok-ben")
    assert client.fetch_feedback(tmp_path / "ben-feedback") == []
    as_student(monkeypatch, url, "tok-ana")
    got = client.fetch_feedback(tmp_path / "ana-feedback")
    assert sorted(p.name for p in got) == ["grades.json", "report.md"]
    assert (tmp_path / "ana-feedback" / "report.md").read_text() == "# ana's report\n"
    assert client.released_grades(tmp_path / "fresh") == {"fixture": 7.5}  # fetched when not there yet


def test_labkit_submit_and_collect_commands_with_a_local_exchange(tmp_path, monkeypatch, capsys):
    from labkit.cli import main

    course = tmp_path / "class.toml"
    course.write_text(course_text(datetime.now(UTC)))
    monkeypatch.delenv("LABKIT_EXCHANGE_URL", raising=False)
    monkeypatch.setenv("LABKIT_EXCHANGE", str(tmp_path / "exchange"))
    monkeypatch.setenv("LABKIT_COURSE", str(course))
    monkeypatch.setattr("getpass.getuser", lambda: "cid")
    with language("en"):
        assert main(["submit", str(_saved(tmp_path, notebook("lesson1")))]) == 0
        assert "Submitted lesson1" in capsys.readouterr().out
        assert main(["collect", "--out", str(tmp_path / "subs"), "--lesson", "fixture"]) == 0  # nothing of it
        assert "0 submissions collected" in capsys.readouterr().out
        assert main(["collect", "--out", str(tmp_path / "subs")]) == 0
        assert "cid lesson1" in capsys.readouterr().out and (tmp_path / "subs" / "cid" / "lesson1.ipynb").is_file()
        monkeypatch.setattr("getpass.getuser", lambda: "zed")  # not on the roster
        assert main(["submit", str(_saved(tmp_path, notebook()))]) == 2
        assert "zed is not on the course's roster" in capsys.readouterr().err
