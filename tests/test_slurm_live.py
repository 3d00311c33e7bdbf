"""launch/slurm/ on a real Slurm: munged, slurmctld and two slurmd (nodes n1, n2) on this machine.

The cluster (labkit.testing.slurm) is installed from Debian's packages when this runs as root
(as CI does) and started once per session; without root, apt-get or network the tests skip,
saying why. Each test submits what a user submits (sbatch train.sbatch, srun
torchrun-from-slurm.sh), waits for the job, reads what the ranks reported, and checks that no
job and no process of a job (slurmstepd, torchrun, ranks) is left on any node.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import nbformat
import pytest

from labkit import export
from labkit.testing import processes, slurm

pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.timeout(240)]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FROM_SLURM = "launch/slurm/torchrun-from-slurm.sh"
JOB_TIMEOUT = 120  # seconds for a job; a healthy one takes 10-20 s here

# FSDP FULL_SHARD on every rank of both nodes: where it ran, what it holds, what it learned
FSDP_CELL = """\
import os
import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
from labkit import rank
from labkit.models.transformer import TransformerLM, synthetic_batch
from labkit.models.config import get_config

torch.manual_seed(0)
cfg = get_config("tiny")
model = FSDP(TransformerLM(cfg), sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=torch.device("cpu"))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in rank.steps(2):
    inputs, targets = synthetic_batch(cfg, 4, step, rank.rank())
    model(inputs, targets).backward()
    optimizer.step()
    optimizer.zero_grad()
    if step == 0 and os.environ.get("DIE_ON") == f"{os.environ['SLURMD_NODENAME']}/{rank.local_rank()}":
        rank.report(dying=rank.rank())
        os.kill(os.getpid(), 9)  # this rank dies between two steps; its peers wait in the next one
held = sum(p.numel() for p in model.parameters())  # this rank's shard
with FSDP.summon_full_params(model):
    full = sum(p.numel() for p in model.parameters())
    checksum = sum(p.double().sum().item() for p in model.parameters())
rank.report(world=dist.get_world_size(), node=os.environ["SLURMD_NODENAME"], local_rank=rank.local_rank(),
            held=held, full=full, checksum=checksum)
"""


@pytest.fixture(scope="session")
def cluster():
    """One Slurm for the session: installed if need be, started, and stopped with nothing left."""
    try:
        seconds = slurm.install()
    except slurm.SlurmUnavailable as e:
        pytest.skip(f"no Slurm: {e}")
    folder = tempfile.mkdtemp(prefix="labkit-slurm-")  # short: munge's socket path must fit in 108 bytes
    try:
        started = time.monotonic()
        running = slurm.start_cluster(folder)
    except slurm.SlurmUnavailable as e:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.skip(f"Slurm did not start: {e}")
    print(f"\nslurm: installed in {seconds:.1f} s, started in {time.monotonic() - started:.1f} s", file=sys.stderr)
    yield running
    killed = running.stop()
    shutil.rmtree(folder, ignore_errors=True)
    assert not killed, f"processes outlived the Slurm daemons: {killed}"


@pytest.fixture
def live(cluster):
    """The cluster, checked after the test: no job active, no job process on any node."""
    assert not cluster.active_jobs(), "a job from an earlier test is still active"
    yield cluster
    from labkit.launch import prefork

    prefork.stop()  # this test process is the kernel: its prefork server lives as long as it does, not a run's leftover
    left = cluster.leftovers()
    assert not left, f"left running after the test (now killed): {left}"


def job_env(tmp_path, **extra: str) -> dict[str, str]:
    """What the submitter's shell holds: srun and sbatch pass it on to every task."""
    reports = tmp_path / "reports"
    reports.mkdir(exist_ok=True)
    env = {
        "PYTHON": sys.executable,
        "PYTHONPATH": ROOT,
        "LABKIT_REPORT_DIR": str(reports),
        "LABKIT_BACKEND": "gloo",
        "LABKIT_LANG": "en",
        "OMP_NUM_THREADS": "1",
        "NPROC_PER_NODE": "2",
        "RDZV_PORT": str(slurm.free_ports(1)[0]),
        "LOG_DIR": str(tmp_path / "torchelastic"),  # torchrun's files, not a /tmp/torchelastic_* on each node
    }
    env.update(extra)
    return env


