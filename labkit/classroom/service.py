"""The exchange as a JupyterHub service: the one writer of the exchange folder, on every spawner.

    python -m labkit.classroom.service --root /srv/labkit-hub/exchange --course course.toml --port 8765

JupyterHub starts it (``c.JupyterHub.services``, ``service_config``) with ``JUPYTERHUB_API_URL`` and its
own token in the environment, and proxies ``/services/exchange/`` to it. A request carries the student's
JupyterHub token (``Authorization: token ...``: the ``JUPYTERHUB_API_TOKEN`` of their server, which their
kernels inherit); the service asks the hub whose it is (``GET <api>/user``, what ``HubAuth.user_for_token``
does), so a student submits as themselves only, and the time stamp is this process's clock.

    POST submit?name=N[&lesson=L]   the notebook's bytes    -> 201, the receipt
    GET  receipts                                           -> the student's receipts
    GET  feedback                                           -> the names of their released feedback files
    GET  feedback/<name>                                    -> one of them
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from labkit.classroom.exchange import MAX_NOTEBOOK, Exchange, ExchangeError
from labkit.i18n import t

NAME = "exchange"
TOKEN_CACHE = 60  # seconds a token's owner is remembered (the hub is asked once a minute per token)


class HubUsers:
    """Who a JupyterHub token belongs to, asked of the hub's API (``None``: nobody the hub knows)."""

    def __init__(self, api_url: str) -> None:
        self.api_url = api_url.rstrip("/")
        self._seen: dict[str, tuple[float, dict[str, Any] | None]] = {}
        self._lock = threading.Lock()

    def user(self, token: str) -> dict[str, Any] | None:
        now = time.monotonic()
        with self._lock:
            hit = self._seen.get(token)
            if hit and now - hit[0] < TOKEN_CACHE:
                return hit[1]
        request = urllib.request.Request(f"{self.api_url}/user", headers={"Authorization": f"token {token}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                model = json.loads(r.read(1 << 20))
        except urllib.error.HTTPError:  # 403: not a token of the hub's
            model = None
        found = model if isinstance(model, dict) and model.get("kind", "user") == "user" and model.get("name") else None
        with self._lock:
            self._seen[token] = (now, found)
        return found


def handler(exchange: Exchange, users: HubUsers, prefix: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "labkit-exchange"

        def log_message(self, fmt: str, *args: Any) -> None:  # one line per request, on stderr
            sys.stderr.write(f"labkit exchange: {self.address_string()} {fmt % args}\n")

        def _reply(self, code: int, body: Any, kind: str = "application/json") -> None:
            data = body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(data)

        def _who(self) -> str | None:
            auth = self.headers.get("Authorization", "")
            scheme, _, token = auth.partition(" ")
            user = users.user(token.strip()) if scheme.lower() in ("token", "bearer") and token.strip() else None
            if user is None:
                self._reply(403, {"error": t("classroom.service.forbidden")})
                return None
            return str(user["name"])

        def _route(self) -> tuple[str, dict[str, str]]:
            url = urllib.parse.urlsplit(self.path)
            path = url.path
            if path.startswith(prefix):
                path = path[len(prefix) :]
            return path.strip("/"), dict(urllib.parse.parse_qsl(url.query))

        def do_POST(self) -> None:
            student = self._who()
            if student is None:
                return
            path, query = self._route()
            size = int(self.headers.get("Content-Length") or 0)
            if path != "submit":
                return self._reply(404, {"error": path})
            if size > MAX_NOTEBOOK:
                return self._reply(413, {"error": t("classroom.exchange.large", mib=MAX_NOTEBOOK >> 20)})
            data = self.rfile.read(size)
            try:
                receipt = exchange.receive(student, data, query.get("name", ""), query.get("lesson") or None)
            except ExchangeError as e:
                return self._reply(400, {"error": str(e)})
            self._reply(201, asdict(receipt))

        def do_GET(self) -> None:
            student = self._who()
            if student is None:
                return
            path, _ = self._route()
            if path == "receipts":
                return self._reply(200, [asdict(r) for r in exchange.receipts(student)])
            files = exchange.feedback_files(student)
            if path == "feedback":
                return self._reply(200, sorted(files))
            name = path.removeprefix("feedback/")
            if path.startswith("feedback/") and name in files:
                return self._reply(200, files[name].read_bytes(), "application/octet-stream")
            self._reply(404, {"error": path})

    return Handler


def make_server(root: str | Path, course: Any, api_url: str, port: int, host: str = "127.0.0.1",
                prefix: str = "") -> ThreadingHTTPServer:  # fmt: skip
    """The service, bound (``port`` 0: a free one), not yet serving."""
    exchange = Exchange(root, course)
    os.makedirs(root, mode=0o755, exist_ok=True)
    server = ThreadingHTTPServer((host, port), handler(exchange, HubUsers(api_url), prefix))
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    from labkit.classroom import course as coursefile

    p = argparse.ArgumentParser(prog="python -m labkit.classroom.service", description=t("classroom.service.help"))
    p.add_argument("--root", required=True, help=t("classroom.cli.exchange"))
    p.add_argument("--course", help=t("classroom.cli.course"))
    p.add_argument("--port", type=int, default=0, help=t("classroom.service.port"))
    args = p.parse_args(argv)
    course = coursefile.load(args.course) if args.course else None
    api = os.environ.get("JUPYTERHUB_API_URL", "http://127.0.0.1:8081/hub/api")
    url = urllib.parse.urlsplit(os.environ.get("JUPYTERHUB_SERVICE_URL", ""))
    port = url.port or args.port
    prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", f"/services/{NAME}/")
    server = make_server(Path(args.root), course, api, port, url.hostname or "127.0.0.1", prefix)
    print(t("classroom.service.listening", url=f"http://{server.server_address[0]}:{server.server_address[1]}"),
          file=sys.stderr, flush=True)  # fmt: skip
    try:
        server.serve_forever()
    except KeyboardInterrupt:  # JupyterHub stops its services with SIGINT: a stop, not a crash to print
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
