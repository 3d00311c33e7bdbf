"""No CUDA in the notebook's kernel or torchrun's agent before the ranks fork, checked on CPU.

A rank forked from a process that started CUDA cannot use CUDA (accelerate's notebook_launcher
issues #182, #940, #3833). On this CPU-only machine ``torch.cuda.is_initialized()`` is always
False, so on its own it proves nothing; ``LABKIT_CUDA_AUDIT`` records every call to the
torch.cuda functions that would start CUDA on a GPU machine, whether or not a GPU answers, in
the kernel, in the agent and in each rank (which also reports the CUDA state it inherited).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from labkit.wire import devices as gpus

ROOT = Path(__file__).resolve().parents[1]


def python(code: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=full, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
def test_a_cell_leaves_the_kernel_and_the_agent_without_cuda(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    cell = "import torch, torch.distributed as dist\nfrom labkit import rank\nx = torch.ones(1)\ndist.all_reduce(x)\nrank.report(total=x.item())\n"
    kernel = f"""
        import json
        from labkit.wire import devices as gpus
        gpus.audit_cuda("kernel")          # before labkit's magics are even imported
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        shell.run_line_magic("load_ext", "labkit")
        shell.run_cell_magic("torchrun", "-n 2 --backend gloo --quiet --display none", {cell!r})
        import labkit, torch
        print(json.dumps({{"initialized": torch.cuda.is_initialized(), "values": labkit.last_run.values}}))
    """
    proc = python(kernel, {gpus.AUDIT_ENV: str(audit)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["initialized"] is False
    assert out["values"] == {"0": {"total": 2.0}, "1": {"total": 2.0}}
    records = gpus.read_audit(str(audit))
    roles = {r["role"] for r in records if r["event"] == "audit"}
    assert roles == {"kernel", "agent"}, records  # both processes were watched
    starts = [r for r in records if r["event"] == "rank_start"]
    assert sorted(r["rank"] for r in starts) == ["0", "1"]
    for r in starts:  # each rank looked at what it inherited from the agent, before any CUDA use
        assert r["parent"] == {"forked": True, "initialized": False, "bad_fork": False, "calls": []}
    # torchrun 2.13 itself asks torch.cuda.is_available() in the agent (LaunchConfig, NUMA binding):
    # labkit's agent makes torch answer it from NVML, which does not start CUDA
    # (a forked rank inherits the agent's audit; what a rank asks after its start is its own business: the
    # run record asks is_available for the NCCL version, which NVML answers too)
    rank_pids = {r["pid"] for r in starts}
    agent = [r for r in records if r["event"] == "call" and r["role"] == "agent"]
    assert [(r["call"], r["nvml_first"]) for r in agent if r["pid"] not in rank_pids] == [("is_available", True)]
    assert all(r["nvml_first"] for r in agent if r["pid"] in rank_pids)
    assert gpus.audit_findings(records) == []


@pytest.mark.slow
def test_the_audit_catches_a_cuda_call_and_a_fork_inherits_it(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    code = """
        import json, multiprocessing, os
        from labkit.wire import devices as gpus
        gpus.audit_cuda("agent")
        import torch
        torch.cuda.is_available()          # on a GPU machine: cuInit, and every fork is poisoned
        ctx = multiprocessing.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=lambda: q.put(gpus.parent_cuda_state()))
        p.start(); state = q.get(timeout=30); p.join()
        print(json.dumps(state))
    """
    proc = python(code, {gpus.AUDIT_ENV: str(audit), gpus.NVML_CHECK_ENV: "0"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = json.loads(proc.stdout.strip().splitlines()[-1])
    assert state["forked"] is True and state["calls"] == ["is_available"]
    records = gpus.read_audit(str(audit))
    call = next(r for r in records if r["event"] == "call")
    assert call["role"] == "agent" and call["call"] == "is_available" and call["where"].startswith("<string>:")
    findings = gpus.audit_findings(records)
    assert len(findings) == 1 and "agent" in findings[0] and "torch.cuda.is_available" in findings[0]


def test_audit_rules() -> None:
    def call(role: str, name: str) -> dict:
        return {
            "event": "call",
            "role": role,
            "pid": 1,
            "call": name,
            "where": "x.py:1",
            "nvml_first": name == "device_count",
        }

    def start(**parent) -> dict:
        base = {"forked": True, "initialized": False, "bad_fork": False, "calls": []}
        return {"event": "rank_start", "role": "", "pid": 2, "rank": "0", "parent": {**base, **parent}}

    assert gpus.audit_findings([call("kernel", "device_count"), call("rank0", "set_device"), start()]) == []
    assert gpus.audit_findings([call("agent", "device_count")]) == []  # NVML first: fork-safe
    assert len(gpus.audit_findings([call("kernel", "is_available")])) == 1
    assert len(gpus.audit_findings([call("agent", "set_device")])) == 1
    assert len(gpus.audit_findings([start(bad_fork=True)])) == 1
    assert len(gpus.audit_findings([start(calls=["init"])])) == 1
    assert gpus.audit_findings([start(forked=False, calls=["init"])]) == []  # spawned: nothing inherited


def test_no_audit_without_the_variable(monkeypatch) -> None:
    monkeypatch.delenv(gpus.AUDIT_ENV, raising=False)
    assert gpus.audit_cuda("kernel") is False
