"""A sandbox per submission: what ``labkit grade`` runs the student's code in (bubblewrap).

Each notebook runs in a sandbox of its own, and the grader's judge (``labkit.grading.evaluate``)
in another, made after the first has ended. In it:

- the system (``/usr``, ``/etc``), Python and labkit are there read-only; nothing else of the
  machine is (not the other submissions, not the reports, not the instructor's files);
- the home folder and ``/tmp`` are private, empty and small (tmpfs); the working folder holds
  the submission alone, and one writable folder for what the run hands back;
- the network is the sandbox's own loopback only (the ranks meet there);
- PID, IPC and UTS namespaces of its own: it sees its own processes only, and when its first
  process ends, or the grader, every process it started is killed by the kernel, a
  ``setsid`` daemon too;
- limits per process (``setrlimit``): address space, CPU seconds, file size, open files, no
  core dumps; and a limit on the number of processes: as root the sandbox runs as a user id
  of its own (``setpriv``), so that the limit counts this sandbox's processes alone; as
  another user, the limit is that user's processes now plus ``processes``;
- a wall-clock limit: the grader kills the sandbox when it is past.

Without bubblewrap (``apt-get install bubblewrap``) or user namespaces, ``find()`` raises
``SandboxUnavailable`` with what is missing; ``labkit grade --no-sandbox`` runs the same
programs as plain processes instead (limits and the clean-up of their process group only).
"""

from __future__ import annotations

import atexit
import itertools
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from labkit.grading.devices import device_files as gpu_files
from labkit.i18n import t

GiB = 1 << 30
SYSTEM = ("/usr", "/etc", "/sys")  # read-only; /bin, /lib, ... follow the host (a symlink or a bind)
TOP_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
HOSTNAME = "sandbox"
HOME, WORK, SINK_DIR = "/home/student", "/submission", "/run/labkit"


_uids = itertools.count()
_uid_lock = threading.Lock()


def process_uids() -> range:
    """The 100 user ids this process's sandboxes run as (as root); other processes have ranges of their own,
    whatever the machine's ``pid_max`` (up to 2**22: the last id is under 2**29, well inside a uid_t)."""
    first = 2_000_000 + os.getpid() * 100
    return range(first, first + 100)


def sandbox_uid() -> int:
    """A user id for one sandbox (as root): unique among this process's sandboxes and other processes'."""
    with _uid_lock:
        return process_uids()[next(_uids) % 100]


def not_dumpable() -> None:
    """This process's memory and descriptors out of reach of the other processes of its sandbox (same user):
    no ``/proc/PID/mem``, ``/proc/PID/fd`` or ptrace. A child that execs is dumpable again."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):  # not Linux: no bubblewrap either
        pass


class SandboxUnavailable(Exception):
    """No sandbox can be made on this machine; the message says why and what to do."""


@dataclass
class Limits:
    memory: int = 16 * GiB  # address space per process (RLIMIT_AS)
    cpu_seconds: int = 3600  # per process
    processes: int = 1024  # tasks (threads count) of the sandbox's user
    file_size: int = GiB
    open_files: int = 4096
    tmp_size: int = GiB  # each of /tmp, /dev/shm and the home folder (memory: gone with the sandbox)


@dataclass
class Outcome:
    returncode: int | None  # None: killed at the wall-clock limit
    seconds: float
    timed_out: bool = False


@dataclass
class Mounts:
    """What a sandbox sees besides the system: read-only paths, writable paths, files at a path of theirs."""

    ro: list[str] = field(default_factory=list)  # host paths, mounted at the same path
    rw: dict[str, str] = field(default_factory=dict)  # sandbox path -> host path
    files: dict[str, str] = field(default_factory=dict)  # sandbox path -> host file (read-only)
    hide: list[str] = field(default_factory=list)  # folders inside the mounts that the sandbox sees empty
    tmpfs: dict[str, int] = field(default_factory=dict)  # sandbox path -> bytes: private, gone with the sandbox


@dataclass
class Pipes:
    """How a program in a sandbox talks to the grader: its standard input, and descriptors it inherits
    (the same numbers inside). Nothing the program writes on the machine's disk is read back."""

    stdin: int | None = None
    keep: tuple[int, ...] = ()


def python_paths() -> list[str]:
    """The folders the running Python needs: its installation, and the virtual environment's (not labkit's source)."""
    found = {sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))}
    found = {p for p in found if not any(p == s or p.startswith(s + "/") for s in SYSTEM)}
    return sorted(p for p in found if not any(p.startswith(q + "/") for q in found))


