"""The class hub's GPUs: a pool on one server, and each student's share of it, by profile.

``launch/hub.sh`` on a server with GPUs gives every student's server its own devices, set in the
server's ``CUDA_VISIBLE_DEVICES``; labkit never widens that variable (``labkit.wire.devices``), so
a bare ``%%torchrun`` takes the student's GPUs and no one else's. The pool is
``LABKIT_HUB_GPUS``: ``auto`` (what ``nvidia-smi -L`` lists: whole GPUs by index, or the MIG
instances of a GPU in MIG mode by UUID), ``none``, or the devices named (``0,1,2,3`` or
``MIG-...,MIG-...``). A student's profile (``LABKIT_HUB_GPU_PROFILE``, or theirs in
``LABKIT_HUB_GPU_PROFILES``) is how many devices are theirs alone (``0``, ``1``, ``2``, ...), or
``shared``: one GPU time-shared by up to ``LABKIT_HUB_GPU_SHARE`` students (CUDA time-slices
their kernels; memory is not divided: the policy is stated in docs/deploy.md).

    pool = GpuPool(["0", "1", "2", "3"], share=2)
    pool.allocate("ana", "2")       # ('0', '1'): the first free devices, in the pool's order
    pool.allocate("ben", "shared")  # ('2',): a GPU of its own for the shared servers
    pool.allocate("eve", "2")       # GpuPoolExhausted: 2 GPUs asked, 1 free (3)
    pool.release("ana")

Allocation is deterministic (the pool's order, first fit), happens when a server is spawned and is
undone when it stops; a student spawned again keeps what they hold. Nothing here needs a GPU.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field

from labkit.i18n import t

SHARED = "shared"
NONE = "none"
AUTO = "auto"

# nvidia-smi -L: "GPU 0: NVIDIA H100 (UUID: GPU-...)", and under a GPU in MIG mode its instances,
# "  MIG 1g.10gb     Device  0: (UUID: MIG-...)"
_GPU_LINE = re.compile(r"^GPU (\d+):.*\(UUID: (GPU-[0-9A-Za-z-]+)\)")
_MIG_LINE = re.compile(r"^\s+MIG .*\(UUID: (MIG-[0-9A-Za-z-]+)\)")


class GpuPoolExhausted(RuntimeError):
    """The pool cannot give a student what their profile asks for; the message says who holds what."""


class GpuProfileError(ValueError):
    """A profile that is not a number of GPUs or ``shared``, or one the pool can never satisfy."""


def parse_nvidia_smi(listing: str) -> list[str]:
    """The devices ``nvidia-smi -L`` lists, as CUDA_VISIBLE_DEVICES names them: a whole GPU by its
    index, a GPU in MIG mode by its instances' UUIDs (such a GPU cannot be used whole)."""
    devices: list[str] = []
    gpu: str | None = None
    migs: list[str] = []

    def close() -> None:
        if gpu is not None:
            devices.extend(migs or [gpu])

    for line in listing.splitlines():
        if found := _GPU_LINE.match(line):
            close()
            gpu, migs = found.group(1), []
        elif (found := _MIG_LINE.match(line)) and gpu is not None:
            migs.append(found.group(1))
    close()
    return devices


def discover(setting: str) -> list[str]:
    """The pool ``LABKIT_HUB_GPUS`` names: ``auto`` asks ``nvidia-smi -L`` (no GPU, no nvidia-smi: none)."""
    setting = setting.strip()
    if setting.lower() in ("", NONE):
        return []
    if setting.lower() != AUTO:
        return [d.strip() for d in setting.split(",") if d.strip()]
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_nvidia_smi(listed.stdout) if listed.returncode == 0 else []


def parse_profile(profile: str) -> int | None:
    """How many devices ``profile`` gives a student alone; None for ``shared``."""
    text = profile.strip().lower()
    if text == SHARED:
        return None
    if text == NONE:
        return 0
    if text.isdigit():
        return int(text)
    raise GpuProfileError(t("hub.gpus.profile", profile=profile))


def parse_profiles(value: str) -> dict[str, str]:
    """``LABKIT_HUB_GPU_PROFILES``: ``ana=2,ben=shared`` as {student: profile}."""
    profiles: dict[str, str] = {}
    for item in (i.strip() for i in value.split(",") if i.strip()):
        user, sep, profile = item.partition("=")
        if not sep or not user.strip():
            raise GpuProfileError(t("hub.gpus.profile", profile=item))
        parse_profile(profile)
        profiles[user.strip()] = profile.strip()
    return profiles