def reports_of(tmp_path) -> dict[int, dict]:
    out = {}
    for name in os.listdir(tmp_path / "reports"):
        r = int(re.fullmatch(r"rank(\d+)\.jsonl", name).group(1))
        with open(tmp_path / "reports" / name) as f:
            for line in f:
                msg = json.loads(line)
                if msg["t"] == "report":  # every cell's reports, in order (a lesson has several cells)
                    out.setdefault(r, {}).update(msg["values"])
    return out


def cell_script(tmp_path, source: str) -> str:
    """A one-cell notebook with ``source`` under %%torchrun, exported as labkit exports a lesson."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%%torchrun -n 4 --backend gloo\n" + source)]
    nbformat.write(nb, str(tmp_path / "cell.ipynb"))
    export.export_notebook(str(tmp_path / "cell.ipynb"), out=str(tmp_path / "cell.py"))
    return str(tmp_path / "cell.py")


def essentials(output: str, limit: int = 4000) -> str:
    """A task's output without the tracebacks of torchrun's agent and C++ frames: what the ranks said."""
    kept = [
        line
        for line in output.splitlines()
        if not line.startswith(("  File ", "    ", "frame #", "Exception raised from"))
    ]
    return "\n".join(kept)[-limit:]


def srun(cluster, tmp_path, args: list[str], timeout: float = JOB_TIMEOUT, **env: str):
    """``srun ARGS`` from the checkout; (CompletedProcess, seconds)."""
    started = time.monotonic()
    done = cluster.run(["srun", *args], timeout=timeout, cwd=ROOT, env=job_env(tmp_path, **env))
    return done, time.monotonic() - started


def test_sbatch_runs_an_exported_lesson_on_two_nodes(live, tmp_path):
    script = str(tmp_path / "lesson01.py")  # what `labkit export LESSON -o lesson01.py` writes
    export.export_notebook(os.path.join(ROOT, "notebooks", "en", "01_ddp_memory_wall.ipynb"), out=script)
    # the template asks for 4 GPUs and 16 CPUs per node: this cluster's nodes have 2 CPUs and no GPU
    options = ["--gpus-per-node=0", "--cpus-per-task=1", f"--output={tmp_path}/%x-%j.out"]
    tmp_before = set(glob.glob(os.path.join(tempfile.gettempdir(), "torchelastic_*")))
    started = time.monotonic()
    submitted = live.run(
        ["sbatch", "--parsable", *options, "launch/slurm/train.sbatch", script],
        cwd=ROOT,
        env=job_env(tmp_path, NPROC_PER_NODE="1"),
    )
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]
    job = live.wait_job(job_id, JOB_TIMEOUT)
    output = open(tmp_path / f"labkit-{job_id}.out").read()
    print(f"sbatch job {job_id}: {time.monotonic() - started:.1f} s, Slurm says RunTime={job['RunTime']}")
    assert (job["JobState"], job["ExitCode"], job["NodeList"]) == ("COMPLETED", "0:0", "n[1-2]"), essentials(output)
    # one torchrun agent per node: node 0 hosts the rendezvous at the first node's address
    agents = re.findall(r"^\+ .*torch\.distributed\.run .*$", output, re.M)
    assert len(agents) == 2, essentials(output)
    assert sorted(re.search(r"is_host=(\d)", a).group(1) for a in agents) == ["0", "1"]
    assert all(f"--rdzv-id=slurm-{job_id}" in a and "--nnodes=2" in a for a in agents)
    values = reports_of(tmp_path)
    assert sorted(values) == [0, 1]  # every rank of both nodes reported
    assert values[0]["checksum"] == values[1]["checksum"]  # DDP: the same weights on both nodes
    assert values[0]["grad_bytes"] == values[0]["param_bytes"] > 0
    nb = nbformat.read(os.path.join(ROOT, "notebooks", "en", "01_ddp_memory_wall.ipynb"), as_version=4)
    first = next(i for i, c in enumerate(nb.cells) if c.source.startswith("%%torchrun"))  # the script's first cell
    assert f"cell {first}, rank 0 reported" in output
    # torchrun's files: each agent's job folder in LOG_DIR, none in a /tmp/torchelastic_* left behind
    assert len(glob.glob(str(tmp_path / "torchelastic" / f"slurm-{job_id}_*"))) == 2
    tmp_new = set(glob.glob(os.path.join(tempfile.gettempdir(), "torchelastic_*"))) - tmp_before
    assert not [d for d in tmp_new if glob.glob(os.path.join(d, f"slurm-{job_id}_*"))]


def test_srun_torchrun_fsdp_full_shard_two_nodes_two_ranks(live, tmp_path):
    script = cell_script(tmp_path, FSDP_CELL)
    args = ["-N2", "--ntasks-per-node=1", "--kill-on-bad-exit=1", f"--output={tmp_path}/task%t.out"]
    done, seconds = srun(live, tmp_path, [*args, "bash", FROM_SLURM, script])
    print(f"srun FSDP 2 nodes x 2 ranks: {seconds:.1f} s")
    tasks = [open(tmp_path / f"task{t}.out").read() for t in (0, 1)]
    assert done.returncode == 0, done.stderr + "".join(essentials(t, 2500) for t in tasks)
    assert "is_host=1" in tasks[0] and "is_host=0" in tasks[1]  # SLURM_PROCID read inside each task
    values = reports_of(tmp_path)
    assert sorted(values) == [0, 1, 2, 3]
    assert {v["world"] for v in values.values()} == {4}
    placed = sorted((v["node"], v["local_rank"]) for v in values.values())
    assert placed == [("n1", 0), ("n1", 1), ("n2", 0), ("n2", 1)]  # two ranks on each node
    full = values[0]["full"]
    assert all(v["full"] == full for v in values.values())
    print(f"FSDP FULL_SHARD: {full} parameters, held per rank {[values[r]['held'] for r in sorted(values)]}")
    assert all(v["held"] == -(-full // 4) for v in values.values())  # FULL_SHARD: a quarter each, padded
    assert len({round(v["checksum"], 6) for v in values.values()}) == 1  # one model, gathered from 4 shards


def test_a_rank_that_dies_on_one_node_fails_the_job_everywhere(live, tmp_path):
    script = cell_script(tmp_path, FSDP_CELL)
    args = ["-N2", "--ntasks-per-node=1", "--kill-on-bad-exit=1", f"--output={tmp_path}/task%t.out"]
    env = {"DIE_ON": "n2/0", "NPROC_PER_NODE": "1", "LABKIT_PG_TIMEOUT": "30"}
    done, seconds = srun(live, tmp_path, [*args, "bash", FROM_SLURM, script], **env)
    print(f"srun with a rank killed on n2: failed in {seconds:.1f} s")
    task1 = open(tmp_path / "task1.out").read()
    assert done.returncode != 0
    # srun names the node and its task; torchrun on that node names the rank and how it died
    assert re.search(r"srun: error: n2: task 1: Exited with exit code 1", done.stderr), done.stderr
    values = reports_of(tmp_path)
    assert [v.get("dying") for v in values.values()] == [r for r in values]  # only the dying rank reported
    root_cause = task1.split("Root Cause (first observed failure):")[-1]
    dead = next(iter(values))
    assert f"rank      : {dead} (local_rank: 0)" in root_cause, task1[-3000:]
    assert "Signal 9 (SIGKILL) received by PID" in root_cause, task1[-3000:]


def test_srun_that_cannot_start_says_why(live, tmp_path):
    for args, message in [
        (["-p", "nosuchpartition", "-N2"], "invalid partition specified: nosuchpartition"),
        (["-w", "n9"], "Invalid node name specified"),
        (["--bogus-option"], "unrecognized option '--bogus-option'"),
    ]:
        done, seconds = srun(live, tmp_path, [*args, "bash", FROM_SLURM, "x.py"], timeout=30)
        assert done.returncode != 0 and message in done.stderr, (args, done.stderr)
        assert seconds < 10, (args, seconds)


def test_a_rendezvous_that_never_completes_times_out(live, tmp_path):
    # node n2's agent never comes (a node stuck before torchrun): n1's agent waits RDZV_TIMEOUT seconds, no more
    stuck = f'[ "$SLURM_PROCID" = 1 ] && exec sleep 600; exec bash {FROM_SLURM} "$@"'
    args = ["-N2", "--ntasks-per-node=1", "--kill-on-bad-exit=1", f"--output={tmp_path}/task%t.out"]
    done, seconds = srun(live, tmp_path, [*args, "bash", "-c", stuck, "rdzv", "x.py"], RDZV_TIMEOUT="10")
    print(f"srun with a node that never joins: failed in {seconds:.1f} s")
    task0 = open(tmp_path / "task0.out").read()
    assert done.returncode != 0
    assert "join_timeout=10" in task0 and "RendezvousTimeoutError" in task0, task0[-3000:]
    assert 10 <= seconds < 10 + 30, seconds
    assert re.search(r"n1: task 0: Exited with exit code", done.stderr), done.stderr


# -- %%torchrun --nnodes 2 --slurm: labkit's own launch across nodes ------------------------------

# the FSDP cell as a notebook runs it: the rank API, a timeline, where each rank ran
NODE_CELL = """
import os
import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, ShardingStrategy
from labkit import rank, timeline
from labkit.models.transformer import TransformerLM, synthetic_batch
from labkit.models.config import get_config