def _parents(paths: list[str]) -> list[str]:
    """The folders above the mount points, made traversable first (bwrap would make them 0700 as root)."""
    out: list[str] = []
    for path in paths:
        parts = Path(path).parts
        for i in range(2, len(parts)):
            parent = str(Path(*parts[:i]))
            if parent not in out and not any(parent == s or parent.startswith(s + "/") for s in SYSTEM):
                out.append(parent)
    return out


def _set_limits(limits: Limits, processes: int) -> None:
    """In the child, before exec: the rlimits every process of the sandbox inherits."""
    for which, value in (
        (resource.RLIMIT_AS, limits.memory),
        (resource.RLIMIT_CPU, limits.cpu_seconds),
        (resource.RLIMIT_FSIZE, limits.file_size),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NPROC, processes),
    ):
        resource.setrlimit(which, (value, value))


def _user_tasks(uid: int) -> int:
    """Tasks (threads included, as RLIMIT_NPROC counts them) of ``uid`` now."""
    count = 0
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.stat(f"/proc/{pid}").st_uid == uid:
                count += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            continue
    return count


class Plain:
    """No sandbox (``--no-sandbox``): the program runs as this user, in a session of its own."""

    name = "none"

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()

    def run(
        self,
        argv: list[str],
        env: dict[str, str],
        mounts: Mounts,
        timeout: float,
        log: Path,
        pipes: Pipes | None = None,
    ) -> Outcome:
        marker = uuid.uuid4().hex
        env = {**os.environ, **env, "LABKIT_GRADE_JOB": marker}
        with tempfile.TemporaryDirectory(prefix="labkit-plain-") as scratch:
            rw = dict(mounts.rw)
            for path in mounts.tmpfs:  # a folder of its own, thrown away after (no size limit without a sandbox)
                rw[path] = os.path.join(scratch, path.strip("/").replace("/", "_"))
                os.makedirs(rw[path])
            for path, host in rw.items():  # the paths the program is given are the host's
                env = {k: v.replace(path, host) for k, v in env.items()}
            argv = [_host_path(a, Mounts(rw=rw, files=mounts.files)) for a in argv]
            processes = _user_tasks(os.getuid()) + self.limits.processes
            limits = lambda: _set_limits(self.limits, processes)  # noqa: E731
            return _supervise(argv, env, timeout, log, limits, marker, cwd=None, pipes=pipes)


def _host_path(arg: str, mounts: Mounts) -> str:
    for path, host in {**mounts.rw, **mounts.files}.items():
        if arg == path or arg.startswith(path + "/"):
            return host + arg[len(path) :]
    return arg


