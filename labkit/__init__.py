"""fsdp-labkit: run real multi-rank FSDP from a notebook cell, see it, and grade it.

    %load_ext labkit
    %%torchrun -n 2
    ...

Importing ``labkit`` is cheap (torch and ipywidgets are imported on first use),
because every rank imports it too.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it; loaded on first access
_LAZY = {
    "torchrun": "labkit.launcher",
    "Run": "labkit.run",
    "RunConfig": "labkit.options",
    "check": "labkit.grading.checks",
    "set_lang": "labkit.i18n",
    "get_lang": "labkit.i18n",
    "LabkitError": "labkit.errors",
    "OptionError": "labkit.errors",
    "RunError": "labkit.errors",
    "RankError": "labkit.errors",
    "RunTimeout": "labkit.errors",
    "RunStopped": "labkit.errors",
    "LaunchError": "labkit.errors",
    "RunInterrupted": "labkit.errors",
    "LabkitInternalError": "labkit.errors",
    "cleanup": "labkit.group",
    "Session": "labkit.warm",
}

last_run: Any = None  # the most recent Run, set by the launcher

# modules whose import registers the course's questions (labkit.grading.registry loads them by name)
QUESTION_SOURCES = ("labkit.course.questions",)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in ("rank", "models", "memory_model", "i18n", "errors"):
        return importlib.import_module(f"labkit.{name}")
    raise AttributeError(f"module 'labkit' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext labkit``: registers ``%%torchrun`` (and the warm-rank magics)."""
    from labkit.magic import register

    register(ipython)
