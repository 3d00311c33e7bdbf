"""Expected values the student's install can check against without holding them: salted, slow hashes.

The student build (``labkit.grading.student``) replaces each reference with, per point and per
number in it, the hash of the number *rounded to the tolerance*: its bucket on a log scale
whose width is the relative tolerance (and, when the question has one, on a linear scale whose
width is the absolute tolerance). A value within the tolerance of the reference falls in the
same bucket or in a neighbour, so the notebook hashes the student's bucket and both
neighbours and looks for the reference's hash among them: everything the grader would accept
is accepted (and values up to twice the tolerance away may be too; the grader's own comparison
is exact). Strings, booleans and sets are hashed as they are compared (case and surrounding
spaces ignored for strings). The structure (a list of two numbers, a dict with these keys) is
kept in clear, so the wrong kind of value still gets its message.

The hash is PBKDF2-SHA256 with ``ITERATIONS`` rounds and a salt per question, point and
position, so looking a value up means hashing every candidate bucket, a few milliseconds
each. That protects a real-valued answer; a small integer can be found by trying. So the
grader checks formulas at points of its own too (``labkit.grading.points``), which no
student install has.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from collections.abc import Mapping
from typing import Any

from labkit.grading.compare import Verdict, as_number, kind

ITERATIONS = 10_000
DIGEST_BYTES = 12


def digest(token: str, salt: str, where: str) -> str:
    return hashlib.pbkdf2_hmac("sha256", token.encode(), f"{salt}|{where}".encode(), ITERATIONS, DIGEST_BYTES).hex()


def _log_width(rel: float) -> float:
    return -math.log1p(-rel)  # ≥ |ln a - ln b| whenever isclose(a, b, rel_tol=rel): neighbours at most


def number_tokens(x: float, rel: float, abs_: float, around: bool) -> list[str]:
    """The buckets of ``x``: its own (``around=False``, for the reference) or its own and both neighbours."""
    steps = (-1, 0, 1) if around else (0,)
    out: list[str] = []
    if x == 0:
        out.append("z")
    elif rel > 0:
        k = math.floor(math.log(abs(x)) / _log_width(rel))
        sign = "+" if x > 0 else "-"
        out += [f"r{sign}{k + d}" for d in steps]
    else:
        out.append(f"x{float(x)!r}")
    if abs_ > 0:
        m = math.floor(x / abs_)
        out += [f"a{m + d}" for d in steps]
    return out


# -- the structure of an expected value, kept in clear ---------------------------------------------


def shape(expected: Any) -> Any:
    if isinstance(expected, bool):
        return "b"
    if isinstance(expected, numbers.Real):
        return "n"
    if isinstance(expected, str):
        return "s"
    if isinstance(expected, (set, frozenset)):
        return ["set", len(expected)]
    if isinstance(expected, Mapping):
        return ["d", {str(k): shape(v) for k, v in expected.items()}]
    if isinstance(expected, (list, tuple)):
        return ["l", [shape(v) for v in expected]]
    return "r"


def leaves(value: Any, form: Any, path: str = "") -> dict[str, tuple[Any, Any]] | Verdict:
    """``{path: (leaf value, leaf form)}``, or the Verdict for a value of the wrong kind (as ``compare`` says it)."""
    if form == "b":
        if not isinstance(value, bool) and type(value).__name__ != "bool_":
            return Verdict(False, "grading.check.type.bool", {"got": kind(value)})
        return {path: (bool(value), form)}
    if form == "n":
        v = as_number(value)
        if v is None:
            return Verdict(False, "grading.check.type.number", {"got": kind(value)})
        return {path: (v, form)}
    if form == "s":
        if not isinstance(value, str):
            return Verdict(False, "grading.check.type.text", {"got": kind(value)})
        return {path: (value, form)}
    if isinstance(form, list) and form[0] == "set":
        if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
            return Verdict(False, "grading.check.type.sequence", {"n": form[1], "got": kind(value)})
        return {path: (set(value), form)}
    if isinstance(form, list) and form[0] == "d":
        keys = form[1]
        if not isinstance(value, Mapping) or {str(k) for k in value} != set(keys):
            return Verdict(False, "grading.check.type.mapping", {"keys": ", ".join(keys), "got": kind(value)})
        by_name = {str(k): v for k, v in value.items()}
        out: dict[str, tuple[Any, Any]] = {}
        for k, sub in keys.items():
            found = leaves(by_name[k], sub, f"{path}/{k}")
            if isinstance(found, Verdict):
                return Verdict(False)  # a wrong element inside: a wrong value, not a wrong kind (as compare)
            out.update(found)
        return out
    if isinstance(form, list) and form[0] == "l":
        items = form[1]
        if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__") or len(value) != len(items):
            return Verdict(False, "grading.check.type.sequence", {"n": len(items), "got": kind(value)})
        out = {}
        for i, (v, sub) in enumerate(zip(list(value), items)):
            found = leaves(v, sub, f"{path}/{i}")
            if isinstance(found, Verdict):
                return Verdict(False)
            out.update(found)
        return out
    return {path: (value, form)}


def leaf_tokens(value: Any, form: Any, rel: float, abs_: float, around: bool) -> list[str]:
    if form == "n":
        return number_tokens(float(value), rel, abs_, around)
    if form == "b":
        return [f"b{int(bool(value))}"]
    if form == "s":
        return ["s" + value.strip().casefold()]
    if isinstance(form, list) and form[0] == "set":
        return ["set" + json.dumps(sorted(repr(v) for v in value))]
    return ["r" + repr(value)]


# -- sealing (at build time) and checking (in the notebook) -----------------------------------------


def seal(expected: Any, rel: float, abs_: float, salt: str, where: str) -> dict[str, Any]:
    """The reference at one point, as the student's install keeps it: its structure and its hashes."""
    form = shape(expected)
    found = leaves(expected, form)
    assert not isinstance(found, Verdict)
    return {
        "shape": form,
        "leaves": {
            path: sorted(digest(tok, salt, f"{where}|{path}") for tok in leaf_tokens(v, f, rel, abs_, around=False))
            for path, (v, f) in found.items()
        },
    }


def student_digests(value: Any, sealed: Mapping[str, Any], rel: float, abs_: float, salt: str, where: str):
    """``{path: the hashes of the student's buckets}``, or the Verdict when the kind of value is wrong."""
    found = leaves(value, sealed["shape"])
    if isinstance(found, Verdict):
        return found
    return {
        path: {digest(tok, salt, f"{where}|{path}") for tok in leaf_tokens(v, f, rel, abs_, around=True)}
        for path, (v, f) in found.items()
    }


def matches(digests: Mapping[str, set[str]], sealed: Mapping[str, Any]) -> bool:
    leaves_ = sealed["leaves"]
    return set(digests) == set(leaves_) and all(digests[p] & set(leaves_[p]) for p in leaves_)
