"""The job a rank is given: ``job.json`` in the run folder, written by the kernel (``labkit.launch.group``)
before torchrun starts, read by every rank's bootstrap (``labkit.ranks.bootstrap``).

It is a declared record (``labkit.wire.record``: ``"kind": "job"`` and its schema, every field
checked as the bootstrap reads it); only the ranks of the same run read it, written moments before
by the same labkit. The code itself does not travel in it: a cell's source is a file next to it
(``source_file``), a function is ``function.pkl``, the ``--vars`` values are ``vars.pkl``
(``vars_file``, relative to the run folder). Warm ranks (``mode="serve"``) get their cells later,
over the channel.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import ClassVar

from labkit.wire.record import Record, Word

JOB_FILE = "job.json"
FUNCTION_FILE = "function.pkl"  # mode "function": the pickled (function, args, kwargs)


class JobMode(Word):
    """What a rank runs, and how its code reaches it. A ``str``: ``job.mode == "code"`` holds, plain ``"code"`` in JSON."""

    CODE = "code"  # a cell's source, in a file
    PATH = "path"  # a .py file
    FUNCTION = "function"  # a pickled callable
    SERVE = "serve"  # warm ranks: the cells come later, over the channel


MODES = JobMode.choices()


@dataclass(frozen=True)
class JobSpec(Record):
    """What every rank of one run executes, and how: a declared record (``labkit.wire.record``), so a
    ``job.json`` that is not one fails in the bootstrap with the field named."""

    KIND: ClassVar[str] = "job"

    mode: JobMode  # the plain string of one is taken
    backend: str  # gloo or nccl: the process group labkit makes for the code
    pg_timeout: float  # seconds a collective may wait before it fails
    sample_interval: float = 0.2  # seconds between memory samples
    source_file: str | None = None  # code, path: the file that holds the source (absolute)
    vars_file: str | None = None  # the pickled --vars, relative to the run folder

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"job mode must be one of {MODES}, got {self.mode!r}")
        object.__setattr__(self, "mode", JobMode(self.mode))  # frozen: the one conversion, at construction
        if self.mode in (JobMode.CODE, JobMode.PATH) and not self.source_file:
            raise ValueError(f"a {self.mode} job names its source_file")

    def write(self, run_dir: str) -> None:
        with open(os.path.join(run_dir, JOB_FILE), "w") as f:
            f.write(self.to_json())

    @classmethod
    def read(cls, run_dir: str) -> JobSpec:
        with open(os.path.join(run_dir, JOB_FILE)) as f:
            return cls.from_json(f.read())
