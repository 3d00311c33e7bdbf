"""What the ranks' records mean, on both sides of the wire, defined once: the collectives counted and
their wire bytes, the memory categories and phases, the spans of a timeline, a rank's state, and what a
run holds (``RunRecord``), with the one way to pick messages out of it (``messages``).

A ``comm`` message carries, per collective kind, a payload (``bytes``) and what one rank sends
under the ring algorithm (``wire_bytes``): ``ring_factor`` is the one definition of that ratio,
used by the in-rank counter and by the kernel's theory and simulator alike.

The rank side writes these records (``labkit.ranks``), the kernel side reads them (``labkit.launch``,
``labkit.views``, ``labkit.timing``); neither imports the other, both import this module.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, TypedDict, cast, runtime_checkable

from labkit.wire.protocol import TYPE, Msg, Status

KINDS = ("all_gather", "reduce_scatter", "all_reduce", "broadcast")


def ring_factor(kind: str, group_size: int) -> float:
    """Bytes a rank sends per payload byte under the ring algorithm."""
    n = max(group_size, 1)
    if kind == "all_reduce":
        return 2 * (n - 1) / n  # reduce-scatter, then all-gather
    if kind in ("barrier", "recv"):
        return 0.0
    if kind == "send":
        return 1.0
    return (n - 1) / n


# -- memory by category (labkit.ranks.memtrack measures them, labkit.memory predicts them) --------

CATEGORIES = ("params", "params_unsharded", "grads", "optimizer", "activations", "other")
PHASES = ("forward", "backward", "optimizer", "peak")  # a "memcat" message's phase: the end of each, and the peak


# -- spans: one timed piece of a step -------------------------------------------------------------


class Stream(str, Enum):
    """Where a span ran. A ``str``, so ``span["stream"] == Stream.COMM`` holds for a span read back from
    JSON, and a span written with ``Stream.COMM`` is plain ``"comm"`` on the wire."""

    COMPUTE = "compute"  # forward, backward, optimizer on the rank's thread (or the device's compute stream)
    COMM = "comm"  # a collective, from issue to completion
    MEMORY = "memory"  # a unit's gathered parameters held ("held" spans)
    HOST = "host"  # CPU overhead between ops (the simulator's replay of it)

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return repr(self.value)


class Span(TypedDict, total=False):
    """One span of a ``spans`` message (and of ``labkit.simulate``'s result): a dict, as on the wire.

    Always: ``unit`` (the FSDP unit, "" for none), ``kind`` (forward, backward, optimizer, held, host, or
    the collective: all_gather, reduce_scatter, all_reduce, broadcast, ...), ``start`` and ``end``
    (seconds: ``time.time()`` on a rank, from 0 in a simulation) and ``stream``. A collective's span
    also carries its payload ``bytes``, and when measured ``wire_bytes``, ``group_size`` and whether
    the rank's thread waited for it (``blocking``).
    """

    unit: str
    kind: str
    start: float
    end: float
    stream: Stream
    bytes: float
    wire_bytes: float
    group_size: int
    blocking: bool


def span(unit: str, kind: str, start: float, end: float, stream: Stream | str, **extra: Any) -> Span:
    """A span, its fields in their usual order (the JSON of a ``spans`` message keeps it)."""
    if type(stream) is not Stream:  # Stream(x) costs a µs; the simulator makes thousands of spans
        stream = Stream(stream)
    return {"unit": unit, "kind": kind, "start": start, "end": end, "stream": stream, **extra}  # type: ignore[typeddict-item]


def on(spans: Iterable[Span], *streams: Stream) -> list[Span]:
    """The spans that ran on one of ``streams``, in their order: ``on(spans, Stream.COMM)``."""
    return [s for s in spans if s["stream"] in streams]


# -- a rank's state, as the notebook sees it ------------------------------------------------------


@dataclass
class RankState:
    """One rank of a run, kept up to date from its messages (``Run.ingest``) and its exit."""

    rank: int
    status: Status = Status.STARTING
    pid: int | None = None
    exit_code: int | None = None
    signal: str | None = None
    error: dict[str, Any] | None = None
    last_step: int | None = None
    last_step_time: float | None = None
    last_log: str = ""
    last_seen: float = field(default_factory=time.time)
    connected: bool = False


# -- a run, as the views and the analyses read it ------------------------------------------------

Message = dict[str, Any]  # one message as received: TYPE, TIME, "rank" and its payload
Events = Mapping[int, Sequence[Message]]  # per rank, its messages in the order they arrived


@runtime_checkable
class Recorded(Protocol):
    """Anything that holds messages per rank: a ``Run``, a simulated step (``simulate.Result``)."""

    @property
    def events(self) -> Events: ...


class LogRecord(Protocol):
    """One rank's output as the dashboard shows it (``labkit.launch.logs.RankLog``)."""

    @property
    def streams(self) -> Mapping[str, Sized]: ...  # "stdout"/"stderr" -> the lines kept

    @property
    def dropped(self) -> Mapping[str, int]: ...  # lines no longer kept

    def text(self, stream: str) -> str: ...


@runtime_checkable
class RunRecord(Recorded, Protocol):
    """What a run holds, as the views, the errors and the graders read it: ``labkit.launch.run.Run``
    is one. Everything is measured; nothing here is derived from a guess."""

    # read-only (properties): a reader's view, so a ``Run``'s dicts of its own types fit it
    @property
    def run_id(self) -> str: ...

    @property
    def nproc(self) -> int: ...

    @property
    def backend(self) -> str: ...

    @property
    def ranks(self) -> Mapping[int, RankState]: ...

    @property
    def values(self) -> Mapping[int, Mapping[str, Any]]: ...  # rank.report()

    @property
    def results(self) -> Mapping[int, Any]: ...  # a function's return value, per rank

    @property
    def memory(self) -> Mapping[int, Sequence[Mapping[str, Any]]]: ...  # samples (ELAPSED, rss, tensor_bytes...)

    @property
    def step_times(self) -> Mapping[int, Sequence[float]]: ...

    @property
    def logs(self) -> Mapping[int, LogRecord]: ...

    @property
    def error(self) -> BaseException | None: ...

    @property
    def started(self) -> float: ...

    @property
    def ok(self) -> bool: ...

    @property
    def wall_time(self) -> float: ...

    def main_memory_key(self) -> str: ...

    def memory_now(self, r: int) -> int | None: ...

    def main_peak(self, r: int) -> int | None: ...

    def last_message(self, r: int, kind: str) -> Message | None: ...


Source = Recorded | Events  # what the analyses read: a run (or simulated step), or its events


def events_of(source: Source) -> Events:
    """The messages per rank of a run, a simulated step, or a mapping {rank: messages} (a saved run,
    one setting's messages, a test's): the one place where the two are told apart."""
    # what isinstance(source, Recorded) asks (has it ``events``?), without a runtime Protocol check,
    # which costs tens of microseconds: the dashboard's table asks here a few times per rank and refresh
    events = getattr(source, "events", None)
    return cast(Events, source) if events is None else cast(Events, events)


def messages(source: Source, kind: Msg | str, /, **match: Any) -> dict[int, list[Message]]:
    """Per rank, its messages of type ``kind`` whose fields equal ``match``, in the order they came.

    ``messages(run, Msg.SPANS, config="ddp")[0]``. Every rank of the source is in the result, with an
    empty list when it sent no such message. An optional filter goes through ``given``:
    ``messages(run, Msg.MEMCAT, **given(step=step))`` (no step given: every step).
    """
    return {int(r): [m for m in evs if _matches(m, kind, match)] for r, evs in events_of(source).items()}


def last_message(source: Source, rank: int, kind: Msg | str, /, **match: Any) -> Message | None:
    """The latest of rank ``rank``'s messages that ``messages`` would give, or None (read from the end:
    the dashboard asks for it several times a second while a run grows)."""
    return next((m for m in reversed(events_of(source).get(rank, ())) if _matches(m, kind, match)), None)


def first_message(source: Source, rank: int, kind: Msg | str, /, **match: Any) -> Message | None:
    """The first such message (a rank's hello), or None: read from the start, it stops there."""
    return next((m for m in events_of(source).get(rank, ()) if _matches(m, kind, match)), None)


def given(**fields: Any) -> dict[str, Any]:
    """The fields whose value is not None: the filters a caller was given, for ``messages``."""
    return {k: v for k, v in fields.items() if v is not None}


def _matches(msg: Message, kind: Msg | str, match: Mapping[str, Any]) -> bool:
    return msg.get(TYPE) == kind and all(msg.get(k) == v for k, v in match.items())
