"""launch/torchrun-multinode.sh and launch/slurm/: two nodes simulated on this machine.

Two torchrun agents on 127.0.0.1 with --nnodes=2 and the c10d rendezvous play two nodes;
the Slurm template runs with Slurm's variables set by hand and stand-ins for `srun` and
`scontrol` on PATH. Every process is started in its own session, carries a marker in its
environment, and is killed by that marker when the test ends, however it ends.
"""

from __future__ import annotations

import glob
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import nbformat
import pytest

from labkit import export

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MULTINODE = os.path.join(ROOT, "launch", "torchrun-multinode.sh")
FROM_SLURM = os.path.join(ROOT, "launch", "slurm", "torchrun-from-slurm.sh")
SBATCH = os.path.join(ROOT, "launch", "slurm", "train.sbatch")
TIMEOUT = 120  # seconds for a simulated two-node job; a healthy one takes under 15 s here

# what each rank reports: enough to see one world of two ranks across the two "nodes"
CELL = """\
import os
import torch
import torch.distributed as dist
from labkit import rank

x = torch.tensor([float(rank.rank() + 1)])
dist.all_reduce(x)
rank.report(world=dist.get_world_size(), total=x.item(), group_rank=int(os.environ["GROUP_RANK"]))
"""

SRUN = """#!/usr/bin/env bash
# srun stand-in: one task per node, as `srun --ntasks-per-node=1` starts them, each with its SLURM_PROCID
while [ $# -gt 0 ] && [[ $1 == -* ]]; do shift; done
pids=()
for ((i = 0; i < SLURM_NNODES; i++)); do
    SLURM_PROCID=$i SLURM_NODEID=$i SLURM_LOCALID=0 "$@" > "$SRUN_LOGS/task$i.log" 2>&1 &
    pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
exit $rc
"""

SCONTROL = """#!/usr/bin/env bash
# scontrol stand-in: `scontrol show hostnames LIST` prints the nodes given in FAKE_NODES
[ "$1 $2" = "show hostnames" ] || exit 1
printf '%s\\n' $FAKE_NODES
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Processes:
    """Processes of one test, each in a session of its own, all marked for the final sweep."""

    def __init__(self) -> None:
        self.mark = "multinodetest-" + secrets.token_hex(4)
        self.procs: list[subprocess.Popen] = []

    def start(self, cmd: list[str], env: dict[str, str], log: str) -> subprocess.Popen:
        out = open(log, "w")
        proc = subprocess.Popen(
            cmd, env={**env, "LABKIT_RUN_ID": self.mark}, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        out.close()
        self.procs.append(proc)
        return proc

    def wait_all(self, timeout: float) -> list[int]:
        deadline = time.monotonic() + timeout
        codes = []
        for proc in self.procs:
            try:
                codes.append(proc.wait(timeout=max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                self.stop()
                pytest.fail(f"a simulated node did not finish in {timeout} s")
        return codes

    def stop(self) -> None:
        from labkit.launch.group import find_run_processes

        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)  # torchrun passes SIGTERM on to its ranks
        time.sleep(0.5)
        for pid in find_run_processes(self.mark):  # ranks live in sessions of their own
            os.kill(pid, signal.SIGKILL)
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture
def processes():
    procs = Processes()
    yield procs
    procs.stop()


@pytest.fixture
def lesson_script(tmp_path) -> str:
    """A one-cell lesson, exported: the script the nodes run."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%%torchrun -n 2 --backend gloo\n" + CELL)]
    path = str(tmp_path / "lesson.ipynb")
    nbformat.write(nb, path)
    return export.export_notebook(path, out=str(tmp_path / "lesson.py")) and str(tmp_path / "lesson.py")


