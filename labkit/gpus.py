"""The GPUs that are ours: what ``CUDA_VISIBLE_DEVICES`` gave this kernel, never more.

On a shared node the hub (or Slurm, or a container runtime) hands each student some
GPUs by setting ``CUDA_VISIBLE_DEVICES``. That variable is advisory: nothing stops a
process from using the other GPUs except good manners, so labkit treats it as the
allocation and never widens it.

    from labkit import gpus
    gpus.visible_gpus()      # ['2', '3'] under CUDA_VISIBLE_DEVICES=2,3
    gpus.default_nproc()     # 2: one rank per GPU; 2 CPU ranks when there are none
    gpus.check_nccl(4)       # OptionError: 4 NCCL ranks, but only 2 GPUs are yours
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from labkit.errors import OptionError
from labkit.i18n import catalog, t

CPU_NPROC = 2  # ranks when there is no GPU: enough to see sharding, light on a laptop

# A GPU named by UUID ("GPU-8f6c..."), or a MIG slice ("MIG-..."), as CUDA accepts them.
_UUID = re.compile(r"^(GPU|MIG)-[0-9A-Za-z-]+$")

catalog(
    {
        "gpus.none": {
            "en": "NCCL needs GPUs, and this kernel has none ({where}). Use backend='gloo' to run the ranks on the CPU.",
            "ro": "NCCL are nevoie de GPU-uri, iar acest kernel nu are niciunul ({where}). Folosiți backend='gloo' pentru a rula rangurile pe CPU.",
        },
        "gpus.too_many": {
            "en": "{nproc} NCCL ranks need {nproc} GPUs, but only {count} are yours: {names} ({where}). "
            "Use nproc={count} or fewer, or backend='gloo' to run {nproc} ranks on the CPU.",
            "ro": "{nproc} ranguri NCCL au nevoie de {nproc} GPU-uri, dar doar {count} sunt ale dumneavoastră: {names} ({where}). "
            "Folosiți nproc={count} sau mai puțin, ori backend='gloo' pentru a rula {nproc} ranguri pe CPU.",
        },
        "gpus.where.env": {"en": "CUDA_VISIBLE_DEVICES={value!r}", "ro": "CUDA_VISIBLE_DEVICES={value!r}"},
        "gpus.where.torch": {
            "en": "torch sees {count} CUDA device(s)",
            "ro": "torch vede {count} dispozitiv(e) CUDA",
        },
    }
)


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
    except Exception:  # noqa: BLE001 - a broken driver means no usable GPU, not a crash
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
    where = t("gpus.where.env", value=value) if value is not None else t("gpus.where.torch", count=count or 0)
    if not found:
        raise OptionError(t("gpus.none", where=where))
    if nproc > len(found):
        raise OptionError(t("gpus.too_many", nproc=nproc, count=len(found), names=", ".join(found), where=where))
    return found[:nproc]
