"""The GPUs that are ours: what ``CUDA_VISIBLE_DEVICES`` gave this kernel, never more.

On a shared node the hub (or Slurm, or a container runtime) hands each student some
GPUs by setting ``CUDA_VISIBLE_DEVICES``. That variable is advisory: nothing stops a
process from using the other GPUs except good manners, so labkit treats it as the
allocation and never widens it.

    from labkit.wire import devices as gpus
    gpus.visible_gpus()      # ['2', '3'] under CUDA_VISIBLE_DEVICES=2,3
    gpus.default_nproc()     # 2: one rank per GPU; 2 CPU ranks when there are none
    gpus.check_nccl(4)       # OptionError: 4 NCCL ranks, but only 2 GPUs are yours
    gpus.choose_backend("auto", 4).reason   # gloo, and why: 4 ranks need 4 GPUs for NCCL

Two rules keep CUDA working in ranks forked from torchrun's agent (accelerate #182, #940):
nothing in the notebook's kernel or the agent may start CUDA (``device_count`` asks NVML,
which does not), and each rank makes ``cuda:LOCAL_RANK`` current before anything else
touches CUDA (``bind_device``, called by the bootstrap). ``LABKIT_CUDA_AUDIT=FILE`` records
every CUDA call of the kernel, the agent and the ranks, so that a test on a CPU-only machine
can check the first rule.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from labkit.i18n import t
from labkit.wire import env as envvars
from labkit.wire.errors import OptionError
from labkit.wire.setting import Backend

CPU_NPROC = 2  # ranks when there is no GPU: enough to see sharding, light on a laptop

# A GPU named by UUID ("GPU-8f6c..."), or a MIG slice ("MIG-..."), as CUDA accepts them.
_UUID = re.compile(r"^(GPU|MIG)-[0-9A-Za-z-]+$")


def parse_visible_devices(value: str) -> list[str]:
    """The devices named by a ``CUDA_VISIBLE_DEVICES`` value, in order.

    CUDA reads the list up to its first invalid entry, so "-1" (or "") means no GPU and
    "0,-1,1" means GPU 0 only. A repeated device also ends the list here: it is not a
    second GPU, and counting it would let two ranks share one.
    """
    devices: list[str] = []
    for entry in (e.strip() for e in value.split(",")):
        valid = entry.isdigit() or bool(_UUID.match(entry))
        if not valid or entry in devices:
            break
        devices.append(entry)
    return devices


def _torch_device_count() -> int | None:
    """What torch sees (it applies CUDA_VISIBLE_DEVICES itself); None without torch."""
    try:
        import torch
    except ImportError:
        return None
    try:
        return int(torch.cuda.device_count())
    except Exception:
        return 0


def visible_gpus(env: Mapping[str, str] | None = None, device_count: int | None = None) -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them (indices or UUIDs).

    Without CUDA_VISIBLE_DEVICES, every GPU torch sees ("0", "1", ...). With it, its entries,
    cut to what torch can really open (a CPU-only torch opens none): the count from
    ``torch.cuda.device_count()`` may only shrink the list, never add to it.
    ``env`` and ``device_count`` replace ``os.environ`` and torch's answer (for tests).
    """
    env = os.environ if env is None else env
    count = _torch_device_count() if device_count is None else device_count
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return [str(i) for i in range(count or 0)]
    devices = parse_visible_devices(value)
    return devices if count is None else devices[:count]


def default_nproc(env: Mapping[str, str] | None = None, device_count: int | None = None) -> int:
    """One rank per GPU that is ours; ``CPU_NPROC`` ranks when there is none."""
    return len(visible_gpus(env, device_count)) or CPU_NPROC


def check_nccl(nproc: int, env: Mapping[str, str] | None = None, device_count: int | None = None) -> list[str]:
    """The GPUs the ``nproc`` NCCL ranks will use (rank i on the i-th); OptionError if there are too few.

    NCCL needs one GPU per rank: two ranks on one GPU fail late with "Duplicate GPU detected",
    after the whole start-up cost, so the check is made before anything is spawned.
    """
    env = os.environ if env is None else env
    count = _torch_device_count() if device_count is None else device_count
    found = visible_gpus(env, count)
    value = env.get("CUDA_VISIBLE_DEVICES")
    where = t("wire.gpus.where.env", value=value) if value is not None else t("wire.gpus.where.torch", count=count or 0)
    if not found:
        raise OptionError(t("wire.gpus.none", where=where))
    if nproc > len(found):
        raise OptionError(t("wire.gpus.too_many", nproc=nproc, count=len(found), names=", ".join(found), where=where))
    return found[:nproc]


RANKS_PER_GPU = 1  # NCCL: two ranks of one group on one GPU fail with "Duplicate GPU detected"


def check_rank_limit(nproc: int, limit: int, devices: list[str]) -> None:
    """NCCL ranks count against the rank limit (``LABKIT_MAX_RANKS``, a hub's per student) as CPU
    ranks do: at most ``limit``, and at most ``RANKS_PER_GPU`` on each of the ``devices`` that are ours."""
    allowed = min(limit, len(devices) * RANKS_PER_GPU)
    if nproc > allowed:
        raise OptionError(
            t("wire.gpus.rank_limit", nproc=nproc, limit=limit, names=", ".join(devices) or "-", allowed=allowed)
        )