def base_env(tmp_path) -> dict[str, str]:
    reports = tmp_path / "reports"
    reports.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "NNODES", "NODE_RANK", "RDZV_"))}
    env.update(PYTHON=sys.executable, NPROC_PER_NODE="1", LABKIT_REPORT_DIR=str(reports), LABKIT_LANG="en")
    env["LOG_DIR"] = str(tmp_path / "torchelastic")  # torchrun's files: here, not in a /tmp/torchelastic_* of its own
    return env


def tmp_torchelastic() -> set[str]:
    """The folders torchrun makes for itself when it is given no --log-dir, which nothing removes."""
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "torchelastic_*")))


def assert_torchrun_files_in_log_dir(env: dict[str, str], rdzv_id: str, before: set[str]) -> None:
    """Each of the two agents made its job folder in LOG_DIR, and none in a /tmp/torchelastic_* made meanwhile."""
    assert len(glob.glob(os.path.join(env["LOG_DIR"], f"{rdzv_id}_*"))) == 2, os.listdir(env["LOG_DIR"])
    leaked = [d for d in tmp_torchelastic() - before if glob.glob(os.path.join(d, f"{rdzv_id}_*"))]
    assert not leaked, leaked


def reports_of(tmp_path) -> dict[int, dict]:
    out = {}
    for r in (0, 1):
        with open(tmp_path / "reports" / f"rank{r}.jsonl") as f:
            for line in f:
                msg = json.loads(line)
                if msg["t"] == "report":
                    out[r] = msg["values"]
    return out


def command_line(log: str) -> str:
    """The torchrun command the launcher printed (the `+ ...` line)."""
    with open(log) as f:
        return next(line for line in f if line.startswith("+ "))


@pytest.mark.slow
def test_two_nodes_elastic(tmp_path, processes, lesson_script):
    # two agents that know only the job id and the endpoint: the first to come hosts the store
    # (node ranks are tested with the Slurm template below, which passes them)
    env, port = base_env(tmp_path), free_port()
    logs = [str(tmp_path / f"node{n}.log") for n in (0, 1)]
    before = tmp_torchelastic()
    for node in (0, 1):
        args = ["--nnodes", "2", "--rdzv-id", "elastic-test", "--rdzv-endpoint", f"127.0.0.1:{port}", lesson_script]
        processes.start(["bash", MULTINODE, *args], env, logs[node])
    assert processes.wait_all(TIMEOUT) == [0, 0], open(logs[0]).read()[-2000:] + open(logs[1]).read()[-2000:]
    values = reports_of(tmp_path)
    assert {r: (v["world"], v["total"]) for r, v in values.items()} == {0: (2, 3.0), 1: (2, 3.0)}
    assert sorted(v["group_rank"] for v in values.values()) == [0, 1]  # one rank on each node
    line = command_line(logs[0])
    for part in (
        "--nnodes=2",
        "--nproc-per-node=1",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{port}",
        "--rdzv-id=elastic-test",
        f"--log-dir={env['LOG_DIR']}",
    ):
        assert part in line
    assert "is_host" not in line
    assert_torchrun_files_in_log_dir(env, "elastic-test", before)  # both nodes share one LOG_DIR


def dry_run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", *args], env={**env, "LABKIT_DRY_RUN": "1"}, capture_output=True, text=True, timeout=30
    )


