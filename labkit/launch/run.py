"""``Run``: what a launch returns to the notebook, filled from the ranks' messages.

Everything here is measured on the run: values the ranks reported, memory
samples, step times, each rank's output. Nothing is derived from a guess.
``Run`` holds the data and takes the messages in (``ingest``); how it is shown
(``summary()``, ``plot()``) lives in ``labkit.views.runview``, its output in ``labkit.launch.logs``.
"""

from __future__ import annotations

import time
from typing import Any, cast

from labkit.launch.logs import RankLog
from labkit.wire import records
from labkit.wire.protocol import ELAPSED, TIME, TYPE, Done, Exit, Hello, Log, Msg, Received, Report, Status, Step
from labkit.wire.records import Message, RankState

__all__ = ["RankLog", "RankState", "Run"]


class Run:
    """The result of ``%%torchrun`` / ``labkit.torchrun``, per rank (a ``labkit.wire.records.RunRecord``)."""

    def __init__(self, run_id: str, nproc: int, backend: str, run_dir: str) -> None:
        self.run_id = run_id
        self.nproc = nproc
        self.backend = backend
        self.run_dir = run_dir
        self.ranks = {r: RankState(r) for r in range(nproc)}
        self.events: dict[int, list[Message]] = {r: [] for r in range(nproc)}
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
        self.unkillable: list[int] = []  # processes that outlived SIGKILL (stuck in the kernel?)

    # -- filled by the rank group -----------------------------------------

    def ingest(self, msg: Message) -> None:
        """Take one message in (the server added its ``rank``). Each type's payload is read as
        ``labkit.wire.protocol`` declares it (``Hello``, ``Step``...), so a field read here that the
        type does not declare is a type checker's error, not a silent None. A sender may still leave
        a field out (or an older rank's message lack one): hence ``get`` with what it means then."""
        r = cast(Received, msg).get("rank")
        if r is None or r not in self.ranks:
            return
        state = self.ranks[r]
        state.last_seen = time.time()
        kind = msg.get(TYPE)
        if kind != Msg.MEM:  # memory samples live in self.memory; keep events small
            self.events[r].append(msg)
        if kind == Msg.HELLO:
            state.pid, state.connected, state.status = cast(Hello, msg).get("pid"), True, Status.RUNNING
        elif kind == Msg.MEM:
            sample = {k: v for k, v in msg.items() if k not in (TYPE, "rank", TIME)}
            sample[ELAPSED] = msg.get(TIME, time.time()) - self.started
            self.memory[r].append(sample)
        elif kind == Msg.REPORT:
            self.values[r].update(cast(Report, msg).get("values") or {})
        elif kind == Msg.STEP:
            self._step(state, r, cast(Step, msg))
        elif kind == Msg.LOG:
            state.last_log = str(cast(Log, msg).get("text", ""))
        elif kind == Msg.ERROR:
            state.error, state.status = msg, Status.FAILED
            if state.exit_code is None:
                state.exit_code = 1  # what the rank exits with after reporting (torchrun may report only the first)
        elif kind == Msg.EXIT:
            state.exit_code, state.status = int(cast(Exit, msg).get("code", 1)), Status.FAILED
        elif kind == Msg.DONE:
            state.exit_code, state.status = 0, Status.DONE
            result = cast(Done, msg).get("result")
            if result is not None:
                self.results[r] = result
        elif kind == Msg.CLOSED:
            state.connected = False

    def _step(self, state: RankState, r: int, step: Step) -> None:
        dt = step.get("dt")
        state.last_step, state.last_step_time = step.get("i"), dt
        if isinstance(dt, (int, float)):
            self.step_times[r].append(float(dt))

    def poll_logs(self) -> None:
        for r, log in self.logs.items():
            if log.poll():
                self.ranks[r].last_log = log.last_line

    def flush_logs(self) -> None:
        """Read the rank logs to their end (the ranks flushed): what they hold now is all there is."""
        for log in self.logs.values():
            log.flush()
        self.poll_logs()

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
                    if k != ELAPSED and isinstance(v, (int, float)):
                        peak[k] = max(peak.get(k, 0), int(v))
            out[r] = peak
        return out

    def main_memory_key(self) -> str:
        """The quantity that tells this run's memory: CUDA allocated, CPU tensor bytes, else RSS."""
        for key in ("allocated", "tensor_bytes"):
            # CPU tensor bytes are read between steps only: a cell without steps has one such
            # sample, no curve, so its curve is the RSS sampled all along
            if any(sum(key in s for s in samples) > 1 for samples in self.memory.values()):
                return key
        return "rss"

    def memory_now(self, r: int) -> int | None:
        """The latest sample of the main quantity: CUDA allocated if on GPU, else CPU tensor bytes."""
        if not self.memory[r]:
            return None
        # CPU tensor bytes come only with the samples taken between steps; RSS-only samples in between
        key = self.main_memory_key()
        s = next((s for s in reversed(self.memory[r]) if key in s), self.memory[r][-1])
        return s.get("allocated", s.get("tensor_bytes", s.get("rss")))

    def main_peak(self, r: int) -> int | None:
        p = self.peak_memory[r]
        return p.get("peak", p.get("allocated", p.get("tensor_bytes", p.get("rss"))))

    def last_message(self, r: int, kind: Msg | str) -> Message | None:
        """The latest message of one type from rank ``r`` (the dashboard's live panels read these)."""
        return records.last_message(self, r, kind)

    def messages(self, kind: Msg | str, **match: Any) -> dict[int, list[Message]]:
        """Every message of one type, per rank (e.g. ``run.messages("memcat")``); see ``records.messages``."""
        return records.messages(self, kind, **match)

    def summary(self) -> str:
        from labkit.views import runview

        return runview.summary(self)

    def __repr__(self) -> str:
        return self.summary()

    def plot(self, ax: Any = None) -> Any:
        """Memory over time for every rank, and step times: one matplotlib figure."""
        from labkit.views import runview

        return runview.plot(self, ax)

    # -- what labkit's in-rank trackers measured (empty when the cell did not use them) --

    def memory_breakdown(self, step: int | None = None, units: str = "MiB") -> Any:
        """Per rank and category (params, grads, optimizer, activations, ...), from ``labkit.memtrack``."""
        from labkit.views.memory import memory_table

        return memory_table(self, step=step, units=units)

    def plot_memory_breakdown(self, step: int | None = None) -> Any:
        from labkit.views.memory import plot_breakdown

        return plot_breakdown(self, step=step)

    def comm(self) -> dict[int, list[Any]]:
        """Per rank, the collectives counted in each step by ``labkit.comm``."""
        from labkit.timing.theory import from_events

        return {r: from_events(ev) for r, ev in self.events.items()}

    def timeline(self, step: int | None = None) -> dict[int, dict[str, Any]]:
        """Per rank, the spans ``labkit.timeline`` recorded for a step (default: the last)."""
        from labkit.timing.spans import spans_by_rank

        return spans_by_rank(self, step=step)

    def plot_timeline(self, step: int | None = None, **kw: Any) -> Any:
        from labkit.views.gantt import plot_timeline

        return plot_timeline(self, step=step, **kw)
