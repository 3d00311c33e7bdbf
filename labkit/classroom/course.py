"""The course file, ``course.toml``: the roster, the lessons with their deadlines, the late policy, the
points and the GPU profile of each lesson (docs/classroom.md; docs/course.example.toml).

    course = load("course.toml")
    course.lesson("lesson1").deadline        # an aware datetime
    course.lateness("lesson1", received)     # Lateness(days=2, factor=0.8, accepted=True)

Read with ``tomllib`` into a tree of dataclasses; every error names the file and the line of the key
that is wrong (tomllib keeps no line numbers, so ``KeyLines`` finds them in the text), and a key the
file does not know is an error with the nearest known one suggested, never silently ignored.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import types
import typing
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import tomllib

from labkit.i18n import LANGS, t
from labkit.wire.errors import OptionError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$")  # a student's or a lesson's id: one path component
GPU = re.compile(r"^(shared|\d{1,2})$")  # labkit.hub.gpus' profiles: a number of GPUs, or a shared one


class CourseError(OptionError):
    """The course file is wrong; the message names the file, the line and the key."""


@dataclass
class LatePolicy:
    per_day: float = 0.0  # the share of the lesson's points lost per day late (a started day counts)
    cutoff_days: float = 0.0  # later than this many days: not accepted (0: no late submission at all)
    grace_minutes: float = 0.0  # this late still counts as on time (a clock, an upload)
    prefer: str = "on_time"  # on_time: the latest on-time submission if any; latest: the latest accepted


@dataclass
class Student:
    id: str  # the login name: the hub's user, the exchange's folder, the gradebook's student
    name: str = ""
    email: str = ""
    sis_id: str = ""  # the university's id (Canvas' SIS User ID, Moodle's idnumber)
    language: str = "en"  # the language of their reports
    section: str = ""


@dataclass
class Instructor:
    id: str  # their hub login: a JupyterHub admin who reads every submission
    name: str = ""
    email: str = ""  # what a single sign-on (OIDC, LTI 1.3) may name them by


@dataclass
class Lesson:
    id: str  # the lesson id of the notebooks' checks ("lesson1")
    deadline: datetime
    title: str = ""
    points: float = 0.0  # what the lesson is worth in the course (0: its questions' own points)
    gpu: str = "shared"  # the hub's GPU profile for this lesson
    late: LatePolicy | None = None  # this lesson's own policy; None: the course's
    canvas_id: int = 0  # the Canvas assignment's id, for ``labkit export --canvas`` (0: a new assignment)


@dataclass
class Info:
    name: str
    locale: str = "en"  # the instructor's: the separator and decimal mark of ``labkit export --csv``
    moodle_id: str = "email"  # the column Moodle matches students on: email, idnumber or username


@dataclass
class Course:
    course: Info
    students: list[Student] = field(default_factory=list)
    instructors: list[Instructor] = field(default_factory=list)  # the hub's admins (hub.sh --course)
    lessons: list[Lesson] = field(default_factory=list)
    late: LatePolicy = field(default_factory=LatePolicy)
    source: str = ""

    def student(self, sid: str) -> Student | None:
        return next((s for s in self.students if s.id == sid), None)

    def lesson(self, lid: str) -> Lesson | None:
        return next((lesson for lesson in self.lessons if lesson.id == lid), None)

    def policy(self, lid: str) -> LatePolicy:
        lesson = self.lesson(lid)
        return lesson.late if lesson is not None and lesson.late is not None else self.late

    def lateness(self, lid: str, received: datetime) -> Lateness:
        """How late ``received`` is for lesson ``lid``, and what the policy makes of it."""
        lesson = self.lesson(lid)
        if lesson is None:  # a lesson with no deadline: on time
            return Lateness(0, 1.0, True)
        return lateness(lesson.deadline, received, self.policy(lid))


@dataclass(frozen=True)
class Lateness:
    days: int  # started days after the deadline (and its grace); 0: on time
    factor: float  # what the points are multiplied by
    accepted: bool  # within the cutoff

    @property
    def late(self) -> bool:
        return self.days > 0


def lateness(deadline: datetime, received: datetime, policy: LatePolicy) -> Lateness:
    over = received - deadline - timedelta(minutes=policy.grace_minutes)
    if over <= timedelta(0):
        return Lateness(0, 1.0, True)
    days = math.ceil(over / timedelta(days=1))
    accepted = over <= timedelta(days=policy.cutoff_days)
    return Lateness(days, max(0.0, 1.0 - policy.per_day * days) if accepted else 0.0, accepted)


# -- where a key is in the text -------------------------------------------------------------------------

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_.-]+)\s*=""")


