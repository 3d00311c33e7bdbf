"""``Run``: what a launch returns to the notebook, filled from the ranks' messages.

Everything here is measured on the run: values the ranks reported, memory
samples, step times, each rank's output. Nothing is derived from a guess.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from labkit.i18n import catalog, t

catalog(
    {
        "run.status.starting": {"en": "starting", "ro": "pornește"},
        "run.status.running": {"en": "running", "ro": "rulează"},
        "run.status.done": {"en": "done", "ro": "gata"},
        "run.status.failed": {"en": "failed", "ro": "eșuat"},
        "run.status.killed": {"en": "killed", "ro": "omorât"},
        "run.status.stopped": {"en": "stopped", "ro": "oprit"},
        "run.summary.head": {
            "en": "Run {run_id}: {nproc} ranks, backend {backend}, {wall:.1f} s, {state}",
            "ro": "Rularea {run_id}: {nproc} ranguri, backend {backend}, {wall:.1f} s, {state}",
        },
        "run.summary.ok": {"en": "all ranks finished", "ro": "toate rangurile au terminat"},
        "run.summary.failed": {"en": "FAILED", "ro": "EȘUAT"},
        "run.col.rank": {"en": "rank", "ro": "rang"},
        "run.col.status": {"en": "status", "ro": "stare"},
        "run.col.mem": {"en": "memory now", "ro": "memorie acum"},
        "run.col.peak": {"en": "peak", "ro": "vârf"},
        "run.col.step": {"en": "last step", "ro": "ultimul pas"},
        "run.col.steps": {"en": "steps", "ro": "pași"},
        "run.col.log": {"en": "last line", "ro": "ultima linie"},
        "run.col.comm": {"en": "sent/step", "ro": "trimis/pas"},
        "run.col.values": {"en": "values", "ro": "valori"},
        "run.plot.title": {"en": "Memory per rank", "ro": "Memoria fiecărui rang"},
        "run.plot.time": {"en": "time since start (s)", "ro": "timp de la pornire (s)"},
        "run.plot.mem": {"en": "MiB", "ro": "MiB"},
        "run.plot.steps": {"en": "Step time per rank", "ro": "Durata pasului, pe rang"},
        "run.plot.step": {"en": "step", "ro": "pas"},
        "run.plot.seconds": {"en": "seconds", "ro": "secunde"},
        "run.mem.tensor": {"en": "tensors", "ro": "tensori"},
        "run.mem.cuda": {"en": "CUDA allocated", "ro": "CUDA alocat"},
        "run.mem.rss": {"en": "process RSS", "ro": "RSS proces"},
        "run.log.truncated": {
            "en": "[{n} earlier lines not shown; the whole log is in {path}]",
            "ro": "[{n} linii anterioare nu sunt afișate; jurnalul complet este în {path}]",
        },
    }
)

LOG_TAIL_LINES = 400  # lines of each stream kept in memory and shown; the file keeps all
LOG_LINE_CHARS = 2000  # a longer line is cut when shown (the file keeps it whole)


class RankLog:
    """One rank's stdout and stderr: the tail in memory, the whole on disk."""

    def __init__(self, rank: int, run_dir: str) -> None:
        self.rank = rank
        self.stdout_path = os.path.join(run_dir, f"rank{rank}.out")
        self.stderr_path = os.path.join(run_dir, f"rank{rank}.err")
        self.streams: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self.dropped = {"stdout": 0, "stderr": 0}
        self._offset = {"stdout": 0, "stderr": 0}
        self._start = {"stdout": 0, "stderr": 0}
        self._partial = {"stdout": b"", "stderr": b""}
        self.last_line = ""

    def start_at_end(self) -> None:
        """Read only what is written from now on: a warm cell's log holds that cell's output alone."""
        for name, path in (("stdout", self.stdout_path), ("stderr", self.stderr_path)):
            try:
                self._offset[name] = self._start[name] = os.path.getsize(path)
            except FileNotFoundError:
                pass

    def poll(self, max_bytes: int = 1 << 20) -> bool:
        """Read what was appended to the files since the last call; True if anything was."""
        grew = False
        for name, path in (("stdout", self.stdout_path), ("stderr", self.stderr_path)):
            try:
                with open(path, "rb") as f:
                    f.seek(self._offset[name])
                    data = f.read(max_bytes)
            except FileNotFoundError:
                continue
            if not data:
                continue
            grew = True
            self._offset[name] += len(data)
            data = self._partial[name] + data
            lines = data.split(b"\n")
            self._partial[name] = lines.pop()
            if len(self._partial[name]) > LOG_LINE_CHARS:  # a huge line with no newline yet
                lines.append(self._partial[name])
                self._partial[name] = b""
            self._add(name, lines)
        return grew

    def flush(self) -> None:
        while self.poll():
            pass
        for name in self.streams:
            if self._partial[name]:
                self._add(name, [self._partial[name]])
                self._partial[name] = b""

    def _add(self, name: str, lines: list[bytes]) -> None:
        # bytes -> text: invalid UTF-8 becomes U+FFFD; control characters are dropped
        text = [_clean(b.decode("utf-8", errors="replace")[:LOG_LINE_CHARS]) for b in lines]
        if text:
            self.last_line = next((s for s in reversed(text) if s.strip()), self.last_line)
        buf = self.streams[name]
        buf.extend(text)
        if len(buf) > LOG_TAIL_LINES:
            extra = len(buf) - LOG_TAIL_LINES
            del buf[:extra]
            self.dropped[name] += extra

    def text(self, name: str) -> str:
        lines = self.streams[name]
        head = []
        if self.dropped[name]:
            path = self.stdout_path if name == "stdout" else self.stderr_path
            head = [t("run.log.truncated", n=self.dropped[name], path=path)]
        return "\n".join(head + lines)

    @property
    def stdout(self) -> str:
        return self.text("stdout")

    @property
    def stderr(self) -> str:
        return self.text("stderr")

    def read_all(self, name: str = "stdout") -> str:
        """The whole stream from disk (may be large)."""
        path = self.stdout_path if name == "stdout" else self.stderr_path
        with open(path, "rb") as f:
            f.seek(self._start[name])
            return f.read().decode("utf-8", errors="replace")

    def __str__(self) -> str:
        return self.stdout + ("\n" + self.stderr if self.streams["stderr"] or self.dropped["stderr"] else "")

    def __repr__(self) -> str:
        return f"<RankLog rank {self.rank}: {len(self.streams['stdout'])} stdout, {len(self.streams['stderr'])} stderr lines>"


