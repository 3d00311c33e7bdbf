"""The common form of the declared records (labkit.wire.record): what a reader refuses, and how it says so."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar

import pytest

from labkit.wire.record import Record, RecordError


class Color(str, Enum):
    RED = "red"
    BLUE = "blue"


@dataclass(frozen=True)
class Inner(Record):
    KIND: ClassVar[str] = "inner"
    n: int


@dataclass(frozen=True)
class Sample(Record):
    KIND: ClassVar[str] = "sample"
    SCHEMA: ClassVar[int] = 2
    name: str
    ratio: float
    flags: list[bool]
    color: Color
    inner: Inner
    maybe: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    pair: tuple[int, ...] = ()


def sample() -> Sample:
    return Sample("a", 0.5, [True], Color.BLUE, Inner(3), None, {"x": [1]}, (1, 2))


def test_a_record_round_trips_through_json():
    s = sample()
    back = Sample.from_json(s.to_json())
    assert back == s and back.color is Color.BLUE and isinstance(back.pair, tuple)
    assert s.to_dict()["kind"] == "sample" and s.to_dict()["schema"] == 2


@pytest.mark.parametrize(
    "change, where",
    [
        ({"name": 3}, "sample.name: expected str, got int"),
        ({"ratio": "1"}, "sample.ratio: expected a number"),
        ({"ratio": True}, "sample.ratio: expected a number"),
        ({"flags": "yes"}, "sample.flags: expected a list"),
        ({"flags": [1]}, "sample.flags[0]: expected bool"),
        ({"color": "green"}, "sample.color: 'green' is not one of red, blue"),
        ({"inner": {"kind": "inner", "n": True}}, "inner.n: expected int, got bool"),
        ({"maybe": "x"}, "sample.maybe: expected int, got str"),
        ({"extra": []}, "sample.extra: expected an object"),
        ({"schema": 3}, "schema 3 (this labkit reads up to 2)"),
        ({"kind": "other"}, "a record of kind 'other'"),
    ],
)
def test_a_bad_field_is_named(change, where):
    data = {**sample().to_dict(), **change}
    with pytest.raises(RecordError, match=where.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        Sample.from_dict(data)


def test_missing_and_unknown_fields():
    data = sample().to_dict()
    del data["ratio"]
    with pytest.raises(RecordError, match="sample.ratio: missing"):
        Sample.from_dict(data)
    data = {**sample().to_dict(), "newer_field": 1}  # a newer writer's extra field: ignored
    assert Sample.from_dict(data) == sample()
    old = {k: v for k, v in sample().to_dict().items() if k not in ("maybe", "extra", "pair")}
    old["schema"] = 1  # an older schema reads with the defaults of what was added since
    assert Sample.from_dict(old).extra == {}


@pytest.mark.parametrize("text", ["", "[1]", '"x"', "{", b"\xff"])
def test_not_a_record(text):
    with pytest.raises(RecordError):
        Sample.from_json(text)
