"""The kernel<->rank contract of labkit.wire, read from the source with ``ast`` and exercised without ranks:

- a message is put together by ``protocol.message`` / ``stamped`` only: no other module writes the
  type key, and no module but ``wire.records`` filters a run's messages by type;
- every call that sends a message of a known type passes only the fields its payload declares;
- no function takes ``run: Any``: a run is a ``RunRecord`` (or a typed ``Source``);
- the job spec, the spans, the errors and the filter behave as the two sides expect.

    .venv/bin/python -m pytest tests/test_contracts.py -q
"""

from __future__ import annotations

import ast
import json
import pickle
from pathlib import Path

import pytest

from labkit.wire import protocol, records
from labkit.wire.errors import LaunchError, RankError, RunError, RunTimeout
from labkit.wire.job import JobMode, JobSpec
from labkit.wire.protocol import PAYLOADS, TIME, TYPE, Msg, message, stamped
from labkit.wire.record import RecordError
from labkit.wire.records import RankState, Stream, events_of, first_message, given, last_message, messages, span

ROOT = Path(__file__).resolve().parents[1]
LABKIT = ROOT / "labkit"
TYPE_KEYS = ("t", "TYPE")  # the key as written: the literal, or protocol's constant
BUILDERS = {"labkit/wire/protocol.py"}  # where the type key is written
FILTERS = {"labkit/wire/records.py"}  # where a run's messages are filtered by type


def sources() -> list[tuple[str, ast.Module]]:
    return [(str(p.relative_to(ROOT)), ast.parse(p.read_text())) for p in sorted(LABKIT.rglob("*.py"))]


def is_type_key(node: ast.AST | None) -> bool:
    return (isinstance(node, ast.Constant) and node.value == "t") or (isinstance(node, ast.Name) and node.id == "TYPE")


def reads_type(node: ast.AST) -> bool:
    """``m.get(TYPE)``, ``m.get("t")``, ``m[TYPE]``, ``m["t"]``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args:
        return is_type_key(node.args[0])
    return isinstance(node, ast.Subscript) and is_type_key(node.slice)


def hand_written_messages() -> list[str]:
    out = []
    for path, module in sources():
        if path in BUILDERS:
            continue
        for node in ast.walk(module):
            if isinstance(node, ast.Dict) and any(is_type_key(k) for k in node.keys):
                out.append(f"{path}:{node.lineno} {{TYPE: ...}}")
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and is_type_key(node.slice):
                out.append(f"{path}:{node.lineno} msg[TYPE] = ...")
            elif isinstance(node, ast.Call) and any(k.arg == "t" for k in node.keywords):
                if ast.unparse(node.func) == "dict":
                    out.append(f"{path}:{node.lineno} dict(t=...)")
    return out


def hand_written_filters() -> list[str]:
    """A comprehension that keeps the messages of one type: ``[m for m in evs if m.get(TYPE) == k]``."""
    out = []
    for path, module in sources():
        if path in FILTERS:
            continue
        for node in ast.walk(module):
            if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)):
                for cond in (c for gen in node.generators for c in gen.ifs):
                    if any(reads_type(n) for n in ast.walk(cond)):
                        out.append(f"{path}:{node.lineno} {ast.unparse(cond)}")
    return out


def run_any() -> list[str]:
    out = []
    for path, module in sources():
        for node in ast.walk(module):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                    if arg.arg in ("run", "runs") and arg.annotation is not None:
                        if "Any" in ast.unparse(arg.annotation):
                            out.append(f"{path}:{node.lineno} {node.name}({arg.arg}: {ast.unparse(arg.annotation)})")
    return out


def kind_of(node: ast.AST) -> Msg | None:
    """``Msg.X`` or the plain string of a known type."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Msg":
        return Msg[node.attr]
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in {m.value for m in Msg}:
        return Msg(node.value)
    return None