def _dotted(text: str) -> tuple[str, ...]:
    return tuple(part.strip().strip("\"'") for part in text.split("."))


class KeyLines:
    """The line of each key and table in a TOML text, by its path (``("students", 1, "email")``)."""

    def __init__(self, text: str) -> None:
        self.lines: dict[tuple[Any, ...], int] = {}
        counts: dict[tuple[str, ...], int] = {}
        table: tuple[Any, ...] = ()
        for n, line in enumerate(text.splitlines(), 1):
            header = _HEADER.match(line)
            if header:
                names = self._indexed(_dotted(header.group(2)), counts)
                if header.group(1) == "[[":
                    i = counts[names] = counts.get(names, -1) + 1
                    table = (*names, i)
                else:
                    table = names
                self.lines.setdefault(table, n)
                continue
            key = _KEY.match(line)
            if key:
                self.lines.setdefault((*table, *_dotted(key.group(1))), n)

    @staticmethod
    def _indexed(names: tuple[str, ...], counts: dict[tuple[Any, ...], int]) -> tuple[Any, ...]:
        """``[lessons.late]`` under the second ``[[lessons]]`` is ``("lessons", 1, "late")``."""
        path: tuple[Any, ...] = ()
        for i, name in enumerate(names):
            path = (*path, name)
            if i < len(names) - 1 and path in counts:
                path = (*path, counts[path])
        return path

    def line(self, path: tuple[Any, ...]) -> int | None:
        """The line of ``path``, or of the nearest table or key above it (a key of an inline table)."""
        for end in range(len(path), 0, -1):
            if path[:end] in self.lines:
                return self.lines[path[:end]]
        return None


# -- the dataclass tree, filled and checked ---------------------------------------------------------------


class _Reader:
    def __init__(self, source: str, lines: KeyLines) -> None:
        self.source, self.lines = source, lines

    def fail(self, path: tuple[Any, ...], key: str, **fields: Any) -> CourseError:
        line = self.lines.line(path)
        where = f"{self.source}:{line}" if line else self.source
        name = ".".join(str(p) if isinstance(p, str) else f"[{p}]" for p in path).replace(".[", "[")
        return CourseError(t("classroom.course.at", where=where, path=name or "-", why=t(key, **fields)))

    def build(self, cls: type, data: Any, path: tuple[Any, ...]) -> Any:
        if not isinstance(data, dict):
            raise self.fail(path, "classroom.course.table")
        hints = typing.get_type_hints(cls)
        known = {f.name: f for f in dataclasses.fields(cls) if f.name != "source"}
        values = {}
        for key, value in data.items():
            if key not in known:
                near = difflib.get_close_matches(key, list(known), 1)
                raise self.fail((*path, key), "classroom.course.unknown", known=", ".join(known),
                                near=near[0] if near else "-")  # fmt: skip
            values[key] = self.value(hints[key], value, (*path, key))
        for name, f in known.items():
            if name not in values and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise self.fail(path, "classroom.course.missing", name=name)
        return cls(**values)

    def value(self, hint: Any, value: Any, path: tuple[Any, ...]) -> Any:
        args = typing.get_args(hint)
        if isinstance(hint, types.UnionType):  # X | None: a TOML file has no null, so it is the X
            return self.value(next(a for a in args if a is not type(None)), value, path)
        if typing.get_origin(hint) is list:
            if not isinstance(value, list):
                raise self.fail(path, "classroom.course.type", want="array", got=type(value).__name__)
            return [self.value(args[0], v, (*path, i)) for i, v in enumerate(value)]
        if dataclasses.is_dataclass(hint):
            return self.build(hint, value, path)
        if hint is datetime:
            return self.when(value, path)
        if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if hint is str and isinstance(value, int) and not isinstance(value, bool):
            return str(value)  # gpu = 1, sis_id = 1001
        if not isinstance(value, hint):
            raise self.fail(path, "classroom.course.type", want=hint.__name__, got=type(value).__name__)
        return value

    def when(self, value: Any, path: tuple[Any, ...]) -> datetime:
        if isinstance(value, str):
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                raise self.fail(path, "classroom.course.date", value=value) from None
        if not isinstance(value, datetime):
            raise self.fail(path, "classroom.course.date", value=value)
        if value.tzinfo is None:
            raise self.fail(path, "classroom.course.timezone", value=value.isoformat())
        return value


