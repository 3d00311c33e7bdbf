"""Every count labkit prints agrees with its number, in every catalog and both languages.

A template's count goes through ``{n:@one|other}`` (labkit.i18n.plural): Romanian has three forms,
"1 fișier scris", "2 fișiere scrise" (0, 2..19, and every number whose last two digits are 01..19:
101, 1.001), "20 de fișiere scrise" (20, 100, 1.000, ...); English two. Each template is rendered
here with 0, 1, 2, 19, 20, 21, 101 and 1000 in each count field, and its text must change with the
number's category and nothing else, with "de" after a number of the "other" category and never
after the others; a number placeholder followed by a counted noun or verb, with no plural spec,
is a fixed noun that reads wrong for some number and fails.

.venv/bin/pytest tests/test_ro_plurals.py -q
"""

from __future__ import annotations

import re
import string
from functools import cache

import pytest

from labkit import i18n

VALUES = (0, 1, 2, 19, 20, 21, 101, 1000)
OTHER_COUNT = 3  # what every other count field of a template holds while one is rendered

# verbs that follow a count directly, where Romanian puts no "de" (doar 20 sunt ale dumneavoastră)
RO_VERBS = {"sunt", "este", "au", "are", "erau", "era", "nu"}
# Romanian plural nouns a message may put after a number (besides those of the plural specs)
RO_COUNTED = {
    "ranguri", "pași", "blocuri", "parametri", "secunde", "procese", "fișiere", "straturi", "unități", "noduri",
    "celule", "linii", "încercări", "rulări", "elemente", "studenți", "tokeni", "gazde", "înregistrări",
    "regresii", "schimbări", "fire", "dispozitive", "nuclee", "octeți", "avertismente", "intervale", "colective",
    "verificări", "seturi", "bucăți", "lecții", "gradienți", "modele", "colectări", "ori", "vizibile",
}  # fmt: skip
# English plural nouns a message may put after a number (besides those of the plural specs)
EN_COUNTED = {
    "ranks", "steps", "blocks", "parameters", "seconds", "processes", "files", "layers", "units", "nodes", "cells",
    "lines", "attempts", "runs", "elements", "items", "students", "tokens", "hosts", "records", "regressions",
    "threads", "devices", "cores", "bytes", "warnings", "spans", "collectives", "checks", "lessons",
    "gradients", "models", "all-gathers", "times", "GPUs", "visible",
}  # fmt: skip
VERBS = {"is", "are", "was", "were", "has", "have", "este", "sunt", "au", "nu", "a", "erau", "era"}
PLURAL_BEFORE = re.compile(r"\bau fost \w+ #")  # "au fost scrise 1 fișier": the verb is the count's
ONLY = re.compile(r"(?:only|doar)\s*$")  # "only {count} are": the verb after it agrees with the count


@cache
def messages() -> dict[str, dict[str, str]]:
    from labkit.grading import registry

    registry.load_questions()  # the questions' hints are messages too
    return i18n.all_messages()


def parsed(text: str) -> list[tuple[str, str | None, str, str | None]]:
    return [(lit, name, spec or "", conv) for lit, name, spec, conv in string.Formatter().parse(text)]


def head(name: str) -> str:
    return re.split(r"[.\[]", name)[0]


def count_fields(text: str) -> dict[str, list[tuple[str, tuple[str, ...]]]]:
    """The fields of ``text`` written with a plural spec: name -> (number spec, forms) of each place."""
    out: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for _, name, spec, _ in parsed(text):
        if name is not None and "@" in spec:
            number, _, forms = spec.partition("@")
            out.setdefault(head(name), []).append((number, tuple(forms.split("|"))))
    return out


@cache
def spec_words() -> dict[str, tuple[set[str], set[str]]]:
    """Per language, the first word after the number in every singular form and every plural form."""
    words: dict[str, tuple[set[str], set[str]]] = {lang: (set(), set()) for lang in i18n.LANGS}
    for texts in messages().values():
        for lang in i18n.LANGS:
            for _, forms in (place for places in count_fields(texts[lang]).values() for place in places):
                phrases = any("#" in form for form in forms)  # "o dată": no word follows a number
                for i, form in enumerate(forms):
                    if phrases and "#" not in form:
                        continue
                    after = form.split("#", 1)[1] if phrases else " " + form
                    match = re.match(r"\s+([^\W\d][\w-]*)", after)
                    if match:
                        words[lang][0 if i == 0 else 1].add(match.group(1))
    return {lang: (one - many, many - one) for lang, (one, many) in words.items()}


