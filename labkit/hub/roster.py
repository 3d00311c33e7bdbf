"""The class's roster: who logs in to the hub, under which account, as what (``hub.sh --roster FILE``).

    id,name,email,lang,role,sis_id
    ana,Ana Pop,ana.pop@uni.example,ro,student,S1001
    prof,Ion Ionescu,ion@uni.example,,instructor,

A CSV file with a header, comma- or semicolon-separated (Romanian Excel saves ``;``), as an LMS's
participant export is after its columns are renamed. ``id`` is the hub's user name and the student's
account on this server (their home, their uid); it is the only column needed. ``email`` lets a single
sign-on (OIDC, LTI 1.3) that names people by their e-mail map each one to their ``id``; ``role`` is
``student`` (the default) or ``instructor`` (a JupyterHub admin who reads every submission); ``lang``
(``en``, ``ro``) and ``sis_id`` are kept for the gradebook's exports. A mistake is refused with the line
that holds it.

The course file (``hub.sh --course course.toml``, labkit.classroom.course) is a roster too: its
``[[students]]`` and ``[[instructors]]`` are read here into the same ``Roster``, so one file is enough for
the hub's logins and the exchange's deadlines (``read_roster`` takes either, by the name's ``.toml``).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

from labkit.i18n import t

ROLES = ("student", "instructor")
LANGS = ("en", "ro")
# what useradd takes and JupyterHub keeps as it is (it lowercases a login name before it maps it)
ID = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")


class RosterError(ValueError):
    """A roster the hub cannot take; the message names the file and the line."""


@dataclass(frozen=True)
class Person:
    id: str
    name: str = ""
    email: str = ""
    lang: str = ""
    role: str = "student"
    sis_id: str = ""


@dataclass(frozen=True)
class Roster:
    people: tuple[Person, ...]

    @property
    def students(self) -> tuple[str, ...]:
        return tuple(p.id for p in self.people if p.role == "student")

    @property
    def instructors(self) -> tuple[str, ...]:
        return tuple(p.id for p in self.people if p.role == "instructor")

    def username_map(self) -> dict[str, str]:
        """What a single sign-on may call each person (their e-mail, lowercased as JupyterHub does) -> their id."""
        return {p.email.lower(): p.id for p in self.people if p.email}


def read_roster(path: str) -> Roster:
    """The roster in ``path`` (a CSV file, or a course file ending in ``.toml``); ``RosterError`` naming
    the line of the first mistake."""
    if path.endswith(".toml"):
        return course_roster(path)
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:  # Excel's CSV starts with a BOM
            text = f.read()
    except OSError as e:
        raise RosterError(t("hub.roster.unreadable", path=path, error=e.strerror or e)) from None
    return parse_roster(text, path)


def parse_roster(text: str, path: str = "roster") -> Roster:
    first = text.split("\n", 1)[0]
    delimiter = ";" if first.count(";") > first.count(",") else ","
    reader = csv.DictReader(io.StringIO(text), delimiter=delimiter)
    columns = [c.strip().lower() for c in reader.fieldnames or []]
    if "id" not in columns:
        raise RosterError(t("hub.roster.no_id", path=path))
    unknown = [c for c in columns if c not in Person.__dataclass_fields__]
    if unknown:
        raise RosterError(t("hub.roster.column", path=path, columns=", ".join(unknown)))
    reader.fieldnames = columns
    people: list[Person] = []
    seen: dict[str, int] = {}
    for row in reader:
        line = reader.line_num
        values = {k: (v or "").strip() for k, v in row.items() if k is not None}
        if not any(values.values()):
            continue
        person = _person(values, path, line)
        for key in (person.id, person.email.lower()):
            if key and key in seen:
                raise RosterError(t("hub.roster.twice", path=path, line=line, value=key, first=seen[key]))
            if key:
                seen[key] = line
        people.append(person)
    if not people:
        raise RosterError(t("hub.roster.empty", path=path))
    return Roster(tuple(people))


def course_roster(path: str) -> Roster:
    """The course file's students and instructors as the hub's roster (their ids checked as account names)."""
    from pathlib import Path

    from labkit.classroom.course import CourseError, KeyLines, load

    try:
        course = load(path)
    except CourseError as e:
        raise RosterError(str(e)) from None
    people = [Person(s.id, s.name, s.email, s.language, "student", s.sis_id) for s in course.students]
    people += [Person(p.id, p.name, p.email, "", "instructor") for p in course.instructors]
    for i, person in enumerate(people):
        if not ID.fullmatch(person.id):  # the course file allows more (@, capitals) than an account takes
            n, table = (i, "students") if i < len(course.students) else (i - len(course.students), "instructors")
            line = KeyLines(Path(path).read_text(encoding="utf-8")).line((table, n, "id"))
            raise RosterError(t("hub.roster.bad_id", path=path, line=line, id=person.id))
    if not people:
        raise RosterError(t("hub.roster.empty", path=path))
    return Roster(tuple(people))


def _person(values: dict[str, str], path: str, line: int) -> Person:
    person = Person(**{**values, "role": values.get("role") or "student"})
    if not ID.fullmatch(person.id):
        raise RosterError(t("hub.roster.bad_id", path=path, line=line, id=person.id))
    if person.role not in ROLES:
        raise RosterError(t("hub.roster.role", path=path, line=line, role=person.role))
    if person.lang and person.lang not in LANGS:
        raise RosterError(t("hub.roster.lang", path=path, line=line, code=person.lang))
    if person.email and "@" not in person.email:
        raise RosterError(t("hub.roster.email", path=path, line=line, email=person.email))
    return person


def main(argv: list[str] | None = None) -> int:
    """``python -m labkit.hub.roster FILE students|instructors``: the ids, comma-separated (for hub.sh)."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[1] not in ("students", "instructors"):
        print("usage: python -m labkit.hub.roster FILE students|instructors", file=sys.stderr)
        return 2
    try:
        roster = read_roster(args[0])
    except RosterError as e:
        print(e, file=sys.stderr)
        return 1
    print(",".join(roster.students if args[1] == "students" else roster.instructors))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
