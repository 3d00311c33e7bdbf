"""fsdp-labkit: run real multi-rank FSDP from a notebook cell, see it, and grade it.

    %load_ext labkit
    %%torchrun -n 2
    ...

Importing ``labkit`` is cheap (torch and ipywidgets are imported on first use),
because every rank imports it too.

The code lives in subpackages named by the side they run on (``wire``, ``ranks``, ``launch``,
``memory``, ``timing``, ``views``, ``export``, ``course``, ``grading``); docs/architecture.md draws
them. What a notebook types stays short: ``from labkit import rank, comm, timeline, memtrack,
simulate, memory_model, estimate`` gives the public modules below, each loaded on first use.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it; loaded on first access
_LAZY = {
    "torchrun": "labkit.launch.cold",
    "Run": "labkit.launch.run",
    "RunConfig": "labkit.launch.options",
    "check": "labkit.grading.checks",
    "set_lang": "labkit.i18n",
    "get_lang": "labkit.i18n",
    "LabkitError": "labkit.wire.errors",
    "OptionError": "labkit.wire.errors",
    "RunError": "labkit.wire.errors",
    "RankError": "labkit.wire.errors",
    "RunTimeout": "labkit.wire.errors",
    "RunStopped": "labkit.wire.errors",
    "LaunchError": "labkit.wire.errors",
    "RunInterrupted": "labkit.wire.errors",
    "LabkitInternalError": "labkit.wire.errors",
    "cleanup": "labkit.launch.group",
    "Session": "labkit.launch.warm",
}

# The short module names a notebook (and code written for the flat layout) imports, and the modules
# that define their names. A name with one home is that module itself (``labkit.rank`` is
# ``labkit.ranks.rank``); a name with several is a view over them, searched in order, each imported on
# first use, the torch-free ones first: ``comm.theory_bytes`` in the kernel never loads the in-rank
# counter (torch), ``timeline.Recorder`` on a rank never loads the plots. Lookup only: nothing here is imported until a name is used.
ALIASES: dict[str, tuple[str, ...]] = {
    "rank": ("labkit.ranks.rank",),
    "memtrack": ("labkit.ranks.memtrack",),
    "sampler": ("labkit.ranks.sampler",),
    "bootstrap": ("labkit.ranks.bootstrap",),
    "fsdp_units": ("labkit.ranks.fsdp_units",),
    "comm": ("labkit.timing.theory", "labkit.ranks.comm"),
    "timeline": (
        "labkit.timing.spans",
        "labkit.timing.trace",
        "labkit.ranks.timeline",
        "labkit.ranks.fsdp_units",
        "labkit.views.gantt",
    ),
    "simulate": ("labkit.timing.simulate", "labkit.timing.links", "labkit.timing.calibrate"),
    "calibrate": ("labkit.timing.calibrate",),
    "links": ("labkit.timing.links",),
    "spans": ("labkit.timing.spans",),
    "memory_model": ("labkit.memory.model", "labkit.memory.states", "labkit.memory.shapes", "labkit.memory.peak"),
    "memory_states": ("labkit.memory.states",),
    "memory_peak": ("labkit.memory.peak",),
    "memory_shapes": ("labkit.memory.shapes",),
    "estimate": ("labkit.memory.estimate",),
    "faketrace": ("labkit.memory.faketrace",),
    "memory_view": ("labkit.views.memory",),
    "dashboard": ("labkit.views.dashboard",),
    "runview": ("labkit.views.runview",),
    "gantt": ("labkit.views.gantt",),
    "protocol": ("labkit.wire.protocol",),
    "channel": ("labkit.wire.channel",),
    "errors": ("labkit.wire.errors",),
    "gpus": ("labkit.wire.devices",),
    "units": ("labkit.fmt",),
    "launcher": ("labkit.launch.cold",),
    "warm": ("labkit.launch.warm",),
    "group": ("labkit.launch.group",),
    "magic": ("labkit.launch.magic",),
    "options": ("labkit.launch.options",),
    "run": ("labkit.launch.run",),
    "diagnose": ("labkit.launch.diagnose",),
    "nodes": ("labkit.launch.nodes",),
    "agent": ("labkit.launch.agent",),
    "logs": ("labkit.launch.logs",),
}

last_run: Any = None  # the most recent Run, set by the launcher

# modules whose import registers the course's questions (labkit.grading.registry loads them by name)
QUESTION_SOURCES = ("labkit.course.questions",)


class _View(types.ModuleType):
    """``labkit.<short name>`` over several modules: an attribute comes from the first that has it."""

    def __init__(self, name: str, homes: tuple[str, ...]) -> None:
        super().__init__(name, f"{name}: the names of {', '.join(homes)}")
        self.__homes__ = homes

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        for home in self.__homes__:
            module = importlib.import_module(home)
            if hasattr(module, attr):
                return getattr(module, attr)
        raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")

    def __dir__(self) -> list[str]:
        names = set()
        for home in self.__homes__:
            module = importlib.import_module(home)
            names |= set(getattr(module, "__all__", None) or (n for n in dir(module) if not n.startswith("_")))
        return sorted(names)


def _alias(short: str) -> types.ModuleType:
    full = f"{__name__}.{short}"
    if full not in sys.modules:
        homes = ALIASES[short]
        sys.modules[full] = importlib.import_module(homes[0]) if len(homes) == 1 else _View(full, homes)
    return sys.modules[full]


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import labkit.timeline`` (not only ``from labkit import timeline``) finds the alias."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        package, _, short = fullname.rpartition(".")
        if package == __name__ and short in ALIASES:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        return _alias(spec.name.rpartition(".")[2])

    def exec_module(self, module: types.ModuleType) -> None:
        pass


if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
    sys.meta_path.append(_AliasFinder())


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in ALIASES:
        return _alias(name)
    if name in ("models", "i18n", "fmt", "export", "wire", "ranks", "launch", "memory", "timing", "views"):
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext labkit``: registers ``%%torchrun`` (and the warm-rank magics); every run then leaves
    its record in the notebook (``labkit.regress.record``)."""
    from labkit.launch.magic import register
    from labkit.regress import record

    register(ipython)
    record.subscribe()
