"""The metrics channel between the ranks and the notebook kernel.

A Unix domain socket in a private 0700 folder, JSON lines, one connection per
rank. Why this and not TCP on one node: a filesystem socket is protected by Unix
permissions, and the kernel also checks the peer's uid (SO_PEERCRED) and a
random per-run token that travels only in the environment (never on argv,
which ``ps`` shows to everyone). Nothing received is ever unpickled.

Ranks on other machines (``%%torchrun --nnodes N``) cannot reach a Unix socket:
the server then also listens on TCP, at an address the caller chooses (never
0.0.0.0 unless asked). Anyone on the network can connect there, and a network
may be sniffed, so the token itself never crosses it: the server sends each new
connection a random nonce, the rank answers HMAC-SHA256(token, nonce), and a
connection that answers wrong, or not within ``HELLO_WAIT``, is dropped and logged.
A rank names its channel in ``LABKIT_SOCKET``: a path, or ``tcp://HOST:PORT``.

This module must stay cheap to import: the rank side imports it before torch.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from labkit.wire.protocol import TIME, TYPE, Msg, message

MAX_LINE = 4 * 1024 * 1024  # a longer line is a broken or hostile client: drop it
HELLO_WAIT = 5.0  # seconds a new connection has to say hello with the right token
TCP_PREFIX = "tcp://"
log = logging.getLogger("labkit.wire.channel")


def encode(msg: dict[str, Any]) -> bytes:
    return (json.dumps(msg, separators=(",", ":"), default=repr) + "\n").encode()


def answer(token: str, nonce: str) -> str:
    """The proof that a TCP client holds the run's token, without sending it: HMAC-SHA256(token, nonce)."""
    return hmac.new(token.encode(), nonce.encode(), hashlib.sha256).hexdigest()


def tcp_address(host: str, port: int) -> str:
    """The ``LABKIT_SOCKET`` value of a TCP channel (IPv6 hosts in brackets)."""
    return f"{TCP_PREFIX}[{host}]:{port}" if ":" in host else f"{TCP_PREFIX}{host}:{port}"


