"""Every labkit message exists in English and Romanian, with the same fields, in correct Romanian.

.venv/bin/pytest tests/test_i18n.py -q
"""

from __future__ import annotations

import importlib
import pkgutil
import string
from pathlib import Path

import pytest

import labkit
from labkit import i18n

CEDILLAS = "\u015f\u0163\u015e\u0162"  # U+015F U+0163 U+015E U+0162: Romanian uses ș ț Ș Ț (comma below)
FIXTURE_QUESTIONS = Path(__file__).parent / "fixtures" / "grading" / "fixture_questions.py"


def import_everything() -> list[str]:
    """Import every labkit module, so that every catalog is registered."""
    names = []
    for mod in pkgutil.walk_packages(labkit.__path__, "labkit."):
        if mod.name.endswith(".__main__"):  # entry points: importing one runs the command
            continue
        importlib.import_module(mod.name)
        names.append(mod.name)
    from labkit.grading import registry

    registry.load_questions()  # the questions' hints are messages too
    return names


def fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


@pytest.fixture(scope="module")
def messages() -> dict[str, dict[str, str]]:
    names = import_everything()
    assert "labkit.grading.checks" in names and "labkit.i18n" in names
    return i18n.all_messages()


def test_every_message_in_both_languages(messages):
    assert len(messages) > 100
    missing = [f"{key} ({lang})" for key, texts in messages.items() for lang in i18n.LANGS if not texts.get(lang)]
    assert not missing, f"messages missing a language: {missing}"
    extra = [key for key, texts in messages.items() if set(texts) - set(i18n.LANGS)]
    assert not extra, f"messages in a language labkit does not have: {extra}"


def test_same_placeholders_in_both_languages(messages):
    differ = {
        key: (fields(m["en"]), fields(m["ro"])) for key, m in messages.items() if fields(m["en"]) != fields(m["ro"])
    }
    assert not differ, f"placeholders differ between en and ro: {differ}"


def test_romanian_uses_comma_below_not_cedilla(messages):
    bad = {key: m["ro"] for key, m in messages.items() if any(c in m["ro"] for c in CEDILLAS)}
    assert not bad, f"\u015f/\u0163 with a cedilla in Romanian text (use ș ț): {bad}"


class Anything:
    """A field value that takes any format spec, attribute or index."""

    def __format__(self, spec: str) -> str:
        return "x"

    def __getattr__(self, name: str) -> Anything:
        return self

    def __getitem__(self, key: object) -> Anything:
        return self


def heads(text: str) -> set[str]:
    return {name.split(".")[0].split("[")[0] for name in fields(text)}


def test_no_placeholder_is_named_like_a_parameter_of_t(messages):
    # t(key, lang, **fields): a field called "key" or "lang" can never be passed (TypeError)
    clash = {
        key: sorted(heads(m["en"]) & {"key", "lang"}) for key, m in messages.items() if heads(m["en"]) & {"key", "lang"}
    }
    assert not clash, f"rename these placeholders, t() cannot take them: {clash}"


def test_every_message_formats(messages):
    for key, texts in messages.items():
        for lang in i18n.LANGS:
            names = heads(texts[lang])
            if names & {"key", "lang"}:
                continue  # the test above reports these
            i18n.t(key, lang, **dict.fromkeys(names, Anything()))  # a stray brace raises here


@pytest.fixture
def clean_lang(monkeypatch):
    monkeypatch.setenv("LABKIT_QUESTIONS", str(FIXTURE_QUESTIONS))
    for var in ("LABKIT_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(var, raising=False)
    i18n.set_lang(None)
    yield monkeypatch
    i18n.set_lang(None)


def test_labkit_lang_switches_check_feedback_to_romanian(clean_lang, capsys):
    from labkit.grading.checks import check

    clean_lang.setenv("LABKIT_LANG", "ro")
    r = labkit.check("fixture.bytes_per_param", 15)
    assert r.lang == "ro"
    hint = i18n.t("q.fixture.bytes_per_param.hint", "ro")
    assert repr(r) == f"✗ fixture.bytes_per_param: încă nu (0/1). Indiciu: {hint}"
    assert repr(check("fixture.bytes_per_param", 16)) == "✓ fixture.bytes_per_param: corect (1/1)"
    clean_lang.setenv("LABKIT_LANG", "en")
    assert repr(check("fixture.bytes_per_param", 16)) == "✓ fixture.bytes_per_param: correct (1/1)"


def test_set_lang_wins_over_the_environment(clean_lang):
    clean_lang.setenv("LABKIT_LANG", "en")
    assert labkit.set_lang("ro") == "ro"
    r = labkit.check("fixture.bytes_per_param", "16")
    assert r.feedback() == "se aștepta un număr, s-a primit str"
    assert r.feedback("en") == "expected a number, got str"  # the same result, read in English
    i18n.set_lang(None)
    clean_lang.setenv("LANG", "ro_RO.UTF-8")
    clean_lang.delenv("LABKIT_LANG")
    assert labkit.check("fixture.bytes_per_param", 16).line() == "✓ fixture.bytes_per_param: corect (1/1)"
