"""LTI 1.3 grade passback (Assignment and Grade Services): the hub's grades, posted to the LMS's gradebook.

    python -m labkit.hub.lti jwks --hub-dir /srv/labkit-hub          # the tool's public key, for the LMS
    python -m labkit.hub.lti passback reports/ --hub-dir /srv/labkit-hub

A student who opens the course from the LMS (an LTI 1.3 launch, ``hub.sh --login lti13``) logs in through
jupyterhub-ltiauthenticator; ``remember_launch`` (the hub's post-auth hook) keeps what the launch said
about grades: the student's LTI user id (``sub``), the activity's line item and the scopes the tool was
given, in ``HUB_DIR/lti/launches.json`` (root's alone). ``passback`` posts, for each remembered launch, a
score to its line item: the points of the lesson the activity names (its custom parameter
``lesson=<lesson id>``), or the course total when it names none. The tool authenticates to the
platform as LTI Advantage says: a client-credentials token request signed with the tool's own RSA key
(``HUB_DIR/lti/tool-key.pem``, made on first use; ``jwks`` prints its public half for the LMS's tool
registration), then one ``application/vnd.ims.lis.v1.score+json`` POST per score.

JSON Web Tokens are signed and checked here with ``cryptography`` (RS256), which the hub already has.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from labkit.i18n import t

AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
CUSTOM_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/custom"
LINK_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/resource_link"
DEPLOYMENT_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/deployment_id"
SCORE_SCOPE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


class LtiError(RuntimeError):
    """The platform refused or could not be reached; the message says which request and why."""


# -- JSON Web Tokens and keys (RS256) ---------------------------------------------------------------


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def jwk(public: rsa.RSAPublicKey) -> dict[str, str]:
    """The key as a JSON Web Key, its ``kid`` the RFC 7638 thumbprint (the same key, the same id)."""
    numbers = public.public_numbers()
    n = b64url(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big"))
    e = b64url(numbers.e.to_bytes((numbers.e.bit_length() + 7) // 8, "big"))
    thumb = b64url(hashlib.sha256(json.dumps({"e": e, "kty": "RSA", "n": n}, separators=(",", ":")).encode()).digest())
    return {"kty": "RSA", "alg": "RS256", "use": "sig", "kid": thumb, "n": n, "e": e}


def public_from_jwk(key: dict[str, str]) -> rsa.RSAPublicKey:
    n, e = (int.from_bytes(unb64url(key[k]), "big") for k in ("n", "e"))
    return rsa.RSAPublicNumbers(e, n).public_key()


def sign_jwt(claims: dict[str, Any], key: rsa.RSAPrivateKey) -> str:
    header = {"alg": "RS256", "typ": "JWT", "kid": jwk(key.public_key())["kid"]}
    signing = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    return f"{signing}.{b64url(key.sign(signing.encode(), padding.PKCS1v15(), hashes.SHA256()))}"


def verify_jwt(token: str, public: rsa.RSAPublicKey, audience: str | None = None) -> dict[str, Any]:
    """The claims of an RS256 token signed by ``public``'s key, unexpired (and for ``audience``); else
    ``LtiError``."""
    from cryptography.exceptions import InvalidSignature

    try:
        head, body, sig = token.split(".")
        if json.loads(unb64url(head)).get("alg") != "RS256":
            raise LtiError("not an RS256 token")
        public.verify(unb64url(sig), f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
        claims = json.loads(unb64url(body))
    except (ValueError, InvalidSignature) as e:
        raise LtiError(f"a token that does not verify ({type(e).__name__})") from None
    if claims.get("exp", 0) < time.time():
        raise LtiError("an expired token")
    aud = claims.get("aud")
    if audience is not None and audience != aud and audience not in (aud if isinstance(aud, list) else []):
        raise LtiError(f"a token for another audience ({aud!r})")
    return claims


def tool_key(path: Path) -> rsa.RSAPrivateKey:
    """The tool's private key at ``path``; made (2048-bit RSA, mode 0600) the first time."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
    loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(loaded, rsa.RSAPrivateKey):
        raise LtiError(f"{path} is not an RSA private key")
    return loaded


# -- what a launch said about grades ------------------------------------------------------------------


def launches_file(state_dir: str) -> Path:
    return Path(state_dir) / "lti" / "launches.json"


