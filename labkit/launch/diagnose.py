"""From what the ranks, torchrun's agent log and the channel said, to the typed error a student reads.

Nothing here starts or stops a process: the rank group gathers the evidence (the ``Run``
filled from the channel, the rank logs, ``agent.log``) and this module explains it, so that
recorded evidence gives the same error text without a launch (``tests/test_diagnose.py``).

- ``root_cause``: which rank failed first-hand, and how (raised, exited, killed, vanished).
  A rank that reports an error counts before one that vanished without a word (torchrun
  stops the others once one fails, and the channel may notice both at once).
- ``HINTS``: pattern -> hint rules, matched on the root cause's error (or its stderr).
- ``same_failure``: the one definition of "these ranks failed the same way".
- ``F``-numbers in the tests refer to ``docs/faults.md``.
"""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from labkit.i18n import t
from labkit.wire.errors import LaunchError, RankError, RunError, RunInterrupted, RunStopped, RunTimeout
from labkit.wire.protocol import TIME, Msg, Outcome, Status
from labkit.wire.records import RankState, first_message

if TYPE_CHECKING:
    from labkit.launch.run import Run


# a collective failed because the other side is gone (gloo's wording, and the OS's)
PEER_LOST = re.compile(
    r"Connection closed by peer|Connection reset by peer|remote process exited|Broken pipe|ECONNRESET"
    r"|Failed to recv, got 0 bytes|Connection was likely closed",  # the latter two: c10d's TCPStore client
    re.I,
)
# init_process_group waited for ranks that never wrote their address: "keys: /default_pg/0//cpu//0/3"
STORE_WAIT = re.compile(r"DistStoreError: wait timeout after \d+ms, keys: (.+)")
# a collective failed this way: the group is broken, or the ranks are out of step
BROKEN = re.compile(PEER_LOST.pattern + r"|Timed out waiting|timeout caused pair closure|ProcessGroup.*abort", re.I)


@dataclass(frozen=True)
class Hint:
    name: str
    pattern: re.Pattern[str]
    key: str  # the catalog key of the hint's text


# first match wins; matched on the error's type, message and traceback (or the rank's stderr)
HINTS = (
    Hint(
        "cuda_oom",
        re.compile(r"OutOfMemoryError|CUDA out of memory|CUDA error: out of memory"),
        "launch.diag.hint.cuda_oom",
    ),
    Hint(
        "nccl_timeout",
        re.compile(r"Watchdog caught collective operation timeout|NCCL.*(timed out|Timeout)", re.I),
        "launch.diag.hint.nccl_timeout",
    ),
    Hint("port_in_use", re.compile(r"Address already in use|EADDRINUSE|\[Errno 98\]"), "launch.diag.hint.port_in_use"),
    Hint("open_files", re.compile(r"Too many open files|EMFILE|\[Errno 24\]"), "launch.diag.hint.open_files"),
    Hint("never_joined", STORE_WAIT, "launch.diag.hint.never_joined"),
    Hint("peer_lost", PEER_LOST, "launch.diag.hint.peer_lost"),
)
SIGNAL_HINTS = {"SIGKILL": "launch.hint.sigkill", "SIGSEGV": "launch.hint.sigsegv"}


def hint_for(text: str) -> str:
    """The first rule whose pattern is in ``text``, as its hint; "" if none."""
    rule = next((h for h in HINTS if h.pattern.search(text)), None)
    return t(rule.key) if rule else ""


def waited_for(error: dict[str, Any] | None) -> list[int]:
    """The ranks a store wait in init_process_group was waiting for (the last number of each key)."""
    m = STORE_WAIT.search(f"{(error or {}).get('type', '')}: {(error or {}).get('message', '')}")
    if not m:
        return []
    return sorted({int(k) for k in re.findall(r"/(\d+)(?=,|\s|$)", m.group(1))})


def same_failure(a: RankState, b: RankState) -> bool:
    """Two ranks failed the same way.

    Every rank runs the same cell, so the same exception type raised at the same cell line is
    one bug seen on several ranks, even when its message differs: messages often name the rank
    or its shard ("bad input on rank 1"). Comparing messages would blame the first rank for the
    others' identical failure. Without a cell line (raised outside the cell) the message is the
    only evidence left, so it is compared then. Ranks that did not raise: the same exit code
    and signal.
    """
    if a.error and b.error:
        if a.error.get("type") != b.error.get("type"):
            return False
        if a.error.get("lineno") is None and b.error.get("lineno") is None:
            return a.error.get("message") == b.error.get("message")
        return a.error.get("lineno") == b.error.get("lineno")
    return not a.error and not b.error and a.exit_code == b.exit_code and a.signal == b.signal


