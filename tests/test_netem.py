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
    why = netem.t("netem.why.userns", detail="kernel.unprivileged_userns_clone = 0")
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
    plain = netem._shape("eth0", link, netem=False)
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
    delayed = netem._shape("eth0", link, netem=True)
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
        n += len(d)
    got.append(time.time())
th = threading.Thread(target=recv); th.start()
t0 = time.time(); out.sendall(b"x" * N); th.join()
print("mbit", round(N * 8 / (got[0] - t0) / 1e6), flush=True)
"""


@needs_netns
@pytest.mark.slow
def test_two_nodes_each_direction_at_the_full_rate(tmp_path):
    """Both nodes send 1.5 MB to each other at once over a 50 Mbit/s link: each direction gets about 50
    (a shared queue, as one loopback with a tbf, would give each about 25), and nothing is left."""
    script = tmp_path / "node.py"
    script.write_text(NODE_CHECK)
    before = host_links()
    spec = json.dumps({"nodes": 2, "rate": 50e6, "latency": 0.0})
    env = {**os.environ, "LABKIT_RUN_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "labkit.launch.netem", "run", spec, "--", sys.executable, str(script), "1500000"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("0: node n0 addr 10.233.0.1/24 tbf True ifs ['eth0', 'lo'] gloo eth0") for line in lines)
    assert any(line.startswith("1: node n1 addr 10.233.0.2/24 tbf True ifs ['eth0', 'lo'] gloo eth0") for line in lines)
    rates = [int(line.split()[-1]) for line in lines if " mbit " in line]
    assert len(rates) == 2 and all(38 <= r <= 52 for r in rates), lines
    emulation = netem.Emulation.read(str(tmp_path))
    assert emulation.addresses == ["10.233.0.1", "10.233.0.2"] and len(emulation.netns) == 3
    assert netem.netns_in_use(emulation.netns) == set()  # the namespaces went with their processes
    assert host_links() == before  # no veth or bridge ever appeared here