def launch_record(claims: dict[str, Any]) -> dict[str, Any] | None:
    """What passback needs from a launch's id_token: None when the activity offers no grade service."""
    ags = claims.get(AGS_CLAIM) or {}
    if not ags.get("lineitem") or SCORE_SCOPE not in (ags.get("scope") or []):
        return None
    return {
        "sub": claims.get("sub"),
        "issuer": claims.get("iss"),
        "deployment": claims.get(DEPLOYMENT_CLAIM),
        "link": (claims.get(LINK_CLAIM) or {}).get("id"),
        "lineitem": ags["lineitem"],
        "lesson": (claims.get(CUSTOM_CLAIM) or {}).get("lesson"),
        "at": int(time.time()),
    }


def record_launch(state_dir: str, user: str, claims: dict[str, Any]) -> None:
    """Keep this launch (the latest per student and activity) in ``launches.json``: written aside, renamed."""
    record = launch_record(claims)
    if record is None:
        return
    path = launches_file(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    known = read_launches(path)
    mine = [r for r in known.get(user, []) if r.get("link") != record["link"]]
    known[user] = [*mine, record]
    aside = path.with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(known, f, indent=1)
    os.replace(aside, path)


def read_launches(path: Path) -> dict[str, list[dict[str, Any]]]:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}


async def remember_launch(authenticator: Any, handler: Any, authentication: dict[str, Any]) -> dict[str, Any]:
    """JupyterHub's ``post_auth_hook`` on an LTI 1.3 hub: the launch's grade service, kept for passback."""
    from labkit.hub import spawners

    claims = authentication.get("auth_state") or {}
    if spawners.SETTINGS is not None and claims:
        record_launch(spawners.SETTINGS.state_dir, authentication["name"], claims)
    return authentication


# -- the grade service's client -----------------------------------------------------------------------


@dataclass
class Platform:
    """The LMS as the tool knows it from its registration there."""

    issuer: str
    client_id: str
    token_url: str


def _request(url: str, data: bytes, headers: dict[str, str], what: str) -> bytes:
    req = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read()
    except urllib.error.HTTPError as e:
        body = e.read()[:300].decode("utf-8", "replace")
        raise LtiError(t("hub.lti.refused", what=what, url=url, status=e.code, body=body)) from None
    except (urllib.error.URLError, OSError) as e:
        raise LtiError(t("hub.lti.unreachable", what=what, url=url, error=getattr(e, "reason", e))) from None


def access_token(platform: Platform, key: rsa.RSAPrivateKey, scopes: tuple[str, ...] = (SCORE_SCOPE,)) -> str:
    """A bearer token for the grade service: the client-credentials grant, the tool's signed JWT as its proof."""
    now = int(time.time())
    assertion = sign_jwt(
        {"iss": platform.client_id, "sub": platform.client_id, "aud": platform.token_url,
         "iat": now, "exp": now + 300, "jti": uuid.uuid4().hex},
        key,
    )  # fmt: skip
    form = {
        "grant_type": "client_credentials",
        "client_assertion_type": ASSERTION_TYPE,
        "client_assertion": assertion,
        "scope": " ".join(scopes),
    }
    body = _request(platform.token_url, urllib.parse.urlencode(form).encode(), {}, "token")
    try:
        return json.loads(body)["access_token"]
    except (ValueError, KeyError):
        raise LtiError(t("hub.lti.no_token", url=platform.token_url)) from None


def scores_url(lineitem: str) -> str:
    """The line item's scores endpoint: ``/scores`` after its path, its query kept (AGS 2.0, 3.4)."""
    scheme, netloc, path, query, fragment = urllib.parse.urlsplit(lineitem)
    return urllib.parse.urlunsplit((scheme, netloc, path.rstrip("/") + "/scores", query, fragment))


def post_score(lineitem: str, token: str, user_id: str, given: float, maximum: float, comment: str = "") -> None:
    score = {
        "userId": user_id,
        "scoreGiven": given,
        "scoreMaximum": maximum,
        "activityProgress": "Completed",
        "gradingProgress": "FullyGraded",
        "timestamp": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
    }
    if comment:
        score["comment"] = comment
    headers = {"Content-Type": SCORE_TYPE, "Authorization": f"Bearer {token}"}
    _request(scores_url(lineitem), json.dumps(score).encode(), headers, "score")


