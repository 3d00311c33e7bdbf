"""Where the questions come from: the course's modules, modules named in LABKIT_QUESTIONS,
or, in a student's install (whose course modules are not there), its catalog.

``labkit.grading.registry`` calls ``load`` on first use; this module knows nothing of
questions itself, so that loading them imports no course code until a check needs it.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
from collections.abc import Callable
from typing import Any

from labkit.wire import env as envvars

# modules that register questions; the package ``labkit`` adds the course's (see labkit/__init__.py)
SOURCES: list[str] = []
CATALOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "catalog.json")  # only in a student install
_loaded: set[str] = set()


class SourceError(Exception):
    """A questions module that does not import: (its name, the error)."""


def add_source(module: str) -> None:
    """Load ``module``'s questions too (by name, imported on the first check)."""
    if module not in SOURCES:
        SOURCES.append(module)


def course_modules() -> list[str]:
    import labkit  # the package names the course's question modules, so grading imports no course code

    return [n for n in (*getattr(labkit, "QUESTION_SOURCES", ()), *SOURCES) if exists(n)]


def load(from_catalog: Callable[[dict[str, Any]], None]) -> None:
    """Import the course's modules and any named in LABKIT_QUESTIONS, once each; without the course's
    modules, give ``from_catalog`` each entry of the install's catalog (once)."""
    course = course_modules()
    if not course and os.path.exists(CATALOG) and CATALOG not in _loaded:
        _loaded.add(CATALOG)
        with open(CATALOG, encoding="utf-8") as f:
            for entry in json.load(f)["questions"]:
                from_catalog(entry)
    names = course + [n for n in (envvars.get("LABKIT_QUESTIONS") or "").split(os.pathsep) if n.strip()]
    for name in names:
        if name in _loaded:
            continue
        _loaded.add(name)  # before importing: a module that imports labkit.check must not loop
        try:
            _import(name.strip())
        except Exception as e:
            _loaded.discard(name)
            raise SourceError(name, f"{type(e).__name__}: {e}") from e


def exists(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its package is not there either
        return False


def _import(name: str) -> None:
    if not name.endswith(".py"):
        importlib.import_module(name)
        return
    path = os.path.abspath(name)
    mod_name = "labkit_questions_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"not a Python file: {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
