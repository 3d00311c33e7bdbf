"""The grader's judge process: call the students' functions again, away from their kernels.

    python -m labkit.grading.evaluate TASKS.json RESULTS.json

``labkit grade`` runs it in a sandbox of its own after a notebook has run (never inside the
notebook's kernel, never in the grader's process): each task is a function snapshot
(``labkit.grading.snapshot``) and the arguments to call it with. What it writes back is only
what the functions returned; the grader compares that with the references, which this
process never sees. Arguments are plain JSON, or ``{"$model": {...}}`` for a ``TransformerLM``
of that configuration on the meta device (shapes only). A task of kind ``"model_loss"`` loads
a state dict the notebook handed in (``torch.load(weights_only=True)``) into a
``TransformerLM`` and returns its loss on one ``synthetic_batch``.
"""

from __future__ import annotations

import json
import numbers
import signal
import sys
from typing import Any

from labkit.grading.snapshot import argument, rebuild, to_plain

CALL_SECONDS = 20  # one call of a student's function


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


def call_task(task: dict[str, Any]) -> list[Any]:
    try:
        fn = rebuild(task["function"])
    except BaseException as e:  # a syntax error, an import that fails: every call fails the same way
        return [error(e)] * len(task["calls"])
    out = []
    for kwargs in task["calls"]:
        signal.alarm(CALL_SECONDS)
        try:
            out.append(result(fn(**{k: argument(v) for k, v in kwargs.items()})))
        except BaseException as e:
            out.append(error(e))
        finally:
            signal.alarm(0)
    return out


def model_loss(task: dict[str, Any]) -> list[Any]:
    import torch

    from labkit.models.config import ModelConfig
    from labkit.models.transformer import TransformerLM, synthetic_batch

    try:
        cfg = ModelConfig(**task["config"])
        model = TransformerLM(cfg)
        state = torch.load(task["state"], map_location="cpu", weights_only=True)
        model.load_state_dict(state)
        with torch.no_grad():
            loss = model(*synthetic_batch(cfg, *task["batch"])).item()
    except BaseException as e:
        return [error(e)]
    return [loss]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    with open(args[0]) as f:
        tasks = json.load(f)["tasks"]
    signal.signal(signal.SIGALRM, _alarm)
    results = {}
    for task in tasks:
        results[task["key"]] = model_loss(task) if task.get("kind") == "model_loss" else call_task(task)
    with open(args[1], "w") as f:
        json.dump({"results": results}, f, default=repr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
