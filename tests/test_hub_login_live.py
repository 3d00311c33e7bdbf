"""Logging in to the live class hub through the real authenticators, against a local platform.

``launch/hub.sh --roster class.csv --login oidc`` (oauthenticator) and ``--login lti13``
(jupyterhub-ltiauthenticator) are started for real, each against the OpenID provider and LMS that
labkit.testing.platform runs on 127.0.0.1: ana signs on with her e-mail and becomes the account the
roster names; a student the roster does not name is turned away; an LTI launch's signed id_token logs
ana in, the hub remembers the activity's line item, and ``python -m labkit.hub.lti passback`` posts her
grade there. No server is spawned: what is checked is who the hub says is logged in.

    sudo .venv/bin/python -m pytest -q tests/test_hub_login_live.py      (two hub starts, about a minute)
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser

import pytest

from labkit.testing.platform import CLIENT_ID, LTI_CLIENT_ID, start_platform

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]
pytest.importorskip("oauthenticator", reason="the hub extra: pip install -e .[hub] (oauthenticator)")
pytest.importorskip("ltiauthenticator", reason="the hub extra: pip install -e .[hub] (jupyterhub-ltiauthenticator)")
requests = pytest.importorskip("requests")


class Form(HTMLParser):
    """The first form of a page: its action and its fields."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.action, self.fields = None, {}
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and self.action is None:
            self.action = a.get("action")
        elif tag == "input" and a.get("name"):
            self.fields[a["name"]] = a.get("value") or ""


@pytest.fixture(scope="module")
def setup():
    from labkit.testing import hub as live

    try:
        live.check_possible()
    except live.HubUnavailable as why:
        pytest.skip(str(why))
    users = live.make_users(["ana", "ben"], ["prof"])
    platform = start_platform({
        "ana": {"email": "Ana.Pop@uni.example", "password": "pa"},  # the provider's own case: mapped all the same
        "eve": {"email": "eve@elsewhere.example", "password": "pe"},
    })  # fmt: skip
    folder = tempfile.mkdtemp(prefix="labkit-hublogin-")
    roster = os.path.join(folder, "class.csv")
    with open(roster, "w") as f:
        f.write("id;name;email;role\nlkhub-ana;Ana Pop;ana.pop@uni.example;student\n")
        f.write("lkhub-ben;Ben;ben@uni.example;\nlkhub-prof;Prof;prof@uni.example;instructor\n")
    yield users, platform, folder, roster
    platform.stop()
    live.remove_users(users)
    shutil.rmtree(folder, ignore_errors=True)


def start(folder: str, roster: str, env: dict[str, str]):
    """hub.sh with the roster alone (no --students): the state folder is shared, so the second start reuses
    the student editions the first one built."""
    from labkit.testing import hub as live

    hub = live.start_hub(folder, {}, env={**env, "LABKIT_HUB_ROSTER": roster}, timeout=300)
    return hub


def who(session: requests.Session, hub) -> str | None:
    """The user the hub's API says this browser is (None when it is no one)."""
    xsrf = session.cookies.get("_xsrf", path="/hub/")
    got = session.get(f"{hub.url}/hub/api/user", headers={"X-XSRFToken": xsrf or ""}, allow_redirects=False)
    return got.json()["name"] if got.status_code == 200 else None


def sign_on(hub, login: str, password: str) -> requests.Session:
    s = requests.Session()
    page = s.get(f"{hub.url}/hub/oauth_login", timeout=30)  # the hub sends the browser to the provider's form
    form = Form(page.text)
    done = s.post(page.url.split("?")[0], data={**form.fields, "login": login, "password": password},
                  allow_redirects=False, timeout=30)  # fmt: skip
    if done.status_code == 302:  # back to the hub's callback: the hub logs the browser in, then sends it on
        s.get(done.headers["Location"], allow_redirects=False, timeout=60)
        s.get(f"{hub.url}/hub/home", allow_redirects=False, timeout=30)  # a page: the _xsrf cookie
    return s


