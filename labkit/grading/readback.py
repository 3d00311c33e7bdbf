"""What comes back from a sandbox, read as data: the runner's frames off a pipe, and the executed notebook's
check records, errors and metadata.

Everything here was written by the student's side (the runner shares its sandbox with the kernel), so
nothing is believed and nothing is followed: a pipe is drained to a cap while the sandbox runs, a frame
or a record that is not what it declares (``labkit.wire.grading``) ends the reading or is left out, a
value of the wrong type in the metadata counts as absent. Judging what was read is ``labkit.grading.judge``'s.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

import nbformat

from labkit.grading.build import check_ids, lesson_from_ids
from labkit.grading.checks import MIME
from labkit.grading.judge import student_cells
from labkit.wire.grading import CheckRecord, Frame, FrameKind, NotebookMeta, RecordError, RunnerStatus

MAX_RECORDS = 5000  # check records read from one notebook


class Drain:
    """Read a pipe to its end (or ``cap`` bytes) in a thread, while the sandbox runs: the other end blocks
    when nobody reads, and what the sandbox writes is never more than ``cap`` in the grader's memory."""

    def __init__(self, fd: int, cap: int) -> None:
        self.fd, self.cap, self.data, self.cut = fd, cap, bytearray(), False
        self.thread = threading.Thread(target=self._read, name="labkit-grade-drain", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with os.fdopen(self.fd, "rb", buffering=0) as pipe:
            while True:
                chunk = pipe.read(1 << 20)
                if not chunk:
                    return
                if len(self.data) + len(chunk) > self.cap:
                    self.cut = True
                    return  # closing our end: the writer gets EPIPE
                self.data += chunk

    def result(self, timeout: float = 30) -> bytes:
        self.thread.join(timeout)
        return bytes(self.data)


@dataclass
class Returned:
    """What a runner sent back (``labkit.grading.runner.frames``), each part checked and capped."""

    status: RunnerStatus | None = None
    notebook: bytes | None = None
    kernel_log: bytes = b""


def read_frames(data: bytes) -> Returned:
    """The frames in ``data``, up to the first that is not one (the rest is ignored, never an error)."""
    got, at = Returned(), 0
    while at < len(data):
        end = data.find(b"\n", at, at + 4096)
        if end < 0:
            break
        try:
            frame = Frame.from_json(data[at:end])
        except RecordError:
            break
        body, at = data[end + 1 : end + 1 + frame.size], end + 1 + frame.size
        if frame.size < 0 or len(body) != frame.size:
            break
        if frame.what is FrameKind.STATUS and got.status is None:
            try:
                got.status = RunnerStatus.from_json(body)
            except RecordError:
                break
        elif frame.what is FrameKind.NOTEBOOK and got.notebook is None:
            got.notebook = body
        elif frame.what is FrameKind.KERNEL_LOG:
            got.kernel_log = body
    return got


def _outputs(cell: Any) -> list[dict[str, Any]]:
    outputs = cell.get("outputs")
    return [o for o in outputs if isinstance(o, dict)] if isinstance(outputs, list) else []


def check_records(nb: nbformat.NotebookNode) -> list[tuple[int, dict[str, Any]]]:
    """Every check record in the outputs, with its cell index, in execution order; a record that is not
    one (``CheckRecord``: a wrong type anywhere in it) is left out, as if it had been printed by hand."""
    found = []
    for i, cell in student_cells(nb):
        for out in _outputs(cell):
            data = out.get("data")
            rec = data.get(MIME) if isinstance(data, dict) else None
            if not isinstance(rec, dict):
                continue
            meta = out.get("metadata")
            extra = meta.get(MIME) if isinstance(meta, dict) else None
            report = extra.get("report") if isinstance(extra, dict) else None  # only the metadata carries it
            try:  # the report is checked where it is judged (judge.claim_of): a bad one scores 0 there
                record = CheckRecord.from_dict({k: v for k, v in rec.items() if k != "report"})
            except RecordError:
                continue
            plain = {**record.to_dict(), "report": report if isinstance(report, dict) else None}
            found.append((i, plain))
            if len(found) >= MAX_RECORDS:
                return found
    return found


def cell_errors(nb: nbformat.NotebookNode) -> list[dict[str, Any]]:
    return [
        {"cell": i, "ename": str(out.get("ename", ""))[:200], "evalue": str(out.get("evalue", ""))[:500]}
        for i, cell in student_cells(nb)
        for out in _outputs(cell)
        if out.get("output_type") == "error"
    ]


def metadata(nb: nbformat.NotebookNode) -> NotebookMeta:
    """The notebook's ``metadata.labkit``, checked: a value of the wrong type counts as absent."""
    raw = nb.get("metadata", {}).get("labkit") if isinstance(nb.get("metadata"), dict) else None
    if not isinstance(raw, dict):
        return NotebookMeta()
    fields = {}
    for name in ("lesson", "lang", "edition"):
        value = raw.get(name)
        if isinstance(value, str) and len(value) < 100:
            fields[name] = value
    if fields.get("lang") not in (None, "en", "ro"):
        fields.pop("lang")
    return NotebookMeta(**fields)


def lesson_of(nb: nbformat.NotebookNode, records: list[tuple[int, dict[str, Any]]]) -> str | None:
    """The metadata's lesson, else the lesson most of the checks belong to."""
    lesson = metadata(nb).lesson
    if lesson:
        return lesson
    return lesson_from_ids([r["id"] for _, r in records]) or lesson_from_ids(check_ids(nb))