def undeclared_fields() -> list[str]:
    """Calls that send a known message type (``send(Msg.X, ...)``, ``message(Msg.X, ...)``, ``group.send(r,
    Msg.X, ...)``) with a keyword its payload does not declare."""
    out = []
    for path, module in sources():
        for node in ast.walk(module):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            name = ast.unparse(node.func).rsplit(".", 1)[-1]
            if not (name in ("message", "stamped") or name.endswith("send")):
                continue
            kind = next((k for k in map(kind_of, node.args[:2]) if k is not None), None)
            if kind is None:
                continue
            declared = set(getattr(PAYLOADS[kind], "__annotations__", {}))
            for kw in node.keywords:
                if kw.arg is not None and kw.arg not in declared and kw.arg != TIME:
                    out.append(f"{path}:{node.lineno} {kind.value} carries {kw.arg!r}, not in its payload")
    return out


def test_the_checks_see_the_code():
    assert any(path == "labkit/wire/protocol.py" for path, _ in sources())
    bad = ast.parse('m = {"t": "x"}\n[e for e in evs if e.get(TYPE) == "x"]')
    assert any(isinstance(n, ast.Dict) and is_type_key(n.keys[0]) for n in ast.walk(bad))
    comp = next(n for n in ast.walk(bad) if isinstance(n, ast.ListComp))
    assert any(reads_type(n) for n in ast.walk(comp.generators[0].ifs[0]))


def test_only_protocol_writes_the_type_key():
    found = hand_written_messages()
    assert not found, "build messages with labkit.wire.protocol.message/stamped:\n" + "\n".join(found)


def test_one_filter_of_a_runs_messages():
    found = hand_written_filters()
    assert not found, "filter with labkit.wire.records.messages (or last_message/first_message):\n" + "\n".join(found)


def test_no_function_takes_run_any():
    found = run_any()
    assert not found, "type the run (labkit.wire.records.RunRecord, or Source for a run or its events):\n" + "\n".join(
        found
    )


def test_senders_pass_only_declared_fields():
    assert set(PAYLOADS) == set(Msg), "every message type declares its payload"
    found = undeclared_fields()
    assert not found, "declare these in labkit/wire/protocol.py (or fix the sender):\n" + "\n".join(found)


# -- the contract at work -------------------------------------------------------------------------


def test_a_message_on_the_wire_is_as_before():
    assert message(Msg.STEP, i=1, dt=0.5) == {"t": "step", "i": 1, "dt": 0.5}
    msg = stamped(Msg.REPORT, values={"x": 1})
    assert list(msg) == [TYPE, TIME, "values"] and isinstance(msg[TIME], float)
    assert json.dumps(protocol.retyped({"t": "cell_done", "cell": 2}, Msg.DONE)) == '{"t": "done", "cell": 2}'


def test_a_span_is_a_plain_dict_on_the_wire():
    s = span("layers.0", "all_gather", 1.0, 2.0, "comm", bytes=10)
    assert s["stream"] is Stream.COMM and s["stream"] == "comm" and {"comm": 1}[s["stream"]] == 1
    text = json.dumps(s)
    assert text == '{"unit": "layers.0", "kind": "all_gather", "start": 1.0, "end": 2.0, "stream": "comm", "bytes": 10}'
    assert json.loads(text)["stream"] == Stream.COMM and repr(Stream.HOST) == "'host'"
    with pytest.raises(ValueError):
        span("u", "forward", 0, 1, "gpu")  # not a stream


