"""The messages between the ranks and the kernel, as code: one name for each type.

Every message is a JSON object. ``TYPE`` (``"t"``) names its type, one of ``Msg``; the rank
adds ``TIME`` (``"time"``, its ``time.time()``) and the server adds ``"rank"``. A ``Msg`` is a
``str``, so ``msg[TYPE] == Msg.HELLO`` holds for a message read back from JSON, and a
message written with ``Msg.HELLO`` is plain ``"hello"`` on the wire.

``message(Msg.X, **payload)`` (``stamped`` adds the sender's time) is the one place a message is
put together: no other code writes the type key. What each type carries is declared below as a
``TypedDict`` (``PAYLOADS``); tests/test_layout.py checks every call that sends one against it.

``Status`` (a rank's state) and ``Outcome`` (why a supervise loop returned) are ``str`` enums
for the same reason: ``state.status == "done"`` holds, and they print as their value.
"""

from __future__ import annotations

import time
from enum import Enum
from typing import Any, TypedDict

TYPE = "t"  # the key of a message's type
TIME = "time"  # the key of the sender's wall-clock time (time.time())


class Msg(str, Enum):
    """Message types. Rank -> kernel unless marked."""

    # every run
    HELLO = "hello"  # rank, local_rank, world_size, pid, host: the bootstrap's first message
    MEM = "mem"  # rss, tensor_bytes (CPU) or allocated, reserved, peak (CUDA): the sampler
    REPORT = "report"  # values: rank.report()
    STEP_START = "step_start"  # i, n inside rank.steps(n)
    STEP = "step"  # i, dt (seconds), n inside rank.steps(n)
    PHASE = "phase"  # name
    LOG = "log"  # text
    ERROR = "error"  # type, message, traceback, lineno: the code raised
    EXIT = "exit"  # code: the code called sys.exit(code)
    DONE = "done"  # result: the code finished
    CLOSED = "closed"  # added by the server when a rank's connection closes
    # trackers (labkit.memtrack, labkit.comm, labkit.timeline) and torch's own, cross-checked
    MEMCAT = "memcat"
    COMM = "comm"
    SPANS = "spans"
    COMMDEBUG = "commdebug"
    FSDPMEMTRACKER = "fsdpmemtracker"
    GPU_TIMING = "gpu_timing"
    OBSERVED = "observed"  # cell, observation: what labkit saw the cell do (labkit.ranks.observe)
    # the run's record (labkit.regress.record): what each cell ran on and issued, what torch lacked
    RANK_ENV = "rank_env"  # torch, cuda, nccl: at the start of each cell (labkit.ranks.recording)
    COMM_TOTAL = "comm_total"  # counts, at_steps, world_size: at the end of each cell (labkit.ranks.recording)
    HOOK_MISSING = "hook_missing"  # hook, api, torch, feature: once per private torch API missing
    # benchmarks/gpu_check.py: the CUDA caching allocator's totals, read against the sampler's
    ALLOCATOR = "allocator"
    # warm ranks
    READY = "ready"  # the process group is up; cells can come
    EXEC = "exec"  # kernel -> rank: cell, code, vars
    CELL_DONE = "cell_done"  # cell, time_end
    CELL_ERROR = "cell_error"  # as ERROR, plus cell
    CUT = "cut"  # kernel -> rank: shut this rank's gloo connections
    STOP = "stop"  # kernel -> rank: leave the loop, exit 0
    # the channel's handshake over TCP: kernel -> rank, before the hello
    CHALLENGE = "challenge"  # nonce
    # an exported script (labkit export): a cell begins; written to the report files only
    CELL = "cell"  # index

    def __str__(self) -> str:  # "hello", not "Msg.HELLO", in f-strings on every Python
        return self.value

    def __repr__(self) -> str:  # 'hello' in a printed list or dict, as the plain string printed before
        return repr(self.value)


class Status(str, Enum):
    """Where one rank stands, as the notebook sees it (``RankState.status``)."""

    STARTING = "starting"  # launched, no hello yet
    RUNNING = "running"  # said hello; the code (or a warm cell) is running
    DONE = "done"  # finished the code (or the cell) without an error
    FAILED = "failed"  # raised, exited non-zero, or ended without a word
    KILLED = "killed"  # ended by a signal nobody of ours sent
    STOPPED = "stopped"  # ended (or interrupted) by us or by torchrun because of another rank

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return repr(self.value)


