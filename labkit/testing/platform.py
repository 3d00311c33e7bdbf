"""A sign-on provider and an LMS for the tests, on 127.0.0.1: an OpenID Connect provider and an LTI 1.3
platform with a grade service, in one small HTTP server with an RSA key made when it starts.

    platform = start_platform({"ana": {"email": "ana.pop@uni.example", "password": "..."}})
    platform.issuer            # http://127.0.0.1:PORT (its /.well-known/openid-configuration, /jwks)
    platform.tool_jwks = ...   # the tool's public keys, as an LMS admin pastes them at registration
    platform.scores            # every score the tool posted: (lineitem path, the score's JSON)
    platform.stop()

OpenID Connect (authorization code, PKCE checked when asked): ``/authorize`` shows a login form, its POST
checks the password and sends the browser back with a code; ``/token`` gives an RS256 id_token for it.
LTI 1.3: ``launch_url(...)`` is the initiation an LMS sends the tool; ``/lti/auth`` answers the tool's
authentication request with the self-posting form of a signed launch (an LtiResourceLinkRequest whose
grade-service claim names a line item here); ``/token`` also takes the tool's client-credentials grant,
its JWT checked against ``tool_jwks``; ``<lineitem>/scores`` records a score posted with that token.
Nothing leaves the machine.
"""

from __future__ import annotations

import hashlib
import html
import json
import secrets
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography.hazmat.primitives.asymmetric import rsa

from labkit.hub import lti

CLIENT_ID = "labkit-hub"
LTI_CLIENT_ID = "labkit-tool"
DEPLOYMENT = "deployment-1"


@dataclass
class Platform:
    server: ThreadingHTTPServer
    users: dict[str, dict[str, str]]  # login -> claims (email, name, ...) and its password
    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)
    )
    client_secret: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    tool_jwks: list[dict[str, str]] = field(default_factory=list)
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    ags_tokens: set[str] = field(default_factory=set)
    scores: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # why a request was refused, for a failing test to show

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def token_url(self) -> str:
        return self.issuer + "/token"

    def lineitem(self, link: str) -> str:
        return f"{self.issuer}/lineitems/{link}/lineitem"

    def launch_url(self, hub: str, login: str, link: str, lesson: str | None = None) -> str:
        """The third-party initiation an LMS makes when ``login`` opens the activity ``link``."""
        hint = json.dumps({"link": link, "lesson": lesson})
        query = {"iss": self.issuer, "login_hint": login, "target_link_uri": hub + "/hub/", "lti_message_hint": hint,
                 "client_id": LTI_CLIENT_ID}  # fmt: skip
        return f"{hub}/hub/lti13/oauth_login?{urllib.parse.urlencode(query)}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- what the handlers make ------------------------------------------------------------------

    def id_token(self, login: str, audience: str, nonce: str | None, extra: dict[str, Any] | None = None) -> str:
        user = {k: v for k, v in self.users[login].items() if k != "password"}
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": f"sub-{login}", "aud": audience, "iat": now, "exp": now + 300, **user}
        if nonce:
            claims["nonce"] = nonce
        return lti.sign_jwt({**claims, **(extra or {})}, self.key)

    def launch_claims(self, hint: dict[str, Any]) -> dict[str, Any]:
        link = hint["link"]
        return {
            "https://purl.imsglobal.org/spec/lti/claim/message_type": "LtiResourceLinkRequest",
            "https://purl.imsglobal.org/spec/lti/claim/version": "1.3.0",
            lti.DEPLOYMENT_CLAIM: DEPLOYMENT,
            "https://purl.imsglobal.org/spec/lti/claim/target_link_uri": "",
            "https://purl.imsglobal.org/spec/lti/claim/roles": [
                "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"
            ],
            lti.LINK_CLAIM: {"id": link},
            lti.CUSTOM_CLAIM: {"lesson": hint["lesson"]} if hint.get("lesson") else {},
            lti.AGS_CLAIM: {"scope": [lti.SCORE_SCOPE], "lineitem": self.lineitem(link)},
        }


