"""A run's record as it crosses processes: written by the kernel after each run, read by another.

``labkit.regress.record`` makes it from a ``Run`` (what the ranks measured, see there) and leaves it
in the notebook's output (``MIME``) and in ``$LABKIT_RECORD_DIR``; ``labkit sweep`` gathers it from an
executed notebook into the notebook's record, ``labkit regress compare`` reads those against the
committed ``baselines/``. So a reader meets records written by an older labkit, and its own.

On the wire it is the JSON it always was: the version is the ``"schema"`` key's string
(``"labkit.run/1"``: the kind and the schema of the common form, ``labkit.wire.record``, in one),
and there is no ``"kind"`` key. ``RunRecord.from_dict`` reads that form (and the common one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, ClassVar, TypeVar

from labkit.wire.record import Record, RecordError

__all__ = ["NotebookRecord", "RunKind", "RunRecord", "SchemaNamed"]

S = TypeVar("S", bound="SchemaNamed")


class RunKind(str, Enum):
    """The kinds of the regression records (their ``"schema"`` is ``KIND/SCHEMA``)."""

    RUN = "labkit.run"  # one run (this module)
    NOTEBOOK = "labkit.notebook"  # an executed notebook: its runs and checks (labkit.regress.record)

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class SchemaNamed(Record):
    """A record whose version travels as ``"schema": "KIND/N"`` and which has no ``"kind"`` key: the
    form the regression records had before the common one, kept so that the baselines still load."""

    @classmethod
    def schema_name(cls) -> str:
        return f"{cls.KIND}/{cls.SCHEMA}"

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        del out["kind"]
        out["schema"] = self.schema_name()
        return out

    @classmethod
    def from_dict(cls: type[S], data: object) -> S:
        if isinstance(data, dict) and isinstance(data.get("schema"), str):
            kind, _, version = str(data["schema"]).rpartition("/")
            if not version.isdigit():
                raise RecordError(f"{cls.KIND}: schema {str(data['schema'])[:40]!r} (expected {cls.schema_name()!r})")
            data = {**data, "kind": kind, "schema": int(version)}
        return super().from_dict(data)


@dataclass(frozen=True)
class RunRecord(SchemaNamed):
    """One ended run, per rank where it says so (keys are the ranks as strings, as JSON has them)."""

    KIND: ClassVar[str] = RunKind.RUN
    SCHEMA: ClassVar[int] = 1

    run_id: str
    nproc: int
    backend: str
    ok: bool
    error: dict[str, Any] | None  # type (the error's class), rank
    exit_codes: dict[str, int | None]
    wall_time: float
    steps: dict[str, dict[str, Any]]  # count, times, median
    memory: dict[str, Any]  # sampled_peak, categories_at_peak, phases
    comm: dict[str, Any]  # total (the whole cell's, per kind), steps (labkit.comm's)
    timeline: dict[str, list[dict[str, Any]]]
    values: dict[str, Any]  # rank.report(), per rank
    missing_hooks: list[str]
    fingerprint: dict[str, Any] = field(default_factory=dict)  # where it ran (labkit.regress.fingerprint)


@dataclass(frozen=True)
class NotebookRecord(SchemaNamed):
    """An executed notebook (``labkit sweep`` writes one per notebook and parameter point, ``labkit
    regress compare`` reads them, the ``baselines/`` are such files): its runs by cell, its checks."""

    KIND: ClassVar[str] = RunKind.NOTEBOOK
    SCHEMA: ClassVar[int] = 1

    notebook: str
    lesson: str | None
    lang: str | None
    parameters: dict[str, Any]
    status: str
    seconds: float | None
    fingerprint: dict[str, Any]
    runs: list[dict[str, Any]]  # cell, source, index, record (a RunRecord's dict)
    checks: list[dict[str, Any]]  # id, cell, status
    errors: list[dict[str, Any]]  # cell, ename, evalue
