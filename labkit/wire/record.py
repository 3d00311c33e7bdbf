"""The common form of a record that crosses a process boundary: a frozen dataclass, checked on the way in.

A record is written by one process and read by another (a rank and the kernel, the grader and its
sandbox, the kernel and its prefork server), so the reader cannot trust it: whatever the other side
is, a bad record must fail with one error that names the field, never as a ``KeyError`` three calls
later. Each record class declares its ``KIND`` (the ``"kind"`` key on the wire) and its ``SCHEMA``
(a version, as nbgrader versions its cell metadata: a reader refuses a newer schema than it knows,
and reads an older one with the defaults of the fields added since).

    @dataclass(frozen=True)
    class TaskResult(Record):
        KIND: ClassVar[str] = "judge_result"
        key: str
        values: list[Any]

    TaskResult.from_json(text)      # RecordError("judge_result.values: expected a list, got str")

The fields' annotations are the check: ``int`` (never a ``bool``), ``float`` (an ``int`` is taken),
``str``, ``bool``, ``None``, ``X | None``, ``list[X]``, ``tuple[X, ...]``, ``dict[str, X]``, a ``str``
``Enum`` (by value), another ``Record`` (nested), and ``Any`` (any JSON value, left as it is).
Unknown keys are ignored, so a newer writer's extra field does not break an older reader.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from enum import Enum
from typing import Any, ClassVar, TypeVar

__all__ = ["Record", "RecordError", "Word"]

R = TypeVar("R", bound="Record")
_NoneType = type(None)


class Word(str, Enum):
    """A ``str`` enum that prints as its value: ``"fsdp1"``, not ``"Flavor.FSDP1"``, in f-strings and lists."""

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return repr(self.value)

    def __hash__(self) -> int:  # the string's hash (Enum's is its name's): a dict keyed by "fsdp1" finds Flavor.FSDP1
        return str.__hash__(self)

    @classmethod
    def choices(cls) -> tuple[str, ...]:
        return tuple(m.value for m in cls)


class RecordError(ValueError):
    """A record that is not what its class declares: which record, which field, what was there."""


@dataclasses.dataclass(frozen=True)
class Record:
    """Base of the declared records: ``to_json`` / ``from_json`` with the fields checked."""

    KIND: ClassVar[str] = "record"
    SCHEMA: ClassVar[int] = 1

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON data; a field at its default is left out (the reader puts the default back)."""
        out: dict[str, Any] = {"kind": self.KIND, "schema": self.SCHEMA}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.default is not dataclasses.MISSING and value == f.default and type(value) is type(f.default):
                continue
            if f.default_factory is not dataclasses.MISSING and value == f.default_factory():
                continue
            out[f.name] = _plain(value)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls: type[R], data: object) -> R:
        if not isinstance(data, dict):
            raise RecordError(f"{cls.KIND}: expected an object, got {type(data).__name__}")
        if data.get("kind", cls.KIND) != cls.KIND:
            raise RecordError(f"{cls.KIND}: a record of kind {str(data.get('kind'))[:40]!r}")
        schema = data.get("schema", cls.SCHEMA)
        if not isinstance(schema, int) or isinstance(schema, bool) or schema > cls.SCHEMA:
            raise RecordError(f"{cls.KIND}: schema {str(schema)[:20]} (this labkit reads up to {cls.SCHEMA})")
        hints = _hints(cls)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in data:
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    raise RecordError(f"{cls.KIND}.{f.name}: missing")
                continue
            values[f.name] = _checked(data[f.name], hints[f.name], f"{cls.KIND}.{f.name}")
        return cls(**values)

    @classmethod
    def from_json(cls: type[R], text: str | bytes) -> R:
        try:
            data = json.loads(text)
        except (ValueError, UnicodeDecodeError) as e:
            raise RecordError(f"{cls.KIND}: not JSON ({type(e).__name__})") from None
        return cls.from_dict(data)


_hint_cache: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _hint_cache:
        _hint_cache[cls] = typing.get_type_hints(cls)
    return _hint_cache[cls]


def _plain(value: Any) -> Any:
    """A field's value as JSON: records and enums by their plain form, containers element by element."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _checked(value: Any, hint: Any, where: str) -> Any:
    """``value`` read back as ``hint`` declares, or a RecordError naming ``where``."""
    if hint is Any:
        return value
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and _NoneType in args:
            return None
        errors = []
        for arg in (a for a in args if a is not _NoneType):
            try:
                return _checked(value, arg, where)
            except RecordError as e:
                errors.append(str(e))
        raise RecordError(errors[0] if len(errors) == 1 else f"{where}: {_got(value)} fits none of its types")
    if origin in (list, tuple):
        if not isinstance(value, list):
            raise RecordError(f"{where}: expected a list, {_got(value)}")
        item = args[0] if args else Any
        items = [_checked(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise RecordError(f"{where}: expected an object, {_got(value)}")
        item = args[1] if len(args) == 2 else Any
        return {str(k): _checked(v, item, f"{where}.{k}") for k, v in value.items()}
    if isinstance(hint, type) and issubclass(hint, Record):
        return hint.from_dict(value)
    if isinstance(hint, type) and issubclass(hint, Enum):
        try:
            return hint(value)
        except ValueError:
            choices = ", ".join(str(m.value) for m in hint)
            raise RecordError(f"{where}: {str(value)[:40]!r} is not one of {choices}") from None
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise RecordError(f"{where}: expected a number, {_got(value)}")
    if hint in (int, str, bool):
        if isinstance(value, hint) and not (hint is int and isinstance(value, bool)):
            return value
        raise RecordError(f"{where}: expected {hint.__name__}, {_got(value)}")
    if hint is _NoneType or hint is None:
        if value is None:
            return None
        raise RecordError(f"{where}: expected null, {_got(value)}")
    raise TypeError(f"{where}: a record field of type {hint!r} is not supported")  # the declaration's fault


def _got(value: Any) -> str:
    return f"got {type(value).__name__}"
