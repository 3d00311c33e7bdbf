"""How students log in to the class hub, and grades passed back to the LMS, without starting a hub: the
roster, the authenticators' configuration (read from a local OpenID provider), the JWTs, and LTI grade
passback posted to a local LMS that records each score (labkit.testing.platform).

The live logins, through the real authenticators in a hub started by launch/hub.sh, are in
tests/test_hub_login_live.py.
"""

from __future__ import annotations

import csv
import json
import time

import pytest

from labkit.hub import lti
from labkit.hub.roster import RosterError, parse_roster, read_roster
from labkit.testing.platform import CLIENT_ID, LTI_CLIENT_ID, start_platform

ROSTER = "\ufeffid;name;email;lang;role;sis_id\nana;Ana Pop;Ana.Pop@uni.example;ro;;S1\nben;Ben;ben@uni.example;en;student;S2\nprof;Prof;prof@uni.example;;instructor;\n"  # fmt: skip


@pytest.fixture
def platform():
    running = start_platform(
        {
            "ana": {"email": "ana.pop@uni.example", "name": "Ana Pop", "password": "pa"},
            "ben": {"email": "ben@uni.example", "name": "Ben", "password": "pb"},
        }
    )
    yield running
    running.stop()


# -- the roster -----------------------------------------------------------------------------------------


def test_a_roster_from_a_romanian_spreadsheet():
    roster = parse_roster(ROSTER.lstrip("\ufeff"))
    assert roster.students == ("ana", "ben") and roster.instructors == ("prof",)
    assert roster.username_map() == {"ana.pop@uni.example": "ana", "ben@uni.example": "ben", "prof@uni.example": "prof"}
    assert roster.people[0].sis_id == "S1" and roster.people[0].lang == "ro"


@pytest.mark.parametrize(
    "text,said",
    [
        ("name,email\nAna,a@x\n", "no id column"),
        ("id,group\nana,1\n", "columns the hub does not know: group"),
        ("id,email\nana,a@x\nben,b@x\nana,c@x\n", "line 4: ana is already on line 2"),
        ("id,email\nana,a@x\nben,A@X\n", "line 3: a@x is already on line 2"),
        ("id\nana\nAna Pop\n", "line 3: the id 'Ana Pop' is not an account name"),
        ("id,role\nana,teacher\n", "line 2: the role 'teacher' is neither student nor instructor"),
        ("id,lang\nana,fr\n", "line 2: the language 'fr' is neither en nor ro"),
        ("id,email\nana,ana-at-uni\n", "line 2: 'ana-at-uni' is not an e-mail address"),
        ("id\n\n", "names nobody"),
    ],
)
def test_a_roster_mistake_is_refused_with_its_line(text, said):
    with pytest.raises(RosterError, match=said):
        parse_roster(text, "class.csv")


COURSE = """[course]
name = "x"

[[students]]
id = "ana"
email = "Ana.Pop@uni.example"
language = "ro"
sis_id = "S1"

[[students]]
id = "ben"

[[instructors]]
id = "prof"
email = "prof@uni.example"

[[lessons]]
id = "lesson1"
deadline = 2026-10-19T23:59:00+03:00
"""


def test_the_course_file_is_a_roster(tmp_path):
    course = tmp_path / "class.toml"
    course.write_text(COURSE)
    roster = read_roster(str(course))
    assert roster.students == ("ana", "ben") and roster.instructors == ("prof",)
    assert roster.username_map() == {"ana.pop@uni.example": "ana", "prof@uni.example": "prof"}
    assert roster.people[0].sis_id == "S1" and roster.people[0].lang == "ro"


@pytest.mark.parametrize(
    "change,said",
    [
        (('id = "ben"', 'id = "Ben"'), "class.toml, line 11: the id 'Ben' is not an account name"),
        (('id = "prof"', 'id = "ana"'), "class.toml:14: instructors.0.id: 'ana' is given twice"),
    ],
)
def test_a_course_roster_mistake_is_refused_with_its_line(tmp_path, change, said):
    course = tmp_path / "class.toml"
    course.write_text(COURSE.replace(*change))
    with pytest.raises(RosterError) as info:
        read_roster(str(course))
    assert said.replace("instructors.0", "instructors[0]") in str(info.value)


# -- the authenticators' configuration --------------------------------------------------------------------


def configured(monkeypatch, tmp_path, **env):
    pytest.importorskip("jupyterhub", reason="the hub extra: pip install -e .[hub]")
    from traitlets.config import Config

    from labkit.hub import config, homes, settings

    monkeypatch.setattr(homes, "ensure_instructors_group", lambda s: 0)  # groupadd is root's
    roster = tmp_path / "class.csv"
    roster.write_text(ROSTER)
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    base = {
        "LABKIT_HUB_DIR": str(tmp_path),
        "LABKIT_HUB_ROSTER": str(roster),
        "LABKIT_HUB_OIDC_SECRET_FILE": str(secret),
    }
    for name, value in {**base, **env}.items():
        monkeypatch.setenv(name, value)
    c = Config()
    s = settings.from_env()
    config.configure(c, s)
    return c, s


