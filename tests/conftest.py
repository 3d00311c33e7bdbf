"""Shared test fixtures: every test that launches ranks is checked for leftovers."""

from __future__ import annotations

import os
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def listening_sockets() -> set[str]:
    """LISTEN entries (local address) in /proc/net/tcp{,6} owned by us."""
    found = set()
    uid = str(os.getuid())
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[3] == "0A" and parts[7] == uid:  # 0A = LISTEN
                        found.add(parts[1])
        except OSError:
            pass
    return found


def leftover_ranks(timeout: float = 10.0) -> list[int]:
    from labkit.launcher import find_run_processes

    deadline = time.time() + timeout
    left = find_run_processes(None)
    while left and time.time() < deadline:
        time.sleep(0.1)
        left = find_run_processes(None)
    return left


@pytest.fixture
def no_leaks():
    """After the test: no process of any labkit run alive, no new listening socket, no fd growth."""
    before_listen = listening_sockets()
    before_fds = len(os.listdir("/proc/self/fd"))
    yield
    left = leftover_ranks()
    if left:
        from labkit.launcher import cleanup

        cleanup()
    assert not left, f"orphan rank processes: {left}"
    deadline = time.time() + 5
    while listening_sockets() - before_listen and time.time() < deadline:
        time.sleep(0.1)
    assert listening_sockets() - before_listen == set(), "a listening socket was left open"
    assert len(os.listdir("/proc/self/fd")) <= before_fds + 2, "file descriptors leaked"