# -- torchrun's agent log -------------------------------------------------------------------


def agent_exit_codes(text: str) -> dict[int, int]:
    """torchrun's failure report lists failed ranks' exit codes (``labkit.launch.agent`` adds the rest); read them."""
    codes: dict[int, int] = {}
    for m in re.finditer(r"rank\s*:\s*(\d+)\s*\(local_rank[^\n]*\n\s*exitcode\s*:\s*(-?\d+)", text):
        codes[int(m.group(1))] = int(m.group(2))
    # labkit.launch.agent adds the ranks torchrun leaves out (one node: the local rank is the rank)
    for m in re.finditer(r"^labkit: local_rank (\d+) exitcode (-?\d+)$", text, re.M):
        codes.setdefault(int(m.group(1)), int(m.group(2)))
    return codes


def agent_stops(text: str) -> dict[int, str]:
    """PIDs torchrun sent a signal to while stopping the other ranks, with the signal's name."""
    found = re.finditer(
        r"(?:Terminating|Closing) process (\d+) via signal (SIG[A-Z]+)|Sending process (\d+) closing signal (SIG[A-Z]+)",
        text,
    )
    return {int(m.group(1) or m.group(3)): m.group(2) or m.group(4) for m in found}


def signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def read_exit_codes(run: Run, agent_log: str) -> None:
    """Fill in the exit codes torchrun reported, and the signal that ended a killed rank."""
    codes = agent_exit_codes(agent_log)
    for r, state in run.ranks.items():
        if state.exit_code is None and r in codes:
            state.exit_code = codes[r]
        if state.exit_code is not None and state.exit_code < 0:
            state.signal = signal_name(-state.exit_code)
            if state.status not in (Status.FAILED, Status.DONE):
                state.status = Status.KILLED


def mark_stopped(run: Run) -> None:
    for s in run.ranks.values():
        if s.status in (Status.STARTING, Status.RUNNING, Status.KILLED) and s.exit_code != 0:
            s.status = Status.STOPPED


# -- where a hung rank is ------------------------------------------------------------------


def stuck_at(stderr_lines: list[str], cell_lines: list[str] = (), cell_name: str = "<cell>") -> list[str]:
    """From a faulthandler dump, the innermost frames of the main thread: where a rank hangs."""
    start = max((i for i, x in enumerate(stderr_lines) if x.startswith("Current thread")), default=None)
    if start is None:
        return []
    frames = []
    for x in stderr_lines[start + 1 :]:
        m = re.match(r'\s+File "(.+)", line (\d+) in (.+)', x)
        if not m:
            break
        name, line, func = m.group(1), int(m.group(2)), m.group(3)
        if name == cell_name and 0 < line <= len(cell_lines):
            frames.append(f"cell line {line}: {cell_lines[line - 1].strip()}")
        elif "labkit" not in name and "runpy" not in name:
            frames.append(f"{os.path.basename(name)}:{line} {func}")
    return frames[:4]


def hang_report(run: Run, ranks: list[int], source: str, cell_name: str = "<cell>") -> list[str]:
    """For each hung rank: its last lines, and where its main thread is (from faulthandler's dump)."""
    lines = []
    for r in ranks:
        lines.append(t("launch.timeout.last", rank=r))
        # a forked rank's stack goes on below the cell into torchrun's agent: read enough lines
        tail = [x for x in run.logs[r].streams["stdout"][-3:] + run.logs[r].streams["stderr"][-150:] if x.strip()]
        where = stuck_at(tail, source.splitlines(), cell_name)
        shown = [x for x in tail if not x.startswith((" ", "Thread 0x", "Current thread", "Stack"))][-4:]
        lines.extend("    " + x for x in shown or ["-"])
        if where:
            lines.append("    " + t("launch.timeout.where", frames=" <- ".join(where)))
    return lines


def ranks_text(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks)) or "-"


# -- a one-shot run -------------------------------------------------------------------------