class Anything:
    """A field value that takes any format spec, attribute or index."""

    def __format__(self, spec: str) -> str:
        return "x"

    def __getattr__(self, name: str) -> Anything:
        return self

    def __getitem__(self, key: object) -> Anything:
        return self


def render(key: str, lang: str, field: str, n: int, text: str | None = None) -> str:
    """The message (or ``text``) with ``n`` in ``field``, every other count at 3 and every other field "x".

    Where ``field`` is also written without a plural spec (``use -n {count}``), that place shows N:
    only the count's own words change with its number."""
    text = messages()[key][lang] if text is None else text
    text = "".join(
        lit.replace("{", "{{").replace("}", "}}")
        + (
            ""
            if name is None
            else "N"
            if head(name) == field and "@" not in spec
            else f"{{{name}{'!' + conv if conv else ''}{':' + spec if spec else ''}}}"
        )
        for lit, name, spec, conv in parsed(text)
    )
    values: dict[str, object] = {head(name): Anything() for _, name, _, _ in parsed(text) if name}
    values |= dict.fromkeys(count_fields(text), OTHER_COUNT)
    values[field] = n
    return i18n.fill(text, lang, **values)


def normalized(phrase: str, n: int, lang: str, spec: str) -> str:
    """A count's ``phrase`` with its number ``n``, as the count writes it, replaced by #."""
    written = re.escape(i18n.count_text(n, lang, spec))
    return re.sub(rf"(?<![\d.,]){written}(?![\d]|[.,]\d)", "#", phrase)


def counted_templates() -> list[tuple[str, str, str]]:
    return [
        (key, lang, field)
        for key, texts in sorted(messages().items())
        for lang in i18n.LANGS
        for field in count_fields(texts[lang])
    ]


def test_the_mechanism_writes_romanians_three_forms():
    ro = [i18n.plural(n, ("o dată", "de # ori"), "ro") for n in (1, 2, 19, 20, 101, 1000)]
    assert ro == ["o dată", "de 2 ori", "de 19 ori", "de 20 de ori", "de 101 ori", "de 1.000 de ori"]
    assert [i18n.plural(n, ("once", "# times"), "en") for n in (1, 2, 20)] == ["once", "2 times", "20 times"]
    written = ("fișier scris", "fișiere scrise")
    assert [i18n.plural(n, written, "ro") for n in (1, 2, 20)] == [
        "1 fișier scris",
        "2 fișiere scrise",
        "20 de fișiere scrise",
    ]
    yours = ("doar # este al dumneavoastră", "doar # sunt ale dumneavoastră", "doar # sunt ale dumneavoastră")
    assert [i18n.plural(n, yours, "ro") for n in (1, 2, 20)] == [
        "doar 1 este al dumneavoastră",
        "doar 2 sunt ale dumneavoastră",
        "doar 20 sunt ale dumneavoastră",
    ]


def test_the_messages_the_issue_names_agree():
    def ro(key: str, field: str, n: int) -> str:
        return render(key, "ro", field, n)

    assert [ro("grading.exercise.no_recompute", "got", n) for n in (1, 2, 20)][0].count("a calculat o dată;") == 1
    assert "a calculat de 2 ori;" in ro("grading.exercise.no_recompute", "got", 2)
    assert "a calculat de 20 de ori;" in ro("grading.exercise.no_recompute", "got", 20)
    assert "reduce-scattered once;" in render("grading.exercise.accumulate_sync", "en", "got", 1)
    assert ro("course.wrote", "n", 1).startswith("1 fișier scris în")
    assert ro("course.wrote", "n", 2).startswith("2 fișiere scrise în")
    assert ro("course.wrote", "n", 20).startswith("20 de fișiere scrise în")
    assert "doar 1 este al dumneavoastră" in ro("wire.gpus.too_many", "count", 1)
    assert "doar 2 sunt ale dumneavoastră" in ro("wire.gpus.auto.too_few", "count", 2)
    assert "only 1 is yours" in render("wire.gpus.too_many", "en", "count", 1)


@pytest.mark.parametrize(("key", "lang", "field"), counted_templates())
def test_every_count_agrees_with_its_number(key, lang, field):
    check_agreement(key, lang, field, messages()[key][lang])


