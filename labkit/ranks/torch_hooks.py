"""The private torch APIs labkit reads, in one place: what each is, who uses it, what is lost without it.

torch keeps FSDP's bookkeeping private (FSDP1's ``FlatParamHandle``, FSDP2's ``FSDPParamGroup``
and ``FSDPParam``), and labkit reads it to name each collective after its unit, to size the
units, and to sort memory into categories. Those names can move in any torch release. So:

* the accessors here (``fsdp1_handle``, ``fsdp2_group``) return ``None`` only where FSDP itself
  has nothing (a unit without parameters), and where *this torch* lacks the attribute they warn,
  once per process, with the torch version and the feature lost (``TorchHookWarning``), and tell
  the notebook (a ``hook_missing`` message, kept in the run's record), instead of a silent "no
  units";
* ``HOOKS`` lists every private API labkit relies on, each with a probe that names what is
  missing; ``labkit doctor`` runs the probes, then a real 2-rank run that uses them.

Nothing here imports torch at module level.
"""

from __future__ import annotations

import importlib
import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from labkit.i18n import t
from labkit.wire.protocol import Msg

MIN_TORCH = (2, 6)  # fully_shard, FSDPModule and MixedPrecisionPolicy are public in torch.distributed.fsdp
MAX_TORCH = (3, 0)  # exclusive, as pyproject says
TESTED = ("2.13",)  # the torch releases the whole suite has run on (README says the same)


class TorchHookWarning(UserWarning):
    """A private torch API labkit reads is missing in this torch: a feature is lost (the message says which)."""


def torch_version() -> str:
    import torch

    return str(torch.__version__)


def version_tuple(version: str) -> tuple[int, int]:
    """``"2.13.0+cpu"`` -> ``(2, 13)``."""
    parts = version.split("+")[0].split(".")
    return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)


def tested(version: str) -> bool:
    return any(version.split("+")[0] == v or version.startswith(v + ".") for v in TESTED)


# -- what is missing, said once ------------------------------------------------------------

_said: set[str] = set()


def missing_message(api: str, lost_key: str, version: str | None = None, lang: str | None = None) -> str:
    version = version or torch_version()
    note = "" if tested(version) else t("ranks.hooks.tested_on", lang=lang, tested=", ".join(TESTED))
    return t("ranks.hooks.missing", lang=lang, torch=version, api=api, version_note=note, lost=t(lost_key, lang=lang))


def missing(hook_id: str, api: str) -> None:
    """Warn (once per process and hook) that ``api`` is missing, and tell the notebook."""
    if hook_id in _said:
        return
    _said.add(hook_id)
    hook = BY_ID[hook_id]
    version = torch_version()
    warnings.warn(missing_message(api, hook.lost, version), TorchHookWarning, stacklevel=3)
    from labkit.ranks import rank

    rank.send(Msg.HOOK_MISSING, hook=hook_id, api=api, torch=version, feature=hook.lost)


# -- the accessors the rank-side modules use -------------------------------------------------

_ABSENT = object()


def is_fsdp1(module: Any) -> bool:
    from torch.distributed.fsdp import FullyShardedDataParallel

    return isinstance(module, FullyShardedDataParallel)


def is_fsdp2(module: Any) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(module, FSDPModule)


def fsdp1_handle(module: Any) -> Any:
    """An FSDP1 unit's ``FlatParamHandle`` (None for a unit without parameters, or a module that is
    no FSDP1 unit). Warns when this torch's FSDP1 unit has no ``_handle`` or its handle no ``flat_param``."""
    if not is_fsdp1(module):
        return None
    handle = getattr(module, "_handle", _ABSENT)
    if handle is _ABSENT:
        missing("fsdp1.handle", "FullyShardedDataParallel._handle")
        return None
    if handle is not None and not hasattr(handle, "flat_param"):
        missing("fsdp1.handle", "FlatParamHandle.flat_param")
        return None
    return handle


def fsdp2_group(module: Any) -> Any:
    """An FSDP2 module's ``FSDPParamGroup`` (None for a module without parameters of its own, or no
    FSDP2 module). Warns when this torch's ``FSDPModule`` has no ``_get_fsdp_state`` or its state no
    ``_fsdp_param_group``."""
    if not is_fsdp2(module):
        return None
    get_state = getattr(module, "_get_fsdp_state", None)
    if not callable(get_state):
        missing("fsdp2.param_group", "FSDPModule._get_fsdp_state")
        return None
    group = getattr(get_state(), "_fsdp_param_group", _ABSENT)
    if group is _ABSENT:
        missing("fsdp2.param_group", "FSDPState._fsdp_param_group")
        return None
    return group


# -- the list doctor checks ------------------------------------------------------------------


@dataclass(frozen=True)
class Hook:
    """One private torch API: ``probe()`` names what of it is missing ([] when all is there)."""

    id: str
    api: str  # how it reads in a message
    used_by: tuple[str, ...]  # labkit modules
    lost: str  # message key of the feature lost without it
    probe: Callable[[], list[str]]


def _load(path: str) -> Any:
    """``"pkg.mod:Class.attr"`` -> the object; AttributeError/ImportError when absent."""
    module, _, attr = path.partition(":")
    obj = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


