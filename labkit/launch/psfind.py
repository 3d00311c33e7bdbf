"""Processes by an environment variable, through psutil: the sweep's search where there is no /proc."""

from __future__ import annotations

import os

PROC = "/proc"  # Linux: labkit.launch.group reads it directly (fast); elsewhere with_env asks psutil


def with_env(marker: bytes, exact: bool) -> list[int]:
    """PIDs of this user's live processes whose environment has ``marker`` (``K=V``; a prefix of V unless ``exact``)."""
    import psutil

    key, _, value = marker.decode().partition("=")
    found = []
    for p in psutil.process_iter(["pid", "uids", "status"]):
        if p.pid == os.getpid() or p.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            if p.info["uids"] is not None and p.info["uids"].real != os.getuid():
                continue
            have = p.environ().get(key)
        except (psutil.Error, OSError):
            continue
        if have is not None and (have == value if exact else have.startswith(value)):
            found.append(p.pid)
    return found