def test_multinode_options_are_checked(tmp_path):
    env = base_env(tmp_path)
    for args, message in [
        (["--nnodes", "2", "x.py"], "need --rdzv-endpoint"),
        (["--nnodes", "0", "x.py"], "--nnodes must be"),
        (["--nnodes", "3:2", "x.py"], "--nnodes must be"),
        (["--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:1", "x.py"], "--node-rank must be 0..1"),
        (["--nnodes", "2", "--rdzv-endpoint", "h:1"], "which script"),
        (["--bogus", "x.py"], "unknown option --bogus"),
        (["--rdzv-timeout", "soon", "x.py"], "--rdzv-timeout must be a number of seconds"),
        (["--log-dir"], "--log-dir needs a value"),
        (["--log-dir", os.path.join(ROOT, "README.md"), "x.py"], "is not a folder"),
    ]:
        done = dry_run(env, MULTINODE, *args)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
    done = dry_run(env, MULTINODE, "--nnodes", "1:4", "--rdzv-id", "j", "--rdzv-endpoint", "node0:1", "x.py")
    assert "--nnodes=1:4" in done.stderr and "--max-restarts=3" in done.stderr and "is_host" not in done.stderr
    # a host without a port gets torchrun's rendezvous port; a loopback host is pointed out
    done = dry_run(env, MULTINODE, "--nnodes", "2", "--rdzv-endpoint", "node0", "x.py", "--lr", "0.1")
    assert (
        done.returncode == 0
        and "--rdzv-endpoint=node0:29400" in done.stderr
        and done.stderr.rstrip().endswith("x.py --lr 0.1")
    )
    done = dry_run({**env, "LABKIT_LANG": "ro"}, MULTINODE, "--nnodes", "2", "--rdzv-endpoint", "localhost:5", "x.py")
    assert "loopback-ul acestei mașini" in done.stderr


def test_multinode_log_dir(tmp_path):
    env = base_env(tmp_path)
    done = dry_run(env, MULTINODE, "x.py")  # LOG_DIR
    assert done.returncode == 0 and f"--log-dir={env['LOG_DIR']} " in done.stderr, done.stderr
    done = dry_run(env, MULTINODE, "--log-dir", str(tmp_path / "logs"), "x.py")  # the option wins
    assert done.returncode == 0 and f"--log-dir={tmp_path / 'logs'} " in done.stderr, done.stderr
    # neither: torchrun's own default, as plain torchrun (a /tmp/torchelastic_* folder)
    done = dry_run({k: v for k, v in env.items() if k != "LOG_DIR"}, MULTINODE, "x.py")
    assert done.returncode == 0 and "--log-dir" not in done.stderr, done.stderr


@pytest.mark.slow
def test_nproc_defaults_to_the_gpus_that_are_ours(tmp_path):
    import torch

    if torch.cuda.device_count() > 0:
        pytest.skip("this machine has GPUs: the count depends on which")
    env = {k: v for k, v in base_env(tmp_path).items() if k != "NPROC_PER_NODE"}
    done = dry_run({**env, "CUDA_VISIBLE_DEVICES": "2,5"}, MULTINODE, "x.py")
    # labkit.wire.devices: this machine's torch opens no GPU, so the variable cannot widen it: 2 CPU ranks
    assert "--nproc-per-node=2" in done.stderr, done.stderr


# -- Slurm --------------------------------------------------------------------------------------


def shims(tmp_path) -> str:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL)):
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return str(folder)


def slurm_env(tmp_path, **extra: str) -> dict[str, str]:
    env = base_env(tmp_path)
    env.update(
        PATH=shims(tmp_path) + os.pathsep + env["PATH"],
        SLURM_JOB_ID="4242",
        SLURM_JOB_NODELIST="gpu[07-08]",
        SLURM_NNODES="2",
        SLURM_NTASKS="2",
        SLURM_PROCID="0",  # what the batch script itself sees
        SLURM_SUBMIT_DIR=ROOT,
        FAKE_NODES="gpu07 gpu08",
        SRUN_LOGS=str(tmp_path),
    )
    env.update(extra)
    return env


def test_slurm_files_parse():
    for path in (
        SBATCH,
        FROM_SLURM,
        MULTINODE,
        *(os.path.join(ROOT, "launch", n) for n in ("lab.sh", "setup-env.sh", "lib.sh")),
    ):
        done = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
        assert done.returncode == 0, (path, done.stderr)
    lines = open(SBATCH).read().split("\n")
    first_command = next(i for i, ln in enumerate(lines) if ln.strip() and not ln.startswith("#"))
    directives = [i for i, ln in enumerate(lines) if ln.startswith("#SBATCH")]
    assert directives and max(directives) < first_command  # sbatch stops reading #SBATCH at the first command
    assert "#SBATCH --ntasks-per-node=1" in lines


