"""A student's function as source, so that the grader can run it again away from their kernel.

    snap = snapshot(fn)        # in the notebook: recorded with the check
    fn = rebuild(snap)         # in the grader's judge process (labkit.grading.evaluate)

A snapshot is the function's source plus what it needs from the notebook: the names its
code reads that the notebook defined, each as plain data (numbers, strings, lists, dicts),
a module to import again (``torch``, ``math``), a function or class to import again from
an installed module, or another function of the notebook, as source too. Nothing is pickled:
a snapshot is JSON, and rebuilding it runs only the student's own source. A name the
snapshot cannot carry (an open file, a model) is left out, and the function fails with a
``NameError`` naming it when the grader calls it.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import math
import sys
import textwrap
import types
from typing import Any

MAX_DEPTH = 8  # functions calling functions of the notebook, this deep
MAX_ITEMS = 10_000  # elements of a plain-data value


class NotAFunction(TypeError):
    """The value cannot be snapshotted: not a function defined in Python source."""


def snapshot(fn: Any) -> dict[str, Any]:
    """``{"name", "source", "env"}`` for a function defined in the notebook (see the module docstring)."""
    if not isinstance(fn, types.FunctionType):
        raise NotAFunction(type(fn).__name__)
    env: dict[str, Any] = {}
    source = _capture(fn, env, 0, set())
    return {"name": fn.__name__, "source": source, "env": env}


def _capture(fn: types.FunctionType, env: dict[str, Any], depth: int, seen: set[int]) -> str:
    seen.add(id(fn))
    source = function_source(fn)
    values = dict(fn.__globals__)
    if fn.__closure__:  # a function defined inside another: its free variables behave as globals here
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
            try:
                values[name] = cell.cell_contents
            except ValueError:  # an empty cell
                pass
    for name in sorted(names_used(fn.__code__)):
        if name in env or name not in values:
            continue  # a builtin, or a name the notebook never defined (the student's bug: NameError)
        spec = _describe(values[name], env, depth, seen)
        if spec is not None:
            env[name] = spec
    return source


def names_used(code: types.CodeType) -> set[str]:
    """Global and free names a code object and the code nested in it read."""
    names = set(code.co_names) | set(code.co_freevars)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= names_used(const)
    return names


def _describe(value: Any, env: dict[str, Any], depth: int, seen: set[int]) -> dict[str, Any] | None:
    if isinstance(value, types.ModuleType):
        return {"module": value.__name__}
    if isinstance(value, types.FunctionType):
        module = getattr(value, "__module__", None) or ""
        if module not in ("__main__", "builtins") and _importable(module, value.__qualname__, value):
            return {"import": [module, value.__qualname__]}
        if id(value) in seen or depth >= MAX_DEPTH:
            return (
                {"function": {"name": value.__name__, "source": function_source(value)}} if id(value) in seen else None
            )
        try:
            return {"function": {"name": value.__name__, "source": _capture(value, env, depth + 1, seen)}}
        except (OSError, TypeError):
            return None
    if isinstance(value, type) or callable(value):
        module, qualname = getattr(value, "__module__", ""), getattr(value, "__qualname__", "")
        if module and qualname and _importable(module, qualname, value):
            return {"import": [module, qualname]}
        return None
    try:
        return {"value": to_plain(value)}
    except (TypeError, ValueError):
        return None


def _importable(module: str, qualname: str, value: Any) -> bool:
    mod = sys.modules.get(module)
    obj: Any = mod
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj is value


def function_source(fn: types.FunctionType) -> str:
    """The source of ``fn``, dedented; a lambda as ``<name> = lambda ...``."""
    lines, _ = inspect.getsourcelines(fn)
    source = textwrap.dedent("".join(lines))
    if fn.__name__ != "<lambda>":
        return _strip_decorators(source, fn.__name__)
    return "_lambda = " + _lambda_text(source, fn)


def _strip_decorators(source: str, name: str) -> str:
    """The ``def`` alone: a decorator would run notebook code the snapshot does not carry."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            node.decorator_list = []
            return ast.unparse(node) + "\n"
    return source