def test_the_job_spec_round_trips_as_the_json_the_bootstrap_read(tmp_path):
    from labkit.launch.group import Job
    from labkit.launch.options import RunConfig

    cfg = RunConfig(backend="gloo", pg_timeout=30.0)
    Job.make("x = 1\n", {"n": 3}, (), {}).write(str(tmp_path), cfg)
    raw = json.loads((tmp_path / "job.json").read_text())
    assert raw == {
        "kind": "job",
        "schema": 1,
        "mode": "code",
        "backend": "gloo",
        "pg_timeout": 30.0,
        "source_file": str(tmp_path / "cell.py"),
        "vars_file": "vars.pkl",
    }
    spec = JobSpec.read(str(tmp_path))
    assert spec.source_file == str(tmp_path / "cell.py") and JobSpec.from_json(spec.to_json()) == spec
    assert spec.mode is JobMode.CODE and spec.mode == "code"
    serve = JobSpec.from_json(JobSpec("serve", "nccl", 120).to_json())
    assert serve.mode is JobMode.SERVE and serve.pg_timeout == 120.0 and serve.source_file is None
    with pytest.raises(ValueError, match="mode"):
        JobSpec("cell", "gloo", 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="source_file"):
        JobSpec("code", "gloo", 1.0)  # type: ignore[arg-type]
    with pytest.raises(RecordError, match="job.pg_timeout: expected a number, got str"):
        JobSpec.from_json(json.dumps({**raw, "pg_timeout": "30"}))  # what a bootstrap refuses, named
    with pytest.raises(RecordError, match="job.mode: 'cell' is not one of code, path, function, serve"):
        JobSpec.from_json(json.dumps({**raw, "mode": "cell"}))


def test_run_error_declares_what_it_carries():
    assert "__getattr__" not in vars(RunError)
    err = RankError("rank 1 failed", rank=1, exit_code=-9, signal="SIGKILL", traceback="Traceback ...", kind="signal")
    assert (err.rank, err.exit_code, err.signal, err.kind, err.alive) == (1, -9, "SIGKILL", "signal", None)
    assert err.context == {
        "rank": 1,
        "exit_code": -9,
        "signal": "SIGKILL",
        "traceback": "Traceback ...",
        "kind": "signal",
    }
    assert err._render_traceback_() == ["RankError: rank 1 failed", "", "Traceback ..."]
    assert RunTimeout("late", alive=[0, 1]).alive == [0, 1] and LaunchError("gone").rank is None
    with pytest.raises(TypeError):
        RankError("x", colour="red")  # an unknown field is a mistake, not a silent attribute
    copy = pickle.loads(pickle.dumps(err))
    assert (type(copy), str(copy), copy.rank, copy.signal) == (RankError, "rank 1 failed", 1, "SIGKILL")


def test_with_note_keeps_the_fields():
    from labkit.launch.diagnose import with_note

    noted = with_note(RankError("boom", rank=2, exit_code=1, kind="error"), "ran on node n2")
    assert type(noted) is RankError and str(noted) == "boom\nran on node n2"
    assert (noted.rank, noted.exit_code, noted.kind, noted.signal) == (2, 1, "error", None)


def test_the_one_filter_reads_a_run_and_its_events_alike():
    from labkit.launch.run import Run

    run = Run("run-x", 2, "gloo", "/nonexistent")
    for msg in (
        {"t": "hello", "rank": 0, "pid": 10},
        {"t": "spans", "rank": 0, "step": 0, "config": "a", "spans": []},
        {"t": "spans", "rank": 0, "step": 1, "config": "b", "spans": []},
        {"t": "spans", "rank": 1, "step": 0, "config": "a", "spans": []},
        {"t": "hello", "rank": 1, "pid": 11},
    ):
        run.ingest(msg)
    assert isinstance(run, records.RunRecord) and events_of(run) is run.events
    by_run, by_events = messages(run, Msg.SPANS), messages(run.events, "spans")
    assert by_run == by_events and [len(by_run[r]) for r in (0, 1)] == [2, 1]
    assert messages(run, Msg.SPANS, config="a") == {0: [run.events[0][1]], 1: [run.events[1][0]]}
    assert messages(run, Msg.SPANS, **given(config=None, step=1))[0] == [run.events[0][2]]
    assert messages(run, Msg.MEMCAT) == {0: [], 1: []} and run.messages("spans", step=0)[1] == [run.events[1][0]]
    assert last_message(run, 0, Msg.SPANS)["step"] == 1 and last_message(run, 1, Msg.DONE) is None
    assert first_message(run, 1, Msg.HELLO)["pid"] == 11 and run.last_message(0, Msg.HELLO)["pid"] == 10
    assert isinstance(run.ranks[0], RankState)