def explain(
    run: Run,
    outcome: Outcome,
    agent_log: str,
    *,
    timeout: float | None = None,
    alive: list[int] | None = None,
    source: str = "",
    stopped_by_us: bool = False,
    failed_nodes: tuple[str, ...] = (),
) -> BaseException | None:
    """The error of a one-shot run that ended with ``outcome`` (None: it went well). ``alive``: the
    ranks still running when it timed out, taken before the teardown (``still_running``);
    ``failed_nodes``: a multi-node run's nodes in the order their agents failed (``root_cause``)."""
    read_exit_codes(run, agent_log)
    if outcome == Outcome.INTERRUPTED:
        mark_stopped(run)
        return RunInterrupted(t("launch.interrupted"), run=run)
    if outcome == Outcome.STOPPED:
        mark_stopped(run)
        return RunStopped(t("launch.stopped"), run=run)
    if outcome == Outcome.TIMEOUT:
        alive = still_running(run) if alive is None else alive
        mark_stopped(run)
        lines = [t("launch.timeout", timeout=timeout, alive=ranks_text(alive))]
        lines += hang_report(run, alive, source)
        return RunTimeout("\n".join(lines), run=run, alive=alive)
    return root_cause(run, agent_log, stopped_by_us=stopped_by_us, failed_nodes=failed_nodes)


def still_running(run: Run) -> list[int]:
    """The ranks started or running and not yet exited. Read it at the timeout, before the teardown:
    the exit codes the teardown reads (from torchrun's log, rank by rank) turn a hung rank into a
    stopped or failed one, and which of them it has read by then depends on the order they died in."""
    return [r for r, s in run.ranks.items() if s.status in (Status.STARTING, Status.RUNNING)]


def agent_died(run: Run, agent_log: str) -> LaunchError:
    log = "\n".join(agent_log.splitlines()[-40:])
    return LaunchError(t("launch.agent_died", code=run.agent_exit_code, log=log), run=run)


def root_cause(
    run: Run,
    agent_log: str,
    stopped_by_us: bool = False,
    gang: bool = True,
    failed_nodes: tuple[str, ...] = (),
) -> RunError | None:
    """The rank whose failure explains the run, as a ``RankError`` (or a ``LaunchError``).

    ``gang``: torchrun stops every rank once one fails (a one-shot run), so the other failures
    are told as caused by it; in a warm cell nobody is stopped because of another, and each
    other failure is told as its own. ``failed_nodes``: the nodes whose agent failed, in the order
    srun saw them end (``nodes.failed_nodes``).
    """
    stopped = agent_stops(agent_log)
    for s in run.ranks.values():
        if s.exit_code is None and s.pid in stopped and not s.error and not stopped_by_us:
            # torchrun ended this rank because another failed (it reports only the first failure)
            s.signal, s.status = stopped[s.pid], Status.STOPPED
        elif s.status == Status.RUNNING and s.exit_code is None:  # ended without a word or a code
            s.status = Status.FAILED
    if run.ok:
        return None
    never = [r for r, s in run.ranks.items() if s.pid is None]
    if len(never) == len(run.ranks):
        return agent_died(run, agent_log)

    candidates = []  # (time, rank, kind) of each first-hand failure
    for r, s in run.ranks.items():
        closed = (first_message(run, r, Msg.CLOSED) or {}).get(TIME)
        if s.error:
            candidates.append((s.error.get("time", 0), r, "error"))
        elif s.exit_code not in (None, 0) and s.signal != "SIGTERM":
            candidates.append((closed or time.time(), r, "exit" if s.exit_code > 0 else "signal"))
        elif s.exit_code is None and s.status == Status.FAILED:
            candidates.append((closed or time.time(), r, "vanished"))
    if not candidates and never:
        log = "\n".join(agent_log.splitlines()[-40:])
        return LaunchError(t("launch.missing", ranks=ranks_text(never), log=log), run=run)
    if not candidates:  # only SIGTERMs: torchrun stopped them, say so
        candidates = [(0, r, "signal") for r, s in run.ranks.items() if s.exit_code not in (None, 0)]
    if not candidates:  # stopped by torchrun, and the one it stopped them for left no trace
        candidates = [(0, r, "vanished") for r, s in run.ranks.items() if s.exit_code != 0]
    # first-hand reports first; then a rank that vanished without a code or a word (most often
    # stopped by torchrun after another rank failed, and the channel may notice both at once);
    # last a rank whose error says its peer is gone: it reports an effect, the peer's death
    # (which the kernel's poll may see after the error) or its early finish. Across nodes, a rank
    # without a word of its own is placed by its node: when a node dies its ranks and the other
    # nodes' ranks all vanish at about once, and srun saw which node ended first
    candidates.sort(
        key=lambda c: (
            c[2] == "error" and peer_lost(run.ranks[c[1]]),
            node_place(run, c[1], c[2], failed_nodes),
            c[2] == "vanished",
            c[0],
            c[1],
        )
    )
    when, r, kind = candidates[0]
    early = early_exit(run, when, r, kind)
    if early is not None:
        return early
    return rank_error(run, r, kind, [c[1] for c in candidates[1:]], gang)


