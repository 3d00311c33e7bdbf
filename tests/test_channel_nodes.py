"""Several nodes without launching: the options, srun's command, what each node adds, the log reading, the ssh lifeline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from labkit.launch import nodes
from labkit.launch.group import Job, RankGroup
from labkit.launch.magic import parse_line, ranks_parser
from labkit.launch.options import RunConfig, node_options, resolve
from labkit.wire.errors import OptionError


@pytest.fixture
def fake_srun(tmp_path, monkeypatch):
    """An ``srun`` and an ``ssh`` on PATH (these tests never run them)."""
    for name in ("srun", "ssh"):
        (tmp_path / name).write_text("#!/bin/sh\nexit 1\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


def cfg(**options) -> RunConfig:
    return resolve(RunConfig(nproc=2, backend="gloo", **options))


@pytest.mark.parametrize(
    "options, words",
    [
        ({"nnodes": 2}, "--slurm (srun) or --hosts"),
        ({"nnodes": 0, "slurm": True}, "at least 1"),
        ({"slurm": True, "hosts": "a,b"}, "exclude each other"),
        ({"nnodes": 3, "hosts": "a,b"}, "names 2 hosts (a,b)"),
        ({"slurm_args": "-p gpu"}, "without --slurm"),
        ({"nnodes": 2, "slurm": True, "slurm_args": "-p 'gpu"}, "--slurm-args"),
        ({"channel_host": "10.0.0.1"}, "one node the channel is a Unix socket"),
    ],
)
def test_bad_node_options_are_refused_before_anything_starts(fake_srun, options, words):
    with pytest.raises(OptionError) as e:
        cfg(**options)
    assert words in str(e.value)


def test_slurm_without_srun_names_the_cause(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(OptionError) as e:
        cfg(nnodes=2, slurm=True)
    assert "--slurm needs srun, which is not on PATH here" in str(e.value)


def test_the_magic_line_reaches_the_run_config(fake_srun):
    opts = parse_line('-n 2 --nnodes 2 --slurm --slurm-args "-p gpu -t 10" --channel-host 10.1.2.3')
    resolved = cfg(**node_options(opts))
    assert (resolved.nnodes, resolved.slurm, resolved.slurm_args, resolved.channel_host) == (
        2,
        True,
        "-p gpu -t 10",
        "10.1.2.3",
    )
    assert cfg(hosts="a, b").nnodes == 2 and cfg(hosts="a,b").hosts == ("a", "b")
    assert cfg().nnodes == 1
    with pytest.raises(OptionError):  # warm ranks stay on one node: %%ranks has no such option
        parse_line("--nnodes 2", ranks_parser())


def test_srun_starts_one_agent_per_node_and_no_secret_is_on_its_command_line(fake_srun, monkeypatch):
    monkeypatch.delenv("SLURM_STEP_ID", raising=False)
    group = RankGroup(cfg(nnodes=2, slurm=True, slurm_args="-p gpu -t 10", timeout=30), Job.serve())
    agent = group.command()
    command = group.nodes.command(agent)
    assert command[: command.index(sys.executable)] == [
        "srun",
        f"--job-name={group.run_id}",  # what cleanup's scancel looks for
        "--nodes=2",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=1",
        "--label",
        "--export=ALL",  # the token travels in the environment
        "--unbuffered",
        "-p",
        "gpu",
        "-t",
        "10",
    ]
    assert "--nnodes=2" in agent and not any(a.startswith("--rdzv-endpoint") for a in agent)  # each node adds it
    env = group.nodes.env({"LABKIT_TOKEN": "secret"}, timeout=30)
    assert env["LABKIT_RDZV_TIMEOUT"] == "30" and env["LABKIT_NODES"] == "slurm"
    assert not any("secret" in a for a in command)
    # a kernel in a 1-node job (a batchspawner server): srun asks for a 2-node job of its own
    monkeypatch.setenv("SLURM_JOB_ID", "41")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "1")
    monkeypatch.setenv("SLURM_STEP_ID", "0")
    inside = {"SLURM_JOB_ID": "41", "SLURM_STEP_ID": "0", "SLURM_CONF": "/etc/slurm.conf"}
    assert group.nodes.env(inside, None) == {**group.nodes.env({}, None), "SLURM_CONF": "/etc/slurm.conf"}
    assert "--overlap" not in group.nodes.srun()
    # a kernel in a job that holds the nodes: a step of that job, sharing the CPUs of the kernel's step
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "2")
    assert group.nodes.env(inside, None)["SLURM_JOB_ID"] == "41" and "--overlap" in group.nodes.srun()


def test_each_node_says_where_to_meet_and_only_the_first_hosts_the_store(monkeypatch):
    monkeypatch.setenv("LABKIT_NODES", "hosts")
    monkeypatch.setenv("LABKIT_HOSTS", "alpha,beta")
    monkeypatch.setenv("LABKIT_RDZV_PORT", "29555")
    monkeypatch.setenv("LABKIT_RDZV_TIMEOUT", "20")
    for node_rank, name, host in [("0", "alpha", 1), ("1", "beta", 0)]:
        monkeypatch.setenv("LABKIT_NODE_RANK", node_rank)
        assert nodes.agent_args() == ["--rdzv-endpoint=alpha:29555", f"--rdzv-conf=is_host={host},join_timeout=20"]
        assert os.environ["LABKIT_NODE"] == name


LOG = """\
0: labkit: node n1 (node rank 0) agent started
1: labkit: node n2 (node rank 1) agent started
0: [rank0]: error: something
1:   rank      : 2 (local_rank: 0)
1:   exitcode  : -9 (pid: 1234)
srun: error: n2: task 1: Killed
"""


def test_the_labelled_log_names_the_nodes():
    assert nodes.node_names(LOG) == {0: "n1", 1: "n2"}
    plain = nodes.unlabel(LOG)
    assert "  rank      : 2 (local_rank: 0)\n  exitcode  : -9" in plain  # what labkit.launch.diagnose reads
    assert nodes.node_report(LOG, 2) == ["srun: error: n2: task 1: Killed"]
    stuck = "0: labkit: node n1 (node rank 0) agent started\n0: RendezvousTimeoutError\n"
    assert nodes.node_report(stuck, 2)[-1].startswith("the rendezvous never completed")
    assert "node ranks that never joined: 1 " in nodes.node_report(stuck, 2)[-1]
    assert "nodes whose agent started: n1;" in nodes.node_report(stuck, 2)[-1]


def test_the_channel_listens_where_the_nodes_are_reached():
    assert nodes.route_to("127.0.0.1") == "127.0.0.1"
    assert nodes.channel_host("hosts", ("127.0.0.1",), None) == "127.0.0.1"
    assert nodes.channel_host("hosts", ("127.0.0.1",), "10.9.8.7") == "10.9.8.7"  # the user's choice wins
    hosts = nodes.NodeLauncher("hosts", 2, "run-x", hosts=("127.0.0.1", "localhost"))
    # listening on every interface (asked for), the nodes still get an address they can dial
    assert hosts.env({"LABKIT_SOCKET": "tcp://0.0.0.0:4242"}, None)["LABKIT_SOCKET"] == "tcp://127.0.0.1:4242"
    assert hosts.env({"LABKIT_SOCKET": "tcp://10.1.1.1:4242"}, None)["LABKIT_SOCKET"] == "tcp://10.1.1.1:4242"


def test_a_remote_agent_ends_when_its_ssh_goes_away(tmp_path):
    # python -m labkit.launch.nodes remote: the environment comes on stdin, and stdin's end is the lifeline
    env = {"LABKIT_TOKEN": "t0ken", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT": "1"}
    cmd = [
        sys.executable,
        "-m",
        "labkit.launch.nodes",
        "remote",
        str(tmp_path),
        "sh",
        "-c",
        "echo $LABKIT_TOKEN > got; sleep 60",
    ]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE)
    proc.stdin.write((json.dumps(env) + "\n").encode())
    proc.stdin.flush()
    deadline = time.monotonic() + 10
    while not (tmp_path / "got").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (tmp_path / "got").read_text().strip() == "t0ken"  # the token arrived, and never on a command line
    started = time.monotonic()
    proc.stdin.close()
    assert proc.wait(timeout=10) != 0 and time.monotonic() - started < 5


def test_ranks_are_labelled_node_and_local_rank_only_across_nodes(tmp_path):
    from labkit.launch.run import Run
    from labkit.views.runview import rank_label, rows
    from labkit.wire.protocol import TYPE, Msg

    def run_on(*placed: tuple[str, int]) -> Run:
        run = Run("run-x", len(placed), "gloo", str(tmp_path))
        for r, (node, local) in enumerate(placed):
            run.ingest({TYPE: Msg.HELLO, "rank": r, "pid": 100 + r, "node": node, "local_rank": local})
        return run

    two = run_on(("n2", 0), ("n2", 1), ("n1", 0), ("n1", 1))
    assert [rank_label(two, r) for r in two.ranks] == ["0 (n2/0)", "1 (n2/1)", "2 (n1/0)", "3 (n1/1)"]
    assert rows(two)[2]["rank"] == "2 (n1/0)"
    one = run_on(("", 0), ("", 1))  # one node: the bootstrap sends no node name
    assert [rank_label(one, r) for r in one.ranks] == ["0", "1"]

    # the timeline's Gantt chart names its rows the same way
    from labkit.views.gantt import plot_timeline

    span = {"kind": "forward", "unit": "layers.0", "stream": "compute", "start": 1.0, "end": 1.5}
    for r in two.ranks:
        two.ingest({TYPE: Msg.SPANS, "rank": r, "step": 0, "spans": [span]})
    labels = [x.get_text() for x in plot_timeline(two).axes[0].get_yticklabels()]
    assert "rank 2 (n1/0) compute" in labels and "rank 0 (n2/0) comm" in labels
