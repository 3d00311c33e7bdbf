"""A real Slurm on this machine for the tests: munged, slurmctld and two slurmd, in a folder of their own.

Debian's ``slurm-wlm`` and ``munge`` packages, installed here with apt-get when this runs as root
(as CI does), started with a private configuration: two node names on one host (``slurmd -N n1``,
``slurmd -N n2``, each on its own port), no cgroups (proctrack/linuxproc, task/none), no
accounting, and a munge key and socket of their own, so nothing in ``/etc`` is used or changed.

    cluster = start_cluster(folder)
    done = cluster.run(["srun", "-N2", "hostname"])
    cluster.stop()

``start_sshd`` does the same for ``%%torchrun --hosts``: an sshd of its own on a free port of
localhost (openssh-server from apt when missing), with host and user keys in a temporary folder.

Every daemon, and every job the cluster's ``env`` submits, carries the cluster's marker in its
environment (srun and sbatch pass the submitter's environment on), so ``job_processes`` finds
what a job left behind on any of its nodes, and ``stop`` removes it all.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field

from labkit.testing import processes

PACKAGES = ("slurm-wlm", "munge")
COMMANDS = ("munged", "slurmctld", "slurmd", "slurmstepd", "srun", "sbatch", "sinfo", "squeue", "scontrol", "scancel")
MARK_VAR = "LABKIT_SLURM_CLUSTER"
ACTIVE_STATES = "PENDING,RUNNING,SUSPENDED,COMPLETING,CONFIGURING"


class SlurmUnavailable(RuntimeError):
    """Slurm cannot be installed or started here; the message says why (the tests skip with it)."""


def missing_commands() -> list[str]:
    return [name for name in COMMANDS if shutil.which(name, path=_sbin_path()) is None]


def install(timeout: float = 600) -> float:
    """Install slurm-wlm and munge from the system's packages if they are missing; the seconds it took.

    Only as root with apt-get: elsewhere a missing Slurm raises SlurmUnavailable with the reason.
    """
    if not missing_commands():
        return 0.0
    if os.geteuid() != 0:
        raise SlurmUnavailable(f"Slurm is not installed ({', '.join(missing_commands())} missing) and this is not root")
    if shutil.which("apt-get") is None:
        raise SlurmUnavailable("Slurm is not installed and there is no apt-get to install it")
    start = time.monotonic()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]
    done = _quiet_run(cmd, env, timeout)
    if done.returncode != 0:  # a fresh container has no package lists yet
        _quiet_run(["apt-get", "update"], env, timeout)
        done = _quiet_run(cmd, env, max(1.0, timeout - (time.monotonic() - start)))
    if done.returncode != 0 or missing_commands():
        tail = done.stdout.strip().splitlines()[-3:]
        raise SlurmUnavailable(f"apt-get install {' '.join(PACKAGES)} failed: {' / '.join(tail)}")
    return time.monotonic() - start


@dataclass
class SlurmCluster:
    """A running test cluster: its folder, nodes, the environment that reaches it, and its daemons."""

    folder: str
    nodes: list[str]
    env: dict[str, str]
    daemons: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def mark(self) -> str:
        return self.env[MARK_VAR]

    def run(self, cmd: list[str], timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
        """A Slurm command (or any command) with the cluster's environment; stdout and stderr as text."""
        env = {**self.env, **kwargs.pop("env", {})}
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, **kwargs)

    def node_states(self) -> dict[str, str]:
        done = self.run(["sinfo", "-h", "-N", "-o", "%N %T"], timeout=10)
        return dict(line.split() for line in done.stdout.splitlines() if line.strip())

    def job(self, job_id: str) -> dict[str, str]:
        """``scontrol show job``'s fields (JobState, ExitCode, NodeList, ...); empty once Slurm forgot it."""
        done = self.run(["scontrol", "show", "job", "-o", job_id], timeout=10)
        fields = {}
        for item in done.stdout.split():
            key, _, value = item.partition("=")
            fields[key] = value
        return fields

    def wait_job(self, job_id: str, timeout: float) -> dict[str, str]:
        """Poll until the job has ended (sbatch --wait backs off to 30 s between its checks; this polls at 0.2 s)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            fields = self.job(job_id)
            if fields.get("JobState") not in (None, *ACTIVE_STATES.split(",")):
                return fields
            time.sleep(0.2)
        self.run(["scancel", job_id], timeout=10)
        raise TimeoutError(f"Slurm job {job_id} did not end in {timeout:.0f} s: {self.job(job_id)}")

    def active_jobs(self) -> list[str]:
        done = self.run(["squeue", "-h", "-t", ACTIVE_STATES, "-o", "%i"], timeout=10)
        return done.stdout.split()

    def job_processes(self) -> list[int]:
        """Processes started for jobs (slurmstepd, tasks, their children), on every node: not the daemons."""
        daemons = {proc.pid for proc in self.daemons.values()}
        ctld = self.daemons["slurmctld"].pid  # its helper slurmscriptd is part of it, not of a job
        return [pid for pid in marked_processes(self.mark) if pid not in daemons and parent(pid) != ctld]

    def leftovers(self, timeout: float = 15) -> list[str]:
        """What jobs left after ``timeout`` seconds: active jobs and processes, as ``ps`` lines; then killed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (self.active_jobs() or self.job_processes()):
            time.sleep(0.2)
        left = [f"job {job}" for job in self.active_jobs()]
        pids = self.job_processes()
        left += [describe(pid) for pid in pids]
        if left:
            self.run(["scancel", *self.active_jobs()], timeout=10)
            _kill_all(pids)
        return left

    def logs(self, lines: int = 15) -> str:
        """The last lines of every daemon's log, to explain a failure."""
        parts = []
        for name in sorted(os.listdir(os.path.join(self.folder, "log"))):
            with open(os.path.join(self.folder, "log", name), errors="replace") as f:
                parts.append(f"--- {name}\n" + "".join(f.readlines()[-lines:]))
        return "\n".join(parts)

    def stop(self) -> list[str]:
        """Cancel every job, stop every daemon, kill whatever outlived them; what had to be killed."""
        if "slurmctld" in self.daemons and self.daemons["slurmctld"].poll() is None:
            jobs = self.active_jobs()
            if jobs:
                self.run(["scancel", *jobs], timeout=10)
        # slurmctld first: stopped after the nodes, it waits ~10 s for nodes that no longer answer
        for name in ["slurmctld"] + [n for n in self.daemons if n.startswith("slurmd")] + ["munged"]:
            proc = self.daemons.get(name)
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        left = marked_processes(self.mark)
        killed = [describe(pid) for pid in left]
        _kill_all(left)
        return killed


