"""Messages in English and Romanian.

Every user-facing string in labkit goes through ``t(key, **fields)``. Each
module registers its own small catalog with ``catalog({...})`` so that the
strings live next to the code that uses them; a test imports every module and
fails if a key exists in one language and not in the other.

A key's first part names the module that registers it: ``"run.status.done"``
lives in ``labkit.run``, and the few prefixes that are not a module's name are
listed in ``OWNERS``. ``t`` imports that module the first time one of its keys
is asked for, so a module shows another module's message (the option errors,
the category names) without importing it only to have its messages registered.

The language comes from ``set_lang()``, else ``LABKIT_LANG``, else the locale
(``ro_*`` gives Romanian), else English.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import locale
import os
from collections.abc import Iterator
from contextlib import contextmanager

LANGS = ("en", "ro")
_CATALOG: dict[str, dict[str, str]] = {}
_REGISTERED_BY: dict[str, str] = {}  # key -> the module that registered it
_forced: str | None = None

# key prefix -> the modules that register its keys, where the prefix is not the module's own name
# (``labkit.<prefix>``); tests/test_i18n.py checks every registered key against this table
OWNERS: dict[str, tuple[str, ...]] = {
    "build": ("labkit.grading.build",),
    "check": ("labkit.grading.checks", "labkit.grading.registry"),
    "cli": ("labkit.cli", "labkit.grading.cli"),
    "comm": ("labkit.timing.theory",),
    "course": ("labkit.course.build", "labkit.course.show"),
    "dash": ("labkit.views.dashboard",),
    "diag": ("labkit.launch.diagnose",),
    "est": ("labkit.memory.estimate",),
    "export": ("labkit.export", "labkit.export.cells"),
    "gpus": ("labkit.wire.devices",),
    "grade": ("labkit.grading.report",),
    "launch": ("labkit.launch.cold", "labkit.launch.diagnose", "labkit.launch.group"),
    "magic": ("labkit.launch.options", "labkit.launch.magic"),  # option help lives with the options
    "nodes": ("labkit.launch.nodes",),
    "memtrack": ("labkit.ranks.memtrack", "labkit.views.memory"),
    "mm": ("labkit.memory.model", "labkit.memory.states", "labkit.views.memory"),
    "opt": ("labkit.launch.options",),
    "peak": ("labkit.memory.peak",),
    "q": ("labkit.grading.registry",),
    "rank": ("labkit.ranks.rank",),  # the questions' hints, registered as the questions load
    "report": ("labkit.grading.report",),
    "run": ("labkit.launch.run", "labkit.views.runview", "labkit.launch.logs"),
    "simulate": ("labkit.timing.simulate", "labkit.timing.links", "labkit.timing.calibrate"),
    "timeline": ("labkit.ranks.timeline", "labkit.timing.spans", "labkit.views.gantt"),
    "warm": ("labkit.launch.warm", "labkit.launch.magic", "labkit.launch.options"),
}


def owners(key: str) -> tuple[str, ...]:
    """The modules whose catalogs hold ``key`` (by its prefix)."""
    prefix = key.split(".", 1)[0]
    return OWNERS.get(prefix, (f"labkit.{prefix}",))


def catalog(entries: dict[str, dict[str, str]]) -> None:
    """Register ``{key: {"en": ..., "ro": ...}}``; a key may be registered once."""
    caller = inspect.currentframe()
    module = caller.f_back.f_globals.get("__name__", "?") if caller and caller.f_back else "?"
    for key, texts in entries.items():
        if key in _CATALOG and _CATALOG[key] != texts:
            raise ValueError(f"message key registered twice with different texts: {key}")
        _CATALOG[key] = dict(texts)
        _REGISTERED_BY.setdefault(key, module)


def registered_by() -> dict[str, str]:
    """Each registered key, with the module that registered it."""
    return dict(_REGISTERED_BY)


def all_messages() -> dict[str, dict[str, str]]:
    """The messages registered so far (a module's are there once it, or one of its keys, was used)."""
    return {k: dict(v) for k, v in _CATALOG.items()}


def _load(key: str) -> None:
    """Import the modules that register ``key``: importing one registers its catalog."""
    for name in owners(key):
        if key in _CATALOG:
            return
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:
            found = False
        if found:
            importlib.import_module(name)


def _normalize(lang: str | None) -> str | None:
    if not lang:
        return None
    code = lang.strip().lower().replace("-", "_").split("_")[0].split(".")[0]
    return code if code in LANGS else None


def set_lang(lang: str | None) -> str:
    """Choose the language for labkit's messages ("en" or "ro"); None resets to the default."""
    global _forced
    if lang is not None and _normalize(lang) is None:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(LANGS)}")
    _forced = _normalize(lang)
    return get_lang()


@contextmanager
def language(lang: str | None) -> Iterator[str]:
    """Messages in ``lang`` inside the block; afterwards, exactly what was chosen before (``set_lang``, or nothing)."""
    global _forced
    before = _forced
    set_lang(lang)
    try:
        yield get_lang()
    finally:
        _forced = before


def get_lang() -> str:
    if _forced:
        return _forced
    env = _normalize(os.environ.get("LABKIT_LANG"))
    if env:
        return env
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        code = _normalize(os.environ.get(var))
        if code:
            return code
    try:
        code = _normalize(locale.getlocale()[0])
    except ValueError:
        code = None
    return code or "en"


def t(key: str, lang: str | None = None, **fields: object) -> str:
    """The message ``key`` in the current language, formatted with ``fields``."""
    texts = _CATALOG.get(key)
    if texts is None:
        _load(key)
        texts = _CATALOG.get(key)
    if texts is None:
        raise KeyError(f"no message registered for {key!r}")
    text = texts.get(_normalize(lang) or get_lang()) or texts["en"]
    return text.format(**fields)
