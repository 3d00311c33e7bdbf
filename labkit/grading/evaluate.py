"""The grader's judge process: call the students' functions again, away from their kernels.

    python -m labkit.grading.evaluate --results-fd N     (tasks on standard input)

``labkit grade`` runs it in a sandbox of its own after a notebook has run. Its tasks
(``labkit.wire.grading.JudgeTask``) come over a pipe, never as a file the sandbox could read: first
a line with their number, then one line a task. Its results go back over another pipe (``--results-fd``,
inherited from the grader), one ``JudgeResult`` line a task.

No student code runs in this process. Before it reads the first task it makes itself non-dumpable
(no other process of the sandbox can read its memory) and forks one child per task; each child gets
its own task over a pipe of its own, closes everything else it inherited, and only then runs the
student's code, in a process group of its own that dies with the task. So a function cannot patch the
judge for the tasks after it, read the other tasks' arguments (the grader's own points), or write
this process's results: a child's answer is read back, checked as a ``JudgeResult`` for its own task,
and only then passed on. A child that dies, hangs past its time or answers nonsense is reported as such.

What a child runs: a function snapshot (``labkit.grading.snapshot``) at each set of arguments (plain
JSON, or ``{"$model": {...}}`` for a ``TransformerLM`` of that configuration on the meta device); a
loader handed in, called on a DCP checkpoint the child writes from a seed, whose model's weights the
next child, which never ran student code, loads as data (``weights_only``) and measures against the
checkpoint's own on one ``synthetic_batch``; or an exercise re-run on the grader's own ranks
(``labkit.grading.rerun``).
"""

from __future__ import annotations

import argparse
import json
import numbers
import os
import select
import signal
import sys
import time
from typing import Any

from labkit.grading.sandbox import not_dumpable
from labkit.grading.snapshot import argument, rebuild, to_plain
from labkit.wire.grading import JudgeResult, JudgeTask, RecordError, TaskKind

CALL_SECONDS = 20  # one call of a student's function
MAX_TASK = 64 << 20  # bytes of one task line
MAX_RESULT = 16 << 20  # bytes of one child's answer
MAX_TASKS = 1000