def node_place(run: Run, r: int, kind: str, failed_nodes: tuple[str, ...]) -> int:
    """Where rank ``r``'s node is in the order the nodes failed; a rank that raised is placed first
    (its own error is first-hand wherever it ran), a rank on a node not named last."""
    node = (first_message(run, r, Msg.HELLO) or {}).get("node")
    if kind == "error" or not failed_nodes:
        return 0
    return failed_nodes.index(node) if node in failed_nodes else len(failed_nodes)


def peer_lost(state: RankState) -> bool:
    """The rank's error says a peer closed its connection (gloo's wording, and the OS's)."""
    err = state.error or {}
    return bool(PEER_LOST.search(str(err.get("message", "")) + str(err.get("traceback", ""))))


def early_exit(run: Run, when: float, r: int, kind: str) -> RankError | None:
    """A rank that returned cleanly before its peers' next collective is the real root cause."""
    err = run.ranks[r].error or {}
    if kind != "error" or not peer_lost(run.ranks[r]):
        return None
    for other in run.ranks:
        done = first_message(run, other, Msg.DONE)
        if other != r and done is not None and done.get("time", when) <= when:
            msg = t("launch.early_exit", rank=other, other=r, detail=err.get("type", "error"))
            return RankError(msg + "\n" + t("launch.hint.early"), run=run, rank=other, exit_code=0, signal=None)
    return None


def rank_error(run: Run, r: int, kind: str, others: list[int], gang: bool = True) -> RankError:
    """Rank ``r`` failed (``kind``: error, exit, signal, vanished); ``others`` failed after it."""
    s = run.ranks[r]
    detail = ""
    if kind == "error":
        err = s.error or {}
        at = ""
        if err.get("step"):
            at += t("launch.at_step", step=err["step"])
        if err.get("lineno"):
            at += t("launch.at_line", line=err["lineno"])
        head = t("launch.rank_failed", rank=r, at=at, type=err.get("type"), message=err.get("message"))
        detail = err.get("traceback", "")
        hint = hint_for(f"{err.get('type')}: {err.get('message')}\n{detail}")
    else:
        tail = run.logs[r].streams["stderr"][-15:]
        if tail:
            detail = t("launch.stderr_tail", rank=r) + "\n" + "\n".join(tail)
        if kind == "exit":
            head = t("launch.rank_exit", rank=r, code=s.exit_code)
        elif kind == "signal":
            head = t("launch.rank_signal", rank=r, signal=s.signal, code=s.exit_code)
        else:
            head = t("launch.rank_vanished", rank=r, code=s.exit_code)
        key = SIGNAL_HINTS.get(s.signal or "") if kind == "signal" else None
        hint = t(key) if key else hint_for("\n".join(tail))
    lines = [head] + ([hint] if hint else [])
    same = sorted(o for o in others if same_failure(s, run.ranks[o]))
    if same:  # every rank ran the same cell; the same error on several is not caused by the first
        lines.append(t("launch.same_way" if len(same) > 1 else "launch.same_way_one", ranks=ranks_text(same)))
    rest = [o for o in others if o not in same]
    if not gang:  # nobody was stopped because of another: each other failure is its own
        for o in [o for o in rest if run.ranks[o].error]:
            e = run.ranks[o].error
            lines.append(t("launch.also_failed", rank=o, type=e.get("type"), message=e.get("message")))
        rest = [o for o in rest if not run.ranks[o].error]
    if rest:
        lines.append(t("launch.secondary", ranks=ranks_text(rest)))
    message = "\n".join(lines)
    return RankError(message, run=run, rank=r, exit_code=s.exit_code, signal=s.signal, traceback=detail, kind=kind)


def broken_collective(run: Run) -> int | None:
    """The first rank whose error says its process group broke (peer gone, gloo timeout)."""
    for r, s in run.ranks.items():
        err = s.error or {}
        if BROKEN.search(str(err.get("message", "")) + str(err.get("traceback", ""))):
            return r
    return None


def with_note(error: Any, note: str) -> Any:
    """The same error, its message followed by ``note`` (a RankError stays a RankError)."""
    if error is None or not note:
        return error
    if isinstance(error, RunInterrupted):
        return RunInterrupted(f"{error}\n{note}", run=error.run)
    if isinstance(error, RunError):
        return type(error)(f"{error}\n{note}", run=error.run, **error.context)
    return error
