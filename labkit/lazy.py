"""A facade whose names are imported from their homes on first use (``labkit.comm``, ``labkit.timeline``).

    HOMES = {"labkit.ranks.comm": ("count", ...), "labkit.timing.theory": ("theory_bytes", ...)}
    __all__, __getattr__, __dir__ = lazy.names(__name__, HOMES)

A facade that spans the rank's side and the kernel's cannot import its names at the top: a rank would
load the plots, the kernel torch. Python calls a module's ``__getattr__`` for a name it does not hold.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def names(
    module: str, homes: Mapping[str, tuple[str, ...]]
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """``module``'s ``__all__``, ``__getattr__`` and ``__dir__``: each name of ``homes`` from its home."""
    home_of = {name: home for home, names_ in homes.items() for name in names_}
    public = sorted(home_of)

    def getattr_(name: str) -> Any:
        if name in home_of:
            return getattr(importlib.import_module(home_of[name]), name)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    def dir_() -> list[str]:
        return public

    return public, getattr_, dir_