def _clean(s: str) -> str:
    return "".join(ch for ch in s if ch >= " " or ch == "\t")


@dataclass
class RankState:
    rank: int
    status: str = "starting"
    pid: int | None = None
    exit_code: int | None = None
    signal: str | None = None
    error: dict[str, Any] | None = None
    last_step: int | None = None
    last_step_time: float | None = None
    last_log: str = ""
    last_seen: float = field(default_factory=time.time)
    connected: bool = False


class Run:
    """The result of ``%%torchrun`` / ``labkit.torchrun``, per rank."""

    def __init__(self, run_id: str, nproc: int, backend: str, run_dir: str) -> None:
        self.run_id = run_id
        self.nproc = nproc
        self.backend = backend
        self.run_dir = run_dir
        self.ranks = {r: RankState(r) for r in range(nproc)}
        self.events: dict[int, list[dict[str, Any]]] = {r: [] for r in range(nproc)}
        self.values: dict[int, dict[str, Any]] = {r: {} for r in range(nproc)}
        self.results: dict[int, Any] = {}
        self.memory: dict[int, list[dict[str, Any]]] = {r: [] for r in range(nproc)}
        self.step_times: dict[int, list[float]] = {r: [] for r in range(nproc)}
        self.logs = {r: RankLog(r, run_dir) for r in range(nproc)}
        self.started = time.time()
        self.ended: float | None = None
        self.error: Exception | None = None
        self.agent_exit_code: int | None = None
        self.rejected_clients: list[str] = []

    # -- filled by the launcher ------------------------------------------

    def ingest(self, msg: dict[str, Any]) -> None:
        r = msg.get("rank")
        if r not in self.ranks:
            return
        state = self.ranks[r]
        state.last_seen = time.time()
        kind = msg.get("t")
        if kind != "mem":  # memory samples live in self.memory; keep events small
            self.events[r].append(msg)
        if kind == "hello":
            state.pid, state.connected, state.status = msg.get("pid"), True, "running"
        elif kind == "mem":
            sample = {k: v for k, v in msg.items() if k not in ("t", "rank", "time")}
            sample["t"] = msg.get("time", time.time()) - self.started
            self.memory[r].append(sample)
        elif kind == "report":
            self.values[r].update(msg.get("values") or {})
        elif kind == "step":
            state.last_step, state.last_step_time = msg.get("i"), msg.get("dt")
            if isinstance(msg.get("dt"), (int, float)):
                self.step_times[r].append(float(msg["dt"]))
        elif kind == "log":
            state.last_log = str(msg.get("text", ""))
        elif kind == "error":
            state.error, state.status = msg, "failed"
            if state.exit_code is None:
                state.exit_code = (
                    1  # what the rank exits with after reporting (torchrun may report only the first failure)
                )
        elif kind == "exit":
            state.exit_code, state.status = int(msg.get("code", 1)), "failed"
        elif kind == "done":
            state.exit_code, state.status = 0, "done"
            if msg.get("result") is not None:
                self.results[r] = msg["result"]
        elif kind == "closed":
            state.connected = False

    def poll_logs(self) -> None:
        for r, log in self.logs.items():
            if log.poll():
                self.ranks[r].last_log = log.last_line

    # -- what the student reads -------------------------------------------

    @property
    def ok(self) -> bool:
        return self.error is None and all(s.exit_code == 0 for s in self.ranks.values())

    @property
    def exit_codes(self) -> dict[int, int | None]:
        return {r: s.exit_code for r, s in self.ranks.items()}

    @property
    def wall_time(self) -> float:
        return (self.ended or time.time()) - self.started

    @property
    def peak_memory(self) -> dict[int, dict[str, int]]:
        """Per rank, the largest value seen of each sampled quantity (bytes)."""
        out: dict[int, dict[str, int]] = {}
        for r, samples in self.memory.items():
            peak: dict[str, int] = {}
            for s in samples:
                for k, v in s.items():
                    if k != "t" and isinstance(v, (int, float)):
                        peak[k] = max(peak.get(k, 0), int(v))
            out[r] = peak
        return out

    def memory_now(self, r: int) -> int | None:
        """The latest sample of the main quantity: CUDA allocated if on GPU, else CPU tensor bytes."""
        if not self.memory[r]:
            return None
        # CPU tensor bytes come only with the samples taken between steps; RSS-only samples in between
        key, _ = self._main_memory_key()
        s = next((s for s in reversed(self.memory[r]) if key in s), self.memory[r][-1])
        return s.get("allocated", s.get("tensor_bytes", s.get("rss")))

    def main_peak(self, r: int) -> int | None:
        p = self.peak_memory[r]
        return p.get("peak", p.get("allocated", p.get("tensor_bytes", p.get("rss"))))

    def last_message(self, r: int, kind: str) -> dict[str, Any] | None:
        """The latest message of one type from rank ``r`` (the dashboard's live panels read these)."""
        return next((m for m in reversed(self.events[r]) if m.get("t") == kind), None)

    def messages(self, kind: str) -> dict[int, list[dict[str, Any]]]:
        """Every message of one type, per rank (e.g. ``run.messages("memcat")``)."""
        return {r: [m for m in ev if m.get("t") == kind] for r, ev in self.events.items()}

    def status_label(self, r: int) -> str:
        s = self.ranks[r]
        label = t(f"run.status.{s.status}")
        if s.status in ("failed", "killed") and s.signal:
            return f"{label} ({s.signal})"
        if s.status == "failed" and s.exit_code not in (None, 0):
            return f"{label} (exit {s.exit_code})"
        return label

    def rows(self) -> list[dict[str, str]]:
        rows = []
        for r, s in self.ranks.items():
            dt = s.last_step_time
            rows.append(
                {
                    "rank": str(r),
                    "status": self.status_label(r),
                    "mem": fmt_bytes(self.memory_now(r)),
                    "peak": fmt_bytes(self.main_peak(r)),
                    "step": "" if dt is None else f"{dt * 1000:.0f} ms (#{s.last_step})",
                    "steps": str(len(self.step_times[r])),
                    "comm": "" if (c := self.last_message(r, "comm")) is None else comm_label(c),
                    "log": s.last_log[-120:],
                }
            )
        return rows

    def summary(self) -> str:
        state = t("run.summary.ok") if self.ok else t("run.summary.failed")
        lines = [
            t(
                "run.summary.head",
                run_id=self.run_id,
                nproc=self.nproc,
                backend=self.backend,
                wall=self.wall_time,
                state=state,
            )
        ]
        cols = ["rank", "status", "mem", "peak", "step", "steps"]
        heads = [t(f"run.col.{c}") for c in cols]
        table = [heads] + [[row[c] for c in cols] for row in self.rows()]
        widths = [max(len(line[i]) for line in table) for i in range(len(cols))]
        for line in table:
            lines.append("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())
        for r, vals in self.values.items():
            if vals:
                shown = ", ".join(f"{k}={_short(v)}" for k, v in list(vals.items())[:8])
                lines.append(f"  {t('run.col.rank')} {r} {t('run.col.values')}: {shown}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    # -- what labkit's in-rank trackers measured (empty when the cell did not use them) --

    def memory_breakdown(self, step: int | None = None, units: str = "MiB") -> Any:
        """Per rank and category (params, grads, optimizer, activations, ...), from ``labkit.memtrack``."""
        from labkit.memory_view import memory_table

        return memory_table(self, step=step, units=units)

    def plot_memory_breakdown(self, step: int | None = None) -> Any:
        from labkit.memory_view import plot_breakdown

        return plot_breakdown(self, step=step)

    def comm(self) -> dict[int, list[Any]]:
        """Per rank, the collectives counted in each step by ``labkit.comm``."""
        from labkit.comm import from_events

        return {r: from_events(ev) for r, ev in self.events.items()}

    def timeline(self, step: int | None = None) -> dict[int, dict[str, Any]]:
        """Per rank, the spans ``labkit.timeline`` recorded for a step (default: the last)."""
        from labkit.timeline import spans_by_rank

        return spans_by_rank(self, step=step)

    def plot_timeline(self, step: int | None = None, **kw: Any) -> Any:
        from labkit.timeline import plot_timeline

        return plot_timeline(self, step=step, **kw)

    def plot(self, ax: Any = None) -> Any:
        """Memory over time for every rank, and step times: one matplotlib figure."""
        import matplotlib.pyplot as plt

        if ax is None:
            fig, (ax_mem, ax_step) = plt.subplots(1, 2, figsize=(10, 3.2), constrained_layout=True)
        else:
            ax_mem, ax_step, fig = ax, None, ax.figure
        key, label = self._main_memory_key()
        for r, samples in self.memory.items():
            xs = [s["t"] for s in samples if key in s]
            ys = [s[key] / 2**20 for s in samples if key in s]
            ax_mem.plot(xs, ys, label=f"{t('run.col.rank')} {r}")
        ax_mem.set_title(f"{t('run.plot.title')} ({label})")
        ax_mem.set_xlabel(t("run.plot.time"))
        ax_mem.set_ylabel(t("run.plot.mem"))
        ax_mem.legend(fontsize="small")
        if ax_step is not None:
            for r, times in self.step_times.items():
                if times:
                    ax_step.plot(range(len(times)), times, marker="o", label=f"{t('run.col.rank')} {r}")
            ax_step.set_title(t("run.plot.steps"))
            ax_step.set_xlabel(t("run.plot.step"))
            ax_step.set_ylabel(t("run.plot.seconds"))
            if any(self.step_times.values()):
                ax_step.legend(fontsize="small")
        plt.close(fig)  # returned, not shown twice by the inline backend
        return fig

    def _main_memory_key(self) -> tuple[str, str]:
        for key, name in (("allocated", "run.mem.cuda"), ("tensor_bytes", "run.mem.tensor")):
            # CPU tensor bytes are read between steps only: a cell without steps has one such
            # sample, no curve, so its curve is the RSS sampled all along
            if any(sum(key in s for s in samples) > 1 for samples in self.memory.values()):
                return key, t(name)
        return "rss", t("run.mem.rss")


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return ""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def comm_label(msg: dict[str, Any]) -> str:
    """A ``comm`` message in a few characters: what this rank sent on the wire, and how many calls."""
    counts = msg.get("counts") or {}
    wire = sum(c.get("wire_bytes", 0) for c in counts.values())
    calls = sum(int(c.get("calls", 0)) for c in counts.values())
    return f"{fmt_bytes(wire)} ({calls})"


def _short(v: Any) -> str:
    s = f"{v:.4g}" if isinstance(v, float) else repr(v)
    return s if len(s) <= 40 else s[:37] + "..."
