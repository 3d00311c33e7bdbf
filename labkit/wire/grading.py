"""The records that cross grading's process boundaries, declared once (the common form of ``labkit.wire.record``).

    notebook kernel ──check record (in the notebook's outputs)──┐
    runner (sandbox 1) ──frames over a pipe──► grader ◄── results over a pipe ── judge (sandbox 2)
                                                 └──── tasks over a pipe ────►    └ one forked child a task

Everything that comes from a sandbox is the student's: the grader reads it with these classes, which
refuse a record that is not what it declares (``RecordError``, naming the field), and judges it; it
never believes a status or a verdict written there. Nothing here imports more than the base.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from labkit.wire.record import Record, RecordError, Word

__all__ = [
    "CheckRecord", "Claim", "Frame", "FrameKind", "JudgeResult", "JudgeTask", "NotebookMeta", "NotebookStatus",
    "QuestionKind", "QuestionStatus", "RecordError", "RunnerStatus", "TaskKind",
]  # fmt: skip


class QuestionKind(Word):
    """How the grader judges a question (``Question.kind``)."""

    SEALED = "sealed"  # multiple choice: the first answer recorded
    RUN = "run"  # an exercise on the ranks: re-run by the grader on ranks of its own
    MODEL = "model"  # a model handed in: its loss, measured by the judge
    FORMULA = "formula"  # a function, compared with the reference at unseen points
    FUNCTION = "function"  # a function tried on probes, each output checked
    VALUE = "value"  # a value, compared with the answer in the check's context


class QuestionStatus(Word):
    """A question's row in a report."""

    CORRECT = "correct"
    WRONG = "wrong"
    UNANSWERED = "unanswered"
    MISSING = "missing"  # its check never ran
    EXTRA = "extra"  # a check of another lesson, or an id the grader does not know: never scored


class NotebookStatus(Word):
    """How a submission's run ended, as the grader saw it."""

    OK = "ok"
    ERRORS = "errors"  # a cell raised; the cells after it ran
    TIMEOUT = "timeout"
    DIED = "died"  # the kernel died
    FAILED = "failed"  # the kernel did not start, or papermill could not run the notebook
    UNREADABLE = "unreadable"  # not a notebook
    REFUSED = "refused"  # not a regular file inside the submissions folder (a link, a FIFO, ...)
    GRADER_ERROR = "grader_error"  # the grader itself failed on this notebook: 0 points, the run goes on


@dataclass(frozen=True)
class RunnerStatus(Record):
    """How papermill's run ended inside the sandbox (the runner's first frame)."""

    KIND: ClassVar[str] = "runner_status"
    status: NotebookStatus
    message: str = ""


class FrameKind(Word):
    STATUS = "status"  # a RunnerStatus
    NOTEBOOK = "notebook"  # the executed notebook
    KERNEL_LOG = "kernel_log"  # the kernel's output (its end, when long)


@dataclass(frozen=True)
class Frame(Record):
    """The header of one piece of what the runner sends back: ``size`` bytes follow it."""

    KIND: ClassVar[str] = "frame"
    what: FrameKind
    size: int


@dataclass(frozen=True)
class NotebookMeta(Record):
    """``metadata.labkit`` of a notebook, as far as the grader reads it: anything else there is ignored."""

    KIND: ClassVar[str] = "notebook_meta"
    lesson: str | None = None
    lang: str | None = None
    edition: str | None = None


@dataclass(frozen=True)
class Claim(Record):
    """A check's report: what the student handed in for one question (never a status). Judged by the grader."""

    KIND: ClassVar[str] = "claim"
    question: QuestionKind  # the kind of question it answers (a claim for another kind scores nothing)
    unanswered: bool = False
    function: dict[str, Any] | None = None  # formula, function: the snapshot (labkit.grading.snapshot)
    not_function: str | None = None  # what was handed in instead of a function
    run: str | None = None  # run: the run's id (the notebook's own feedback only)
    value: Any = None  # sealed, value: the value, as plain JSON
    context_run: str | None = None
    context: dict[str, Any] = field(default_factory=dict)  # the check's keywords, encoded


@dataclass(frozen=True)
class CheckRecord(Record):
    """What one ``labkit.check`` call leaves in the notebook's outputs (``checks.MIME``). The grader reads
    only ``id``, ``lang`` and the report; the status and points are what the notebook showed."""

    KIND: ClassVar[str] = "check"
    id: str
    status: str = ""
    lang: str | None = None
    feedback: str = ""
    report: Claim | None = None


class TaskKind(Word):
    CALLS = "calls"  # call a function handed in at the given arguments
    LOAD = "load"  # call a loader handed in on a checkpoint the grader made, keep the weights it returned
    MODEL_LOSS = "model_loss"  # the loss of those weights against the checkpoint's own, from the same seed
    RANKS = "ranks"  # re-run an exercise on the grader's own ranks (labkit.grading.rerun)


@dataclass(frozen=True)
class JudgeTask(Record):
    """One task of the judge process, sent to it over a pipe and handed to one forked child."""

    KIND: ClassVar[str] = "judge_task"
    key: str
    does: TaskKind
    function: dict[str, Any] | None = None  # CALLS: the snapshot
    calls: list[dict[str, Any]] = field(default_factory=list)  # CALLS: keyword arguments, one dict a call
    state: str | None = None  # LOAD, MODEL_LOSS: the weights the loader returned, a path inside the judge's sandbox
    config: dict[str, Any] | None = None  # LOAD, MODEL_LOSS: the model's shape
    batch: list[int] = field(default_factory=list)  # MODEL_LOSS: synthetic_batch(cfg, *batch)
    seed: int = 0  # LOAD, MODEL_LOSS: the checkpoint's weights
    ranks: dict[str, Any] | None = None  # RANKS: the re-run's task (labkit.grading.rerun.task)
    seconds: float = 60.0  # the child's time


@dataclass(frozen=True)
class JudgeResult(Record):
    """What one child returned: the values of its calls (``{"$error": ...}`` for a call that raised)."""

    KIND: ClassVar[str] = "judge_result"
    key: str
    values: list[Any]
    seconds: float = 0.0
    how: str = ""  # when the child ended without a result: its exit status, or the time it ran past