class Outcome(str, Enum):
    """Why the supervise loop returned: what the group layer then tears down and diagnoses."""

    EXITED = "exited"  # cold: torchrun is gone (all ranks ended, or it stopped them)
    STUCK = "stuck"  # cold: a rank failed and torchrun did not stop the others in time
    DEAD = "dead"  # warm: a rank or torchrun is gone in the middle of a cell
    DONE = "done"  # warm: every rank answered the cell
    FAILED = "failed"  # warm: a rank failed and others are still busy after the grace
    STOPPED = "stopped"  # the Stop button
    TIMEOUT = "timeout"  # past the run's (or cell's) timeout
    INTERRUPTED = "interrupted"  # the kernel's interrupt (KeyboardInterrupt)

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return repr(self.value)


ELAPSED = "elapsed"  # a memory sample's time: seconds since the run started (kernel side)


# -- building a message -------------------------------------------------------------------


def kind_of(kind: Msg | str) -> Msg:
    """``kind`` as a ``Msg``: a plain string that names a declared type is taken (``"hello"``);
    anything else raises a ``ValueError`` that lists the declared types (a new message type is
    declared here, with its payload in ``PAYLOADS``, before anything sends it)."""
    if type(kind) is Msg:  # the common case, without Msg()'s lookup
        return kind
    try:
        return Msg(kind)
    except ValueError:
        known = ", ".join(m.value for m in Msg)
        raise ValueError(
            f"{str(kind)[:40]!r} is not a declared message type (labkit.wire.protocol.Msg: {known})"
        ) from None


def message(kind: Msg, /, **payload: Any) -> dict[str, Any]:
    """The message ``{TYPE: kind, **payload}``: what goes on the wire as one JSON line."""
    return {TYPE: kind, **payload}


def stamped(kind: Msg, /, **payload: Any) -> dict[str, Any]:
    """A message with the sender's wall-clock time (``TIME``) after its type, as a rank sends it."""
    return {TYPE: kind, TIME: time.time(), **payload}


def retyped(msg: dict[str, Any], kind: Msg) -> dict[str, Any]:
    """A copy of ``msg`` as a message of type ``kind`` (a warm cell's end read as a run's end)."""
    return {**msg, TYPE: kind}


# -- what each message carries --------------------------------------------------------------
# total=False: a sender may leave a field out where it has no value (no CUDA, no step yet). The
# trackers' messages also carry the caller's own ``fields`` (``config``, the setting's name).


class Received(TypedDict, total=False):
    rank: int  # added by the kernel's server to every message it receives (never sent by a rank)


class Hello(TypedDict, total=False):
    rank: int
    local_rank: int
    world_size: int
    pid: int
    host: str
    node: str  # the node's name on several nodes, else ""
    token: str  # the proof, on the Unix socket
    auth: str  # the proof, on TCP: HMAC-SHA256(token, nonce)


class Challenge(TypedDict):
    nonce: str


class Mem(TypedDict, total=False):
    rss: int
    tensor_bytes: int  # CPU: bytes of the tensors reachable from the cell (between steps only)
    allocated: int  # CUDA
    reserved: int
    peak: int


class Report(TypedDict):
    values: dict[str, Any]


class _StepsTotal(TypedDict, total=False):
    n: int  # inside rank.steps(n): the loop's n (the dashboard shows i/n and the time left)


class StepStart(_StepsTotal):
    i: int


class Step(_StepsTotal):
    i: int
    dt: float  # seconds


class Phase(TypedDict):
    name: str


class Log(TypedDict):
    text: str


class Error(TypedDict, total=False):
    type: str  # the exception's class name
    message: str
    traceback: str
    lineno: int | None  # the cell's line
    step: int  # the steps this rank finished before it raised
    cell: int  # CELL_ERROR: the warm cell


class Exit(TypedDict):
    code: int
    step: int


class Done(TypedDict):
    result: Any
    time_end: float


class Closed(TypedDict):
    rank: int


