"""Comparing a student's value with an expected one: numbers within a tolerance, strings without
case or surrounding spaces, containers element by element, and the wrong kind of value named.

``compare`` returns None when they match, else a ``Verdict``: with a message key when the kind of
value is wrong (which gives nothing away), without one when it is only a different value.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Verdict:
    """The outcome of comparing a value: correct, or why not (an i18n key and its fields)."""

    correct: bool
    key: str | None = None  # a message key: a type problem, or the hint to show
    fields: dict[str, Any] = field(default_factory=dict)


def as_number(value: Any) -> float | int | None:
    """A plain number from an int, float, numpy scalar or one-element tensor; None otherwise."""
    if isinstance(value, bool) or isinstance(value, (str, bytes)):
        return None
    if isinstance(value, numbers.Real):
        return value  # type: ignore[return-value]
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", 0) == 0:  # numpy scalars, 0-d tensors
        try:
            v = item()
        except (TypeError, ValueError, RuntimeError):
            return None
        return v if isinstance(v, numbers.Real) and not isinstance(v, bool) else None
    return None


def kind(value: Any) -> str:
    return type(value).__name__


def compare(value: Any, expected: Any, rel: float = 1e-6, abs: float = 0.0) -> Verdict | None:
    """None if ``value`` matches ``expected``; else a Verdict, with a key when the kind is wrong."""
    if isinstance(expected, bool):
        if not isinstance(value, bool) and type(value).__name__ != "bool_":  # numpy.bool_ too
            return Verdict(False, "grading.check.type.bool", {"got": kind(value)})
        return None if bool(value) == expected else Verdict(False)
    if isinstance(expected, numbers.Real):
        v = as_number(value)
        if v is None:
            return Verdict(False, "grading.check.type.number", {"got": kind(value)})
        return None if math.isclose(v, expected, rel_tol=rel, abs_tol=abs) else Verdict(False)
    if isinstance(expected, str):
        if not isinstance(value, str):
            return Verdict(False, "grading.check.type.text", {"got": kind(value)})
        return None if value.strip().casefold() == expected.strip().casefold() else Verdict(False)
    if isinstance(expected, Mapping):
        keys = ", ".join(map(str, expected))
        if not isinstance(value, Mapping) or set(value) != set(expected):
            return Verdict(False, "grading.check.type.mapping", {"keys": keys, "got": kind(value)})
        bad = [k for k in expected if compare(value[k], expected[k], rel, abs) is not None]
        return None if not bad else Verdict(False)
    if isinstance(expected, (set, frozenset)):
        if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
            return Verdict(False, "grading.check.type.sequence", {"n": len(expected), "got": kind(value)})
        return None if set(value) == set(expected) else Verdict(False)
    if isinstance(expected, (list, tuple)):
        if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__") or len(value) != len(expected):
            return Verdict(False, "grading.check.type.sequence", {"n": len(expected), "got": kind(value)})
        items = list(value)
        bad = [i for i, e in enumerate(expected) if compare(items[i], e, rel, abs) is not None]
        return None if not bad else Verdict(False)
    return None if value == expected else Verdict(False)
