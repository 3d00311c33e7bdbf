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
    (``{nproc:@rang|ranguri}``: 1 rang, 2 ranguri, 20 de ranguri; ``{got:@o dată|de # ori}``: o dată,
    de 2 ori, de 20 de ori; see ``plural``).
    """
    if not known(key):
        raise KeyError(f"no message registered for {key!r}")
    texts = _CATALOG[key]
    chosen = _normalize(lang) or get_lang()
    return fill(texts.get(chosen) or texts["en"], chosen, **fields)


def fill(text: str, lang: str, /, **fields: object) -> str:
    """A message's text in ``lang`` with its fields written in, as ``t`` writes them (numbers, counts)."""
    return _Formatter(lang).vformat(text, (), fields)


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
    """``n`` and the words that agree with it, in the form its number takes.

    ``forms`` is (singular, plural), or in Romanian (one, few, other), CLDR's categories (see
    ``plural_category``). A form without ``#`` is what follows the number: English "1 rank",
    "2 ranks"; Romanian "1 rang", "2 ranguri", "19 ranguri", "20 de ranguri", "101 ranguri",
    "1,5 ranguri". Where a form has ``#``, each form is the whole phrase, ``#`` standing for the
    number, so a count can be a word or follow one: ("o dată", "de # ori") gives "o dată", "de 2 ori", "de 20 de ori";
    ("once", "# times") gives "once", "2 times".

    Romanian puts "de" between a number of the other category (a whole number ending in 00 or
    20..99, not 0, or one written with a suffix: 7,5 mld.) and the noun after it. With two forms
    the plural one takes that "de" there; a third form is the other category's phrase as written,
    for what follows the number without "de", a verb: ("# este al dumneavoastră", "# sunt ale
    dumneavoastră", "# sunt ale dumneavoastră"). ``n`` is a number (formatted with ``spec``, else
    whole numbers grouped) or the text of one already formatted in the language (``fmt_count``'s
    "7,5 mld.").
    """
    lang = _normalize(lang) or get_lang()
    text = count_text(n, lang, spec)
    category = plural_category(text, lang)
    if category == "one":
        form = forms[0]
    elif lang == "ro" and len(forms) > 2:
        form = forms[1] if category == "few" else forms[2]
    else:
        form = forms[-1]
        if category == "other" and lang == "ro" and len(forms) == 2:
            form = _with_de(form)
    phrases = any("#" in f for f in forms)  # then every form is the whole phrase: "o dată" has no number
    return form.replace("#", text) if phrases else f"{text} {form}"


def _with_de(form: str) -> str:
    """The plural form with "de" after the number, where a word follows it ("# fișiere" -> "# de fișiere")."""
    if "#" not in form:
        return f"de {form}"
    return re.sub(r"#(\s+)(?=\w)", r"# de\1", form, count=1)


def count_text(n: object, lang: str | None = None, spec: str = "") -> str:
    """A count as ``plural`` writes it: with ``spec``, else grouped if whole (1.000), in ``lang``'s format."""
    lang = _normalize(lang) or get_lang()
    if isinstance(n, (int, float)) and not isinstance(n, bool):
        if spec:
            return localize(format(n, spec), lang)
        if float(n).is_integer():
            return localize(f"{n:,.0f}", lang)
        return localize(format(n, ","), lang)
    return str(n)


# a number, and the suffix of a short count: 197K, 7.5B; 197 de mii, 7,5 mil., 7,5 mld. (``fmt_count``)
_NUMBER = re.compile(r"^[+-]?(\d[\d.,\u00a0 ]*?)\s*([KMB]|mie|mii|de mii|mil\.|mld\.)?$")


def plural_category(text: str, lang: str | None = None) -> str:
    """ "one", "few" or "other" (CLDR's categories) for a number written in ``lang``'s format.

    English has one and other; Romanian one (1), few (0, a fraction, or a whole number whose last two
    digits are 01..19) and other (the rest: 20, 100, 1.000, ..., and a short count: 7,5 mld.). Text
    that is no number reads as few.
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