def _lambda_text(source: str, fn: types.FunctionType) -> str:
    """The one ``lambda`` expression in the lines that define ``fn`` whose arguments are ``fn``'s."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a lambda in the middle of a multi-line expression: take the lines as they come
        tree = ast.parse("(\n" + source + "\n)")
    args = list(fn.__code__.co_varnames[: fn.__code__.co_argcount])
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and [a.arg for a in n.args.args] == args]
    if len(found) != 1:
        raise NotAFunction("lambda")
    return ast.unparse(found[0])


# -- plain data, as JSON -------------------------------------------------------------------------


def to_plain(value: Any, budget: list[int] | None = None) -> Any:
    """JSON for numbers, strings, booleans, None and lists, tuples, sets and dicts of them.

    Tuples, sets, non-string keys and the floats JSON has no word for are tagged, so that
    ``from_plain`` gives back the same value. Anything else raises TypeError.
    """
    budget = budget if budget is not None else [MAX_ITEMS]
    budget[0] -= 1
    if budget[0] < 0:
        raise ValueError("too large")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    item = getattr(value, "item", None)  # numpy and torch scalars
    if (
        callable(item)
        and getattr(value, "ndim", None) == 0
        and type(value).__module__.split(".")[0] in ("numpy", "torch")
    ):
        return to_plain(item(), budget)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [
            to_plain(v, budget) for v in (sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value)
        ]
        if isinstance(value, list):
            return items
        return {"$tuple": items} if isinstance(value, tuple) else {"$set": items}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: to_plain(v, budget) for k, v in value.items()}
        return {"$dict": [[to_plain(k, budget), to_plain(v, budget)] for k, v in value.items()]}
    raise TypeError(type(value).__name__)


# dataclasses a check's context may carry, rebuilt by the grader (data only: their constructors run, nothing else)
DATACLASSES = ("labkit.timing.calibrate:Profile", "labkit.timing.links:Link", "labkit.models.config:ModelConfig")


def encode(value: Any) -> Any:
    """``to_plain``, plus the dataclasses of ``DATACLASSES`` (a simulator profile, a link, a model config)."""
    import dataclasses

    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = f"{type(value).__module__}:{type(value).__qualname__}"
        if name not in DATACLASSES:
            raise TypeError(name)
        return {
            "$dataclass": name,
            "fields": {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)},
        }
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, tuple):
        return {"$tuple": [encode(v) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) and not k.startswith("$") for k in value):
        return {k: encode(v) for k, v in value.items()}
    return to_plain(value)


def decode(data: Any) -> Any:
    """What ``encode`` wrote, back; a dataclass not in ``DATACLASSES`` is refused (ValueError)."""
    import importlib

    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    if "$dataclass" in data:
        if data["$dataclass"] not in DATACLASSES:
            raise ValueError(f"not a dataclass the grader rebuilds: {data['$dataclass']}")
        module, _, name = data["$dataclass"].partition(":")
        cls = getattr(importlib.import_module(module), name)
        return cls(**{k: decode(v) for k, v in data["fields"].items()})
    if "$tuple" in data:
        return tuple(decode(v) for v in data["$tuple"])
    if any(k.startswith("$") for k in data):
        return from_plain(data)
    return {k: decode(v) for k, v in data.items()}


def from_plain(data: Any) -> Any:
    if isinstance(data, list):
        return [from_plain(v) for v in data]
    if isinstance(data, dict):
        if "$float" in data:
            return float(data["$float"])
        if "$tuple" in data:
            return tuple(from_plain(v) for v in data["$tuple"])
        if "$set" in data:
            return set(from_plain(v) for v in data["$set"])
        if "$dict" in data:
            return {_hashable(from_plain(k)): from_plain(v) for k, v in data["$dict"]}
        return {k: from_plain(v) for k, v in data.items()}
    return data


def _hashable(x: Any) -> Any:
    return tuple(x) if isinstance(x, list) else x


def argument(value: Any) -> Any:
    """A call's argument from JSON: plain data, or ``{"$model": config}`` for a ``TransformerLM`` on the meta device."""
    if isinstance(value, dict) and "$model" in value:
        from labkit.grading.wrap import meta_model

        return meta_model(value["$model"])
    return from_plain(value)


# -- in the judge: the function again --------------------------------------------------------


def rebuild(snap: dict[str, Any]) -> Any:
    """The function a snapshot describes, in a fresh namespace of its own."""
    import importlib

    namespace: dict[str, Any] = {"__builtins__": builtins, "__name__": "__student__"}
    functions = []
    for name, spec in snap.get("env", {}).items():
        if "module" in spec:
            namespace[name] = importlib.import_module(spec["module"])
        elif "import" in spec:
            module, qualname = spec["import"]
            obj: Any = importlib.import_module(module)
            for part in qualname.split("."):
                obj = getattr(obj, part)
            namespace[name] = obj
        elif "value" in spec:
            namespace[name] = from_plain(spec["value"])
        elif "function" in spec:
            functions.append((name, spec["function"]))
    for name, fn in functions:
        exec(compile(fn["source"], f"<student {fn['name']}>", "exec"), namespace)
        if fn["name"] == "<lambda>":
            namespace[name] = namespace.pop("_lambda")
        elif fn["name"] != name:
            namespace[name] = namespace[fn["name"]]
    exec(compile(snap["source"], f"<student {snap['name']}>", "exec"), namespace)
    return namespace["_lambda"] if snap["name"] == "<lambda>" else namespace[snap["name"]]