class Handler(BaseHTTPRequestHandler):
    platform: Platform

    def log_message(self, *args: Any) -> None:  # quiet: the test says what failed
        pass

    def _send(self, status: int, body: Any, kind: str = "application/json", headers: dict[str, str] | None = None):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _refuse(self, status: int, why: str) -> None:
        self.platform.refused.append(why)
        self._send(status, {"error": why})

    def _form(self) -> dict[str, str]:
        length = int(self.headers.get("Content-Length") or 0)
        return dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        p = self.platform
        if url.path == "/.well-known/openid-configuration":
            self._send(200, {"issuer": p.issuer, "authorization_endpoint": p.issuer + "/authorize",
                             "token_endpoint": p.token_url, "jwks_uri": p.issuer + "/jwks"})  # fmt: skip
        elif url.path == "/jwks":
            self._send(200, {"keys": [lti.jwk(p.key.public_key())]})
        elif url.path == "/authorize":  # the provider's login page; its fields carry the request on
            hidden = "".join(
                f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in query.items()
            )
            form = f'<form method="post" action="/authorize">{hidden}<input name="login"><input name="password"></form>'
            self._send(200, form, "text/html")
        elif url.path == "/lti/auth":
            self._lti_auth(query)
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        if path == "/authorize":
            self._authorize(self._form())
        elif path == "/token":
            self._token(self._form())
        elif path == "/lti/auth":
            self._lti_auth(self._form())
        elif path.startswith("/lineitems/") and path.endswith("/scores"):
            self._score(path)
        else:
            self._send(404, {"error": "not found"})

    def _authorize(self, form: dict[str, str]) -> None:
        p = self.platform
        user = p.users.get(form.get("login", ""))
        if user is None or form.get("password") != user["password"]:
            return self._refuse(401, "wrong password")
        if form.get("client_id") != CLIENT_ID or form.get("response_type") != "code":
            return self._refuse(400, f"an authorization request for {form.get('client_id')!r}")
        code = secrets.token_urlsafe(16)
        p.codes[code] = {"login": form["login"], **form}
        back = {"code": code, "state": form.get("state", "")}
        self._send(302, "", headers={"Location": f"{form['redirect_uri']}?{urllib.parse.urlencode(back)}"})

    def _token(self, form: dict[str, str]) -> None:
        if form.get("grant_type") == "client_credentials":
            return self._ags_token(form)
        p = self.platform
        asked = p.codes.pop(form.get("code", ""), None)
        if asked is None or form.get("redirect_uri") != asked["redirect_uri"]:
            return self._refuse(400, "an unknown code, or another redirect_uri")
        secret = form.get("client_secret")
        if secret is None and self.headers.get("Authorization", "").startswith("Basic "):
            import base64

            secret = base64.b64decode(self.headers["Authorization"][6:]).decode().partition(":")[2]
        if secret != p.client_secret:
            return self._refuse(401, "a wrong client secret")
        if asked.get("code_challenge"):  # PKCE, S256
            verifier = form.get("code_verifier", "").encode()
            if lti.b64url(hashlib.sha256(verifier).digest()) != asked["code_challenge"]:
                return self._refuse(400, "a PKCE verifier that does not match")
        token = p.id_token(asked["login"], CLIENT_ID, asked.get("nonce"))
        self._send(200, {"access_token": secrets.token_urlsafe(16), "token_type": "Bearer", "id_token": token,
                         "expires_in": 300})  # fmt: skip

    def _ags_token(self, form: dict[str, str]) -> None:
        p = self.platform
        if form.get("client_assertion_type") != lti.ASSERTION_TYPE or lti.SCORE_SCOPE not in form.get("scope", ""):
            return self._refuse(400, "not an LTI Advantage token request")
        claims = None
        for key in p.tool_jwks:
            try:
                claims = lti.verify_jwt(form.get("client_assertion", ""), lti.public_from_jwk(key), p.token_url)
                break
            except lti.LtiError as e:
                p.refused.append(str(e))
        if claims is None or claims.get("iss") != LTI_CLIENT_ID or claims.get("sub") != LTI_CLIENT_ID:
            return self._refuse(401, "a client assertion the tool's registered keys do not verify")
        token = secrets.token_urlsafe(16)
        p.ags_tokens.add(token)
        self._send(200, {"access_token": token, "token_type": "Bearer", "expires_in": 3600, "scope": lti.SCORE_SCOPE})

    def _lti_auth(self, args: dict[str, str]) -> None:
        p = self.platform
        needed = ("client_id", "redirect_uri", "login_hint", "nonce", "state")
        if (
            args.get("response_type") != "id_token"
            or args.get("response_mode") != "form_post"
            or not all(args.get(k) for k in needed)
        ):
            return self._refuse(400, f"not an LTI authentication request: {sorted(args)}")
        if args["client_id"] != LTI_CLIENT_ID or args["login_hint"] not in p.users:
            return self._refuse(400, "another client, or an unknown user")
        hint = json.loads(args.get("lti_message_hint") or "{}")
        token = p.id_token(args["login_hint"], LTI_CLIENT_ID, args["nonce"], p.launch_claims(hint))
        fields = {"id_token": token, "state": args["state"]}
        inputs = "".join(f'<input type="hidden" name="{k}" value="{html.escape(v)}">' for k, v in fields.items())
        page = (f'<form id="launch" method="post" action="{html.escape(args["redirect_uri"])}">{inputs}</form>'
                '<script>document.getElementById("launch").submit()</script>')  # fmt: skip
        self._send(200, page, "text/html")

    def _score(self, path: str) -> None:
        p = self.platform
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or auth[7:] not in p.ags_tokens:
            return self._refuse(401, "a score without the grade service's token")
        if self.headers.get("Content-Type") != lti.SCORE_TYPE:
            return self._refuse(415, f"a score as {self.headers.get('Content-Type')}")
        length = int(self.headers.get("Content-Length") or 0)
        score = json.loads(self.rfile.read(length))
        missing = {"userId", "scoreGiven", "scoreMaximum", "activityProgress", "gradingProgress", "timestamp"} - set(
            score
        )
        if missing:
            return self._refuse(400, f"a score without {sorted(missing)}")
        p.scores.append((path.removesuffix("/scores"), score))
        self._send(200, {})


def start_platform(users: dict[str, dict[str, str]]) -> Platform:
    """The platform, serving on a free port of 127.0.0.1 from a thread of this process."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    platform = Platform(server, users)
    server.RequestHandlerClass = type("Bound", (Handler,), {"platform": platform})
    threading.Thread(target=server.serve_forever, daemon=True, name="test-platform").start()
    return platform
