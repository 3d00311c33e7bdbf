"""Message types are ``Msg`` members, never strings: no kind written as a literal outside the enum.

Issue 46 found three types (``comm_total``, ``rank_env``, ``hook_missing``) sent and read back by
string, and ``rank.send`` taking any string. Each is a ``Msg`` now; these tests keep it so: a
message type's string may appear in ``labkit/wire/protocol.py`` (where ``Msg`` defines it) and
nowhere else in labkit's code that sends, filters or compares messages.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from labkit.ranks import rank
from labkit.wire.protocol import PAYLOADS, TYPE, Msg, kind_of

ROOT = Path(__file__).resolve().parents[1]
DEFINED_IN = {"labkit/wire/protocol.py"}  # the enum's definition
KINDS = {m.value for m in Msg}
# calls whose argument is a message type: sending one, building one, picking a run's messages of one
TAKES_A_KIND = ("send", "message", "stamped", "retyped", "messages", "_messages", "last_message", "first_message")


def reads_type(node: ast.AST) -> bool:
    """``m.get(TYPE)``, ``m[TYPE]``, and the same with the key's own string ``"t"``."""
    text = ast.unparse(node)
    return text.endswith((".get(TYPE)", "[TYPE]", ".get('t')", "['t']"))


def is_kind(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in KINDS


def literal_kinds(source: str, path: str) -> list[str]:
    """Where ``source`` writes a message type as a string: an argument of a call in ``TAKES_A_KIND``
    (or any ``*send``), a comparison with a message's type, or a module constant holding one."""
    out = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func).rsplit(".", 1)[-1]
            if name in TAKES_A_KIND or name.endswith("send"):
                out += [f"{path}:{node.lineno} {ast.unparse(node)[:80]}" for a in node.args[:2] if is_kind(a)]
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            values = [e for s in sides for e in (s.elts if isinstance(s, (ast.Tuple, ast.List, ast.Set)) else [s])]
            if any(map(reads_type, sides)) and any(map(is_kind, values)):
                out.append(f"{path}:{node.lineno} {ast.unparse(node)[:80]}")
    for node in tree.body:
        if isinstance(node, ast.Assign) and is_kind(node.value):
            out.append(f"{path}:{node.lineno} {ast.unparse(node)[:80]}")
    return out


def test_the_scan_finds_each_form():
    planted = """
MESSAGE = "comm_total"
rank.send("hook_missing", hook="x")
_messages(run, "rank_env")
found = [m for m in msgs if m.get(TYPE) == "memcat"]
late = [m for m in msgs if m["t"] in ("done", "exit")]
fine = [m for m in msgs if m.get(TYPE) == Msg.DONE and kind == "error"]
"""
    found = literal_kinds(planted, "x.py")
    assert [f.split()[0] for f in found] == ["x.py:3", "x.py:4", "x.py:5", "x.py:6", "x.py:2"], found


@pytest.mark.parametrize("folder", ["labkit", "benchmarks"])
def test_no_message_type_is_a_string_outside_the_enum(folder: str):
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel not in DEFINED_IN:
            found += literal_kinds(path.read_text(encoding="utf-8"), rel)
    assert not found, "write the type as labkit.wire.protocol.Msg.X (declare a new one there):\n" + "\n".join(found)


def test_the_lessons_send_only_declared_types():
    """A lesson's code cell that sends a message of its own must name a ``Msg`` (rank.send refuses others)."""
    sends = []
    for path in sorted((ROOT / "labkit/course/lessons").glob("*.md")):
        for m in re.finditer(r"\brank\.send\(\s*([^,)]+)", path.read_text(encoding="utf-8")):
            sends.append((path.name, m.group(1).strip()))
    bad = [(name, arg) for name, arg in sends if not arg.startswith("Msg.")]
    assert not bad, bad


def test_every_declared_type_is_in_the_architecture_table():
    text = (ROOT / "docs/architecture.md").read_text(encoding="utf-8")
    table = text.split("## Messages from ranks", 1)[1].split("\nOutput:", 1)[0]
    listed = set(re.findall(r"`([a-z_]+)`", table))
    assert KINDS <= listed, sorted(KINDS - listed)
    assert set(PAYLOADS) == set(Msg)


def test_send_takes_a_declared_type_and_refuses_any_other(tmp_path, monkeypatch):
    monkeypatch.setattr(rank, "_client", None)
    monkeypatch.setenv("LABKIT_REPORT_DIR", str(tmp_path))
    monkeypatch.setenv("RANK", "0")
    rank.send(Msg.RANK_ENV, torch="2.13.0", cuda=None, nccl=None)
    rank.send("hook_missing", hook="h", api="a", torch="2.13.0", feature="f")  # a declared type's string
    with pytest.raises(ValueError, match=r"'comm_totals' is not a declared message type .*comm_total"):
        rank.send("comm_totals", counts={})  # type: ignore[arg-type]  # the mistake this refuses
    lines = [json.loads(line) for line in (tmp_path / "rank0.jsonl").read_text().splitlines()]
    assert [m[TYPE] for m in lines] == ["rank_env", "hook_missing"], "nothing was sent for the undeclared one"
    assert kind_of("step") is Msg.STEP and kind_of(Msg.STEP) is Msg.STEP