def start_cluster(folder: str, nodes: int = 2, cpus: int = 2, timeout: float = 30) -> SlurmCluster:
    """munged, slurmctld and one slurmd per node, configured in ``folder``; returns once every node is idle.

    Raises SlurmUnavailable (with the daemons' logs) if they do not come up in ``timeout`` seconds,
    after stopping whatever did start.
    """
    missing = missing_commands()
    if missing:
        raise SlurmUnavailable(f"Slurm is not installed: {', '.join(missing)} missing")
    if os.geteuid() != 0:
        raise SlurmUnavailable("slurmd must run as root to start jobs, and this is not root")
    for sub in ("munge", "state", "log", "spool"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    os.chmod(folder, 0o755)  # munged wants its socket's folders searchable by everyone
    names = [f"n{i + 1}" for i in range(nodes)]
    ports = free_ports(1 + nodes)
    env = {
        **os.environ,
        "SLURM_CONF": os.path.join(folder, "slurm.conf"),
        "PATH": _sbin_path(),
        MARK_VAR: f"{os.getpid()}-{secrets.token_hex(4)}",
    }
    env = {k: v for k, v in env.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_")) or k == "SLURM_CONF"}
    cluster = SlurmCluster(folder=folder, nodes=names, env=env)
    with open(env["SLURM_CONF"], "w") as f:
        f.write(slurm_conf(folder, names, ports[0], ports[1:], cpus))
    key = os.path.join(folder, "munge", "munge.key")
    with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o400), "wb") as f:
        f.write(secrets.token_bytes(1024))
    try:
        munge = os.path.join(folder, "munge")
        cluster.daemons["munged"] = _daemon(
            cluster,
            "munged",
            ["munged", "--foreground", "--force", f"--socket={munge}/socket", f"--key-file={key}"]
            + [f"--pid-file={munge}/munged.pid", f"--log-file={munge}/munged.log", f"--seed-file={munge}/seed"],
        )
        _wait_for(lambda: os.path.exists(f"{munge}/socket"), 10, cluster, "munged made no socket")
        cluster.daemons["slurmctld"] = _daemon(cluster, "slurmctld", ["slurmctld", "-D", "-f", env["SLURM_CONF"]])
        for name in names:
            os.makedirs(os.path.join(folder, "spool", name), exist_ok=True)
            cmd = ["slurmd", "-D", "-f", env["SLURM_CONF"], "-N", name]
            cluster.daemons[f"slurmd-{name}"] = _daemon(cluster, f"slurmd-{name}", cmd)
        _wait_for(lambda: _all_idle(cluster), timeout, cluster, f"the nodes {names} were not all idle")
    except BaseException:
        cluster.stop()
        raise
    return cluster


