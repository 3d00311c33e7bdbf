"""Per-student limits on one server: memory, CPU and processes by cgroup, ranks by labkit.

A student's server, kernels and ranks live in one cgroup (v2 ``labkit-hub/<user>``, or the same
path under v1's memory, cpu and pids hierarchies), entered by the server process before it runs
(``enter``, in the spawner's preexec), so everything it starts is inside: torch's ranks count
against their student's memory, and one student's runaway job cannot starve the class.
``LABKIT_MAX_RANKS`` in the server's environment caps a cell's ``-n`` (labkit refuses more,
before anything starts). Where cgroups cannot be written, the hub logs it and keeps only that cap.
"""

from __future__ import annotations

import os
import signal
import time

from labkit.hub.settings import HubSettings, parse_bytes

ROOT = "/sys/fs/cgroup"
GROUP = "labkit-hub"
PERIOD = 100_000  # cpu.cfs_period_us / cpu.max's period, microseconds


def is_v2(root: str = ROOT) -> bool:
    return os.path.exists(os.path.join(root, "cgroup.controllers"))


def paths(user: str, root: str = ROOT) -> list[str]:
    """The cgroup folders of ``user``'s server (one on v2; memory, cpu, pids on v1)."""
    if is_v2(root):
        return [os.path.join(root, GROUP, user)]
    return [os.path.join(root, ctl, GROUP, user) for ctl in ("memory", "cpu", "pids")]


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def create(user: str, settings: HubSettings, root: str = ROOT) -> list[str]:
    """Make ``user``'s cgroups with the limits set; the folders (empty where cgroups are not writable)."""
    memory, cpus, pids = parse_bytes(settings.memory), settings.cpus, settings.max_processes
    quota = str(int(cpus * PERIOD))
    made = []
    try:
        if is_v2(root):
            top = os.path.join(root, GROUP)
            os.makedirs(top, exist_ok=True)
            _write(os.path.join(root, "cgroup.subtree_control"), "+memory +cpu +pids")
            _write(os.path.join(top, "cgroup.subtree_control"), "+memory +cpu +pids")
            (path,) = paths(user, root)
            os.makedirs(path, exist_ok=True)
            _write(os.path.join(path, "memory.max"), str(memory))
            _write(os.path.join(path, "memory.swap.max"), "0")
            _write(os.path.join(path, "cpu.max"), f"{quota} {PERIOD}")
            _write(os.path.join(path, "pids.max"), str(pids))
            return [path]
        mem, cpu, pid = paths(user, root)
        for path in (mem, cpu, pid):
            os.makedirs(path, exist_ok=True)
            made.append(path)
        _write(os.path.join(mem, "memory.limit_in_bytes"), str(memory))
        _write(os.path.join(cpu, "cpu.cfs_period_us"), str(PERIOD))
        _write(os.path.join(cpu, "cpu.cfs_quota_us"), quota)
        _write(os.path.join(pid, "pids.max"), str(pids))
    except OSError:
        return []
    return made


def enter(folders: list[str], pid: int | None = None) -> None:
    """Move ``pid`` (default: this process) into ``folders``; its children are born there."""
    for path in folders:
        _write(os.path.join(path, "cgroup.procs"), str(pid or os.getpid()))


def members(user: str, root: str = ROOT) -> list[int]:
    """The processes in ``user``'s cgroups now."""
    pids: set[int] = set()
    for path in paths(user, root):
        try:
            with open(os.path.join(path, "cgroup.procs")) as f:
                pids |= {int(x) for x in f.read().split()}
        except OSError:
            continue
    return sorted(pids)


def kill_all(user: str, sig: int = signal.SIGKILL, root: str = ROOT, wait: float = 5.0) -> list[int]:
    """Signal every process in ``user``'s cgroups (a server's kernels and ranks); the ones signalled."""
    hit = members(user, root)
    for pid in hit:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + wait
    while members(user, root) and time.monotonic() < deadline:
        time.sleep(0.05)
    return hit


def remove(user: str, root: str = ROOT) -> None:
    """Drop ``user``'s cgroups once their processes are gone (a busy one stays until next time)."""
    for path in paths(user, root):
        try:
            os.rmdir(path)
        except OSError:
            pass


def of_process(pid: int) -> dict[str, str]:
    """``/proc/PID/cgroup`` as ``{controller: path}`` (v2's single line under ``""``)."""
    out = {}
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, ctls, path = line.rstrip("\n").split(":", 2)
            for ctl in ctls.split(","):
                out[ctl] = path
    return out
