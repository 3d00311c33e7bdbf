"""Messages in English and Romanian.

Every user-facing string in labkit goes through ``t(key, **fields)``. The messages are data: each
package keeps its own in ``labkit/<package>/messages.py``, one dict ``MESSAGES = {key: {"en": ...,
"ro": ...}}``, and a key's first part is the package that holds it (``"launch.opt.timeout"`` lives in
``labkit.launch.messages``). A key whose first part is no package with messages is a top-level
module's (``"cli.run.help"``), in ``labkit.messages``. ``t`` imports a catalog the first time one of
its keys is asked for: importing it runs no labkit code but the package's ``__init__``.

The questions' hints are the one kind of message made at run time: the grading registry hands
them to ``catalog()`` as the questions load (``grading.q.<question id>.hint``, ``.mistake<i>``).
tests/test_i18n.py checks both languages, the fields, the Romanian letters, that every key the
code asks for exists and that every message is asked for.

The language comes from ``set_lang()``, else ``LABKIT_LANG``, else the locale
(``ro_*`` gives Romanian), else English.
"""

from __future__ import annotations

import importlib
import locale
import os
import re
import string
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path

LANGS = ("en", "ro")
TOP = "labkit.messages"  # the top-level modules' messages (labkit.cli)
_CATALOG: dict[str, dict[str, str]] = {}  # every message loaded or registered so far
_LOADED: set[str] = set()  # the catalog modules already read into _CATALOG
_forced: str | None = None


@cache
def packages() -> tuple[str, ...]:
    """The packages that have a catalog (``labkit/<package>/messages.py``), found on disk, not imported."""
    root = Path(__file__).parent
    return tuple(sorted(path.parent.name for path in root.glob("*/messages.py")))


def home(key: str) -> str:
    """The module whose ``MESSAGES`` hold ``key``: ``labkit.<first part>.messages``, else the top level's."""
    prefix = key.split(".", 1)[0]
    return f"labkit.{prefix}.messages" if prefix in packages() else TOP


def catalogs() -> tuple[str, ...]:
    """Every catalog module, the top level's first."""
    return (TOP, *(f"labkit.{name}.messages" for name in packages()))


def _merge(entries: dict[str, dict[str, str]], source: str) -> None:
    for key, texts in entries.items():
        if key in _CATALOG and _CATALOG[key] != texts:
            raise ValueError(f"message key {key!r} given twice with different texts ({source})")
        _CATALOG[key] = dict(texts)


def load(module: str) -> dict[str, dict[str, str]]:
    """Read the catalog ``module`` (once) and return its messages."""
    messages: dict[str, dict[str, str]] = importlib.import_module(module).MESSAGES
    if module not in _LOADED:
        _merge(messages, module)
        _LOADED.add(module)
    return messages


def catalog(entries: dict[str, dict[str, str]]) -> None:
    """Register messages made at run time, ``{key: {"en": ..., "ro": ...}}``: the questions' hints.

    A key may be registered again only with the same texts (a question module loaded twice)."""
    _merge(entries, "catalog()")


def known(key: str) -> bool:
    """Whether ``key`` is a message (its catalog is read if it was not yet)."""
    if key not in _CATALOG:
        load(home(key))
    return key in _CATALOG


def all_messages() -> dict[str, dict[str, str]]:
    """Every catalog's messages, and those registered at run time so far (the questions' hints once loaded)."""
    for module in catalogs():
        load(module)
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
    """The message ``key`` in the current language, formatted with ``fields``.

    A number field is written in the language's format (``{wall:.1f}`` gives 2,5 in Romanian), and
    ``{n:@one|other}`` writes a count with its noun in the form the number takes
    (``{nproc:@rang|ranguri}``: 1 rang, 2 ranguri, 20 de ranguri; see ``plural``).
    """
    if not known(key):
        raise KeyError(f"no message registered for {key!r}")
    texts = _CATALOG[key]
    chosen = _normalize(lang) or get_lang()
    text = texts.get(chosen) or texts["en"]
    return _Formatter(chosen).vformat(text, (), fields)


class _Formatter(string.Formatter):
    """str.format, with numbers and counts written the way ``lang`` writes them."""

    def __init__(self, lang: str) -> None:
        self.lang = lang

    def format_field(self, value: object, format_spec: str) -> str:
        if "@" in format_spec:
            spec, _, forms = format_spec.partition("@")
            return plural(value, forms.split("|"), self.lang, spec)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return localize(format(value, format_spec), self.lang)
        return format(value, format_spec)


# -- how each language writes numbers and counts (labkit.fmt writes with these) -----------------------


def localize(text: str, lang: str | None = None) -> str:
    """A number written the English way (``1,103.6``, ``+2.5%``), in the language's own format."""
    if (_normalize(lang) or get_lang()) == "ro":
        # swap the separators through a placeholder: 1,103.6 -> 1.103,6
        text = text.replace(",", "\0").replace(".", ",").replace("\0", ".")
    return text


def plural(n: object, forms: Sequence[str], lang: str | None = None, spec: str = "") -> str:
    """``n`` and the noun in the form its number takes: ``forms`` is (singular, plural).

    English: "1 rank", "2 ranks". Romanian (one / few / other): "1 rang", "2 ranguri", "19 ranguri",
    "20 de ranguri", "101 ranguri", "1,5 ranguri"; "de" comes before the noun when the number is a
    whole one ending in 00 or 20..99 (not 0), or is written with a K/M/B suffix (mii, milioane,
    miliarde de ...). ``n`` is a number (formatted with ``spec``, else whole numbers grouped) or the
    text of one already formatted in the language (``fmt_count``'s "7,5B").
    """
    lang = _normalize(lang) or get_lang()
    if isinstance(n, (int, float)) and not isinstance(n, bool):
        if spec:
            text = localize(format(n, spec), lang)
        elif float(n).is_integer():
            text = localize(f"{n:,.0f}", lang)
        else:
            text = localize(format(n, ","), lang)
    else:
        text = str(n)
    one, many = forms[0], forms[-1]
    category = plural_category(text, lang)
    if category == "one":
        return f"{text} {one}"
    return f"{text} de {many}" if category == "other" and lang == "ro" else f"{text} {many}"


_NUMBER = re.compile(r"^[+-]?(\d[\d.,\u00a0 ]*)([KMB]?)$")


def plural_category(text: str, lang: str | None = None) -> str:
    """ "one", "few" or "other" (CLDR's categories) for a number written in ``lang``'s format.

    English has one and other; Romanian one (1), few (0, a fraction, or a whole number whose last two
    digits are 01..19) and other (the rest: 20, 100, 1.000, ...). Text that is no number reads as few.
    """
    lang = _normalize(lang) or get_lang()
    match = _NUMBER.match(text.strip())
    if not match:
        return "few" if lang == "ro" else "other"
    digits, suffix = match.groups()
    point, group = (",", ".") if lang == "ro" else (".", ",")
    whole, _, fraction = digits.replace(group, "").replace("\u00a0", "").replace(" ", "").partition(point)
    if suffix:
        return "other"
    if not whole.isdigit() or (fraction and not fraction.isdigit()):
        return "few" if lang == "ro" else "other"
    n = int(whole)
    if n == 1 and not fraction:
        return "one"
    if lang != "ro":
        return "other"
    if fraction or n == 0 or 1 <= n % 100 <= 19:
        return "few"
    return "other"
