"""Emulated nodes (labkit.launch.netem): the options, the namespaces and links, and what is left after a run.

The tests that make namespaces skip where this machine cannot (the probe says why); CI runs as
root, where it can. Traffic goes only between the namespaces a test created.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from labkit.launch import netem
from labkit.launch.options import RunConfig, resolve
from labkit.wire.errors import OptionError

CAN = netem.probe()
needs_netns = pytest.mark.skipif(CAN.error is not None, reason=f"no network namespaces here: {CAN.error}")


@pytest.mark.parametrize(
    "text, rate, latency",
    [
        ("200mbit,100us", 200e6, 100e-6),
        ("1gbit", 1e9, 0.0),
        ("5Gbit, 0.5ms", 5e9, 0.5e-3),
        ("50mbit,2ms", 50e6, 2e-3),
    ],
)
def test_link_parsed(text, rate, latency):
    link = netem.parse_link(text)
    assert link.rate == pytest.approx(rate) and link.latency == pytest.approx(latency)
    assert link.burst() >= 2 * netem.MTU and link.queue() >= 2**20


@pytest.mark.parametrize(
    "text, says",
    [
        ("100mbps", "bytes per second in tc; write the rate in bits: 800mbit"),
        ("fast", "RATE[,LATENCY]"),
        ("200mbit,100", "RATE[,LATENCY]"),
        ("0.5mbit", "between 1mbit and 100gbit"),
        ("200mbit,2s", "latency at most 1 s"),
    ],
)
def test_bad_link_refused(text, says):
    with pytest.raises(OptionError, match=None) as info:
        netem.parse_link(text)
    assert says in str(info.value)


def test_node_options_refused_before_anything_starts():
    with pytest.raises(OptionError, match="--link shapes the link between emulated nodes"):
        resolve(RunConfig(nproc=2, backend="gloo", link="200mbit"))
    with pytest.raises(OptionError, match="whole number of emulated nodes"):
        resolve(RunConfig(nproc=2, backend="gloo", nodes="two"))
    with pytest.raises(OptionError, match="--nodes emulates nodes on this machine"):
        resolve(RunConfig(nproc=2, backend="gloo", nodes=2, hosts=("a", "b")))


def test_no_namespaces_fails_at_once_naming_why(monkeypatch):
    """Where namespaces cannot be made (a container's seccomp profile), the option fails before any spawn."""
    why = netem.t("launch.netem.why.userns", detail="kernel.unprivileged_userns_clone = 0")
    monkeypatch.setattr(netem, "probe", lambda: netem.Probe(why))
    with pytest.raises(OptionError) as info:
        resolve(RunConfig(nproc=1, backend="gloo", nodes=2, link="100mbit"))
    text = str(info.value)
    assert "network namespaces" in text and "unprivileged_userns_clone = 0" in text and "labkit.simulate" in text


def test_romanian_message(monkeypatch):
    from labkit.i18n import set_lang

    set_lang("ro")
    try:
        with pytest.raises(OptionError, match="legătura dintre noduri emulate"):
            resolve(RunConfig(nproc=2, backend="gloo", link="200mbit"))
    finally:
        set_lang("en")


def test_shaping_commands():
    link = netem.parse_link("200mbit,100us")
    plain = netem.shape_commands("eth0", link, netem=False)
    assert plain == [
        [
            "tc",
            "qdisc",
            "add",
            "dev",
            "eth0",
            "root",
            "tbf",
            "rate",
            "200000000bit",
            "burst",
            "25000",
            "limit",
            str(2_500_000),
        ]
    ]
    delayed = netem.shape_commands("eth0", link, netem=True)
    assert delayed[0][-4:] == ["delay", "100us", "limit", "100000"] and delayed[1][5:8] == ["parent", "1:1", "handle"]


def host_links() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return sorted(line.split(":")[1].strip() for line in out.splitlines())


NODE_CHECK = r"""
import os, socket, subprocess, sys, time
i = int(os.environ["LABKIT_NODE_RANK"])
addr = subprocess.run(["ip", "-o", "-4", "addr", "show", "dev", "eth0"], capture_output=True, text=True).stdout
qdisc = subprocess.run(["tc", "qdisc", "show", "dev", "eth0"], capture_output=True, text=True).stdout
links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
print("node", os.environ["LABKIT_NODE"], "addr", addr.split()[3], "tbf", "tbf" in qdisc,
      "ifs", sorted(l.split(":")[1].strip().split("@")[0] for l in links.splitlines()),
      "gloo", os.environ["GLOO_SOCKET_IFNAME"], flush=True)
N = int(sys.argv[1])
srv = socket.socket(); srv.bind(("0.0.0.0", 5001)); srv.listen(1)
time.sleep(0.3)
peer = "10.233.0.2" if i == 0 else "10.233.0.1"
out = socket.create_connection((peer, 5001), timeout=10)
inc, _ = srv.accept()
import threading
got = []
def recv():
    n = 0
    while n < N:
        d = inc.recv(1 << 16)
        if not d: break
        if n == 0: got.append(time.time())
        n += len(d)
    got.append(time.time())
th = threading.Thread(target=recv); th.start()
out.sendall(b"x" * N); th.join()
# the rate this node received at, from its first byte to its last (a peer that started late on a
# loaded machine does not count against the link), and when, to check the two directions overlapped
print("mbit", round(N * 8 / (got[1] - got[0]) / 1e6), "from", got[0], "to", got[1], flush=True)
"""


@needs_netns
@pytest.mark.slow
def test_two_nodes_each_direction_at_the_full_rate(tmp_path):
    """Both nodes send 4 MB to each other at once over a 50 Mbit/s link: each direction gets about 50
    (a shared queue, as one loopback with a tbf, would give each about 25, together 50), and nothing
    is left."""
    script = tmp_path / "node.py"
    script.write_text(NODE_CHECK)
    before = host_links()
    spec = json.dumps({"nodes": 2, "rate": 50e6, "latency": 0.0})
    env = {**os.environ, "LABKIT_RUN_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "labkit.launch.netem_run", spec, "--", sys.executable, str(script), "4000000"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("0: node n0 addr 10.233.0.1/24 tbf True ifs ['eth0', 'lo'] gloo eth0") for line in lines)
    assert any(line.startswith("1: node n1 addr 10.233.0.2/24 tbf True ifs ['eth0', 'lo'] gloo eth0") for line in lines)
    received = [line.split() for line in lines if " mbit " in line]  # "<node>: mbit R from T0 to T1"
    rates = [int(words[2]) for words in received]
    # both directions at once through one queue would get about 25 each, 50 together; on a loaded
    # machine a receiver that waits for a core reads its last bytes late (measured in CI with 1.5 MB:
    # 45 and 29), so the test asks for more than one queue could carry, not for 50 each
    assert len(rates) == 2 and sum(rates) >= 70 and all(25 <= r <= 56 for r in rates), lines
    (a0, a1), (b0, b1) = [(float(words[4]), float(words[6])) for words in received]
    assert abs(a0 - b0) < 0.2 * min(a1 - a0, b1 - b0), f"the two directions did not start together: {lines}"
    emulation = netem.Emulation.read(str(tmp_path))
    assert emulation.addresses == ["10.233.0.1", "10.233.0.2"] and len(emulation.netns) == 3
    assert netem.netns_in_use(emulation.netns) == set()  # the namespaces went with their processes
    assert host_links() == before  # no veth or bridge ever appeared here


# -- runs on emulated nodes, and what is left after them --------------------------------------

ALLREDUCE = """
import os, torch, torch.distributed as dist
from labkit.ranks import rank
x = torch.ones(1000) * (rank.rank() + 1)
dist.all_reduce(x)
cores = set()
for tid in os.listdir("/proc/self/task"):  # every thread: the rank's, gloo's, labkit's
    try:
        cores |= os.sched_getaffinity(int(tid))
    except OSError:  # ended since the listing
        pass
rank.report(total=x[0].item(), node=os.environ["LABKIT_NODE"], ifname=os.environ["GLOO_SOCKET_IFNAME"], cores=sorted(cores))
"""
FAULT = """
import os, time, torch, torch.distributed as dist
from labkit.ranks import rank
print("before the collective", flush=True)
for i in rank.steps(4):
    if rank.rank() == 1 and i == 2:
        {fault}
    dist.all_reduce(torch.ones(1))
"""


def nothing_left(run, links_before: list[str]) -> None:
    """No namespace of the run is alive, no link appeared on this machine (processes: ``no_leaks``)."""
    emulation = run.emulation
    assert emulation is not None and len(emulation.netns) == 3
    assert netem.netns_in_use(emulation.netns) == set()
    assert host_links() == links_before


@needs_netns
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
def test_a_cell_on_two_emulated_nodes():
    """Four ranks on two emulated nodes, each bound to a core (``pin``): the nodes share this
    machine's cores, so rank r takes core r mod cores, whatever its node."""
    import labkit

    before = host_links()
    run = labkit.torchrun(ALLREDUCE, nproc=2, nodes=2, link="200mbit,100us", backend="gloo", display="none", pin=True)
    assert {r: v["total"] for r, v in run.values.items()} == {r: 10.0 for r in range(4)}
    allowed = sorted(os.sched_getaffinity(0))
    assert {r: v["cores"] for r, v in run.values.items()} == {r: [allowed[r % len(allowed)]] for r in range(4)}
    assert {r: v["node"] for r, v in run.values.items()} == {0: "n0", 1: "n0", 2: "n1", 3: "n1"}
    assert {v["ifname"] for v in run.values.values()} == {"eth0"}
    assert "2 (n1/0)" in run.summary()  # node/local rank, as for real nodes
    assert run.emulation.rate == 200e6 and run.emulation.latency_asked == pytest.approx(100e-6)
    assert run.emulation.latency_s == (100e-6 if run.emulation.netem else netem.VETH_LATENCY)
    nothing_left(run, before)


@needs_netns
@pytest.mark.slow
@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize("fault", ["kill", "hang"])
def test_faults_on_emulated_nodes_leave_nothing(fault):
    """A rank on node n1 killed, or hung past the timeout: the error names it, and no namespace,
    link or process is left."""
    import labkit
    from labkit.wire.errors import RankError, RunTimeout

    before = host_links()
    code = FAULT.format(fault="os.kill(os.getpid(), 9)" if fault == "kill" else "time.sleep(1000)")
    with pytest.raises(RankError if fault == "kill" else RunTimeout) as info:
        labkit.torchrun(
            code,
            nproc=1,
            nodes=2,
            link="100mbit",
            backend="gloo",
            display="none",
            timeout=60 if fault == "kill" else 20,
        )
    err, text = info.value, str(info.value)
    if fault == "kill":
        assert err.rank == 1 and err.signal == "SIGKILL", text
        assert "rank 1 ran on node n1 (local rank 0)" in text
    else:
        # once in CI, on a loaded machine, rank 0 was not among them: say where each rank stood
        states = {r: str(s.status) for r, s in err.run.ranks.items()}
        assert set(err.alive) == {0, 1}, f"{states}\n{text}"
        if "before the collective" in text:  # both got there before the timeout (a loaded CPU starts slowly)
            assert "time.sleep(1000)" in text, "where the hung rank is"
    nothing_left(err.run, before)


KERNEL = """
import labkit
try:
    labkit.torchrun({code!r}, nproc=1, nodes=2, link="100mbit", backend="gloo", display="none")
finally:
    print("RUN_DIR", labkit.last_run.run_dir, flush=True)
"""


@needs_netns
@pytest.mark.slow
@pytest.mark.usefixtures("no_orphans")
def test_interrupt_on_emulated_nodes_leaves_nothing(tmp_path):
    """The kernel's Ctrl-C (twice, as an impatient student does) mid-run: the namespaces go too."""
    import signal
    import time

    from labkit.testing.processes import our_rank_processes

    before = host_links()
    script = tmp_path / "kernel.py"
    script.write_text(
        KERNEL.format(code="import time\nfrom labkit import rank\nprint('up', flush=True)\ntime.sleep(1000)")
    )
    proc = subprocess.Popen([sys.executable, str(script)], start_new_session=True, stdout=subprocess.PIPE, text=True)
    deadline = time.time() + 90
    while time.time() < deadline and len(our_rank_processes()) < 5:  # supervisor, 2 agents, 2 ranks
        time.sleep(0.2)
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    run_dir = next(line.split()[1] for line in out.splitlines() if line.startswith("RUN_DIR"))
    emulation = netem.Emulation.read(run_dir)
    assert emulation is not None, out
    deadline = time.time() + 10
    while netem.netns_in_use(emulation.netns) and time.time() < deadline:
        time.sleep(0.1)
    assert netem.netns_in_use(emulation.netns) == set()
    assert host_links() == before


def test_magic_options():
    from labkit.launch import magic
    from labkit.launch.options import node_options

    opts = node_options(magic.parse_line("-n 2 --nodes 2 --link 200mbit,100us --profile --pin"))
    assert opts["nodes"] == "2" and opts["link"] == "200mbit,100us" and opts["profile"] is True and opts["pin"] is True
    if CAN.error is None:
        cfg = resolve(RunConfig(nproc=2, backend="gloo", **opts))
        assert cfg.nodes == 2 and cfg.nnodes == 2 and cfg.link == "200mbit,100us" and cfg.profile
