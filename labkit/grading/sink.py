"""The grader's sink: where labkit's instrumentation on the ranks sends what it observed.

A Unix socket the grader serves, outside the sandbox, for the time one submission runs; the
sandbox sees it at a fixed path and the ranks find its name in ``LABKIT_OBSERVE_SINK``, which
the bootstrap takes out of the environment before any cell code runs (``labkit.ranks.observe``).
The notebook's kernel knows the name too, so every connection is checked from outside
before anything it sends is kept: the peer (its process id from ``SO_PEERCRED``) must be a
rank of a labkit run, that is a child of torchrun's agent, started by it (a fork has the agent's
command line, a spawned rank runs labkit's bootstrap), and not a child of a rank; one connection
per process. The agent is ``python -m labkit.launch.agent``, or, forked from the kernel's prefork
server (``labkit.launch.forkserver``), a process with the server's command line whose environment
holds its run's id (the server itself holds none); a rank forked from it shows the same. A kernel that writes to the socket
itself, or a process it starts, is turned away. What a cell does inside a rank (it runs in the
rank's own process) is beyond this check; docs/grading.md says so.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

MAX_BYTES = 256 << 20  # per connection
AGENT = "labkit.launch.agent"
FORKSERVER = "labkit.launch.forkserver"  # the prefork server: its agents (and their forked ranks) keep its command line
RUN_MARK = b"LABKIT_RUN_ID="  # in an agent's environment block (/proc/PID/environ), never in the server's
BOOTSTRAP = ("labkit.ranks.bootstrap", "labkit.bootstrap", "labkit/ranks/bootstrap.py")


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _module(argv: list[str]) -> str | None:
    return next((b for a, b in zip(argv, argv[1:]) if a == "-m"), None)


def _in_a_run(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return any(var.startswith(RUN_MARK) for var in f.read().split(b"\0"))
    except OSError:
        return False


def is_agent(pid: int) -> bool:
    """torchrun's agent of a labkit run: started as ``-m labkit.launch.agent``, or forked from the prefork server."""
    module = _module(cmdline(pid))
    return module == AGENT or (module == FORKSERVER and _in_a_run(pid))


def is_rank(pid: int) -> bool:
    """A process torchrun's agent started for a labkit run (seen from outside the sandbox)."""
    me, up = cmdline(pid), parent(pid)
    if not me or not is_agent(up) or is_agent(parent(up)):
        return False  # its parent is no agent, or that "agent" is itself a forked rank (a rank's child)
    return me == cmdline(up) or any(b in a for a in me for b in BOOTSTRAP)


class Sink:
    """Serve one submission's sink at ``folder/sink.sock`` until ``close()``; observations by run id."""

    def __init__(self, folder: Path, check_peers: bool = True) -> None:
        self.path = str(folder / "sink.sock")
        self.check_peers = check_peers
        self.records: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
        self.refused: list[str] = []  # why connections were turned away, for the report's log
        self._peers: set[int] = set()
        self._lock = threading.Lock()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        os.chmod(self.path, 0o777)  # the sandbox's user connects; nobody else sees the folder
        self._server.listen(64)
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, name="labkit-sink", daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            pid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
            with self._lock:
                allowed = pid not in self._peers and (not self.check_peers or is_rank(pid))
                self._peers.add(pid)
            if not allowed:
                self.refused.append(f"pid {pid}: {' '.join(cmdline(pid))[:200]}")
                conn.close()
                continue
            thread = threading.Thread(target=self._read, args=(conn,), name="labkit-sink-read", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _read(self, conn: socket.socket) -> None:
        received = 0
        with conn, conn.makefile("rb") as lines:
            for line in lines:
                received += len(line)
                if received > MAX_BYTES:
                    return
                try:
                    record = json.loads(line)
                    key, rank, observation = str(record["run"]), int(record["rank"]), record["observation"]
                except (ValueError, KeyError, TypeError):
                    continue
                if isinstance(observation, dict):
                    with self._lock:
                        self.records[key][rank] = observation

    def close(self) -> dict[str, dict[int, dict[str, Any]]]:
        """Stop serving (the sandbox has ended); the observations, ``{run id: {rank: observation}}``."""
        try:
            self._server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._server.close()
        for thread in self._threads:
            thread.join(timeout=5)
        with self._lock:
            return {k: dict(v) for k, v in self.records.items()}
