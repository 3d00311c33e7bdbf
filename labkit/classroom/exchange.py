"""The submission exchange: notebooks handed in, each a read-only snapshot stamped by the server.

    <exchange>/inbound/<student>/<lesson>/<stamp>-<sha>.ipynb    the notebook as received (0444; inbound/ is 0700)
    <exchange>/inbound/<student>/<lesson>/<stamp>-<sha>.json     its receipt: who, when (the server's clock), late
    <exchange>/feedback/<student>/...                            the reports ``labkit feedback`` released

Only the exchange's owner writes there: the service (``labkit.classroom.service``, a JupyterHub service
that knows a student by their hub token) on a hub, or the instructor's own commands. A student never
writes into it, so neither the time stamp nor an earlier snapshot can be changed; what they send is a
notebook's bytes, and the name it is filed under is the server's.

``labkit collect`` reads it with ``lstat`` and refuses links (as ``labkit.grading.collect``), and copies
per student and lesson the submission the late policy chooses into the layout ``labkit grade`` reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Collection
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from labkit.classroom.course import NAME, Course
from labkit.i18n import t
from labkit.wire.errors import OptionError

MAX_NOTEBOOK = 64 << 20  # bytes of one submission (labkit.grading.grade reads no more)
INBOUND, FEEDBACK = "inbound", "feedback"


class ExchangeError(OptionError):
    """A submission refused, or an exchange that cannot be used; the message says why."""


@dataclass
class Receipt:
    student: str
    lesson: str
    name: str  # the notebook's name as the student had it
    received: str  # ISO time, UTC, from the server's clock
    sha256: str
    size: int
    late_days: int = 0
    factor: float = 1.0  # the late policy's multiplier of the points
    accepted: bool = True
    file: str = ""  # the snapshot, relative to the exchange

    @property
    def when(self) -> datetime:
        return datetime.fromisoformat(self.received)

    @property
    def late(self) -> bool:
        return self.late_days > 0


def lesson_of(data: bytes) -> str | None:
    """The lesson a notebook says it is (``metadata.labkit.lesson``), else the prefix of its first check's id."""
    nb = json.loads(data.decode("utf-8"))
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError("not a notebook")
    meta = nb.get("metadata", {}).get("labkit", {})
    if isinstance(meta, dict) and isinstance(meta.get("lesson"), str):
        return meta["lesson"]
    import re

    for cell in nb["cells"]:
        source = cell.get("source", "") if isinstance(cell, dict) else ""
        source = "".join(source) if isinstance(source, list) else str(source)
        found = re.search(r"""labkit\.check\(\s*["']([A-Za-z0-9_-]+)\.""", source)
        if found:
            return found.group(1)
    return None


