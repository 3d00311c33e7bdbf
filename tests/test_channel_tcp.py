"""The channel over TCP, for ranks on other machines: HMAC challenge with the run's token, no launch."""

from __future__ import annotations

import json
import os
import socket
import threading
import time

import pytest

from labkit.testing.processes import listening_sockets
from labkit.wire.channel import ChannelClient, ChannelServer, answer, parse_tcp
from labkit.wire.protocol import TYPE, Msg

TOKEN = "ab" * 32


@pytest.fixture
def server(tmp_path):
    srv = ChannelServer(str(tmp_path / "ch.sock"), TOKEN, tcp_host="127.0.0.1")
    yield srv
    srv.close()


def poll_until(srv: ChannelServer, done, seconds: float = 5.0) -> list[dict]:
    got: list[dict] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not done(got):
        got += srv.poll(0.05)
    return got


def connect(srv: ChannelServer, hello: dict, got: list[dict]) -> ChannelClient:
    """A rank's client, made in a thread: it waits for the challenge, which only ``poll`` sends here."""
    made: list[ChannelClient] = []
    thread = threading.Thread(target=lambda: made.append(ChannelClient(srv.address, TOKEN, hello)))
    thread.start()
    got += poll_until(srv, lambda g: not thread.is_alive() and g)
    thread.join()
    return made[0]


def raw_client(srv: ChannelServer) -> tuple[socket.socket, str]:
    """A client that reads the challenge itself: what a stranger on the network can do."""
    sock = socket.create_connection(parse_tcp(srv.address), timeout=5)
    srv.poll(0.5)  # accepts, and sends the nonce
    line = b""
    while not line.endswith(b"\n"):
        line += sock.recv(1)
    return sock, json.loads(line)["nonce"]


def test_a_rank_with_the_token_is_accepted_and_never_sends_it(server):
    assert server.address.startswith("tcp://127.0.0.1:")
    got: list[dict] = []
    client = connect(server, {"rank": 3, "pid": os.getpid()}, got)
    client.send({TYPE: Msg.REPORT, "values": {"x": 1}})
    got += poll_until(server, lambda g: len(g) >= 1)
    assert [m[TYPE] for m in got] == [Msg.HELLO, Msg.REPORT]
    assert all(m["rank"] == 3 for m in got)
    assert "auth" not in got[0] and "token" not in got[0]
    assert server.connected_ranks() == {3} and server.rejected == []
    assert server.send(3, {TYPE: Msg.STOP})  # and the kernel can talk back
    client.close()


def test_a_wrong_answer_or_the_token_in_clear_is_dropped_and_logged(server, caplog):
    wrong, nonce = raw_client(server)
    wrong.sendall(json.dumps({TYPE: Msg.HELLO, "rank": 0, "auth": answer("cd" * 32, nonce)}).encode() + b"\n")
    clear, _ = raw_client(server)  # the Unix socket's way is not accepted over the network
    clear.sendall(json.dumps({TYPE: Msg.HELLO, "rank": 1, "token": TOKEN}).encode() + b"\n")
    poll_until(server, lambda g: len(server.rejected) >= 2)
    assert len(server.rejected) == 2 and all("wrong token (from 127.0.0.1:" in r for r in server.rejected)
    assert "dropped a connection" in caplog.text
    assert server.connected_ranks() == set()
    for sock in (wrong, clear):  # the server closed them
        sock.settimeout(2)
        assert sock.recv(100) == b""
        sock.close()


def test_the_port_is_released_when_the_run_ends(tmp_path):
    before = listening_sockets()
    srv = ChannelServer(str(tmp_path / "ch.sock"), TOKEN, tcp_host="127.0.0.1")
    assert len(listening_sockets() - before) == 1
    host, port = parse_tcp(srv.address)
    client = connect(srv, {"rank": 0}, [])
    srv.close()
    with pytest.raises(OSError):
        socket.create_connection((host, port), timeout=2).close()
    probe = socket.socket()
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the closed connection may sit in TIME_WAIT
    probe.bind((host, port))  # free again: no listener holds it
    probe.close()
    assert listening_sockets() == before
    assert not os.path.exists(tmp_path / "ch.sock")
    client.close()


def test_a_unix_socket_server_has_no_tcp_listener(tmp_path):
    srv = ChannelServer(str(tmp_path / "ch.sock"), TOKEN)
    assert srv.address is None
    client = ChannelClient(str(tmp_path / "ch.sock"), TOKEN, {"rank": 0})
    assert [m[TYPE] for m in poll_until(srv, lambda g: len(g) >= 1)] == [Msg.HELLO]
    client.close()
    srv.close()
