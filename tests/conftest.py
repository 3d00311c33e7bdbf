"""Shared test fixtures: every test that launches ranks is checked for leftovers."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def listening_sockets() -> set[str]:
    """TCP sockets in LISTEN state held open by this process (by inode).

    Other processes' sockets die with them, and orphan processes are checked separately;
    looking only at our own fds keeps the check exact when other jobs share the machine.
    """
    listening = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[3] == "0A":  # 0A = LISTEN
                        listening.add(parts[9])
        except OSError:
            pass
    ours = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            ours.add(target[8:-1])
    return listening & ours


# Every process this test session starts (ranks, stand-in kernels, Jupyter kernels) inherits this
# marker, so the leftover check sees our processes only, never another session's on the same machine.
SESSION_MARK = f"LABKIT_TEST_SESSION={os.getpid()}-{time.time_ns()}"
os.environ["LABKIT_TEST_SESSION"] = SESSION_MARK.split("=", 1)[1]


def our_rank_processes() -> list[int]:
    from labkit.launcher import find_run_processes

    mine = []
    for pid in find_run_processes(None):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if SESSION_MARK.encode() in f.read().split(b"\0"):
                    mine.append(pid)
        except OSError:
            pass
    return mine


def leftover_ranks(timeout: float = 10.0) -> list[int]:
    deadline = time.time() + timeout
    left = our_rank_processes()
    while left and time.time() < deadline:
        time.sleep(0.1)
        left = our_rank_processes()
    return left


def check_leftovers(before_listen: set[str]) -> None:
    left = leftover_ranks()
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not left, f"orphan rank processes: {left}"
    deadline = time.time() + 5
    while listening_sockets() - before_listen and time.time() < deadline:
        time.sleep(0.1)
    assert listening_sockets() - before_listen == set(), "a listening socket was left open"


@pytest.fixture
def no_orphans():
    """After the test: no process of any labkit run alive, no new listening socket."""
    before_listen = listening_sockets()
    yield
    check_leftovers(before_listen)


@pytest.fixture
def no_leaks():
    """``no_orphans``, and no file descriptors leaked by this process (the launcher ran in it)."""
    before_listen = listening_sockets()
    before_fds = len(os.listdir("/proc/self/fd"))
    yield
    check_leftovers(before_listen)
    assert len(os.listdir("/proc/self/fd")) <= before_fds + 2, "file descriptors leaked"
