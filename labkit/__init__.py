"""fsdp-labkit: run real multi-rank FSDP from a notebook cell, see it, and grade it.

    %load_ext labkit
    %%torchrun -n 2
    ...

Importing ``labkit`` is cheap (torch and ipywidgets are imported on first use),
because every rank imports it too.

The code lives in subpackages named by the side they run on (``wire``, ``ranks``, ``launch``,
``memory``, ``timing``, ``views``, ``export``, ``course``, ``grading``); docs/architecture.md draws
them. What a notebook types stays short: ``from labkit import rank, comm, timeline, memtrack,
simulate, memory_model, estimate`` (and ``memory_view``, ``units``) are small modules directly in
labkit/ that re-export the names notebooks use from where they live, each imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it; loaded on first access
_LAZY = {
    "torchrun": "labkit.launch.cold",
    "Run": "labkit.launch.run",
    "RunConfig": "labkit.launch.options",
    "check": "labkit.grading.checks",
    "progress": "labkit.grading.selfstudy",  # self-study: what is done, and a solution after a try
    "solution": "labkit.grading.selfstudy",
    "submit": "labkit.classroom.client",  # a class: hand this notebook in (labkit.classroom)
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

# the modules ``labkit.<name>`` reaches without an import of its own (``import labkit; labkit.comm``)
FACADES = ("rank", "comm", "timeline", "memtrack", "simulate", "memory_model", "estimate", "memory_view", "units")
SUBPACKAGES = ("models", "i18n", "fmt", "export", "wire", "ranks", "launch", "memory", "timing", "views")

last_run: Any = None  # the most recent Run, set by the launcher

# modules whose import registers the course's questions (labkit.grading.registry loads them by name)
QUESTION_SOURCES = ("labkit.course.questions",)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in FACADES or name in SUBPACKAGES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext labkit``: registers ``%%torchrun`` (and the warm-rank magics); every run then leaves
    its record in the notebook (``labkit.regress.record``)."""
    from labkit.grading import selfstudy
    from labkit.launch.magic import register
    from labkit.regress import record

    register(ipython)
    record.subscribe()
    selfstudy.watch(ipython)  # the checks this kernel shows count as tries for labkit.solution