def test_a_roster_hub_with_system_passwords(monkeypatch, tmp_path):
    c, _ = configured(monkeypatch, tmp_path)
    assert c.JupyterHub.authenticator_class == "jupyterhub.auth.PAMAuthenticator"
    assert c.Authenticator.allowed_users == {"ana", "ben", "prof"} and c.Authenticator.admin_users == {"prof"}


def test_the_course_file_alone_says_who_logs_in(monkeypatch, tmp_path):
    course = tmp_path / "class.toml"
    course.write_text(COURSE.replace('id = "ben"', 'id = "cat"'))
    c, s = configured(monkeypatch, tmp_path, LABKIT_HUB_ROSTER="", LABKIT_HUB_COURSE=str(course))
    assert c.Authenticator.allowed_users == {"ana", "cat", "prof"} and c.Authenticator.admin_users == {"prof"}
    assert s.course == str(course) and "--course" in c.JupyterHub.services[1]["command"]
    c, _ = configured(monkeypatch, tmp_path, LABKIT_HUB_COURSE=str(course))  # with the CSV: both rosters' people
    assert c.Authenticator.allowed_users == {"ana", "ben", "cat", "prof"}


def test_openid_connect_reads_the_providers_configuration(monkeypatch, tmp_path, platform):
    c, _ = configured(
        monkeypatch, tmp_path, LABKIT_HUB_LOGIN="oidc", LABKIT_HUB_OIDC_ISSUER=platform.issuer,
        LABKIT_HUB_OIDC_CLIENT_ID=CLIENT_ID, LABKIT_HUB_PUBLIC_URL="https://hub.uni.example/",
    )  # fmt: skip
    assert c.JupyterHub.authenticator_class == "oauthenticator.generic.GenericOAuthenticator"
    a = c.GenericOAuthenticator
    assert (a.authorize_url, a.token_url) == (platform.issuer + "/authorize", platform.token_url)
    assert a.client_id == CLIENT_ID and a.client_secret == "s3cret" and a.username_claim == "email"
    assert a.oauth_callback_url == "https://hub.uni.example/hub/oauth_callback"
    assert c.Authenticator.username_map["ana.pop@uni.example"] == "ana"


def test_openid_connect_without_its_provider_does_not_start(monkeypatch, tmp_path, platform):
    from labkit.hub.login import LoginError

    with pytest.raises(LoginError, match="LABKIT_HUB_OIDC_ISSUER"):
        configured(monkeypatch, tmp_path, LABKIT_HUB_LOGIN="oidc", LABKIT_HUB_OIDC_CLIENT_ID=CLIENT_ID)
    gone = platform.issuer + "/nothing-here"
    with pytest.raises(LoginError, match="could not be read from .*/nothing-here/.well-known/openid-configuration"):
        configured(monkeypatch, tmp_path, LABKIT_HUB_LOGIN="oidc", LABKIT_HUB_OIDC_ISSUER=gone,
                   LABKIT_HUB_OIDC_CLIENT_ID=CLIENT_ID)  # fmt: skip
    with pytest.raises(LoginError, match="'saml' is none of pam, oidc, lti13"):
        configured(monkeypatch, tmp_path, LABKIT_HUB_LOGIN="saml")


def test_lti13_checks_launches_against_the_platforms_keys(monkeypatch, tmp_path, platform):
    c, _ = configured(
        monkeypatch, tmp_path, LABKIT_HUB_LOGIN="lti13", LABKIT_HUB_LTI_ISSUER=platform.issuer,
        LABKIT_HUB_LTI_CLIENT_ID=LTI_CLIENT_ID, LABKIT_HUB_LTI_AUTHORIZE_URL=platform.issuer + "/lti/auth",
        LABKIT_HUB_LTI_JWKS_URL=platform.issuer + "/jwks",
    )  # fmt: skip
    assert c.JupyterHub.authenticator_class == "ltiauthenticator.lti13.auth.LTI13Authenticator"
    a = c.LTI13Authenticator
    assert a.client_id == {LTI_CLIENT_ID} and a.jwks_endpoint == platform.issuer + "/jwks" and a.username_key == "email"
    assert c.Authenticator.post_auth_hook is lti.remember_launch


# -- JWTs -------------------------------------------------------------------------------------------------


