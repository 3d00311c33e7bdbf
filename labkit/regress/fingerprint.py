"""Where a run ran: torch, CUDA and NCCL, the GPUs and their driver or the CPU, Python, labkit.

    fingerprint()        # {"torch": "2.13.0+cpu", "cuda": None, "gpus": [], "cpu": "AMD EPYC ...", ...}
    machine_class(fp)    # "cpu" or the GPU's model, as a folder name: "nvidia-h100-80gb-hbm3"

Read once per process (importing torch and asking nvidia-smi cost seconds).
"""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpus() -> list[dict[str, str]]:
    """Each GPU nvidia-smi lists: model and driver ([] without nvidia-smi or GPUs)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    rows = [[x.strip() for x in line.split(",")] for line in out.splitlines() if line.strip()]
    return [{"name": r[0], "driver": r[1], "memory": r[2] if len(r) > 2 else ""} for r in rows if len(r) >= 2]


def git_commit(repo: Path = REPO) -> str | None:
    """The commit labkit was loaded from, with ``+dirty`` when its tracked files differ; None outside git."""
    if not (repo / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def torch_facts() -> dict[str, Any]:
    """torch, CUDA and NCCL versions as this process sees them (imports torch)."""
    import torch

    nccl = None
    if torch.cuda.is_available():
        try:
            nccl = ".".join(str(x) for x in torch.cuda.nccl.version())
        except (AttributeError, RuntimeError, TypeError):
            nccl = None
    return {"torch": str(torch.__version__), "cuda": torch.version.cuda, "nccl": nccl}


@functools.cache
def machine() -> dict[str, Any]:
    """What does not need torch: GPUs (nvidia-smi), CPU, Python, labkit and its commit."""
    import labkit

    return {
        "gpus": gpus(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "labkit": labkit.__version__,
        "commit": git_commit(),
    }


@functools.cache
def _own_torch() -> dict[str, Any]:
    return torch_facts()


def fingerprint(torch: dict[str, Any] | None = None) -> dict[str, Any]:
    """Where a run ran. ``torch``: the versions a rank reported (else this process imports torch)."""
    facts = dict(torch) if torch else _own_torch()
    return {k: facts.get(k) for k in ("torch", "cuda", "nccl")} | machine()


def machine_class(fp: dict[str, Any]) -> str:
    """A baseline's folder name for the machine: the first GPU's model, else ``cpu``."""
    found = fp.get("gpus") or []
    if not found:
        return "cpu"
    return re.sub(r"[^a-z0-9]+", "-", found[0]["name"].lower()).strip("-")


# what differs between two fingerprints and matters when numbers differ (a newer commit alone does not)
ENVIRONMENT_KEYS = ("torch", "cuda", "nccl", "python", "cpu", "cores")


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, a's value, b's value) for each environment fact that differs, GPUs included."""
    out = [(k, a.get(k), b.get(k)) for k in (*ENVIRONMENT_KEYS, "labkit", "commit") if a.get(k) != b.get(k)]
    ga = [(g.get("name"), g.get("driver")) for g in a.get("gpus") or []]
    gb = [(g.get("name"), g.get("driver")) for g in b.get("gpus") or []]
    if ga != gb:
        out.append(("gpus", ga, gb))
    return out