def parse_tcp(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``tcp://HOST:PORT`` address; None for a Unix socket path."""
    if not address.startswith(TCP_PREFIX):
        return None
    host, _, port = address[len(TCP_PREFIX) :].rpartition(":")
    return host.strip("[]"), int(port)


class ChannelServer:
    """Kernel side: accepts rank connections and yields their messages.

    Single-threaded: ``poll()`` is called from the cell's main thread, which
    is also the only thread that touches widgets.
    """

    def __init__(self, path: str, token: str, tcp_host: str | None = None, tcp_port: int = 0) -> None:
        """A Unix socket at ``path``; with ``tcp_host``, a TCP listener too (``address`` says where)."""
        self.path = path
        self.token = token
        self.rejected: list[str] = []  # why each foreign or broken client was dropped
        self.address: str | None = None  # tcp://HOST:PORT when listening on TCP
        old = os.umask(0o077)  # the socket file is created 0600
        try:
            self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._listener.bind(path)
        finally:
            os.umask(old)
        self._listener.listen(64)
        self._listener.setblocking(False)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._clients: dict[socket.socket, _Conn] = {}
        self.by_rank: dict[int, socket.socket] = {}
        self._tcp: socket.socket | None = None
        if tcp_host is not None:
            self._listen_tcp(tcp_host, tcp_port)

    def _listen_tcp(self, host: str, port: int) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        tcp = socket.socket(family, socket.SOCK_STREAM)
        try:
            tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            tcp.bind((host, port))
            tcp.listen(256)
            tcp.setblocking(False)
        except OSError:
            tcp.close()
            self.close()
            raise
        self._tcp = tcp
        self._sel.register(tcp, selectors.EVENT_READ, None)
        self.address = tcp_address(host, tcp.getsockname()[1])

    def poll(self, timeout: float) -> list[dict[str, Any]]:
        """Wait up to ``timeout`` seconds; return the messages that arrived, each with its ``rank``."""
        out: list[dict[str, Any]] = []
        if self._listener.fileno() < 0:
            return out
        for key, _ in self._sel.select(timeout):
            if key.fileobj is self._listener:
                self._accept()
            elif key.fileobj is self._tcp:
                self._accept_tcp()
            else:
                self._read(key.fileobj, out)  # type: ignore[arg-type]
        now = time.monotonic()
        for sock, conn in list(self._clients.items()):
            if conn.rank is None and now - conn.opened > HELLO_WAIT:
                self._drop(sock, f"no hello within {HELLO_WAIT:.0f} s")
        return out

    def send(self, rank: int, msg: dict[str, Any]) -> bool:
        sock = self.by_rank.get(rank)
        if sock is None:
            return False
        try:
            sock.setblocking(True)
            sock.sendall(encode(msg))
            return True
        except OSError:
            return False
        finally:
            try:
                sock.setblocking(False)
            except OSError:
                pass

    def connected_ranks(self) -> set[int]:
        return set(self.by_rank)

    def close(self) -> None:
        if self._listener.fileno() < 0:
            return  # closed already
        for sock in list(self._clients):
            self._drop(sock, None)
        for listener in (self._listener, self._tcp):
            if listener is None:
                continue
            try:
                self._sel.unregister(listener)
            except (KeyError, ValueError):
                pass
            listener.close()  # the TCP port is free again from here on
        self._sel.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    # -- internals -------------------------------------------------------

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except BlockingIOError:
            return
        sock.setblocking(False)
        uid = _peer_uid(sock)
        if uid is not None and uid != os.getuid():
            self.rejected.append(f"connection from uid {uid}")
            sock.close()
            return
        self._clients[sock] = _Conn()
        self._sel.register(sock, selectors.EVENT_READ, None)

    def _accept_tcp(self) -> None:
        """A rank from another machine: it gets a nonce, and must answer with its HMAC before anything else."""
        if self._tcp is None:  # not listening on TCP: nothing to accept
            return
        try:
            sock, peer = self._tcp.accept()
        except (BlockingIOError, OSError):
            return
        conn = _Conn()
        conn.nonce, conn.peer = secrets.token_hex(32), f"{peer[0]}:{peer[1]}"
        try:
            sock.sendall(encode(message(Msg.CHALLENGE, nonce=conn.nonce)))  # a few bytes: fits the fresh buffer
        except OSError:
            sock.close()
            return
        sock.setblocking(False)
        self._clients[sock] = conn
        self._sel.register(sock, selectors.EVENT_READ, None)

    def _authentic(self, conn: _Conn, msg: dict[str, Any]) -> bool:
        if msg.get(TYPE) != Msg.HELLO:
            return False
        if conn.nonce is None:  # the Unix socket: a same-uid peer showing the token
            return msg.get("token") == self.token
        proof = msg.get("auth")
        return isinstance(proof, str) and hmac.compare_digest(proof, answer(self.token, conn.nonce))

    def _read(self, sock: socket.socket, out: list[dict[str, Any]]) -> None:
        conn = self._clients.get(sock)
        if conn is None:
            return
        try:
            data = sock.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            if conn.rank is not None:
                out.append(message(Msg.CLOSED, rank=conn.rank, **{TIME: time.time()}))
            self._drop(sock, None)
            return
        conn.buf += data
        while True:
            nl = conn.buf.find(b"\n")
            if nl < 0:
                if len(conn.buf) > MAX_LINE:
                    self._drop(sock, f"line longer than {MAX_LINE} bytes")
                return
            line, conn.buf = bytes(conn.buf[:nl]), conn.buf[nl + 1 :]
            if len(line) > MAX_LINE:
                self._drop(sock, f"line longer than {MAX_LINE} bytes")
                return
            try:
                msg = json.loads(line)
                if not isinstance(msg, dict):
                    raise ValueError("not an object")
            except ValueError:
                self._drop(sock, "malformed message")
                return
            if conn.rank is None:
                if not self._authentic(conn, msg):
                    self._drop(sock, "bad hello or wrong token")
                    return
                try:
                    conn.rank = int(msg["rank"])
                except (KeyError, TypeError, ValueError):
                    self._drop(sock, "hello without a rank")
                    return
                self.by_rank[conn.rank] = sock
                msg.pop("token", None)
                msg.pop("auth", None)
            msg["rank"] = conn.rank
            out.append(msg)

    def _drop(self, sock: socket.socket, why: str | None) -> None:
        conn = self._clients.pop(sock, None)
        if why:
            if conn is not None and conn.peer:
                why = f"{why} (from {conn.peer})"
            self.rejected.append(why)
            log.warning("labkit channel: dropped a connection: %s", why)
        if conn is not None and conn.rank is not None and self.by_rank.get(conn.rank) is sock:
            del self.by_rank[conn.rank]
        try:
            self._sel.unregister(sock)
        except (KeyError, ValueError):
            pass
        sock.close()


class _Conn:
    def __init__(self) -> None:
        self.buf = bytearray()
        self.rank: int | None = None
        self.opened = time.monotonic()
        self.nonce: str | None = None  # TCP: the challenge this client must answer
        self.peer = ""  # TCP: host:port, for the log of dropped connections


def _peer_uid(sock: socket.socket) -> int | None:
    so_peercred = getattr(socket, "SO_PEERCRED", None)
    if so_peercred is None:
        return None
    try:
        _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, so_peercred, 12))
    except OSError:
        return None
    return uid


class ChannelClient:
    """Rank side: a thread-safe sender, and a reader thread for messages from the kernel.

    When the kernel goes away (its end of the socket closes), ``on_close`` runs:
    the bootstrap uses that as the lifeline that ends the rank, so a kernel
    restart or crash leaves no orphan.
    """

    def __init__(
        self,
        path: str,
        token: str,
        hello: dict[str, Any],
        on_message: Callable[[dict[str, Any]], None] | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        tcp = parse_tcp(path)
        if tcp is None:
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._sock.connect(path)
            proof = {"token": token}
        else:
            self._sock = socket.create_connection(tcp, timeout=HELLO_WAIT)
            proof = {"auth": answer(token, self._challenge())}
            self._sock.settimeout(None)
        self._lock = threading.Lock()
        self.closed = False
        self.send(message(Msg.HELLO, **{**proof, **hello}))
        self._on_message = on_message
        self._on_close = on_close
        self._reader = threading.Thread(target=self._read_loop, name="labkit-channel", daemon=True)
        self._reader.start()

    def send(self, msg: dict[str, Any]) -> None:
        data = encode(msg)
        with self._lock:
            if self.closed:
                return
            try:
                self._sock.sendall(data)
            except OSError:
                self.closed = True

    def _challenge(self) -> str:
        """The server's first line on TCP: the nonce to answer (read byte by byte: nothing after it is ours yet)."""
        line = b""
        while not line.endswith(b"\n") and len(line) < 1024:
            byte = self._sock.recv(1)
            if not byte:
                break
            line += byte
        try:
            return str(json.loads(line)["nonce"])
        except (ValueError, KeyError, TypeError):
            self._sock.close()
            raise ConnectionError("the labkit channel sent no challenge") from None

    def close(self) -> None:
        with self._lock:
            self.closed = True
            try:
                self._sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _read_loop(self) -> None:
        buf = b""
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                break
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if self._on_message is not None:
                    self._on_message(msg)
        if self._on_close is not None:
            self._on_close()