def check_agreement(key: str, lang: str, field: str, template: str) -> None:
    """Render ``template``'s count ``field`` with every number of VALUES and check the words agree."""
    places = count_fields(template)[field]
    spec = places[0][0]
    singular, plural = spec_words()[lang]
    by_category: dict[str, dict[int, str]] = {}
    for n in VALUES:
        category = i18n.plural_category(i18n.count_text(n, lang, spec), lang)
        text = render(key, lang, field, n, template)
        for number, forms in places:
            phrase = i18n.plural(n, forms, lang, number)  # the count and its words, in the rendered template
            assert phrase in text, f"{key}: {phrase!r} not in {text!r}"
            text = text.replace(phrase, normalized(phrase, n, lang, number))
        by_category.setdefault(category, {})[n] = text
        if lang == "ro" and category == "one":
            assert "# dată" not in text, f"{key}: one time is «o dată»: {text}"
            assert not PLURAL_BEFORE.search(text), f"{key}: a plural verb before 1: {text}"
        for word in re.findall(r"#\s+([^\W\d][\w-]*)", text):
            if lang == "ro" and category == "other":
                assert word == "de" or word in RO_VERBS, f"{key} ({n}): '{n} {word}' needs 'de': {text}"
            else:
                assert word != "de", f"{key} ({n}): no 'de' after {n}: {text}"
            wrong = plural if category == "one" else singular
            assert word not in wrong, f"{key} ({n}): '{word}' after {n}: {text}"
    for category, texts in by_category.items():
        assert len(set(texts.values())) == 1, f"{key}: the {category} numbers read differently: {texts}"
    assert by_category["one"][1] != by_category["other"][20], f"{key}: 1 and 20 read alike"
    if lang == "ro":
        assert by_category["few"][2] != by_category["one"][1], f"{key}: 1 and 2 read alike"


def fixed_counts(text: str, lang: str) -> list[str]:
    """Number placeholders of ``text`` with no plural spec that a counted noun or verb follows.

    A field called ``rank`` is a rank's number or label ("rangul {rank}"), never a count."""
    # plural nouns: a singular one after a name is common ("{kind} cell"), and a verb after a name or an
    # index agrees with nothing to count ("rank {rank} is")
    counted = ((RO_COUNTED if lang == "ro" else EN_COUNTED) | spec_words()[lang][1]) - VERBS
    parts = parsed(text)
    found = []
    for i, (lit, name, spec, conv) in enumerate(parts):
        if name is None or "@" in spec or conv == "r" or head(name) == "rank" or i + 1 >= len(parts):
            continue
        match = re.match(r"\s+(?:de\s+)?([^\W\d][\w-]*)", parts[i + 1][0])
        if match and (match.group(1) in counted or (ONLY.search(lit) and match.group(1) in VERBS)):
            found.append(f"{{{name}}} {match.group(1)}")
    return found


def test_no_count_is_written_with_a_fixed_noun():
    fixed = {
        f"{key} ({lang})": found
        for key, texts in sorted(messages().items())
        for lang in i18n.LANGS
        if (found := fixed_counts(texts[lang], lang))
    }
    assert fixed == {}, "write these counts with a plural spec, {n:@fișier|fișiere}: the noun agrees with n"


def test_the_fixed_noun_check_finds_one():
    assert fixed_counts("doar {count} sunt ale dumneavoastră", "ro") == ["{count} sunt"]
    assert fixed_counts("a calculat de {got} ori", "ro") == ["{got} ori"]
    assert fixed_counts("labkit saw {got} models run", "en") == ["{got} models"]
    assert fixed_counts("ranks {ranks} failed; rank {rank} is slow", "en") == []
    assert fixed_counts("{n:@fișier|fișiere} scrise", "ro") == []


def test_the_agreement_check_fails_a_wrong_template():
    with pytest.raises(AssertionError, match="read alike"):
        check_agreement("made up", "ro", "n", "{n:@rezultate|rezultate} scrise")  # no singular
    with pytest.raises(AssertionError, match="needs 'de'"):
        check_agreement("made up", "ro", "n", "{n:@# fișier|# fișiere|# fișiere} scrise")  # 20 fișiere
    with pytest.raises(AssertionError, match="after"):
        check_agreement("made up", "ro", "n", "{n:@ranguri|rang}")  # the forms swapped
    with pytest.raises(AssertionError, match="o dată"):
        check_agreement("made up", "ro", "n", "de {n:@dată|ori}")  # de 1 dată
    with pytest.raises(AssertionError, match="plural verb"):
        check_agreement("made up", "ro", "n", "au fost scrise {n:@fișier|fișiere}")
