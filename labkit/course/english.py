"""English printed into the Romanian edition: output lines whose words are English.

A code cell of the Romanian edition prints through labkit's messages (``labkit.i18n``), so each
line it prints is Romanian, or numbers and code. ``english_lines`` finds the lines that are not:
a line reads as English when, once code is set aside (identifiers with ``_`` or ``.``, ``name=value``,
calls, flags, paths, quoted and back-quoted text, numbers, units), at least two of its words are
English and none is Romanian. A word is English when it is an English function word ("the", "of",
"is") or a word of labkit's English messages that its Romanian messages do not use; Romanian when
it has a Romanian letter (ă â î ș ț) or is a word of the Romanian messages the English ones do not
use. So a Romanian sentence keeps the English term it introduces ("fragmentare (sharding)"), and a
table of numbers under Romanian headers passes.

``english_outputs(nb)`` applies it to the outputs of an executed notebook (tests/test_notebooks.py's
papermill run of each Romanian notebook, and the stored outputs of the built ones).
"""

from __future__ import annotations

import html
import re
from functools import cache
from typing import Any

from labkit import i18n

# English words that carry a sentence and are never Romanian words ("are", "a", "per" are Romanian too)
FUNCTION_WORDS = frozenset(
    "the and of to is was were be been being with for on in this that these those not from by will would "
    "can could should each every which when while after before than then it its your you we our has have "
    "had there their they what how why into only also but or if at yet still already here".split()
)
RO_LETTERS = re.compile(r"[ăâîșțĂÂÎȘȚşţ]")
# what is code, a number or a unit, not prose: set aside before the words are read
CODE = re.compile(
    r"`[^`]*`"  # back-quoted code
    r"|'[^'\n]*'|\"[^\"\n]*\""  # quoted strings: a dict's keys, a repr
    r"|\S*[/\\]\S*"  # paths, URLs, ratios
    r"|-{1,2}[\w-]+"  # flags
    r"|\w+(?:[._]\w+)+"  # dotted and snake_case names: labkit.check, all_gather, 1.5
    r"|\w+(?:\s*=|[(\[<])"  # name=value, calls, indexing, generics
    r"|%+\w+"  # magics: %%torchrun, %%ranks
    r"|\b[A-Z][a-z]+[A-Z]\w*"  # CamelCase classes
    r"|\b[A-Z0-9]{2,}\w*"  # acronyms and constants: FSDP, GB, FULL_SHARD
)
WORD = re.compile(r"[^\W\d_][^\W\d_'-]*(?:-[^\W\d_]+)*")


def _words(texts: list[str]) -> set[str]:
    words: set[str] = set()
    for text in texts:
        text = re.sub(r"\{[^{}:]*:[^{}@]*@([^{}]*)\}", lambda m: m.group(1).replace("|", " "), text)  # counts' words
        text = re.sub(r"\{[^{}]*\}", " ", text)  # the other fields
        words.update(w.lower() for w in WORD.findall(CODE.sub(" ", text)))
    return words


@cache
def vocabularies() -> tuple[frozenset[str], frozenset[str]]:
    """(English, Romanian): the words each language's messages use and the other's do not."""
    messages = i18n.all_messages().values()
    en = _words([m.get("en", "") for m in messages])
    ro = _words([m.get("ro", "") for m in messages])
    return frozenset({w for w in en - ro if len(w) > 2} | FUNCTION_WORDS), frozenset(ro - en)


def prose_words(line: str) -> list[str]:
    """The words of ``line`` once code, numbers and units are set aside, lower case."""
    return [w.lower() for w in WORD.findall(CODE.sub(" ", line))]


def is_english(line: str) -> bool:
    """Whether ``line`` reads as English: two English words or more, and no Romanian one."""
    english, romanian = vocabularies()
    words = prose_words(line)
    if RO_LETTERS.search(" ".join(words)) or any(w in romanian for w in words):
        return False
    return sum(w in english for w in words) >= 2


def english_lines(text: str) -> list[str]:
    """The lines of ``text`` (an output; HTML is read as its text) that read as English."""
    if "<" in text and ">" in text:
        text = re.sub(r"<(style|script)\b.*?</\1>", "", text, flags=re.S)
        text = re.sub(r"</?(?:div|p|br|tr|li|table|h\d|pre)\b[^>]*>", "\n", text)  # a block: a line of its own
        text = html.unescape(re.sub(r"<[^>]+>", "", text))
    return [line.strip() for line in text.splitlines() if is_english(line)]


def outputs(cell: Any) -> list[str]:
    """The texts a code cell printed or displayed: streams, results, displays (plain, markdown, HTML)."""
    texts = []
    for out in cell.get("outputs", []):
        if "text" in out:
            texts.append(out["text"] if isinstance(out["text"], str) else "".join(out["text"]))
        data = out.get("data", {})
        for mime in ("text/markdown", "text/html", "text/plain"):  # the first a display has: one reading
            if data.get(mime):
                texts.append(data[mime] if isinstance(data[mime], str) else "".join(data[mime]))
                break
    return texts


def english_outputs(nb: Any) -> list[str]:
    """Each English line a code cell of ``nb`` printed, as "cell N: line"."""
    return [
        f"cell {i}: {line}"
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code"
        for text in outputs(cell)
        for line in english_lines(text)
    ]
