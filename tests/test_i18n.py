"""Every labkit message exists in English and Romanian, with the same fields, in correct Romanian.

.venv/bin/pytest tests/test_i18n.py -q
"""

from __future__ import annotations

import importlib
import pkgutil
import string
import subprocess
import sys
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


def test_every_key_is_registered_where_its_prefix_says(messages):
    # i18n.t imports the module a key's prefix names the first time the key is used, so a key
    # registered anywhere else would be found only once that other module happened to be imported
    stray = {key: mod for key, mod in i18n.registered_by().items() if mod not in i18n.owners(key)}
    assert not stray, f"keys registered outside the module their prefix names (rename, or add to i18n.OWNERS): {stray}"


def test_a_message_of_a_module_not_yet_imported_loads_it():
    # a fresh interpreter: nothing but labkit.i18n is imported when the option message is asked for
    code = (
        "import sys\n"
        "from labkit.i18n import t\n"
        "assert 'labkit.launch.options' not in sys.modules\n"
        "print(t('opt.timeout', 'en', value='x'))\n"
        "assert 'labkit.launch.options' in sys.modules\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[1]
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == i18n.t("opt.timeout", "en", value="x")


def test_an_unknown_key_is_a_clear_error():
    with pytest.raises(KeyError, match="no message registered for 'nosuchmodule.x'"):
        i18n.t("nosuchmodule.x")


def test_language_block_restores_what_was_chosen(clean_lang):
    clean_lang.setenv("LABKIT_LANG", "en")
    with i18n.language("ro") as lang:
        assert lang == "ro" and i18n.get_lang() == "ro"
    assert i18n.get_lang() == "en"  # nothing was forced before: the environment decides again
    clean_lang.setenv("LABKIT_LANG", "ro")
    assert i18n.get_lang() == "ro"
    i18n.set_lang("en")
    with i18n.language("ro"):
        assert i18n.t("opt.timeout", value=1).startswith("timeout trebuie")
    assert i18n.get_lang() == "en"