torch.manual_seed(0)
cfg = get_config("tiny")
model = FSDP(TransformerLM(cfg), sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=torch.device("cpu"))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
recorder = timeline.Recorder(model, optimizer)
for step in rank.steps(2):
    inputs, targets = synthetic_batch(cfg, 4, step, rank.rank())
    with recorder.step(step):
        model(inputs, targets).backward()
        optimizer.step()
    optimizer.zero_grad()
held = sum(p.numel() for p in model.parameters())
with FSDP.summon_full_params(model):
    full = sum(p.numel() for p in model.parameters())
    checksum = sum(p.double().sum().item() for p in model.parameters())
rank.report(world=dist.get_world_size(), node=os.environ.get("LABKIT_NODE", "local"), local_rank=rank.local_rank(),
            held=held, full=full, checksum=checksum)
"""

SLEEP_CELL = """
import time
from labkit import rank
for step in rank.steps(3000):
    time.sleep(0.05)
"""


@pytest.fixture
def nodes_env(live, monkeypatch, tmp_path):
    """The kernel's side: this process reaches the cluster (srun on PATH, SLURM_CONF) as a notebook on a login node would."""
    for key in ("SLURM_CONF", "PATH", slurm.MARK_VAR):
        monkeypatch.setenv(key, live.env[key])
    monkeypatch.setenv("LABKIT_RUN_ROOT", str(tmp_path / "runs"))  # every node sees it (one host here)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("LABKIT_LANG", "en")
    from labkit.launch.group import find_run_processes
    from labkit.testing.processes import check_leftovers, listening_sockets

    before = listening_sockets()
    yield live
    assert not [slurm.describe(p) for p in find_run_processes(None) if p in slurm.marked_processes(live.mark)]
    check_leftovers(before)  # no rank of ours anywhere, and the channel's TCP listener is closed