class Exchange:
    """The exchange folder, used by its owner: receive a snapshot, list them, release feedback."""

    def __init__(self, root: str | Path, course: Course | None = None) -> None:
        self.root = Path(root)
        self.course = course

    def receive(self, student: str, data: bytes, name: str, lesson: str | None = None,
                now: datetime | None = None) -> Receipt:  # fmt: skip
        """File ``data`` as ``student``'s submission, stamped ``now`` (the server's clock: never the sender's)."""
        if not NAME.match(student):
            raise ExchangeError(t("classroom.exchange.student", student=student))
        if len(data) > MAX_NOTEBOOK:
            raise ExchangeError(t("classroom.exchange.large", mib=MAX_NOTEBOOK >> 20))
        try:
            lesson = lesson or lesson_of(data)
        except (ValueError, UnicodeDecodeError):
            raise ExchangeError(t("classroom.exchange.not_notebook")) from None
        if not lesson or not NAME.match(lesson):
            raise ExchangeError(t("classroom.exchange.no_lesson"))
        if self.course is not None:
            if self.course.student(student) is None:
                raise ExchangeError(t("classroom.exchange.not_enrolled", student=student))
            if self.course.lesson(lesson) is None:
                raise ExchangeError(t("classroom.exchange.unknown_lesson", lesson=lesson))
        now = (now or datetime.now(UTC)).astimezone(UTC)
        late = self.course.lateness(lesson, now) if self.course is not None else None
        digest = hashlib.sha256(data).hexdigest()
        stem = f"{now.strftime('%Y%m%dT%H%M%S.%fZ')}-{digest[:12]}"
        folder = self._folder(INBOUND, student, lesson)
        rel = f"{INBOUND}/{student}/{lesson}/{stem}.ipynb"
        receipt = Receipt(student, lesson, os.path.basename(name)[:200] or "notebook.ipynb", now.isoformat(),
                          digest, len(data), late.days if late else 0, late.factor if late else 1.0,
                          late.accepted if late else True, rel)  # fmt: skip
        _write_once(folder / f"{stem}.ipynb", data)
        _write_once(folder / f"{stem}.json", json.dumps(asdict(receipt), indent=1).encode())
        return receipt

    def _folder(self, kind: str, student: str, *parts: str) -> Path:
        """``<root>/<kind>/<student>/...``, made as needed. ``inbound`` is closed to others (0700, or the
        hub's 0750 for its instructors' group): on a hub a student could otherwise list it and read another's
        notebook (found on the live hub). A student's feedback folder is the owner's (0700) until the hub
        gives it to them at their first login (``labkit.hub.homes``: 0750, their group)."""
        top = self.root / kind
        top.mkdir(parents=True, exist_ok=True, mode=0o700 if kind == INBOUND else 0o755)
        mode = top.stat().st_mode
        if kind == INBOUND and mode & 0o007:
            top.chmod(mode & 0o770)  # an exchange made before inbound/ was closed
        folder = top / student
        folder.mkdir(exist_ok=True, mode=0o755 if kind == INBOUND else 0o700)
        if parts:
            folder = folder.joinpath(*parts)
            folder.mkdir(parents=True, exist_ok=True, mode=0o755)
        return folder

    def receipts(self, student: str | Collection[str] | None = None,
                 lesson: str | Collection[str] | None = None) -> list[Receipt]:  # fmt: skip
        """The receipts filed (of these students and lessons: all when None), oldest first; nothing is
        followed through a link."""
        students, lessons = _names(student), _names(lesson)
        out = []
        for sdir in _entries(self.root / INBOUND):
            if students is not None and sdir.name not in students:
                continue
            for ldir in _entries(Path(sdir.path)):
                if lessons is not None and ldir.name not in lessons:
                    continue
                for entry in _entries(Path(ldir.path), files=True):
                    if entry.name.endswith(".json"):
                        data = _read_plain(Path(entry.path), 1 << 20)
                        try:
                            out.append(Receipt(**json.loads(data)))
                        except (TypeError, ValueError):
                            continue
        return sorted(out, key=lambda r: (r.student, r.lesson, r.received))

    def snapshot(self, receipt: Receipt) -> bytes:
        """A receipt's notebook, read without following a link; its hash checked."""
        data = _read_plain(self.root / receipt.file, MAX_NOTEBOOK)
        if hashlib.sha256(data).hexdigest() != receipt.sha256:
            raise ExchangeError(t("classroom.exchange.changed", file=receipt.file))
        return data

    def feedback_folder(self, student: str) -> Path:
        if not NAME.match(student):
            raise ExchangeError(t("classroom.exchange.student", student=student))
        return self._folder(FEEDBACK, student)

    def feedback_files(self, student: str) -> dict[str, Path]:
        """{name: path} of the feedback released to ``student`` (regular files only)."""
        folder = self.root / FEEDBACK / student
        return {e.name: Path(e.path) for e in _entries(folder, files=True)} if NAME.match(student) else {}


def _names(given: str | Collection[str] | None) -> set[str] | None:
    if given is None or (not isinstance(given, str) and not given):
        return None
    return {given} if isinstance(given, str) else set(given)