class Bubblewrap:
    """bubblewrap (``bwrap``): namespaces and mounts as the module docstring says."""

    name = "bubblewrap"

    def __init__(self, limits: Limits | None = None, bwrap: str = "bwrap") -> None:
        self.limits = limits or Limits()
        self.bwrap = bwrap
        self.root = os.geteuid() == 0
        self._hosts: str | None = None

    def hosts(self) -> str:
        """An /etc/hosts for the sandbox: its hostname is on loopback (torchrun's rendezvous resolves it)."""
        if self._hosts is None or not os.path.exists(self._hosts):
            folder = tempfile.mkdtemp(prefix="labkit-sandbox-")
            atexit.register(shutil.rmtree, folder, True)
            os.chmod(folder, 0o755)
            self._hosts = os.path.join(folder, "hosts")
            with open(self._hosts, "w") as f:
                f.write(f"127.0.0.1\tlocalhost {HOSTNAME}\n::1\tlocalhost ip6-localhost ip6-loopback\n")
            os.chmod(self._hosts, 0o644)
        return self._hosts

    def command(self, argv: list[str], env: dict[str, str], mounts: Mounts, uid: int | None) -> list[str]:
        cmd = [self.bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net"]
        cmd += ["--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", HOSTNAME]
        if not self.root:
            cmd += ["--unshare-user", "--disable-userns"]
        for path in SYSTEM:
            cmd += ["--ro-bind", path, path]
        for path in TOP_LINKS:
            if os.path.islink(path):
                cmd += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                cmd += ["--ro-bind", path, path]
        cmd += ["--ro-bind", self.hosts(), "/etc/hosts", "--proc", "/proc", "--dev", "/dev"]
        for dev in gpu_files(env.get("CUDA_VISIBLE_DEVICES")):  # the job's GPUs (labkit.grading.devices)
            cmd += ["--dev-bind", str(dev), str(dev)]
        # the private tmpfs first: a mount below /tmp (a cache there, on some machines) must show above it
        made = _parents([HOME])
        for parent in made:
            cmd += ["--perms", "0755", "--dir", parent]
        for path in ("/tmp", HOME, "/dev/shm"):
            cmd += ["--perms", "1777", "--size", str(self.limits.tmp_size), "--tmpfs", path]
        targets = [*python_paths(), *mounts.ro, WORK, *mounts.files, *mounts.rw, *mounts.tmpfs]
        for parent in _parents(targets):
            if parent not in made and parent not in ("/tmp", HOME, "/dev/shm"):
                cmd += ["--perms", "0755", "--dir", parent]
        for path in (*python_paths(), *mounts.ro):
            cmd += ["--ro-bind", path, path]
        for path in mounts.hide:  # e.g. the instructor's labkit, installed in the environment the sandbox uses
            if os.path.isdir(path) and any(path.startswith(p + "/") for p in (*python_paths(), *mounts.ro)):
                cmd += ["--perms", "0755", "--tmpfs", path]
        cmd += ["--perms", "0755", "--dir", WORK]
        for path, host in mounts.files.items():
            cmd += ["--ro-bind", host, path]
        for path, host in mounts.rw.items():
            cmd += ["--bind", host, path]
        for path, size in mounts.tmpfs.items():
            cmd += ["--perms", "1777", "--size", str(size), "--tmpfs", path]
        cmd += ["--chdir", WORK, "--clearenv"]
        for k, v in sorted(env.items()):
            cmd += ["--setenv", k, v]
        if uid is not None:  # root: run as a user of this sandbox's own, without any capability
            drop = ["--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
            cmd += ["--", "setpriv", f"--reuid={uid}", f"--regid={uid}", *drop, "--", *argv]
        else:
            cmd += ["--", *argv]
        return cmd

    def run(
        self,
        argv: list[str],
        env: dict[str, str],
        mounts: Mounts,
        timeout: float,
        log: Path,
        pipes: Pipes | None = None,
    ) -> Outcome:
        uid = sandbox_uid() if self.root else None
        env = {"HOME": HOME, "USER": "student", "LOGNAME": "student", "PATH": _path(), "LANG": "C.UTF-8", **env}
        if uid is not None:
            for host in mounts.rw.values():
                os.chown(host, uid, uid)
        processes = self.limits.processes if self.root else _user_tasks(os.getuid()) + self.limits.processes
        cmd = self.command(argv, env, mounts, uid)
        limits = lambda: _set_limits(self.limits, processes)  # noqa: E731
        return _supervise(cmd, None, timeout, log, limits, None, cwd="/", pipes=pipes)


def _path() -> str:
    bins = [os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]
    return ":".join(dict.fromkeys(bins))


def _supervise(
    cmd: list[str],
    env: dict[str, str] | None,
    timeout: float,
    log: Path,
    limits: Callable[[], None],
    marker: str | None,
    cwd: str | None,
    pipes: Pipes | None = None,
) -> Outcome:
    start = time.monotonic()
    pipes = pipes or Pipes()
    stdin = pipes.stdin if pipes.stdin is not None else subprocess.DEVNULL
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd, env=env, cwd=cwd, stdin=stdin, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=limits, pass_fds=pipes.keep,
        )  # fmt: skip
        for fd in (pipes.stdin, *pipes.keep):  # the sandbox holds its ends now: the grader's copies must close
            if fd is not None:
                os.close(fd)
        try:
            code: int | None = proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            code, timed_out = None, True
        finally:
            _kill_group(proc.pid)
            proc.wait()
            if marker:
                _kill_marked(marker)
    return Outcome(code, time.monotonic() - start, timed_out)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_marked(marker: str) -> None:
    """Without a sandbox: processes that left the session but kept the job's marker in their environment."""
    needle = f"LABKIT_GRADE_JOB={marker}".encode()
    for _ in range(3):
        found = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if needle in f.read().split(b"\0"):
                        found.append(int(pid))
            except OSError:
                continue
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not found:
            return
        time.sleep(0.05)


def find(no_sandbox: bool = False, limits: Limits | None = None) -> Bubblewrap | Plain:
    """The sandbox to grade in: bubblewrap, checked to start; ``Plain`` only when ``no_sandbox``."""
    if no_sandbox:
        return Plain(limits)
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(t("grading.sandbox.unavailable", why=t("grading.sandbox.no_bwrap")))
    box = Bubblewrap(limits, bwrap)
    probe = box.command(["/usr/bin/true"], {}, Mounts(), sandbox_uid() if box.root else None)
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SandboxUnavailable(t("grading.sandbox.unavailable", why=t("grading.sandbox.failed", error=str(e)))) from e
    if done.returncode != 0:
        why = t(
            "grading.sandbox.failed", error=(done.stderr or done.stdout).strip()[-300:] or f"exit {done.returncode}"
        )
        raise SandboxUnavailable(t("grading.sandbox.unavailable", why=why))
    return box
