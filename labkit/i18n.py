"""Messages in English and Romanian.

Every user-facing string in labkit goes through ``t(key, **fields)``. Each
module registers its own small catalog with ``catalog({...})`` so that the
strings live next to the code that uses them; a test imports every module and
fails if a key exists in one language and not in the other.

The language comes from ``set_lang()``, else ``LABKIT_LANG``, else the locale
(``ro_*`` gives Romanian), else English.
"""

from __future__ import annotations

import locale
import os

LANGS = ("en", "ro")
_CATALOG: dict[str, dict[str, str]] = {}
_forced: str | None = None


def catalog(entries: dict[str, dict[str, str]]) -> None:
    """Register ``{key: {"en": ..., "ro": ...}}``; a key may be registered once."""
    for key, texts in entries.items():
        if key in _CATALOG and _CATALOG[key] != texts:
            raise ValueError(f"message key registered twice with different texts: {key}")
        _CATALOG[key] = dict(texts)


def all_messages() -> dict[str, dict[str, str]]:
    return {k: dict(v) for k, v in _CATALOG.items()}


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
        raise KeyError(f"no message registered for {key!r}")
    text = texts.get(_normalize(lang) or get_lang()) or texts["en"]
    return text.format(**fields)