# -- passback: the graded reports, to each launch's line item -------------------------------------------


@dataclass
class Posted:
    user: str
    lesson: str | None  # None: the course total
    given: float
    maximum: float
    error: str = ""


def grades(reports: Path) -> tuple[dict[str, dict[str, tuple[float, float]]], dict[str, tuple[float, float]]]:
    """({student: {lesson: (points, max)}}, {student: (total, max)}) from ``labkit grade``'s output: the
    gradebook's totals, and each lesson's points from the students' reports (its maximum, the largest any
    report gives it: a lesson a student did not hand in is 0 of that)."""
    with open(reports / "gradebook.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    totals = {r["student"]: (float(r["total"]), float(r["max_points"])) for r in rows}
    lessons: dict[str, dict[str, tuple[float, float]]] = {}
    maxima: dict[str, float] = {}
    for folder in sorted(p for p in reports.iterdir() if (p / "report.json").is_file()):
        rep = json.loads((folder / "report.json").read_text())
        mine = {k: (v["points"], v["max_points"]) for k, v in rep.get("lessons", {}).items()}
        lessons[rep["student"]] = mine
        for k, (_, m) in mine.items():
            maxima[k] = max(maxima.get(k, 0.0), m)
    for student in totals:
        mine = lessons.setdefault(student, {})
        for k, m in maxima.items():
            mine.setdefault(k, (0.0, m))
    return lessons, totals


def passback(reports: Path, launches: dict[str, list[dict[str, Any]]], platform: Platform, key: Any) -> list[Posted]:
    """Post every remembered launch's score; what was posted (or why not), one entry a launch."""
    lessons, totals = grades(reports)
    token = access_token(platform, key)
    posted = []
    for user, records in sorted(launches.items()):
        for rec in records:
            if rec.get("issuer") not in (None, platform.issuer):
                continue  # another platform's launch: its line items are not this token's
            lesson = rec.get("lesson")
            if lesson:
                given, maximum = lessons.get(user, {}).get(lesson, (0.0, 0.0))
            else:
                given, maximum = totals.get(user, (0.0, 0.0))
            entry = Posted(user, lesson, given, maximum)
            if maximum <= 0:
                entry.error = t("hub.lti.no_grade", user=user, what=lesson or "total")
            else:
                try:
                    post_score(rec["lineitem"], token, rec["sub"], given, maximum)
                except LtiError as e:
                    entry.error = str(e)
            posted.append(entry)
    return posted


def platform_from_env() -> Platform:
    from labkit.wire import env as envvars

    return Platform(
        issuer=envvars.get("LABKIT_HUB_LTI_ISSUER") or "",
        client_id=envvars.get("LABKIT_HUB_LTI_CLIENT_ID") or "",
        token_url=envvars.get("LABKIT_HUB_LTI_TOKEN_URL") or "",
    )


def main(argv: list[str] | None = None) -> int:
    import argparse

    from labkit.wire import env as envvars

    parser = argparse.ArgumentParser(prog="python -m labkit.hub.lti", description=t("hub.lti.cli"))
    parser.add_argument("command", choices=("jwks", "passback"))
    parser.add_argument("reports", nargs="?", help=t("hub.lti.cli.reports"))
    parser.add_argument("--hub-dir", default=envvars.get("LABKIT_HUB_DIR"), help=t("hub.lti.cli.hub_dir"))
    args = parser.parse_args(argv)
    key = tool_key(Path(args.hub_dir) / "lti" / "tool-key.pem")
    if args.command == "jwks":
        print(json.dumps({"keys": [jwk(key.public_key())]}, indent=1))
        return 0
    platform = platform_from_env()
    if not (args.reports and platform.token_url and platform.client_id):
        print(t("hub.lti.cli.needs"), file=sys.stderr)
        return 2
    try:
        done = passback(Path(args.reports), read_launches(launches_file(args.hub_dir)), platform, key)
    except (LtiError, OSError) as e:
        print(e, file=sys.stderr)
        return 1
    for p in done:
        what = p.lesson or "total"
        print(p.error or t("hub.lti.posted", user=p.user, what=what, given=p.given, maximum=p.maximum))
    return 1 if any(p.error for p in done) else 0


if __name__ == "__main__":
    raise SystemExit(main())