def slurm_conf(folder: str, nodes: list[str], ctld_port: int, node_ports: list[int], cpus: int) -> str:
    """The whole configuration: one host playing ``nodes``, no cgroups, no accounting, fast cleanup."""
    host = socket.gethostname().split(".")[0]  # slurmctld checks that it runs on SlurmctldHost
    lines = [
        "ClusterName=labkit",
        f"SlurmctldHost={host}(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={folder}/munge/socket",
        f"StateSaveLocation={folder}/state",
        f"SlurmdSpoolDir={folder}/spool/%n",
        f"SlurmctldPidFile={folder}/slurmctld.pid",
        f"SlurmdPidFile={folder}/slurmd-%n.pid",
        f"SlurmctldLogFile={folder}/log/slurmctld.log",
        f"SlurmdLogFile={folder}/log/slurmd-%n.log",
        "ProctrackType=proctrack/linuxproc",  # no cgroups: a container has none to give
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SlurmdParameters=config_overrides",  # the nodes as written here, whatever this host has
        "MpiDefault=none",
        "MailProg=/bin/true",
        "ReturnToService=2",
        "KillWait=5",  # seconds between a step's SIGTERM and SIGKILL
        "MinJobAge=60",
    ]
    # one line per node: each slurmd of this host listens on a port of its own
    lines += [
        f"NodeName={name} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} CPUs={cpus} State=UNKNOWN"
        for name, port in zip(nodes, node_ports)
    ]
    lines.append("PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def marked_processes(mark: str) -> list[int]:
    """PIDs whose environment carries the cluster's marker (daemons, slurmstepd, tasks and their children)."""
    return processes.with_env(MARK_VAR, mark)


def parent(pid: int) -> int:
    """The parent's PID (0 once the process is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b") ", 1)[-1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def describe(pid: int) -> str:
    """``pid command line``, as ps shows it."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f"{pid} " + f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
    except OSError:
        return f"{pid} (gone)"


def free_ports(count: int) -> list[int]:
    """``count`` TCP ports free right now (held together while chosen, so they differ)."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _sbin_path() -> str:
    """PATH with the sbin folders, where Debian puts the daemons (a non-login root shell may lack them)."""
    path = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(path + [p for p in ("/usr/sbin", "/sbin", "/usr/bin") if p not in path])


def _quiet_run(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as e:
        raise SlurmUnavailable(f"{' '.join(cmd)} took more than {timeout:.0f} s (no network?)") from e


def _daemon(cluster: SlurmCluster, name: str, cmd: list[str]) -> subprocess.Popen:
    """A daemon in the foreground, in a session of its own, its output in log/NAME.out.

    It gets SIGTERM if this process dies first (a test session killed by a timeout): no daemon outlives us.
    """
    with open(os.path.join(cluster.folder, "log", f"{name}.out"), "w") as out:
        return subprocess.Popen(
            cmd,
            env=cluster.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the parent exits (Linux prctl PR_SET_PDEATHSIG)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def _all_idle(cluster: SlurmCluster) -> bool:
    for name, proc in cluster.daemons.items():
        if proc.poll() is not None:
            raise SlurmUnavailable(f"{name} exited with {proc.returncode}\n{cluster.logs()}")
    states = cluster.node_states()
    return sorted(states) == sorted(cluster.nodes) and all(s == "idle" for s in states.values())


def _wait_for(ready, timeout: float, cluster: SlurmCluster, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise SlurmUnavailable(f"{what} after {timeout:.0f} s\n{cluster.logs()}")
        time.sleep(0.2)


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# -- sshd on localhost, for %%torchrun --hosts -------------------------------------------------


@dataclass
class Sshd:
    """An sshd of the tests' own on a free port of localhost, and the ssh command that reaches it by key."""

    proc: subprocess.Popen
    ssh: list[str]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_sshd(folder: str, timeout: float = 300) -> Sshd:
    """sshd (Debian's openssh-server, installed as root if missing) with a host key, a user key and a
    configuration in ``folder``; nothing in /etc or ~/.ssh is used or changed. Raises SlurmUnavailable."""
    sshd = shutil.which("sshd", path=_sbin_path())
    if sshd is None:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            raise SlurmUnavailable("no sshd, and no root with apt-get to install openssh-server")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        done = _quiet_run(["apt-get", "install", "-y", "--no-install-recommends", "openssh-server"], env, timeout)
        sshd = shutil.which("sshd", path=_sbin_path())
        if done.returncode != 0 or sshd is None:
            raise SlurmUnavailable(f"apt-get install openssh-server failed: {done.stdout.strip()[-300:]}")
    if os.geteuid() != 0:
        raise SlurmUnavailable("sshd must run as root to log users in, and this is not root")
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # its privilege separation folder
    for name in ("host", "user"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{folder}/{name}"], check=True)
    os.chmod(f"{folder}/user", 0o600)
    shutil.copy(f"{folder}/user.pub", f"{folder}/authorized_keys")
    os.chmod(folder, 0o700)  # sshd's StrictModes: the key files' folder is not writable by others
    port = free_ports(1)[0]
    config = [
        f"Port {port}",
        "ListenAddress 127.0.0.1",
        f"HostKey {folder}/host",
        f"AuthorizedKeysFile {folder}/authorized_keys",
        "PasswordAuthentication no",
        "PermitRootLogin prohibit-password",
        "UsePAM no",
        "StrictModes no",  # the keys sit in a private folder under /tmp, which is world-writable
        f"PidFile {folder}/sshd.pid",
    ]
    with open(f"{folder}/sshd_config", "w") as f:
        f.write("\n".join(config) + "\n")
    log = open(f"{folder}/sshd.log", "w")
    proc = subprocess.Popen(
        [sshd, "-D", "-e", "-f", f"{folder}/sshd_config"],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    log.close()
    ssh = ["ssh", "-p", str(port), "-i", f"{folder}/user", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no"]
    ssh += ["-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"]
    deadline = time.monotonic() + 15
    while subprocess.run([*ssh, "127.0.0.1", "true"], capture_output=True, timeout=15).returncode != 0:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SlurmUnavailable(f"sshd did not let us in: {open(f'{folder}/sshd.log').read()[-500:]}")
        time.sleep(0.2)
    return Sshd(proc, ssh)
