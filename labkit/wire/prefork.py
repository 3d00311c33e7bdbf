"""The kernel and its prefork server (``labkit.launch.prefork`` and ``labkit.launch.forkserver``): what
each says to the other over their socket pair, one JSON line a record, declared (``labkit.wire.record``).

    server -> kernel   ForkReady     once the imports are done (ready), or why they failed (error)
    kernel -> server   ForkRequest   fork an agent: its argv, environment, folder, umask, log
    server -> kernel   ForkReply     the agent's pid, or why there is none; with the request's id

Both ends are the same labkit (the kernel starts the server, and replaces it when a file it imported
changes), so a record's form may change with labkit; a line that is not the record expected fails
with a ``RecordError`` that names the field, and the kernel then starts torchrun the usual way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar

from labkit.wire.record import Record

__all__ = ["ForkKind", "ForkReady", "ForkReply", "ForkRequest", "ImportedFile"]


class ForkKind(str, Enum):
    """The ``"kind"`` of each record between the kernel and its prefork server."""

    READY = "prefork_ready"
    REQUEST = "prefork_request"
    REPLY = "prefork_reply"
    FILE = "prefork_file"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class ImportedFile(Record):
    """A file the server imported, as it found it on disk: a change to it makes the server stale."""

    KIND: ClassVar[str] = ForkKind.FILE
    path: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class ForkReady(Record):
    """The server's first line: its imports are done (``ready``), or they failed (``error``)."""

    KIND: ClassVar[str] = ForkKind.READY
    ready: bool
    pid: int | None = None
    threads: int = 0  # the server's threads: the kernel forks from it only with one
    files: list[ImportedFile] = field(default_factory=list)  # labkit's modules and torch's version file
    error: str | None = None  # the traceback of the import that failed


@dataclass(frozen=True)
class ForkRequest(Record):
    """Fork one agent: ``python -m labkit.launch.agent ARGV`` as ``Popen(argv, env=env, cwd=cwd)`` would."""

    KIND: ClassVar[str] = ForkKind.REQUEST
    id: int  # the kernel's count of its requests: an answer to an abandoned one is told apart
    argv: list[str]
    env: dict[str, str]
    cwd: str
    umask: int
    log: str  # the agent's stdout and stderr
    prune: str = ""  # a runs folder whose old run folders the server removes once the agent is on its way


@dataclass(frozen=True)
class ForkReply(Record):
    """The answer to a request: the agent's ``pid``, or the ``error`` that kept it from being forked."""

    KIND: ClassVar[str] = ForkKind.REPLY
    id: int | None  # the request's (None: the request could not be read)
    pid: int | None = None
    error: str | None = None