def test_slurm_torchrun_command_from_the_variables(tmp_path):
    env = slurm_env(tmp_path, SLURM_PROCID="1", NPROC_PER_NODE="4")
    done = dry_run(env, FROM_SLURM, "fsdp.py", "--steps", "5")
    assert done.returncode == 0, done.stderr
    line = done.stderr.strip().split("\n")[-1]
    for part in (
        "--nnodes=2",
        "--nproc-per-node=4",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=gpu07:29642",
        "--rdzv-id=slurm-4242",
        "--rdzv-conf=is_host=0",
    ):
        assert part in line, (part, line)
    assert line.endswith("fsdp.py --steps 5")
    assert f"--log-dir={env['LOG_DIR']}" in line, line
    assert "is_host=1" in dry_run(slurm_env(tmp_path, SLURM_PROCID="0"), FROM_SLURM, "fsdp.py").stderr
    # without LOG_DIR torchrun's files go beside the job's output, in the folder the job was submitted from
    submitted_from = tmp_path / "submit"
    env = {k: v for k, v in slurm_env(tmp_path, SLURM_SUBMIT_DIR=str(submitted_from)).items() if k != "LOG_DIR"}
    done = dry_run(env, FROM_SLURM, "fsdp.py")
    assert done.returncode == 0 and f"--log-dir={submitted_from / 'torchelastic'} " in done.stderr, done.stderr


def test_slurm_refuses_what_would_hang(tmp_path):
    # two tasks on one node would start two agents that both claim to be node 0 and 1 of 2
    done = dry_run(slurm_env(tmp_path, SLURM_NTASKS="4"), FROM_SLURM, "fsdp.py")
    assert done.returncode == 2 and "one task per node" in done.stderr
    # without scontrol no head node can be named: fail, do not fall back to localhost
    if shutil.which("scontrol", path=f"/usr/bin{os.pathsep}/bin"):
        return  # a real Slurm client here: it cannot be hidden from the script
    env = slurm_env(tmp_path)
    bare = tmp_path / "no-scontrol"
    bare.mkdir()
    env["PATH"] = f"{bare}{os.pathsep}/usr/bin{os.pathsep}/bin"
    done = dry_run(env, FROM_SLURM, "fsdp.py")
    assert done.returncode != 0 and "localhost" not in done.stderr
    done = dry_run({k: v for k, v in slurm_env(tmp_path).items() if k != "SLURM_PROCID"}, FROM_SLURM, "fsdp.py")
    assert done.returncode == 2 and "SLURM_PROCID is not set" in done.stderr


@pytest.mark.slow
def test_sbatch_runs_two_nodes(tmp_path, processes, lesson_script):
    env = slurm_env(tmp_path, FAKE_NODES="127.0.0.1 127.0.0.1", RDZV_PORT=str(free_port()))
    before = tmp_torchelastic()
    batch = processes.start(["bash", SBATCH, lesson_script], env, str(tmp_path / "batch.log"))
    code = processes.wait_all(TIMEOUT)[0]
    tasks = [open(tmp_path / f"task{i}.log").read() for i in (0, 1)]
    assert code == 0 and batch.returncode == 0, open(tmp_path / "batch.log").read() + "".join(t[-2000:] for t in tasks)
    values = reports_of(tmp_path)
    assert {r: (v["world"], v["total"]) for r, v in values.items()} == {0: (2, 3.0), 1: (2, 3.0)}
    assert sorted(v["group_rank"] for v in values.values()) == [0, 1]  # one rank on each node
    # each task read its own SLURM_PROCID: node 0 hosts the rendezvous, node 1 joins it
    hosts = [re.search(r"is_host=(\d)", t).group(1) for t in tasks]
    assert hosts == ["1", "0"]
    assert_torchrun_files_in_log_dir(env, "slurm-4242", before)