def _annotations(cls: type) -> set[str]:
    return {name for klass in cls.__mro__ for name in getattr(klass, "__annotations__", {})}


def _needs(
    path: str, attrs: tuple[str, ...] = (), annotated: tuple[str, ...] = (), source: tuple[str, ...] = ()
) -> Callable[[], list[str]]:
    """A probe: ``path`` importable, with callable/class attributes ``attrs``, annotations ``annotated``
    (instance attributes declared on the class) and ``source`` snippets in its source code."""

    def probe() -> list[str]:
        try:
            obj = _load(path)
        except (ImportError, AttributeError):
            return [path]
        gone = [f"{path}.{a}" for a in attrs if not hasattr(obj, a)]
        if annotated:
            have = _annotations(obj)
            gone += [f"{path}.{a}" for a in annotated if a not in have]
        if source:
            try:
                text = inspect.getsource(obj)
            except (OSError, TypeError):
                text = ""
            gone += [f"{path}: {s}" for s in source if s not in text]
        return gone

    return probe


def _all(*probes: Callable[[], list[str]]) -> Callable[[], list[str]]:
    return lambda: [name for p in probes for name in p()]


FSDP1 = "torch.distributed.fsdp._flat_param"
FSDP2 = "torch.distributed.fsdp._fully_shard"

HOOKS: tuple[Hook, ...] = (
    Hook(
        "fsdp1.handle",
        "FSDP1 FlatParamHandle / FlatParameter",
        ("labkit/ranks/fsdp_units.py", "labkit/ranks/timeline.py", "labkit/ranks/memtrack.py"),
        "ranks.hooks.lost.fsdp1",
        _all(
            _needs("torch.distributed.fsdp._common_utils:_FSDPState.__init__", source=("self._handle",)),
            _needs(f"{FSDP1}:FlatParamHandle", attrs=("unshard", "reshard", "uses_sharded_strategy")),
            _needs(
                f"{FSDP1}:FlatParameter",
                annotated=("_sharded_size", "_unpadded_unsharded_size", "_local_shard", "_full_param_padded"),
            ),
        ),
    ),
    Hook(
        "fsdp2.param_group",
        "FSDP2 FSDPParamGroup / FSDPParam",
        ("labkit/ranks/fsdp_units.py", "labkit/ranks/timeline.py", "labkit/ranks/memtrack.py"),
        "ranks.hooks.lost.fsdp2",
        _all(
            _needs("torch.distributed.fsdp:FSDPModule", attrs=("_get_fsdp_state",)),
            _needs(f"{FSDP2}._fsdp_state:FSDPState", attrs=("_fsdp_param_group",)),
            _needs(
                f"{FSDP2}._fsdp_param_group:FSDPParamGroup",
                attrs=("unshard", "reshard", "post_backward", "is_unsharded"),
            ),
            _needs(
                f"{FSDP2}._fsdp_param:FSDPParam",
                annotated=(
                    "padded_sharded_param_size",
                    "_sharded_param_data",
                    "_unsharded_param",
                    "all_gather_outputs",
                ),
            ),
        ),
    ),
    Hook(
        "agent.process_context",
        "ProcessContext.join (polled by torchrun's agent)",
        ("labkit/launch/agent.py",),
        "ranks.hooks.lost.agent",
        _all(
            _needs("torch.multiprocessing.spawn:ProcessContext", attrs=("join",)),
            _needs("torch.distributed.elastic.multiprocessing.api:MultiprocessContext", source=("_pc.join(",)),
        ),
    ),
    Hook(
        "estimate.fake_pg",
        "torch.testing._internal.distributed.fake_pg.FakeStore, FSDP2's _chunk_with_empty",
        ("labkit/memory/faketrace.py",),
        "ranks.hooks.lost.estimate",
        _all(
            _needs("torch.testing._internal.distributed.fake_pg:FakeStore"),
            _needs(f"{FSDP2}._fsdp_param:_chunk_with_empty"),
            _needs("torch._subclasses.fake_tensor:FakeTensorMode"),
        ),
    ),
    Hook(
        "comm.dispatch",
        "torch._C._dispatch_has_kernel_for_dispatch_key, torch._C._AutoDispatchBelowAutograd",
        ("labkit/ranks/comm.py",),
        "ranks.hooks.lost.comm",
        _all(
            _needs("torch._C:_dispatch_has_kernel_for_dispatch_key"),
            _needs("torch._C:_AutoDispatchBelowAutograd"),
            _needs("torch.library:Library", attrs=("impl",)),
        ),
    ),
    Hook(
        "memtrack.storages",
        "UntypedStorage.resize_, torch._guards.active_fake_mode, TorchDispatchMode",
        ("labkit/ranks/memtrack.py",),
        "ranks.hooks.lost.memtrack",
        _all(
            _needs("torch:UntypedStorage", attrs=("resize_", "_cdata")),
            _needs("torch._guards:active_fake_mode"),
            _needs("torch.utils._python_dispatch:TorchDispatchMode"),
        ),
    ),
)

BY_ID = {h.id: h for h in HOOKS}
