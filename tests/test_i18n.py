"""Every labkit message exists in English and Romanian, with the same fields, in correct Romanian;
the messages are data, one catalog per package; every key the code asks for exists, and every
message is asked for.

.venv/bin/pytest tests/test_i18n.py -q
"""

from __future__ import annotations

import ast
import importlib
import re
import string
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

import labkit
from labkit import i18n

ROOT = Path(__file__).resolve().parents[1]
CEDILLAS = "\u015f\u0163\u015e\u0162"  # U+015F U+0163 U+015E U+0162: Romanian uses ș ț Ș Ț (comma below)
FIXTURE_QUESTIONS = Path(__file__).parent / "fixtures" / "grading" / "fixture_questions.py"
SOURCES = ("labkit", "tests", "benchmarks", "launch")  # where keys are spelled
QUESTION_KEY = re.compile(
    r"^grading\.q\.[\w.]+\.(hint\d*|mistake\d+)$"
)  # the hints the questions register (hint2, hint3: the next levels)

# Key families the code builds at run time: a prefix it spells and a name that comes from data (a
# status, a column, a lesson's ``show.say("ran")``). Their keys count as used; every prefix the code
# builds a key from must be listed here with what fills it in.
DYNAMIC = {
    "course.col.": "show.table's column headers: the keys of a lesson's rows",
    "course.fig.": "show.text('fig.<name>'): a figure's labels, named in a lesson",
    "course.machine.": "show.machine(): the facts it prints",
    "course.say.": "show.say('<name>'): the sentences a lesson prints",
    "grading.check.line.": "a check's status: correct, wrong, unanswered, recorded",
    "grading.exercise.": "what an exercise's verifier found wrong (labkit.grading.exercises)",
    "grading.grade.run.": "how a graded notebook ran",
    "grading.grade.status.": "a graded question's status",
    "grading.report.col.": "the report table's columns",
    "launch.warm.state.": "a warm session's state: up, unsafe, down",
    "memory.cat.": "a memory category (ranks.memtrack.CATEGORIES)",
    "memory.est.stage.": "the phase a fake-tensor run peaked in: forward, backward, optimizer",
    "memory.peak.phase.": "a phase of the peak model (memory.peak.Phase.key)",
    "memory.peak.term.": "a term of the peak model (memory.peak.Term.key)",
    "memory.peak.unit.": "the units a peak term counts (Term.detail)",
    "memory.what.": "the settings a memory table states",
    "timing.simulate.col.": "the simulator table's columns",
    "views.memtrack.phase.": "the phase a memory sample was taken in",
    "views.run.col.": "the run summary's columns",
    "views.run.status.": "a rank's status (wire.protocol.Status)",
    "views.timeline.lane.": "a timeline lane: compute, comm, held",
    "views.timeline.legend.": "a span's kind in the timeline legend",
    "regress.doctor.status.": "a doctor line's status: pass, warn, fail",
    "regress.compare.col.": "the comparison report's columns",
    "regress.compare.verdict.": "a compared metric's verdict",
    "regress.sweep.col.": "the sweep summary's columns",
}

# strings that look like message keys and are not: a run record's metric names (labkit.regress)
NOT_KEYS = {
    "memory.phases": "the record's memory phases",
    "memory.at_peak.": "a memory category at the peak, in a record",
    "memory.sampled_peak.": "a sampled peak (rss, allocated, ...), in a record",
    "memory.max": "a cgroup v2 file (labkit.hub.limits)",
    "memory.swap.max": "a cgroup v2 file (labkit.hub.limits)",
    "memory.limit_in_bytes": "a cgroup v1 file (labkit.hub.limits)",
    "hub.sh": "launch/hub.sh, a file name",
    "hub.log": "a test hub's log file (labkit.testing.hub)",
}


def catalog_paths() -> dict[str, Path]:
    """Each catalog module on disk: labkit/messages.py and labkit/<package>/messages.py."""
    paths = [ROOT / "labkit" / "messages.py", *sorted((ROOT / "labkit").glob("*/messages.py"))]
    return {".".join(p.relative_to(ROOT).with_suffix("").parts): p for p in paths}


def load_questions() -> None:
    from labkit.grading import registry

    registry.load_questions()  # the questions' hints are messages too


def fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


@pytest.fixture(scope="module")
def messages() -> dict[str, dict[str, str]]:
    load_questions()
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
    hint = i18n.t("grading.q.fixture.bytes_per_param.hint", "ro")
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