def _entries(folder: Path, files: bool = False) -> list[os.DirEntry]:
    """A folder's plain subfolders (or regular files), by name; links and the rest are skipped."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    keep = []
    for e in entries:
        if e.name.startswith(".") or e.is_symlink():
            continue
        mode = e.stat(follow_symlinks=False).st_mode
        if (stat.S_ISREG(mode) if files else stat.S_ISDIR(mode)) and (files or NAME.match(e.name)):
            keep.append(e)
    return keep


def _read_plain(path: Path, limit: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ExchangeError(t("classroom.exchange.not_file", file=path.name))
        return f.read(limit + 1)[:limit]


def _write_once(path: Path, data: bytes) -> None:
    """Written beside, then linked in place: a snapshot is never written over, and is read-only."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, path)  # fails if it exists: the same student, lesson, microsecond and hash
    finally:
        os.unlink(tmp)


# -- collect: per student and lesson, the submission the policy chooses ----------------------------------


@dataclass
class Collected:
    chosen: list[Receipt]
    refused: list[tuple[str, str]]  # (student/lesson, why): after the cutoff


def choose(receipts: list[Receipt], course: Course | None) -> Collected:
    """Per student and lesson: the latest on-time submission, else (or with ``prefer = "latest"``) the
    latest one the late policy accepts; one past the cutoff is never chosen."""
    by: dict[tuple[str, str], list[Receipt]] = {}
    for r in receipts:
        by.setdefault((r.student, r.lesson), []).append(r)
    chosen, refused = [], []
    for (student, lesson), mine in sorted(by.items()):
        mine.sort(key=lambda r: r.received)
        if course is not None:  # the course file now, which may have moved a deadline since
            for r in mine:
                late = course.lateness(lesson, r.when)
                r.late_days, r.factor, r.accepted = late.days, late.factor, late.accepted
        prefer = course.policy(lesson).prefer if course is not None else "latest"
        on_time = [r for r in mine if not r.late]
        accepted = [r for r in mine if r.accepted]
        pick = on_time[-1] if prefer == "on_time" and on_time else (accepted[-1] if accepted else None)
        if pick is None:
            refused.append((f"{student}/{lesson}", t("classroom.collect.cutoff", n=len(mine))))
        else:
            chosen.append(pick)
    return Collected(chosen, refused)


def collect(exchange: Exchange, dest: str | Path, student: str | Collection[str] | None = None,
            lesson: str | Collection[str] | None = None) -> Collected:  # fmt: skip
    """Copy the chosen submissions to ``dest/<student>/<lesson>.ipynb`` (what ``labkit grade`` reads), each
    with its receipt beside it (``<lesson>.receipt.json``: the late marks the exports use)."""
    got = choose(exchange.receipts(student, lesson), exchange.course)
    dest = Path(dest)
    for r in got.chosen:
        folder = dest / r.student
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{r.lesson}.ipynb"
        if target.is_symlink():
            target.unlink()
        target.write_bytes(exchange.snapshot(r))
        (folder / f"{r.lesson}.receipt.json").write_text(json.dumps(asdict(r), indent=1) + "\n")
    return got


def receipts_in(submissions: str | Path) -> dict[tuple[str, str], Receipt]:
    """The receipts ``collect`` wrote beside the notebooks: {(student, lesson): receipt}."""
    out = {}
    for path in Path(submissions).glob("*/*.receipt.json"):
        if path.is_symlink():
            continue
        try:
            r = Receipt(**json.loads(path.read_text()))
        except (OSError, TypeError, ValueError):
            continue
        out[(r.student, r.lesson)] = r
    return out


def receipt_text(r: Receipt, lang: str | None = None) -> str:
    """One line a student reads after handing in."""
    key = "classroom.submit.late" if r.late else "classroom.submit.on_time"
    return t(key, lang, lesson=r.lesson, when=r.received, sha=r.sha256[:12], days=r.late_days)