def _check(course: Course, r: _Reader) -> None:
    """What each field's type cannot say: ids, languages, emails, ranges, unique names."""
    seen: set[str] = set()  # ids and e-mails, lowercased: a login may be either
    people: list[tuple[str, int, Student | Instructor]] = [
        *(("students", i, s) for i, s in enumerate(course.students)),
        *(("instructors", i, p) for i, p in enumerate(course.instructors)),
    ]
    sis: set[str] = set()
    for table, i, s in people:  # one login is one person: a student or an instructor, once
        at = (table, i)
        if not NAME.match(s.id):
            raise r.fail((*at, "id"), "classroom.course.id", value=s.id)
        if s.id.lower() in seen:
            raise r.fail((*at, "id"), "classroom.course.twice", value=s.id)
        seen.add(s.id.lower())
        if isinstance(s, Student) and s.language not in LANGS:
            raise r.fail((*at, "language"), "classroom.course.language", value=s.language, langs=", ".join(LANGS))
        if s.email and not re.match(r"^[^@\s]+@[^@\s]+$", s.email):
            raise r.fail((*at, "email"), "classroom.course.email", value=s.email)
        # A single sign-on logs a person in by their e-mail (lowercased, as JupyterHub does), and Moodle
        # matches grades on it: two people with one address would get one account and one grade.
        if s.email and s.email.lower() in seen:
            raise r.fail((*at, "email"), "classroom.course.twice", value=s.email)
        if s.email:
            seen.add(s.email.lower())
        if isinstance(s, Student) and s.sis_id:  # Canvas' SIS id and Moodle's idnumber match on it too
            if s.sis_id in sis:
                raise r.fail((*at, "sis_id"), "classroom.course.twice", value=s.sis_id)
            sis.add(s.sis_id)
    lessons: set[str] = set()
    for i, lesson in enumerate(course.lessons):
        at = ("lessons", i)
        if not NAME.match(lesson.id) or lesson.id in lessons:
            raise r.fail((*at, "id"), "classroom.course.twice" if lesson.id in lessons else "classroom.course.id",
                         value=lesson.id)  # fmt: skip
        lessons.add(lesson.id)
        if lesson.points < 0:
            raise r.fail((*at, "points"), "classroom.course.negative", value=lesson.points)
        if not GPU.match(lesson.gpu):
            raise r.fail((*at, "gpu"), "classroom.course.gpu", value=lesson.gpu)
        if lesson.late is not None:
            _check_policy(lesson.late, (*at, "late"), r)
    _check_policy(course.late, ("late",), r)
    if course.course.locale not in LANGS:
        raise r.fail(("course", "locale"), "classroom.course.language", value=course.course.locale,
                     langs=", ".join(LANGS))  # fmt: skip
    if course.course.moodle_id not in ("email", "idnumber", "username"):
        raise r.fail(("course", "moodle_id"), "classroom.course.moodle_id", value=course.course.moodle_id)


def _check_policy(p: LatePolicy, at: tuple[Any, ...], r: _Reader) -> None:
    if not 0 <= p.per_day <= 1:
        raise r.fail((*at, "per_day"), "classroom.course.per_day", value=p.per_day)
    for name in ("cutoff_days", "grace_minutes"):
        if getattr(p, name) < 0:
            raise r.fail((*at, name), "classroom.course.negative", value=getattr(p, name))
    if p.prefer not in ("on_time", "latest"):
        raise r.fail((*at, "prefer"), "classroom.course.prefer", value=p.prefer)


def parse(text: str, source: str = "<course>") -> Course:
    """The course in ``text``; ``CourseError`` naming ``source``'s line when anything is wrong."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:  # its message says the line and column
        raise CourseError(t("classroom.course.toml", source=source, error=e)) from None
    r = _Reader(source, KeyLines(text))
    course = r.build(Course, data, ())
    _check(course, r)
    course.source = source
    return course


def load(path: str | Path) -> Course:
    """The course file at ``path`` (``CourseError`` when it cannot be read or is wrong)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CourseError(t("classroom.course.read", source=path, error=type(e).__name__)) from None
    return parse(text, str(path))