def test_a_message_loads_its_catalog_and_no_code():
    # a fresh interpreter: asking for an option's message reads labkit.launch's catalog, and imports
    # neither the module that raises it nor any other catalog
    code = (
        "import sys\n"
        "from labkit.i18n import t\n"
        "assert 'labkit.launch.messages' not in sys.modules\n"
        "print(t('launch.opt.timeout', 'en', value='x'))\n"
        "assert 'labkit.launch.messages' in sys.modules\n"
        "assert 'labkit.launch.options' not in sys.modules\n"
        "assert [m for m in sys.modules if m.endswith('.messages')] == ['labkit.launch.messages']\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[1]
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == i18n.t("launch.opt.timeout", "en", value="x")


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
        assert i18n.t("launch.opt.timeout", value=1).startswith("timeout trebuie")
    assert i18n.get_lang() == "en"


# -- the catalogs are data, one per package -------------------------------------------------------


def test_the_catalogs_on_disk_are_the_ones_i18n_reads():
    assert set(i18n.catalogs()) == set(catalog_paths())
    assert {"labkit.messages", "labkit.launch.messages", "labkit.grading.messages"} <= set(i18n.catalogs())


@pytest.mark.parametrize("module", sorted(catalog_paths()))
def test_a_catalog_is_one_dict_literal_of_both_languages(module):
    tree = ast.parse(catalog_paths()[module].read_text(encoding="utf-8"))
    body = [node for node in tree.body if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
    assert len(body) == 1 and isinstance(body[0], (ast.Assign, ast.AnnAssign)), f"{module}: only MESSAGES = {{...}}"
    target = body[0].targets[0] if isinstance(body[0], ast.Assign) else body[0].target
    assert isinstance(target, ast.Name) and target.id == "MESSAGES"
    keys = [k.value for k in body[0].value.keys]
    assert len(keys) == len(set(keys)), f"{module}: a key given twice: {sorted(k for k in keys if keys.count(k) > 1)}"
    literal = ast.literal_eval(body[0].value)  # a plain literal: no names, no calls, no f-strings
    bad = {key: sorted(texts) for key, texts in literal.items() if sorted(texts) != sorted(i18n.LANGS)}
    assert not bad, f"{module}: each message has exactly {i18n.LANGS}: {bad}"
    assert all(isinstance(text, str) for texts in literal.values() for text in texts.values())
    assert literal == importlib.import_module(module).MESSAGES


@pytest.mark.parametrize("module", sorted(catalog_paths()))
def test_a_key_starts_with_its_package(module):
    top_level = {p.stem for p in (ROOT / "labkit").glob("*.py")}
    for key in importlib.import_module(module).MESSAGES:
        prefix = key.split(".", 1)[0]
        if module == "labkit.messages":  # the top-level modules': a key starts with the module's name
            assert prefix in top_level and prefix not in i18n.packages(), key
        else:
            assert module == f"labkit.{prefix}.messages", f"{key} is in {module}: its first part names its package"
        assert i18n.home(key) == module, key


def test_messages_made_at_run_time_are_the_questions_hints(messages):
    static = {key for module in i18n.catalogs() for key in importlib.import_module(module).MESSAGES}
    made = set(messages) - static
    assert made, "the questions registered no hint"
    assert not [key for key in made if not QUESTION_KEY.match(key)]


# -- the keys the code spells ---------------------------------------------------------------------


@cache
def source_trees() -> dict[Path, ast.Module]:
    """Every Python file where keys may be spelled, catalogs left out."""
    paths = [
        p for top in SOURCES for p in (ROOT / top).rglob("*.py") if p.name != "messages.py" or "labkit" not in p.parts
    ]
    return {p: ast.parse(p.read_text(encoding="utf-8")) for p in sorted(paths)}


def built_prefix(node: ast.AST) -> str | None:
    """The literal start of a string the code builds (``f"views.run.status.{s}"``, ``"views.run.col." + c``)."""
    if isinstance(node, ast.JoinedStr) and len(node.values) > 1 and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.left, ast.Constant):
        return node.left.value if isinstance(node.left.value, str) else None
    return None


def looks_like_a_key(text: str) -> bool:
    parts = text.split(".")
    firsts = {*i18n.packages(), *(k.split(".", 1)[0] for k in i18n.load(i18n.TOP))}
    if len(parts) < 2 or parts[0] not in firsts or not all(re.fullmatch(r"[a-z0-9_]+", p) for p in parts):
        return False
    if any(text.startswith(prefix) for prefix in NOT_KEYS):
        return False
    module = ROOT / "labkit" / Path(*parts)
    return not (module.with_suffix(".py").exists() or module.is_dir() or parts[-1] in ("py", "ipynb", "json", "md"))


def test_every_key_the_code_spells_exists(messages):
    missing = []
    for path, tree in source_trees().items():
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and looks_like_a_key(node.value):
                if node.value not in messages and not QUESTION_KEY.match(node.value):
                    missing.append(f"{where}:{node.lineno} {node.value}")
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "t":
                start = built_prefix(node.args[0]) if node.args else None
                if start and not any(key.startswith(start) for key in messages):
                    missing.append(f"{where}:{node.lineno} {start}...")
    assert not missing, f"keys no catalog has: {missing}"


def test_every_message_is_used():
    static = {key for module in i18n.catalogs() for key in importlib.import_module(module).MESSAGES}
    spelled, built = set(), set()
    for path, tree in source_trees().items():
        if path.is_relative_to(ROOT / "labkit"):
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    spelled.add(node.value)
                start = built_prefix(node)
                if start and start.endswith(".") and any(key.startswith(start) for key in static):
                    built.add(start)
    assert not [p for p in built if not any(d.startswith(p) for d in DYNAMIC)], "list these prefixes in DYNAMIC"
    assert not [d for d in DYNAMIC if not any(d.startswith(p) for p in built)], "the code builds no key from these"
    assert all(any(key.startswith(d) for key in static) for d in DYNAMIC)
    unused = sorted(key for key in static if key not in spelled and not key.startswith(tuple(DYNAMIC)))
    assert not unused, f"messages nothing asks for: {unused}"
