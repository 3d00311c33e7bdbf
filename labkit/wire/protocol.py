"""The messages between the ranks and the kernel, as code: one name for each type.

Every message is a JSON object. ``TYPE`` (``"t"``) names its type, one of ``Msg``; the rank
adds ``TIME`` (``"time"``, its ``time.time()``) and the server adds ``"rank"``. A ``Msg`` is a
``str``, so ``msg[TYPE] == Msg.HELLO`` holds for a message read back from JSON, and a
message written with ``Msg.HELLO`` is plain ``"hello"`` on the wire.

``Status`` (a rank's state) and ``Outcome`` (why a supervise loop returned) are ``str`` enums
for the same reason: ``state.status == "done"`` holds, and they print as their value.
"""

from __future__ import annotations

from enum import Enum

TYPE = "t"  # the key of a message's type
TIME = "time"  # the key of the sender's wall-clock time (time.time())


class Msg(str, Enum):
    """Message types. Rank -> kernel unless marked."""

    # every run
    HELLO = "hello"  # rank, local_rank, world_size, pid, host: the bootstrap's first message
    MEM = "mem"  # rss, tensor_bytes (CPU) or allocated, reserved, peak (CUDA): the sampler
    REPORT = "report"  # values: rank.report()
    STEP_START = "step_start"  # i
    STEP = "step"  # i, dt (seconds)
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
    # warm ranks
    READY = "ready"  # the process group is up; cells can come
    EXEC = "exec"  # kernel -> rank: cell, code, vars
    CELL_DONE = "cell_done"  # cell, time_end
    CELL_ERROR = "cell_error"  # as ERROR, plus cell
    CUT = "cut"  # kernel -> rank: shut this rank's gloo connections
    STOP = "stop"  # kernel -> rank: leave the loop, exit 0

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
