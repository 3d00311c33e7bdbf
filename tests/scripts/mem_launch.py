"""Run ``mem_job.py`` under torchrun for the tests and the benchmark, once per set of arguments.

A torchrun launch costs seconds, so each distinct job runs once per session and the tests
share its messages, as ``Run.events`` would hold them.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
STEPS = 2  # step 1 is measured: AdamW makes its state during step 0
# The jobs the tests read (tests/test_memtrack.py, tests/test_estimate.py), by number of ranks.
TEST_JOBS = {
    1: ("fsdp1:FULL_SHARD", "fsdp2:reshard"),
    2: (
        "fsdp1:FULL_SHARD",
        "fsdp2:reshard",
        "fsdp1:NO_SHARD",
        "fsdp1:SHARD_GRAD_OP",
        "fsdp1:FULL_SHARD:nowrap",
        "fsdp2:keep",
    ),
    4: ("fsdp1:FULL_SHARD", "fsdp2:reshard", "fsdp1:FULL_SHARD@odd", "fsdp2:reshard@odd"),
}


@functools.cache
def run_job(nproc: int, model: str, steps: int, *configs: str, timeout: float = 300) -> dict[int, list[dict[str, Any]]]:
    """Every message of every rank, in order, each with its ``rank``."""
    with tempfile.TemporaryDirectory(prefix="labkit-mem-") as out:
        env = {**os.environ, "LABKIT_REPORT_DIR": out, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}"]
        cmd += ["--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0", str(HERE / "mem_job.py"), model, str(steps)]
        proc = subprocess.Popen(
            cmd + list(configs), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            raise AssertionError(f"mem_job timed out after {timeout} s:\n{output.decode()[-3000:]}") from None
        assert proc.returncode == 0, f"mem_job failed (rc {proc.returncode}):\n{output.decode()[-3000:]}"
        events = {}
        for r in range(nproc):
            with open(os.path.join(out, f"rank{r}.jsonl")) as f:
                events[r] = [{**json.loads(line), "rank": r} for line in f]
        return events


def test_job(nproc: int) -> dict[int, list[dict[str, Any]]]:
    """The tests' job at ``nproc`` ranks on the "tiny" model (run once per session)."""
    return run_job(nproc, "tiny", STEPS, *TEST_JOBS[nproc])


test_job.__test__ = False  # a helper, not a test, even when pytest imports it


def of_config(events: dict[int, list[dict[str, Any]]], config: str) -> dict[int, list[dict[str, Any]]]:
    """The messages of one configuration only, as if it had been a run of its own."""
    return {r: [m for m in evs if m.get("config") == config] for r, evs in events.items()}


def phase(events: dict[int, list[dict[str, Any]]], config: str, rank: int, name: str) -> dict[str, int]:
    """Bytes by category that ``rank`` measured at ``name`` (forward, backward, optimizer, peak)."""
    for m in events[rank]:
        if m.get("t") == "memcat" and m.get("config") == config and m.get("phase") == name:
            return m["categories"]
    raise KeyError((config, rank, name))