@dataclass
class GpuPool:
    """Who holds which of ``devices``: some alone, some time-shared by up to ``share`` students."""

    devices: list[str]
    share: int = 4  # students on one shared GPU
    alone: dict[str, tuple[str, ...]] = field(default_factory=dict)  # student -> their devices
    shared: dict[str, list[str]] = field(default_factory=dict)  # device -> the students sharing it

    def __post_init__(self) -> None:
        if len(set(self.devices)) != len(self.devices):
            raise GpuProfileError(t("hub.gpus.repeated", devices=", ".join(self.devices)))
        if self.share < 1:
            raise GpuProfileError(t("hub.gpus.share", share=self.share))

    @property
    def mig(self) -> bool:
        return any(d.startswith("MIG-") for d in self.devices)

    def check(self, profile: str) -> None:
        """Refuse, before anyone logs in, a profile this pool could never give."""
        wanted = parse_profile(profile)
        if wanted is not None and wanted > len(self.devices):
            raise GpuProfileError(t("hub.gpus.too_big", profile=profile, count=len(self.devices)))
        if wanted is not None and wanted > 1 and self.mig:  # CUDA shows a process one MIG instance
            raise GpuProfileError(t("hub.gpus.mig", profile=profile))

    def held(self, user: str) -> tuple[str, ...]:
        """What ``user`` holds now (alone or shared), in the pool's order."""
        if user in self.alone:
            return self.alone[user]
        return tuple(d for d, users in self.shared.items() if user in users)

    def free(self) -> list[str]:
        """The devices nobody holds, alone or shared, in the pool's order."""
        taken = {d for devices in self.alone.values() for d in devices} | set(self.shared)
        return [d for d in self.devices if d not in taken]

    def allocate(self, user: str, profile: str) -> tuple[str, ...]:
        """``user``'s devices under ``profile`` (what they hold already, if anything); GpuPoolExhausted
        when the pool has not enough left."""
        if held := self.held(user):
            return held
        self.check(profile)
        wanted = parse_profile(profile)
        if wanted is None:
            return self._allocate_shared(user)
        if wanted == 0:
            return ()
        free = self.free()
        if len(free) < wanted:
            raise GpuPoolExhausted(
                t("hub.gpus.exhausted", user=user, wanted=wanted, free=len(free), holders=self.holders())
            )
        self.alone[user] = tuple(free[:wanted])
        return self.alone[user]

    def _allocate_shared(self, user: str) -> tuple[str, ...]:
        # the fullest shared GPU that has room first: the others stay whole for whole-GPU profiles
        open_ = [d for d in self.devices if d in self.shared and len(self.shared[d]) < self.share]
        if open_:
            device = max(open_, key=lambda d: (len(self.shared[d]), -self.devices.index(d)))
        elif free := self.free():
            device = free[0]
        else:
            raise GpuPoolExhausted(t("hub.gpus.exhausted_shared", user=user, share=self.share, holders=self.holders()))
        self.shared.setdefault(device, []).append(user)
        return (device,)

    def release(self, user: str) -> tuple[str, ...]:
        """Give back what ``user`` holds (nothing held: nothing done); what was released."""
        held = self.alone.pop(user, ())
        for device in [d for d, users in self.shared.items() if user in users]:
            self.shared[device].remove(user)
            held += (device,)
            if not self.shared[device]:
                del self.shared[device]
        return held

    def holders(self) -> str:
        """Who holds what, for a refusal's message: ``ana: 0, 1; ben, eve: 2 (shared)``."""
        parts = [f"{user}: {', '.join(devices)}" for user, devices in self.alone.items()]
        parts += [f"{', '.join(users)}: {d} ({SHARED})" for d, users in self.shared.items()]
        return "; ".join(parts) or "-"


def environment(devices: Iterable[str]) -> dict[str, str]:
    """What a server's environment says of its devices: exactly those, numbered as nvidia-smi does."""
    names = list(devices)
    # the pool's indices are nvidia-smi's (PCI order); CUDA's own default order may differ
    return {"CUDA_VISIBLE_DEVICES": ",".join(names) if names else "", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