def test_openid_connect_logs_the_roster_in_and_no_one_else(setup):
    users, platform, folder, roster = setup
    secret = os.path.join(folder, "oidc-secret")
    with open(os.open(secret, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(platform.client_secret)
    env = {"LABKIT_HUB_LOGIN": "oidc", "LABKIT_HUB_OIDC_ISSUER": platform.issuer,
           "LABKIT_HUB_OIDC_CLIENT_ID": CLIENT_ID, "LABKIT_HUB_OIDC_SECRET_FILE": secret}  # fmt: skip
    hub = start(folder, roster, env)
    try:
        assert who(sign_on(hub, "ana", "pa"), hub) == "lkhub-ana", (platform.refused, hub.log())
        assert who(sign_on(hub, "eve", "pe"), hub) is None  # signed on at the provider, not on the roster
        assert who(sign_on(hub, "ana", "wrong"), hub) is None
    finally:
        hub.stop()
    assert "User 'eve@elsewhere.example' not allowed" in hub.log(200000)


def test_an_lti_launch_logs_in_and_its_grade_goes_back(setup):
    users, platform, folder, roster = setup
    env = {"LABKIT_HUB_LOGIN": "lti13", "LABKIT_HUB_LTI_ISSUER": platform.issuer,
           "LABKIT_HUB_LTI_CLIENT_ID": LTI_CLIENT_ID, "LABKIT_HUB_LTI_AUTHORIZE_URL": platform.issuer + "/lti/auth",
           "LABKIT_HUB_LTI_JWKS_URL": platform.issuer + "/jwks"}  # fmt: skip
    hub = start(folder, roster, env)
    state = os.path.join(folder, "state")
    try:
        s = requests.Session()
        auth = s.get(platform.launch_url(hub.url, "ana", "link-01", "fixture"), timeout=30)  # LMS -> hub -> LMS
        launch = Form(auth.text)  # the LMS's self-posting form: the signed launch
        assert launch.action and "id_token" in launch.fields, (auth.status_code, auth.text[:300], platform.refused)
        s.post(launch.action, data=launch.fields, allow_redirects=False, timeout=60)
        s.get(f"{hub.url}/hub/home", allow_redirects=False, timeout=30)
        assert who(s, hub) == "lkhub-ana", hub.log()
        forged = dict(launch.fields, id_token=re.sub(r"\.[^.]+$", ".AAAA", launch.fields["id_token"]))
        bad = requests.Session()
        again = bad.get(platform.launch_url(hub.url, "ana", "link-01", "fixture"), timeout=30)
        forged["state"] = Form(again.text).fields["state"]
        refused = bad.post(launch.action, data=forged, allow_redirects=False, timeout=60)
        assert refused.status_code in (400, 401) and who(bad, hub) is None  # a signature the platform never made
    finally:
        hub.stop()
    launches = json.load(open(os.path.join(state, "lti", "launches.json")))
    assert [(r["sub"], r["lesson"]) for r in launches["lkhub-ana"]] == [("sub-ana", "fixture")]
    # the instructor registered the tool's key at the LMS (hub.sh wrote it), graded, and passes grades back
    platform.tool_jwks = json.load(open(os.path.join(state, "lti", "tool-jwks.json")))["keys"]
    reports = os.path.join(folder, "reports")
    os.makedirs(os.path.join(reports, "lkhub-ana"), exist_ok=True)
    with open(os.path.join(reports, "gradebook.csv"), "w", newline="") as f:
        csv.writer(f).writerows(
            [["student", "fixture", "total", "max_points", "percent"], ["lkhub-ana", 3, 3, 4, "75%"]]
        )
    with open(os.path.join(reports, "lkhub-ana", "report.json"), "w") as f:
        json.dump({"student": "lkhub-ana", "lessons": {"fixture": {"points": 3, "max_points": 4}}}, f)
    env = {**os.environ, "LABKIT_HUB_LTI_ISSUER": platform.issuer, "LABKIT_HUB_LTI_CLIENT_ID": LTI_CLIENT_ID,
           "LABKIT_HUB_LTI_TOKEN_URL": platform.token_url, "LABKIT_LANG": "en"}  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "labkit.hub.lti", "passback", reports, "--hub-dir", state],
                          capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert done.returncode == 0, (done.stdout, done.stderr, platform.refused)
    assert "posted lkhub-ana fixture: 3/4" in done.stdout
    assert [(p, s["userId"], s["scoreGiven"], s["scoreMaximum"]) for p, s in platform.scores] == [
        ("/lineitems/link-01/lineitem", "sub-ana", 3, 4)
    ]