class CallTimeout(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise CallTimeout(f"the function did not return within {CALL_SECONDS} s")


def result(value: Any) -> Any:
    """What a call returned, as JSON: numbers (numpy and torch scalars too), strings, containers."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, numbers.Real):
        return to_plain(float(value) if not isinstance(value, int) else value)
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", None) == 0:
        try:
            return result(item())
        except (RuntimeError, ValueError, TypeError):
            pass
    if isinstance(value, (list, tuple)):
        return [result(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return {"$set": sorted((result(v) for v in value), key=repr)}
    if isinstance(value, dict):
        return {"$dict": [[result(k), result(v)] for k, v in value.items()]}
    return {"$kind": type(value).__name__}


def error(e: BaseException) -> dict[str, str]:
    return {"$error": type(e).__name__, "message": str(e)[:500]}


def call_task(task: JudgeTask) -> list[Any]:
    try:
        fn = rebuild(task.function or {})
    except BaseException as e:  # a syntax error, an import that fails: every call fails the same way
        return [error(e)] * len(task.calls)
    signal.signal(signal.SIGALRM, _alarm)
    out = []
    for kwargs in task.calls:
        signal.alarm(CALL_SECONDS)
        try:
            out.append(result(fn(**{k: argument(v) for k, v in kwargs.items()})))
        except BaseException as e:
            out.append(error(e))
        finally:
            signal.alarm(0)
    return out


def _seeded_model(task: JudgeTask) -> Any:
    """The checkpoint's model: ``task.config``'s shape, weights from ``task.seed`` (the same in both children)."""
    import torch

    from labkit.models.config import ModelConfig
    from labkit.models.transformer import TransformerLM

    torch.manual_seed(task.seed)
    return TransformerLM(ModelConfig(**(task.config or {})))


def load(task: JudgeTask) -> list[Any]:
    """A loader handed in, called on a DCP checkpoint this child writes first (before any student code runs);
    the weights of the model it returned go to ``task.state``, for the next child to measure."""
    import tempfile

    import torch
    import torch.distributed.checkpoint as dcp

    from labkit.models.config import ModelConfig

    folder = tempfile.mkdtemp(prefix="labkit-judge-checkpoint-")
    model = _seeded_model(task)
    dcp.save({"train": {"model": model.state_dict()}}, checkpoint_id=folder, no_dist=True)  # as the lesson's ranks
    del model
    try:
        fn = rebuild(task.function or {})
        signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(CALL_SECONDS)
        try:
            loaded = fn(folder, ModelConfig(**(task.config or {})))
        finally:
            signal.alarm(0)
        state = {k: v.detach().to("cpu").clone() for k, v in loaded.state_dict().items()}
        torch.save(state, task.state or "")
    except BaseException as e:
        return [error(e)]
    return [True]


def model_loss(task: JudgeTask) -> list[Any]:
    """(the checkpoint's own loss, the loss of the weights the loader returned), on one synthetic batch, here:
    in a child that ran no student code, with the weights loaded as data (``weights_only``)."""
    import torch

    from labkit.models.transformer import synthetic_batch

    try:
        model = _seeded_model(task)
        size, step, rank = task.batch
        batch = synthetic_batch(model.cfg, size, step, rank)
        with torch.no_grad():
            want = model(*batch).item()
            model.load_state_dict(torch.load(task.state or "", map_location="cpu", weights_only=True))
            got = model(*batch).item()
    except FileNotFoundError:  # the loader failed: its own task says how
        return [{"$error": "NoModel", "message": ""}]
    except BaseException as e:
        return [error(e)]
    return [want, got]


def rank_task(task: JudgeTask) -> list[Any]:
    """One exercise re-run on the grader's ranks, or several (``{"tasks": [...]}``, a student's notebooks judged
    together: one prefork server for all, so torch is imported once)."""
    from labkit.grading import rerun

    ranks = task.ranks or {}
    try:
        if "tasks" in ranks:
            each = task.seconds / max(1, len(ranks["tasks"]))
            return list(rerun.run_tasks(list(ranks["tasks"]), each))
        return [rerun.run_task(ranks, task.seconds)]
    except BaseException as e:
        return [error(e)]


RUN = {TaskKind.CALLS: call_task, TaskKind.LOAD: load, TaskKind.MODEL_LOSS: model_loss, TaskKind.RANKS: rank_task}


# -- the parent: one child per task ------------------------------------------------------------


class Child:
    """A process forked before any task was read: it waits for its own task on a pipe."""

    def __init__(self, keep: list[int]) -> None:
        task_r, self.task_w = os.pipe()
        self.result_r, result_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child: nothing of the parent's but its own two pipes (and its output)
            code = 1
            try:  # never back into the parent's code, whatever happens here
                os.setsid()
                mine = {task_r, result_w, 1, 2}
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                for fd in _open_fds():
                    if fd not in mine and fd != 0:
                        try:
                            os.close(fd)
                        except OSError:
                            pass
                code = _child(task_r, result_w)
            except BaseException:
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(task_r)
        os.close(result_w)
        keep.extend((self.task_w, self.result_r))

    def run(self, line: bytes, seconds: float) -> tuple[bytes, str]:
        """Hand the child its task; (its answer, how it ended when it gave none)."""
        try:
            os.write(self.task_w, line)
        except OSError:
            pass
        os.close(self.task_w)
        answer, deadline = b"", time.monotonic() + seconds
        while len(answer) <= MAX_RESULT:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.result_r], [], [], max(left, 0))
            if not ready:
                self.kill()
                return answer, f"timeout {seconds:g} s"
            chunk = os.read(self.result_r, 1 << 20)
            if not chunk:
                break
            answer += chunk
        self.kill()
        os.close(self.result_r)
        _, status = os.waitpid(self.pid, 0)
        return answer, _how(status)

    def kill(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else "?"


def _open_fds() -> list[int]:
    try:
        return [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 1024))


def _child(task_r: int, result_w: int) -> int:
    with os.fdopen(task_r, "rb") as f:
        line = f.read(MAX_TASK + 1)
    started = time.monotonic()
    try:
        task = JudgeTask.from_json(line)
    except RecordError as e:
        task, values = None, [{"$error": "RecordError", "message": str(e)[:300]}]
    if task is not None:
        values = RUN[task.does](task)
    key = task.key if task is not None else "?"
    answer = JudgeResult(key, values, round(time.monotonic() - started, 3)).to_dict()
    with os.fdopen(result_w, "w") as out:
        json.dump(answer, out, default=repr)
    return 0


def _raw_line(fd: int, limit: int = 64) -> bytes:
    line = b""
    while len(line) < limit and not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            break
        line += byte
    return line


def _failed(task: JudgeTask, how: str, seconds: float) -> JudgeResult:
    return JudgeResult(task.key, [], round(seconds, 3), how)


def judge(tasks_in: Any, results_out: Any) -> None:
    """Read the tasks from ``tasks_in`` (binary), write one result line each to ``results_out`` (text)."""
    not_dumpable()
    try:  # read byte by byte: a buffered read would hold the tasks after it, and every child would inherit them
        count = min(int(_raw_line(tasks_in.fileno())), MAX_TASKS)
    except ValueError:
        return
    keep: list[int] = []
    children = [Child(keep) for _ in range(count)]  # forked before any task is in this process
    for child in children:
        line = tasks_in.readline(MAX_TASK)
        try:
            task = JudgeTask.from_json(line)
        except RecordError as e:  # the grader's own line: should never happen; say so and go on
            print(f"labkit judge: a task the grader sent is not one ({e})", file=sys.stderr)
            child.kill()
            continue
        started = time.monotonic()
        answer, how = child.run(line, task.seconds)
        try:
            got = JudgeResult.from_json(answer)
            if got.key != task.key or (task.does is TaskKind.CALLS and len(got.values) != len(task.calls)):
                raise RecordError("an answer for another task")
            result_line = JudgeResult(task.key, got.values, got.seconds).to_dict()
        except RecordError:
            result_line = _failed(task, how, time.monotonic() - started).to_dict()
        results_out.write(json.dumps(result_line, default=repr) + "\n")
        results_out.flush()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m labkit.grading.evaluate")
    p.add_argument("--results-fd", type=int, required=True, help="where the results go (a pipe from the grader)")
    args = p.parse_args(argv)
    with os.fdopen(args.results_fd, "w") as out:
        judge(sys.stdin.buffer, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
