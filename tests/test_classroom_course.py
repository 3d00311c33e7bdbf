"""The course file (issue 48): read into dataclasses, every error naming the line of the key that is wrong,
and the late policy's arithmetic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from labkit.classroom.course import CourseError, KeyLines, LatePolicy, lateness, load, parse
from labkit.i18n import language

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs/course.example.toml"


def test_the_example_is_a_valid_course():
    course = load(EXAMPLE)
    assert [s.id for s in course.students] == ["ana", "ben"]
    assert course.student("ana").language == "ro" and course.student("ana").sis_id == "RO-2026-0001"
    lesson1 = course.lesson("lesson1")
    assert lesson1.deadline == datetime(2026, 10, 19, 20, 59, tzinfo=UTC)
    assert lesson1.points == 20 and lesson1.gpu == "shared"
    assert course.policy("lesson1").per_day == 0.25 and course.policy("lesson0").per_day == 0.10
    assert course.course.locale == "ro"


def error(text: str) -> str:
    with language("en"), pytest.raises(CourseError) as info:
        parse(text, "class.toml")
    return str(info.value)


BASE = """\
[course]
name = "x"

[[students]]
id = "ana"
email = "ana@example.ro"

[[students]]
id = "ben"
{ben}

[[lessons]]
id = "lesson1"
deadline = 2026-10-19T23:59:00+03:00
{lesson}
"""


@pytest.mark.parametrize(
    "ben, lesson, line, words",
    [
        ('emial = "b@x.ro"', "", 10, ["students[1].emial", "unknown key", "email"]),  # a typo: the nearest key
        ('language = "fr"', "", 10, ["students[1].language", "'fr'"]),
        ('email = "not an address"', "", 10, ["students[1].email"]),
        ("", "points = -1", 15, ["lessons[0].points", "negative"]),
        ("", 'gpu = "two"', 15, ["lessons[0].gpu", "GPU profile"]),
        ("", 'points = "ten"', 15, ["lessons[0].points", "expected float, got str"]),
        ("", "[lessons.late]\nper_day = 2", 16, ["lessons[0].late.per_day", "between 0 and 1"]),
        ("", '[lessons.late]\nprefer = "first"', 16, ["lessons[0].late.prefer"]),
    ],
)
def test_an_error_names_the_file_line_and_key(ben, lesson, line, words):
    text = BASE.format(ben=ben, lesson=lesson)
    message = error(text)
    assert message.startswith(f"class.toml:{line}: "), message
    for word in words:
        assert word in message


def test_a_deadline_without_a_time_zone_is_refused_at_its_line():
    text = BASE.format(ben="", lesson="").replace("2026-10-19T23:59:00+03:00", "2026-10-19T23:59:00")
    message = error(text)
    assert message.startswith("class.toml:14: lessons[0].deadline") and "time zone" in message
    text = BASE.format(ben="", lesson="").replace("2026-10-19T23:59:00+03:00", '"next friday"')
    assert error(text).startswith("class.toml:14: lessons[0].deadline")
    text = BASE.format(ben="", lesson="").replace("2026-10-19T23:59:00+03:00", '"2026-10-19T23:59:00+03:00"')
    assert parse(text).lessons[0].deadline.utcoffset() == timedelta(hours=3)  # ISO in a string is a date too


def test_a_missing_key_names_its_table():
    message = error('[course]\nname = "x"\n\n[[lessons]]\nid = "l1"\n')
    assert message.startswith("class.toml:4: lessons[0]") and "deadline is missing" in message


def test_broken_toml_says_where():
    message = error('[course]\nname = "x\n')
    assert message.startswith("class.toml: not a valid TOML file") and "line 2" in message


def test_romanian_errors():
    with language("ro"), pytest.raises(CourseError) as info:
        parse(BASE.format(ben="", lesson="points = -1"), "c.toml")
    assert "c.toml:15: lessons[0].points: -1,0 este negativ" == str(info.value)  # a Romanian number


def test_a_student_twice_is_refused_at_the_second():
    text = BASE.format(ben="", lesson="").replace('id = "ben"', 'id = "ana"')
    assert error(text).startswith("class.toml:9: students[1].id: 'ana' is given twice")


@pytest.mark.parametrize(
    "ben, key, value",
    [
        ('email = "Ana@Example.ro"', "email", "Ana@Example.ro"),  # one address, whatever its case
        ('id = "ANA"', "id", "ANA"),  # JupyterHub lowercases a login
        ('email = "ben@example.ro"\nsis_id = "7"\n[[students]]\nid = "cy"\nsis_id = "7"', "sis_id", "7"),
    ],
)
def test_an_email_or_university_id_twice_is_refused(ben, key, value):
    """A single sign-on logs a person in by their e-mail and Moodle or Canvas match grades on it (or on the
    SIS id): two people sharing one would share an account or a grade."""
    text = BASE.format(ben=ben, lesson="").replace('id = "ben"\nid = "ANA"', 'id = "ANA"')
    message = error(text)
    assert f".{key}: {value!r} is given twice" in message, message


def test_key_lines_of_nested_tables_and_inline_keys():
    lines = KeyLines('[course]\nname = "x"\n[[lessons]]\nid = "a"\n[[lessons]]\nid = "b"\nlate = { per_day = 2 }\n')
    assert lines.line(("lessons", 1, "id")) == 6
    assert lines.line(("lessons", 1, "late", "per_day")) == 7  # an inline table's key: its table's line
    assert lines.line(("course", "name")) == 2


def test_lateness_per_started_day_grace_and_cutoff():
    deadline = datetime(2026, 10, 19, 21, 0, tzinfo=UTC)
    policy = LatePolicy(per_day=0.1, cutoff_days=3, grace_minutes=5)
    assert lateness(deadline, deadline + timedelta(minutes=4), policy).days == 0
    one = lateness(deadline, deadline + timedelta(minutes=6), policy)
    assert (one.days, one.factor, one.accepted, one.late) == (1, 0.9, True, True)
    three = lateness(deadline, deadline + timedelta(days=2, hours=1), policy)
    assert (three.days, round(three.factor, 6)) == (3, 0.7)
    past = lateness(deadline, deadline + timedelta(days=3, minutes=6), policy)
    assert (past.accepted, past.factor) == (False, 0.0)
    assert not lateness(deadline, deadline + timedelta(seconds=1), LatePolicy()).accepted  # no late work by default
