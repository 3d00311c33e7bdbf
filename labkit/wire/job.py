"""The job a rank is given: ``job.json`` in the run folder, written by the kernel (``labkit.launch.group``)
before torchrun starts, read by every rank's bootstrap (``labkit.ranks.bootstrap``).

The code itself does not travel in it: a cell's source is a file next to it (``source_file``), a
function is ``function.pkl``, the ``--vars`` values are ``vars.pkl`` (``vars_file``, relative to the
run folder). Warm ranks (``mode="serve"``) get their cells later, over the channel.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from typing import Any

from labkit.wire.setting import Word

JOB_FILE = "job.json"
FUNCTION_FILE = "function.pkl"  # mode "function": the pickled (function, args, kwargs)


class Mode(Word):
    """How a job's code reaches the ranks."""

    CODE = "code"  # a cell, its source in a file
    PATH = "path"  # a .py file
    FUNCTION = "function"  # a pickled callable
    SERVE = "serve"  # warm ranks: the cells come later, over the channel


MODES = Mode.choices()


@dataclass(frozen=True)
class JobSpec:
    """What every rank of one run executes, and how."""

    mode: str  # code (a cell), path (a .py file), function (a pickled callable), serve (warm ranks)
    backend: str  # gloo or nccl: the process group labkit makes for the code
    pg_timeout: float  # seconds a collective may wait before it fails
    sample_interval: float = 0.2  # seconds between memory samples
    source_file: str | None = None  # code, path: the file that holds the source (absolute)
    vars_file: str | None = None  # the pickled --vars, relative to the run folder

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"job mode must be one of {MODES}, got {self.mode!r}")
        object.__setattr__(self, "mode", Mode(self.mode))  # frozen: the string read back becomes the enum, once
        if self.mode in (Mode.CODE, Mode.PATH) and not self.source_file:
            raise ValueError(f"a {self.mode} job names its source_file")

    def to_json(self) -> str:
        """The JSON of ``job.json``: the fields that have a value, in the order above."""
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None})

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        data: dict[str, Any] = json.loads(text)
        return cls(
            mode=data["mode"],
            backend=data["backend"],
            pg_timeout=float(data["pg_timeout"]),
            sample_interval=float(data.get("sample_interval", 0.2)),
            source_file=data.get("source_file"),
            vars_file=data.get("vars_file"),
        )

    def write(self, run_dir: str) -> None:
        with open(os.path.join(run_dir, JOB_FILE), "w") as f:
            f.write(self.to_json())

    @classmethod
    def read(cls, run_dir: str) -> JobSpec:
        with open(os.path.join(run_dir, JOB_FILE)) as f:
            return cls.from_json(f.read())
