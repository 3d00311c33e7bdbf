"""The models the lessons train: ``config`` (sizes, no torch) and ``transformer`` (the torch modules).

from labkit.models.transformer import TransformerLM
from labkit.models.config import get_config
"""

from __future__ import annotations

import importlib
from typing import Any

_HOME = {
    "ModelConfig": "config",
    "PRESETS": "config",
    "get_config": "config",
    "RMSNorm": "transformer",
    "Attention": "transformer",
    "FeedForward": "transformer",
    "TransformerBlock": "transformer",
    "TransformerLM": "transformer",
    "synthetic_batch": "transformer",
}


def __getattr__(name: str) -> Any:
    # lazy, so that ``from labkit.models import get_config`` never imports torch
    if name in _HOME:
        return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(_HOME)