class MemCat(TypedDict, total=False):
    step: int
    phase: str  # one of labkit.wire.records.PHASES
    device: str
    categories: dict[str, int]  # labkit.wire.records.CATEGORIES -> bytes
    by_device: dict[str, dict[str, int]]
    peak: dict[str, int]
    stage: str  # the peak's: where in the step it was reached
    config: str  # the caller's: which setting (labkit.testing's jobs), and on what
    model: str
    world_size: int


class Comm(TypedDict, total=False):
    step: int | None
    counts: dict[str, dict[str, Any]]  # kind -> calls, bytes, wire_bytes
    world_size: int
    calls: list[dict[str, Any]]
    config: str
    padded: int


class Spans(TypedDict, total=False):
    step: int | None
    start: float
    end: float
    spans: list[Any]  # labkit.wire.records.Span
    flavor: str  # fsdp1, fsdp2, ddp, plain
    world_size: int
    device: str
    unit_bytes: dict[str, float]
    units: list[str]
    strategy: str | None
    backward_prefetch: str | None
    forward_prefetch: bool
    limit_all_gathers: bool
    padded_units: dict[str, int]
    simulated: bool  # labkit.simulate's result, drawn as a run
    config: str


class CommDebug(TypedDict):
    config: str
    commdebugmode: dict[str, int]
    labkit: dict[str, int]


class FsdpMemTracker(TypedDict):
    config: str
    after_backward: dict[str, Any]
    peak: dict[str, Any]


class GpuTiming(TypedDict):
    plain: list[float]
    synced: list[float]
    synchronize: bool


class Observed(TypedDict):
    cell: int | None  # the warm cell; None for a cold cell
    observation: dict[str, Any]  # ok, trace, dropped, globals, seconds (labkit.ranks.observe)


class RankEnv(TypedDict):
    torch: str
    cuda: str | None  # torch.version.cuda: None on a CPU build
    nccl: str | None  # "2.21.5" where CUDA is there, else None


class CommCounts(TypedDict):
    calls: int
    bytes: int


class CommAtStep(TypedDict):
    step: int
    counts: dict[str, CommCounts]  # the whole cell's totals so far, after this step


class CommTotal(TypedDict):
    counts: dict[str, CommCounts]  # collective kind -> calls, payload bytes over the whole cell
    at_steps: list[CommAtStep]
    world_size: int


class HookMissing(TypedDict):
    hook: str  # labkit.ranks.torch_hooks.BY_ID's key
    api: str  # the private torch name that is not there
    torch: str  # this torch's version
    feature: str  # the i18n key of what labkit cannot show without it


class Allocator(TypedDict):
    allocated: int
    reserved: int
    max_allocated: int
    max_reserved: int


class Exec(TypedDict):
    cell: int
    code: str
    vars: str | None  # the pickled --vars file in the run folder


class CellDone(TypedDict):
    cell: int
    time_end: float


class Cell(TypedDict):
    index: int


class Empty(TypedDict):
    pass


PAYLOADS: dict[Msg, type] = {
    Msg.HELLO: Hello,
    Msg.MEM: Mem,
    Msg.REPORT: Report,
    Msg.STEP_START: StepStart,
    Msg.STEP: Step,
    Msg.PHASE: Phase,
    Msg.LOG: Log,
    Msg.ERROR: Error,
    Msg.EXIT: Exit,
    Msg.DONE: Done,
    Msg.CLOSED: Closed,
    Msg.MEMCAT: MemCat,
    Msg.COMM: Comm,
    Msg.SPANS: Spans,
    Msg.COMMDEBUG: CommDebug,
    Msg.FSDPMEMTRACKER: FsdpMemTracker,
    Msg.GPU_TIMING: GpuTiming,
    Msg.OBSERVED: Observed,
    Msg.RANK_ENV: RankEnv,
    Msg.COMM_TOTAL: CommTotal,
    Msg.HOOK_MISSING: HookMissing,
    Msg.ALLOCATOR: Allocator,
    Msg.READY: Empty,
    Msg.EXEC: Exec,
    Msg.CELL_DONE: CellDone,
    Msg.CELL_ERROR: Error,
    Msg.CUT: Empty,
    Msg.STOP: Empty,
    Msg.CHALLENGE: Challenge,
    Msg.CELL: Cell,
}
