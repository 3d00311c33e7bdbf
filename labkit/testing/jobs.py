"""Run one of the tests' torchrun scripts (``comm_job.py``, ``mem_job.py``) and read what its ranks reported.

A launch costs seconds, so the helpers built on this one cache each distinct job per session
and the tests share its messages, as ``Run.events`` would hold them. The ranks are forked
from torchrun's agent, as labkit starts them (torch is imported once, not once per rank).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
ROOT = HERE.parent.parent  # the checkout (or site-packages) that holds labkit


def run_script(
    script: str, nproc: int, args: list[str], timeout: float, env: dict[str, str] | None = None
) -> dict[int, list[dict[str, Any]]]:
    """Every message of every rank of ``torchrun script args``, in order, each with its ``rank``."""
    with tempfile.TemporaryDirectory(prefix="labkit-job-") as out:
        full_env = {**os.environ, "LABKIT_REPORT_DIR": out, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        full_env.update(env or {})
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}"]
        cmd += ["--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:0", "--start-method=fork"]
        cmd += ["--log-dir", os.path.join(out, "torchelastic")]  # not /tmp/torchelastic_*, left behind
        cmd += ["--run-path", str(HERE / script), *args]
        proc = subprocess.Popen(
            cmd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            raise AssertionError(f"{script} timed out after {timeout} s:\n{output.decode()[-3000:]}") from None
        assert proc.returncode == 0, f"{script} failed (rc {proc.returncode}):\n{output.decode()[-3000:]}"
        events = {}
        for r in range(nproc):
            with open(os.path.join(out, f"rank{r}.jsonl")) as f:
                events[r] = [{**json.loads(line), "rank": r} for line in f]
        return events


def of_config(events: dict[int, list[dict[str, Any]]], config: str) -> dict[int, list[dict[str, Any]]]:
    """The messages of one configuration only, as if it had been a run of its own."""
    return {r: [m for m in evs if m.get("config") == config] for r, evs in events.items()}