def agent_on(cluster, node: str) -> int | None:
    """The torchrun agent (not a forked rank) that srun started on ``node``, if it runs yet."""
    for pid in processes.with_env("SLURMD_NODENAME", node, slurm.marked_processes(cluster.mark)):
        if "labkit.launch.agent" in slurm.describe(pid) and "labkit.launch.agent" not in slurm.describe(
            slurm.parent(pid)
        ):
            return pid
    return None


def in_background(action) -> threading.Thread:
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    return thread


def test_a_two_node_slurm_cell_comes_back_like_a_one_node_cell(nodes_env):
    from labkit.launch import magic

    started = time.monotonic()
    two = magic.run_cell("--nnodes 2 --slurm -n 2 --backend gloo --timeout 120 --display none", NODE_CELL, {})
    seconds = time.monotonic() - started
    one = magic.run_cell("-n 2 --backend gloo --timeout 120 --display none", NODE_CELL, {})
    print(f"%%torchrun --nnodes 2 --slurm -n 2 (FSDP FULL_SHARD): {seconds:.1f} s; 1 node x 2: {one.wall_time:.1f} s")
    assert two.ok and one.ok and two.rejected_clients == []
    values = two.values
    assert sorted(values) == [0, 1, 2, 3] and {v["world"] for v in values.values()} == {4}
    assert sorted((v["node"], v["local_rank"]) for v in values.values()) == [("n1", 0), ("n1", 1), ("n2", 0), ("n2", 1)]
    full = values[0]["full"]
    assert all(v["full"] == full and v["held"] == -(-full // 4) for v in values.values())  # FULL_SHARD over 4
    assert len({round(v["checksum"], 6) for v in values.values()}) == 1
    # the same results as a one-node cell: values, memory samples, peaks, step times, timeline
    assert all(set(values[r]) == set(one.values[0]) for r in values)
    assert all(two.memory[r] and set(two.memory[r][-1]) == set(one.memory[0][-1]) for r in values)
    assert all(set(two.peak_memory[r]) == set(one.peak_memory[0]) and two.main_peak(r) > 0 for r in values)
    assert all(len(two.step_times[r]) == len(one.step_times[0]) == 2 for r in values)
    spans = two.timeline()
    assert sorted(spans) == [0, 1, 2, 3] and all(set(spans[r]) == set(one.timeline()[0]) for r in spans)
    # the summary names each rank's node and local rank; a one-node run keeps plain numbers
    for r, v in values.items():
        assert f"{r} ({v['node']}/{v['local_rank']})" in two.summary()
    assert "(local/" not in one.summary()


def test_a_node_that_dies_names_the_node_and_rank(nodes_env):
    import labkit
    from labkit.wire.errors import RunError

    killed: list[float] = []
    secrets_seen: list[str] = []

    def kill_node_two() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            run = labkit.last_run
            if run is not None and run.nproc == 2 and all(s.connected for s in run.ranks.values()):
                pid = agent_on(nodes_env, "n2")
                if pid:
                    secrets_seen.extend(token_on_command_lines(pid))
                    os.kill(pid, 9)
                    killed.append(time.monotonic())
                    return
            time.sleep(0.05)

    labkit.last_run = None
    thread = in_background(kill_node_two)
    with pytest.raises(RunError) as failure:
        labkit.torchrun(SLEEP_CELL, nproc=1, backend="gloo", nnodes=2, slurm=True, timeout=90, display="none")
    thread.join(5)
    seconds = time.monotonic() - killed[0]
    message = str(failure.value)
    print(f"node n2's agent killed: {type(failure.value).__name__} after {seconds:.1f} s\n{message}")
    dead = next(r for r, v in failure.value.run.events.items() if v and v[0].get("node") == "n2")
    assert failure.value.rank == dead and f"rank {dead} ran on node n2 (local rank 0)" in message
    assert "srun: error: n2: task 1" in message
    assert seconds < 30
    assert secrets_seen == [], f"the run's token is on a command line: {secrets_seen}"


def test_a_rank_that_raises_on_the_second_node_is_named_with_its_node(nodes_env):
    import labkit
    from labkit.wire.errors import RankError

    cell = (
        "import os\nfrom labkit import rank\nif os.environ['LABKIT_NODE'] == 'n2':\n    raise ValueError('bad shard')\n"
    )
    started = time.monotonic()
    with pytest.raises(RankError) as failure:
        labkit.torchrun(cell, nproc=1, backend="gloo", nnodes=2, slurm=True, timeout=60, display="none")
    message = str(failure.value)
    print(f"a rank raising on n2: {time.monotonic() - started:.1f} s\n{message}")
    on_n2 = next(r for r, v in failure.value.run.events.items() if v and v[0].get("node") == "n2")
    assert failure.value.rank == on_n2 and "ValueError: bad shard" in message
    assert (
        f"rank {on_n2} failed (cell line 4): ValueError: bad shard\nrank {on_n2} ran on node n2 (local rank 0)"
        in message
    )


def test_a_kernel_inside_an_allocation_runs_the_cell_as_a_step_of_its_job(live, tmp_path):
    # what a batchspawner server with --nodes=2 is: a kernel in a 2-node job; the cell becomes a step of it
    kernel = tmp_path / "kernel.py"
    kernel.write_text(
        "import json, os, sys\nimport labkit\n"
        "cell = 'import os\\nfrom labkit import rank\\n"
        'rank.report(job=os.environ["SLURM_JOB_ID"], step=os.environ["SLURM_STEP_ID"], node=os.environ["LABKIT_NODE"])\'\n'
        "run = labkit.torchrun(cell, nproc=1, backend='gloo', nnodes=2, slurm=True, timeout=90, display='none')\n"
        "json.dump({'job': os.environ['SLURM_JOB_ID'], 'values': run.values}, open(sys.argv[1], 'w'))\n"
    )
    env = job_env(tmp_path, LABKIT_RUN_ROOT=str(tmp_path / "runs"))
    wrap = f"{sys.executable} {kernel} {tmp_path}/result.json"
    started = time.monotonic()
    submitted = live.run(
        ["sbatch", "--parsable", "-N2", "--ntasks-per-node=1", f"--output={tmp_path}/kernel.out", "--wrap", wrap],
        cwd=ROOT,
        env=env,
    )
    assert submitted.returncode == 0, submitted.stderr
    job = live.wait_job(submitted.stdout.strip().split(";")[0], JOB_TIMEOUT)
    print(f"a kernel in a 2-node job, the cell a step of it: {time.monotonic() - started:.1f} s")
    assert job["JobState"] == "COMPLETED", open(tmp_path / "kernel.out").read()[-3000:]
    result = json.load(open(tmp_path / "result.json"))
    values = result["values"].values()
    assert {v["job"] for v in values} == {result["job"]}  # the kernel's own job, not a new one
    assert sorted(v["node"] for v in values) == ["n1", "n2"]


def token_on_command_lines(agent: int) -> list[str]:
    """Every process whose command line (what ``ps`` shows everyone) holds the token the agent got in its env."""
    with open(f"/proc/{agent}/environ", "rb") as f:
        token = dict(item.partition(b"=")[::2] for item in f.read().split(b"\0"))[b"LABKIT_TOKEN"]
    assert len(token) == 64
    seen = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if token in f.read():
                    seen.append(slurm.describe(int(name)))
        except OSError:
            continue
    return seen


def test_a_two_node_run_past_its_timeout_is_stopped_on_every_node(nodes_env):
    import labkit
    from labkit.wire.errors import RunTimeout

    started = time.monotonic()
    with pytest.raises(RunTimeout) as failure:
        labkit.torchrun(SLEEP_CELL, nproc=1, backend="gloo", nnodes=2, slurm=True, timeout=15, display="none")
    seconds = time.monotonic() - started
    print(f"--timeout 15 on 2 nodes: RunTimeout after {seconds:.1f} s\n{failure.value}")
    assert sorted(failure.value.alive) == [0, 1] and seconds < 15 + 15
    # the live fixture then checks that no job, slurmstepd, agent or rank is left on n1 or n2


def test_an_srun_that_cannot_start_fails_at_once_with_srun_s_reason(nodes_env):
    import labkit
    from labkit.wire.errors import LaunchError

    started = time.monotonic()
    with pytest.raises(LaunchError) as failure:
        labkit.torchrun(
            "pass",
            nproc=1,
            backend="gloo",
            nnodes=2,
            slurm=True,
            slurm_args="-p nosuchpartition",
            timeout=60,
            display="none",
        )
    seconds = time.monotonic() - started
    print(f"srun -p nosuchpartition: {seconds:.1f} s")
    assert "invalid partition specified: nosuchpartition" in str(failure.value)
    assert seconds < 15


def test_a_rendezvous_that_never_completes_fails_within_its_timeout(nodes_env, monkeypatch):
    import labkit
    from labkit.wire.errors import RunError

    monkeypatch.setenv("LABKIT_RDZV_TIMEOUT", "10")
    stopped: list[int] = []

    def stall_node_two() -> None:  # a node stuck before torchrun joins: SIGSTOP its agent as soon as it runs
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not stopped:
            pid = agent_on(nodes_env, "n2")
            if pid:
                os.kill(pid, 19)
                stopped.append(pid)
            time.sleep(0.01)

    thread = in_background(stall_node_two)
    started = time.monotonic()
    with pytest.raises(RunError) as failure:
        labkit.torchrun("pass", nproc=1, backend="gloo", nnodes=2, slurm=True, timeout=60, display="none")
    seconds = time.monotonic() - started
    thread.join(5)
    message = str(failure.value)
    print(f"rendezvous with n2 stopped: {type(failure.value).__name__} after {seconds:.1f} s\n{message}")
    assert stopped and "the rendezvous never completed" in message
    assert "node ranks that never joined: 1 " in message
    assert 10 <= seconds < 10 + 30


# -- %%torchrun --hosts a,b: ssh, for lab machines without a scheduler --------------------------------

HOSTS_CELL = """
import os
import torch.distributed as dist
from labkit import rank
import torch
for step in rank.steps(2):
    dist.all_reduce(torch.ones(1))
rank.report(world=dist.get_world_size(), node=os.environ["LABKIT_NODE"], local_rank=rank.local_rank())
"""


@pytest.fixture(scope="module")
def sshd():
    """An sshd on localhost (None, with the reason, where it cannot be installed or started)."""
    folder = tempfile.mkdtemp(prefix="labkit-ssh-")
    try:
        server = slurm.start_sshd(folder)
    except (slurm.SlurmUnavailable, OSError, subprocess.SubprocessError) as e:
        yield None, str(e)
    else:
        yield server, ""
        server.stop()
    shutil.rmtree(folder, ignore_errors=True)


def run_on_hosts(monkeypatch, tmp_path, ssh: str, hosts: tuple[str, ...]):
    import labkit
    from labkit.testing.processes import leftover_ranks, listening_sockets

    monkeypatch.setenv("LABKIT_SSH", ssh)
    monkeypatch.setenv("LABKIT_RUN_ROOT", str(tmp_path / "runs"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    started, before = time.monotonic(), listening_sockets()
    try:
        return labkit.torchrun(HOSTS_CELL, nproc=1, backend="gloo", hosts=hosts, timeout=60, display="none")
    finally:
        print(f"--hosts {','.join(hosts)}: {time.monotonic() - started:.1f} s")
        assert leftover_ranks() == [] and listening_sockets() == before  # the channel's listener too


def check_two_hosts(run) -> None:
    assert run.ok and run.rejected_clients == []
    assert sorted((v["node"], v["local_rank"], v["world"]) for v in run.values.values()) == [
        ("127.0.0.1", 0, 2),
        ("localhost", 0, 2),
    ]
    assert "(localhost/0)" in run.summary()


def test_hosts_agents_started_here_without_ssh(monkeypatch, tmp_path):
    # LABKIT_SSH="": the fan-out starts each host's agent here, through the same env-on-stdin path
    check_two_hosts(run_on_hosts(monkeypatch, tmp_path, "", ("127.0.0.1", "localhost")))


def test_hosts_over_ssh_to_localhost(sshd, monkeypatch, tmp_path):
    from labkit.wire.errors import LaunchError

    server, why = sshd
    if server is None:
        pytest.skip(f"no sshd to ssh to (the agents started here are tested above): {why}")
    check_two_hosts(run_on_hosts(monkeypatch, tmp_path, shlex.join(server.ssh), ("127.0.0.1", "localhost")))
    with pytest.raises(LaunchError) as failure:  # a host that cannot be reached ends the other node too
        run_on_hosts(monkeypatch, tmp_path, shlex.join(server.ssh), ("127.0.0.1", "nosuchhost.invalid"))
    assert "node nosuchhost.invalid exited with code 255" in str(failure.value)


def running_tasks(cluster) -> list[str]:
    """The ``sleep`` tasks of a job (not the srun that started them, whose command line names them too)."""
    return [
        line for line in map(slurm.describe, cluster.job_processes()) if os.path.basename(line.split()[1]) == "sleep"
    ]


def test_an_srun_killed_outright_leaves_its_job_and_cleanup_cancels_it(nodes_env):
    # why teardown ends with scancel: srun SIGKILLed (after its SIGTERM grace) cannot end its own job
    from labkit.launch.nodes import NodeLauncher

    srun_proc = subprocess.Popen(
        ["srun", "--job-name=run-cleanup-test", "-N2", "sleep", "100"], env=os.environ, start_new_session=True
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not running_tasks(nodes_env):
        time.sleep(0.1)
    srun_proc.kill()
    srun_proc.wait()
    assert nodes_env.active_jobs(), "the job should outlive a SIGKILLed srun"
    job = nodes_env.active_jobs()[0]
    assert sorted(NodeLauncher("slurm", 2, "run-cleanup-test").cleanup()) == [job, f"{job}.0"]  # the job and its step
    # the live fixture then checks that no job and no process of it is left on n1 or n2
