"""The grader's GPUs: ``labkit grade --jobs N`` gives each job devices of its own.

Without this, every sandbox saw every GPU and every notebook's ``%%torchrun`` took them all, so
jobs running side by side fought over the same devices. Here the grader's GPUs (its own
``CUDA_VISIBLE_DEVICES``, never widened, else every GPU the driver lists) are cut into equal,
disjoint groups, one per job running at a time; each notebook leases a group for its run and gives
it back after. A job's sandbox sees its group in ``CUDA_VISIBLE_DEVICES`` and, under bubblewrap,
only those GPUs' device files (``/dev/nvidiaN``; the driver's control files stay).

    slots = Slots.split(["GPU-a", "GPU-b", ..., "GPU-h"], jobs=3)   # 8 GPUs, 3 jobs
    slots.groups       # [('GPU-a', 'GPU-b'), ('GPU-c', 'GPU-d'), ('GPU-e', 'GPU-f')]: 2 each, 2 unused
    with slots.lease() as env:                                       # {'CUDA_VISIBLE_DEVICES': 'GPU-a,GPU-b'}
        ...

Equal groups, so that a notebook's default ``-n`` (one rank per GPU) is the same in every job; more
jobs than GPUs run only as many jobs at once as there are GPUs. Nothing here needs a GPU: the
driver's list is read from ``/proc/driver/nvidia/gpus`` (a test gives its own).
"""

from __future__ import annotations

import os
import queue
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from labkit.wire import devices as wire

PROC = "/proc/driver/nvidia/gpus"


@dataclass(frozen=True)
class Gpu:
    """One GPU as the driver lists it: its UUID (what CUDA_VISIBLE_DEVICES takes), its /dev/nvidiaN."""

    uuid: str
    minor: int
    bus: str


def driver_gpus(root: str = PROC) -> list[Gpu]:
    """The GPUs the driver lists, in PCI order (nvidia-smi's); none without the driver."""
    found: list[Gpu] = []
    for info in sorted(Path(root).glob("*/information")):
        try:
            text = info.read_text()
        except OSError:
            continue
        uuid = re.search(r"^GPU UUID:\s*(\S+)", text, re.M)
        minor = re.search(r"^Device Minor:\s*(\d+)", text, re.M)
        if uuid and minor:
            found.append(Gpu(uuid.group(1), int(minor.group(1)), info.parent.name))
    return sorted(found, key=lambda g: g.bus)


def grader_devices(env: Mapping[str, str] | None = None, root: str = PROC) -> list[str]:
    """The devices the grader may hand out: its own CUDA_VISIBLE_DEVICES as given, else every GPU by UUID."""
    env = os.environ if env is None else env
    if env.get("CUDA_VISIBLE_DEVICES") is not None:
        return wire.parse_visible_devices(env["CUDA_VISIBLE_DEVICES"])
    return [g.uuid for g in driver_gpus(root)]


def device_files(visible: str | None, dev: str = "/dev", root: str = PROC) -> list[str]:
    """The /dev/nvidia* files a sandbox binds for ``visible`` (its CUDA_VISIBLE_DEVICES): the driver's
    control files and the listed GPUs' own. Every one when ``visible`` is unset, or names a device
    this cannot place (an index, a MIG instance: its GPU is not named)."""
    every = sorted(str(p) for p in Path(dev).glob("nvidia*"))
    if visible is None:
        return every
    by_uuid = {g.uuid: g.minor for g in driver_gpus(root)}
    names = wire.parse_visible_devices(visible)
    if any(n not in by_uuid for n in names):
        return every
    mine = {os.path.join(dev, f"nvidia{by_uuid[n]}") for n in names}
    return [p for p in every if not re.fullmatch(r"nvidia\d+", os.path.basename(p)) or p in mine]


def slots(jobs: int, env: Mapping[str, str] | None = None, root: str = PROC) -> Slots:
    """The grader's devices (``grader_devices``) for ``jobs`` jobs at a time."""
    env = os.environ if env is None else env
    return Slots.split(grader_devices(env, root), jobs, hidden=env.get("CUDA_VISIBLE_DEVICES") is not None)


@dataclass
class Slots:
    """Disjoint groups of devices, leased one per running job."""

    groups: list[tuple[str, ...]]
    hidden: bool = False  # no group, and the grader was told no GPU (CUDA_VISIBLE_DEVICES=""): none for the jobs
    _free: queue.Queue[tuple[str, ...]] = field(default_factory=queue.Queue, repr=False)

    def __post_init__(self) -> None:
        for group in self.groups:
            self._free.put(group)

    @classmethod
    def split(cls, devices: list[str], jobs: int, hidden: bool = False) -> Slots:
        """``devices`` in ``jobs`` equal groups, in order (fewer groups when there are fewer devices)."""
        jobs = max(1, jobs)
        if not devices:
            return cls([], hidden=hidden)
        per = max(1, len(devices) // jobs)
        count = min(jobs, len(devices) // per)
        return cls([tuple(devices[i * per : (i + 1) * per]) for i in range(count)])

    def jobs(self, asked: int) -> int:
        """How many jobs may run at once: ``asked``, but no more than there are groups (when there are GPUs)."""
        return min(asked, len(self.groups)) if self.groups else max(1, asked)

    @contextmanager
    def lease(self) -> Iterator[dict[str, str]]:
        """A group for one job, as the variables its sandbox gets ({} without GPUs); given back after."""
        if not self.groups:
            yield {"CUDA_VISIBLE_DEVICES": ""} if self.hidden else {}
            return
        group = self._free.get()
        try:
            yield {"CUDA_VISIBLE_DEVICES": ",".join(group)}
        finally:
            self._free.put(group)