def test_a_signed_token_verifies_and_a_changed_one_does_not(platform):
    key = platform.key
    now = int(time.time())
    token = lti.sign_jwt({"aud": "x", "exp": now + 60, "sub": "ana"}, key)
    assert lti.verify_jwt(token, lti.public_from_jwk(lti.jwk(key.public_key())), "x")["sub"] == "ana"
    head, body, sig = token.split(".")
    forged = ".".join([head, lti.b64url(json.dumps({"aud": "x", "exp": now + 60, "sub": "ben"}).encode()), sig])
    with pytest.raises(lti.LtiError, match="does not verify"):
        lti.verify_jwt(forged, key.public_key())
    with pytest.raises(lti.LtiError, match="another audience"):
        lti.verify_jwt(token, key.public_key(), "y")
    with pytest.raises(lti.LtiError, match="expired"):
        lti.verify_jwt(lti.sign_jwt({"exp": now - 1}, key), key.public_key())


def test_the_tool_key_is_made_once_and_kept_private(tmp_path):
    path = tmp_path / "lti" / "tool-key.pem"
    first = lti.tool_key(path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert lti.jwk(lti.tool_key(path).public_key()) == lti.jwk(first.public_key())


# -- grade passback ------------------------------------------------------------------------------------------


def graded(folder, rows: dict[str, dict[str, tuple[float, float]]]) -> None:
    """What labkit grade writes, for these students' lessons: gradebook.csv and each report.json."""
    lessons = sorted({k for r in rows.values() for k in r})
    maxima = {k: max(r[k][1] for r in rows.values() if k in r) for k in lessons}
    with open(folder / "gradebook.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", *lessons, "total", "max_points", "percent"])
        for student, mine in rows.items():
            total = sum(p for p, _ in mine.values())
            w.writerow([student, *(mine.get(k, (0, 0))[0] for k in lessons), total, sum(maxima.values()), ""])
    for student, mine in rows.items():
        (folder / student).mkdir()
        lessons_json = {k: {"points": p, "max_points": m} for k, (p, m) in mine.items()}
        (folder / student / "report.json").write_text(json.dumps({"student": student, "lessons": lessons_json}))


def test_passback_posts_each_launchs_lesson_or_total(tmp_path, platform):
    state, reports = tmp_path / "hub", tmp_path / "reports"
    reports.mkdir()
    graded(reports, {"ana": {"00_setup": (3, 4), "01_memory": (5, 10)}, "ben": {"00_setup": (4, 4)}})
    # ana opened the lesson 01 activity and the course's; ben the lesson 01 activity (he handed in nothing there)
    for user, link, lesson in [
        ("ana", "link-01", "01_memory"),
        ("ana", "link-course", None),
        ("ben", "link-01", "01_memory"),
    ]:
        claims = {
            "iss": platform.issuer,
            "sub": f"sub-{user}",
            **platform.launch_claims({"link": link, "lesson": lesson}),
        }
        lti.record_launch(str(state), user, claims)
    lti.record_launch(str(state), "ben", {"sub": "sub-ben"})  # a launch without the grade service: nothing kept
    launches = lti.read_launches(lti.launches_file(str(state)))
    assert lti.launches_file(str(state)).stat().st_mode & 0o777 == 0o600
    key = lti.tool_key(state / "lti" / "tool-key.pem")
    platform.tool_jwks = [lti.jwk(key.public_key())]  # the LMS admin registered the tool's key
    tool = lti.Platform(platform.issuer, LTI_CLIENT_ID, platform.token_url)
    done = lti.passback(reports, launches, tool, key)
    assert [(p.user, p.lesson, p.given, p.maximum, p.error) for p in done] == [
        ("ana", "01_memory", 5, 10, ""), ("ana", None, 8, 14, ""), ("ben", "01_memory", 0, 10, ""),
    ]  # fmt: skip
    got = {
        (path, s["userId"]): (s["scoreGiven"], s["scoreMaximum"], s["gradingProgress"]) for path, s in platform.scores
    }
    assert got == {
        ("/lineitems/link-01/lineitem", "sub-ana"): (5, 10, "FullyGraded"),
        ("/lineitems/link-course/lineitem", "sub-ana"): (8, 14, "FullyGraded"),
        ("/lineitems/link-01/lineitem", "sub-ben"): (0, 10, "FullyGraded"),
    }, platform.refused


def test_passback_with_a_key_the_lms_does_not_know_is_refused(tmp_path, platform):
    reports = tmp_path / "reports"
    reports.mkdir()
    graded(reports, {"ana": {"00_setup": (3, 4)}})
    platform.tool_jwks = [lti.jwk(lti.tool_key(tmp_path / "registered.pem").public_key())]
    other = lti.tool_key(tmp_path / "other.pem")
    tool = lti.Platform(platform.issuer, LTI_CLIENT_ID, platform.token_url)
    with pytest.raises(lti.LtiError, match=r"refused the token request .*\(401\)"):
        lti.passback(reports, {}, tool, other)
    assert platform.scores == []


def test_the_scores_url_keeps_the_line_items_query():
    assert lti.scores_url("https://lms.example/api/lti/courses/7/line_items/3?type=x") == (
        "https://lms.example/api/lti/courses/7/line_items/3/scores?type=x"
    )
