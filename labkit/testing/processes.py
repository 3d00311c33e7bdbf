"""Which processes and sockets a test session left behind: the leftover checks of tests and benchmarks.

Every process a test session starts (ranks, stand-in kernels, Jupyter kernels) inherits the
``LABKIT_TEST_SESSION`` marker (set by ``mark_session()``), so the checks see this session's
processes only, never another session's on the same machine.
"""

from __future__ import annotations

import os
import signal
import time

from labkit.wire import env as envvars

MARK_VAR = "LABKIT_TEST_SESSION"


def mark_session() -> str:
    """Give this process (and all it starts) a marker of its own; returns it."""
    os.environ.setdefault(MARK_VAR, f"{os.getpid()}-{time.time_ns()}")
    return envvars.require(MARK_VAR)


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


def with_env(var: str, value: str, pids: list[int] | None = None) -> list[int]:
    """Live processes (all, or those in ``pids``) whose environment holds ``var=value``; never this one.

    A marker in the environment survives fork, exec, setsid and reparenting, so this finds every
    process a test started, however far from us it ended up; zombies are skipped (their parent reaps them).
    """
    needle = f"{var}={value}".encode()
    candidates = pids if pids is not None else [int(n) for n in os.listdir("/proc") if n.isdigit()]
    found = []
    for pid in candidates:
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b") ", 1)[-1][:1] == b"Z":
                    continue
        except OSError:
            continue
        found.append(pid)
    return found


def our_rank_processes() -> list[int]:
    """The labkit run processes that carry this session's marker."""
    from labkit.launch.group import find_run_processes

    return with_env(MARK_VAR, mark_session(), find_run_processes(None))


def leftover_ranks(timeout: float = 10.0) -> list[int]:
    """Our run processes still alive after up to ``timeout`` seconds."""
    deadline = time.time() + timeout
    left = our_rank_processes()
    while left and time.time() < deadline:
        time.sleep(0.1)
        left = our_rank_processes()
    return left


def check_leftovers(before_listen: set[str]) -> None:
    """Fail (after killing them) if run processes or new listening sockets outlived the test."""
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