# -- backend "auto": NCCL only when every rank gets a GPU of its own ------------------------


@dataclass(frozen=True)
class BackendChoice:
    """What ``--backend`` became, on which GPUs, and why (in the current language)."""

    backend: str
    devices: list[str]  # the GPU of rank i is devices[i] (nccl); [] for gloo
    reason: str
    fell_back: bool  # auto chose gloo although GPUs are there: worth telling the student


def choose_backend(
    requested: str, nproc: int, env: Mapping[str, str] | None = None, device_count: int | None = None
) -> BackendChoice:
    """Decide ``auto``; check ``nccl``. Pure, apart from counting the GPUs (``env``/``device_count`` fake it).

    ``auto`` is NCCL only when each of the ``nproc`` ranks gets a GPU of its own: NCCL refuses two
    ranks on one GPU ("Duplicate GPU detected"), so fewer GPUs than ranks means gloo on the CPU,
    and the reason says so. An explicit ``nccl`` with too few GPUs is an ``OptionError``.
    """
    env = os.environ if env is None else env
    if requested == Backend.GLOO:  # no GPU to count: and counting them imports torch (1.3 s on a laptop)
        return BackendChoice(Backend.GLOO, [], t("wire.gpus.asked", backend=Backend.GLOO), False)
    count = _torch_device_count() if device_count is None else device_count
    if requested == Backend.NCCL:
        return BackendChoice(
            Backend.NCCL, check_nccl(nproc, env, count), t("wire.gpus.asked", backend=Backend.NCCL), False
        )
    found = visible_gpus(env, count)
    names = ", ".join(found)
    if not found:
        value = env.get("CUDA_VISIBLE_DEVICES")
        where = (
            t("wire.gpus.where.env", value=value) if value is not None else t("wire.gpus.where.torch", count=count or 0)
        )
        return BackendChoice(Backend.GLOO, [], t("wire.gpus.auto.no_gpu", where=where), False)
    if any(d.startswith("MIG-") for d in found):
        return BackendChoice(Backend.GLOO, [], t("wire.gpus.auto.mig", names=names), True)
    if nproc > len(found):
        return BackendChoice(
            Backend.GLOO, [], t("wire.gpus.auto.too_few", nproc=nproc, count=len(found), names=names), True
        )
    return BackendChoice(Backend.NCCL, found[:nproc], t("wire.gpus.auto.nccl", names=", ".join(found[:nproc])), False)


def resolve_backend(requested: str, nproc: int, quiet: bool = False) -> str:
    """``choose_backend`` for a run about to start; says why when ``auto`` left GPUs unused."""
    choice = choose_backend(requested, nproc)
    if choice.fell_back and not quiet:
        print(f"labkit: {choice.reason}", flush=True)
    return choice.backend


# -- in each rank: the device by LOCAL_RANK, and a fork that CUDA has not poisoned --------


class CudaForkError(RuntimeError):
    """A rank forked from a process that had initialised CUDA: CUDA cannot start in it."""


_bound: Any = False  # what bind_device returned in this process (False: not called yet)


def bind_device(backend: str) -> Any:
    """In a rank, first thing: the GPU of this rank, ``cuda:LOCAL_RANK``, made current (NCCL only).

    ``torch.cuda.set_device(LOCAL_RANK)`` must come before anything touches CUDA, or every rank
    makes its context and allocates on GPU 0 (pytorch #151858). Before that, a forked rank
    checks what it inherited: if the agent had initialised CUDA, CUDA cannot start here and
    the first CUDA call would fail with an obscure "initialization error"; a ``CudaForkError``
    naming the rank says why instead. Under ``LABKIT_CUDA_AUDIT`` the rank also writes what it
    inherited to the audit file. Returns the device (``None`` for gloo); a second call returns
    the first one's answer.
    """
    global _bound, _audit_role
    if _bound is not False:
        return _bound
    rank = os.environ.get("RANK", "?")
    parent = parent_cuda_state()
    if envvars.get(AUDIT_ENV):
        _audit_write({"event": "rank_start", "rank": rank, "backend": backend, "parent": parent})
        _audit_role = f"rank{rank}"  # from here on, CUDA calls are this rank's own, and allowed
    if backend != Backend.NCCL:
        _bound = None
        return None
    if parent["initialized"] or parent["bad_fork"]:
        raise CudaForkError(t("wire.gpus.bad_fork", rank=rank, calls=", ".join(parent["calls"]) or "?"))
    import torch

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    _bound = torch.device("cuda", local)
    return _bound


def parent_cuda_state() -> dict[str, Any]:
    """What this process inherited, read before it touches CUDA itself.

    In a forked child, torch's ``_initialized`` flag is still the parent's, and torch marks the
    child "in bad fork" when the parent had initialised CUDA (``is_initialized()`` then says
    False in the child, so it cannot be used here). ``calls``: the audited CUDA calls made in
    this process so far, the parent's included when forked (empty without ``LABKIT_CUDA_AUDIT``).
    """
    import multiprocessing

    cuda = sys.modules.get("torch.cuda")
    initialized = bool(getattr(cuda, "_initialized", False)) if cuda else False
    bad_fork = bool(getattr(cuda, "_is_in_bad_fork", lambda: False)()) if cuda else False
    return {
        "forked": multiprocessing.parent_process() is not None,
        "initialized": initialized,
        "bad_fork": bad_fork,
        "calls": [c["call"] for c in _audit_calls if not c["nvml_first"]],
    }


def prepare_agent() -> None:
    """In torchrun's agent (``labkit.launch.agent``), before torchrun's own main runs.

    torch 2.13's ``LaunchConfig`` calls ``torch.cuda.is_available()`` in the agent (to decide on
    NUMA binding). By default that is ``cudaGetDeviceCount``, which starts the CUDA driver in
    the agent, and every rank forked from it afterwards cannot start CUDA. With
    ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` torch answers from NVML instead (its documented
    fork-safe check); the ranks inherit the setting, which changes nothing for them.
    """
    os.environ.setdefault(NVML_CHECK_ENV, "1")
    audit_cuda("agent")


# -- the CUDA audit: which process called into CUDA, and from where -------------------------

AUDIT_ENV = "LABKIT_CUDA_AUDIT"  # a file: each audited process appends JSON lines to it
NVML_CHECK_ENV = "PYTORCH_NVML_BASED_CUDA_CHECK"  # "1": torch.cuda.is_available() asks NVML, not CUDA
# torch.cuda functions that start the CUDA driver in the calling process or need it started.
# After that, a fork of this process cannot use CUDA. device_count() asks NVML first and
# starts the driver only when NVML cannot answer (MIG, no NVML), and is_available() does the
# same under NVML_CHECK_ENV=1: recorded as "nvml_first", and allowed outside the ranks.
AUDITED = (
    "is_available",
    "device_count",
    "init",
    "_lazy_init",
    "set_device",
    "current_device",
    "get_device_name",
    "get_device_properties",
    "get_device_capability",
    "is_bf16_supported",
    "synchronize",
    "mem_get_info",
    "memory_allocated",
    "memory_reserved",
    "max_memory_allocated",
    "memory_stats",
    "empty_cache",
)
NVML_FIRST = ("device_count",)
_audit_role = ""
_audit_calls: list[dict[str, Any]] = []


def audit_cuda(role: str) -> bool:
    """Record every call to the ``AUDITED`` torch.cuda functions made by this process as ``role``.

    Only under ``LABKIT_CUDA_AUDIT=FILE`` (a test, ``benchmarks/gpu_check.py``); else nothing
    happens. It works on a CPU-only torch too: the calls are counted whether or not a GPU answers,
    so a test on a laptop catches code that would initialise CUDA in the notebook or the agent.
    """
    global _audit_role
    if not envvars.get(AUDIT_ENV):
        return False
    import torch.cuda as cuda

    _audit_role = role
    for name in AUDITED:
        fn = getattr(cuda, name, None)
        if fn is not None and not getattr(fn, "labkit_audited", False):
            setattr(cuda, name, _audited(name, fn))
    _audit_write({"event": "audit", "role": role})
    return True


def _audited(name: str, fn: Any) -> Any:
    import functools
    import traceback

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        frames = [f for f in traceback.extract_stack()[:-1] if "/torch/" not in f.filename]
        where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
        nvml = name in NVML_FIRST or (name == "is_available" and os.environ.get(NVML_CHECK_ENV) == "1")
        record = {"event": "call", "call": name, "nvml_first": nvml, "where": where}
        _audit_calls.append(record)
        _audit_write(record)
        return fn(*args, **kwargs)

    wrapper.labkit_audited = True  # type: ignore[attr-defined]
    return wrapper


def _audit_write(record: dict[str, Any]) -> None:
    path = envvars.get(AUDIT_ENV)
    if not path:
        return
    line = json.dumps({"pid": os.getpid(), "role": _audit_role, "time": time.time(), **record})
    with open(path, "a") as f:  # one short write per line: lines of several processes do not mix
        f.write(line + "\n")


def read_audit(path: str) -> list[dict[str, Any]]:
    """The audit file's records, in order."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def audit_findings(records: list[dict[str, Any]]) -> list[str]:
    """What the audit shows was wrong, one line each; [] when the kernel and agent stayed clear of CUDA.

    The rule: no process other than a rank may start CUDA; asking NVML first (``nvml_first``) is
    allowed; every rank that was forked must have inherited no CUDA state.
    """
    problems = []
    for r in records:
        if r["event"] == "call" and not r["role"].startswith("rank"):
            if r.get("nvml_first"):
                continue
            problems.append(f"{r['role']} (pid {r['pid']}) called torch.cuda.{r['call']} at {r['where']}")
        if r["event"] == "rank_start":
            p = r["parent"]
            if p["initialized"] or p["bad_fork"] or (p["forked"] and p["calls"]):
                problems.append(f"rank {r['rank']} inherited CUDA state from its parent: {p}")
    return problems
