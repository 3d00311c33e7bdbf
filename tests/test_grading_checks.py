"""labkit.check and the question registry, without a kernel.

.venv/bin/pytest tests/test_grading_checks.py -q
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from labkit.grading import registry
from labkit.grading.checks import MIME, CheckResult, check
from labkit.grading.registry import compare, question
from labkit.i18n import set_lang, t
from labkit.wire.errors import OptionError

FIXTURE_QUESTIONS = Path(__file__).parent / "fixtures" / "grading" / "fixture_questions.py"

# questions only these tests use: a verifier that reads the student's Run, and one that crashes
question(
    "testcheck.rank0_share",
    points=3,
    rel=0.01,
    verify=lambda value, run: abs(value - run.values[0]["bytes"] / run.values[0]["total"]) < 0.01,
    hint={"en": "Divide what rank 0 held by the total.", "ro": "Împărțiți ce a ținut rangul 0 la total."},
)
question(
    "testcheck.fragile",
    verify=lambda value: value.shape == (2, 2),
    hint={"en": "Look at the shape.", "ro": "Uitați-vă la formă."},
)


@pytest.fixture(autouse=True)
def english(monkeypatch):
    monkeypatch.setenv("LABKIT_QUESTIONS", str(FIXTURE_QUESTIONS))
    set_lang("en")
    yield
    set_lang(None)


def test_correct_answer_scores_its_points(capsys):
    r = check("fixture.per_rank_bytes", 8_000_000, n_params=1_000_000, world_size=2)
    assert r.correct and bool(r) and r.status == "correct"
    assert (r.points, r.max_points) == (2, 2)
    assert repr(r) == "✓ fixture.per_rank_bytes: correct (2/2)"
    assert capsys.readouterr().out.strip() == repr(r)  # no IPython here: the line is printed


def test_wrong_answer_gets_the_hint_not_the_answer():
    r = check("fixture.bytes_per_param", 15)
    assert not r and r.status == "wrong" and r.points == 0 and r.max_points == 1
    hint = registry.get("fixture.bytes_per_param").hint("en")
    assert r.feedback() == hint
    assert repr(r) == f"✗ fixture.bytes_per_param: not yet (0/1). Hint: {hint}"


def test_a_known_mistake_gets_its_own_hint():
    r = check("fixture.bytes_per_param", 12)
    assert r.status == "wrong"
    assert r.feedback() == t("grading.q.fixture.bytes_per_param.mistake0", "en")
    assert r.feedback() != registry.get("fixture.bytes_per_param").hint("en")


def test_float_tolerance_and_scalar_types():
    import numpy as np
    import torch

    assert check("fixture.bytes_per_param", 16.0000001).correct  # within the default rel 1e-6
    assert not check("fixture.bytes_per_param", 16.01).correct
    assert check("fixture.bytes_per_param", torch.tensor(16)).correct
    assert check("fixture.bytes_per_param", np.int64(16)).correct
    assert not check("fixture.bytes_per_param", torch.tensor([16, 16])).correct


def test_wrong_kind_of_value_says_so():
    r = check("fixture.bytes_per_param", "16")
    assert r.status == "wrong" and r.key == "grading.check.type.number"
    assert r.feedback() == "expected a number, got str"
    assert check("fixture.bytes_per_param", True).key == "grading.check.type.number"  # a bool is not a count


def test_ellipsis_is_not_answered_yet():
    r = check("fixture.bytes_per_param", ...)
    assert r.status == "unanswered" and r.points == 0
    assert "replace the ..." in repr(r)


def test_answer_from_context_and_a_missing_context():
    assert check("fixture.total_bytes", 32_000, n_params=2_000).correct
    assert not check("fixture.total_bytes", 32_000, n_params=3_000).correct
    with pytest.raises(OptionError, match=r"needs n_params=\.\.\."):
        check("fixture.total_bytes", 32_000)


def test_verifier_gets_the_run_explicitly():
    run = SimpleNamespace(values={0: {"bytes": 250, "total": 1000}})
    assert check("testcheck.rank0_share", 0.25, run=run).points == 3
    assert not check("testcheck.rank0_share", 0.5, run=run).correct
    with pytest.raises(OptionError, match="run="):
        check("testcheck.rank0_share", 0.25)


def test_a_verifier_that_crashes_on_the_value_is_a_wrong_answer():
    r = check("testcheck.fragile", 3)
    assert r.status == "wrong" and r.key == "grading.check.crashed"
    assert "AttributeError" in r.feedback()


def test_unknown_question_is_an_error():
    with pytest.raises(OptionError, match="no question is registered"):
        check("fixture.nope", 1)


def test_registration_errors():
    with pytest.raises(ValueError, match="missing in ro"):
        question("testcheck.half", answer=1, hint={"en": "only English"})
    with pytest.raises(ValueError, match="twice"):
        question("fixture.bytes_per_param", answer=1, hint={"en": "a", "ro": "b"})
    with pytest.raises(ValueError, match="<lesson>.<name>"):
        question("nolesson", answer=1, hint={"en": "a", "ro": "b"})


def test_compare_structures():
    assert compare([1, 2.0, "a"], [1, 2, "A "]) is None
    assert compare((1, 2), [1, 2]) is None
    assert compare([1, 2], [1, 3]).key is None  # same shape, wrong values: the question's hint
    assert compare([1], [1, 2]).key == "grading.check.type.sequence"
    assert compare({"a": 1, "b": 2.0}, {"b": 2, "a": 1}) is None
    assert compare({"a": 1}, {"a": 1, "b": 2}).key == "grading.check.type.mapping"
    assert compare({"x", "y"}, {"y", "x"}) is None
    assert compare(1, True).key == "grading.check.type.bool"
    assert compare(False, False) is None
    assert compare(float("nan"), 1.0) is not None


def test_display_bundle_carries_the_record_for_the_grader():
    r = check("fixture.bytes_per_param", 15)
    bundle = r.bundle()
    assert bundle["text/plain"] == repr(r)
    assert "#c62828" in bundle["text/html"] and "Hint" in bundle["text/html"]
    rec = bundle[MIME]
    assert rec["id"] == "fixture.bytes_per_param" and rec["status"] == "wrong" and rec["correct"] is False
    assert (rec["points"], rec["max_points"], rec["lang"]) == (0, 1, "en")
    assert rec["key"] == "grading.q.fixture.bytes_per_param.hint" and rec["feedback"] == r.feedback()
    assert MIME not in r.bundle(with_record=False)  # a re-display is not another attempt
    ok = check("fixture.bytes_per_param", 16).bundle()
    assert "#2e7d32" in ok["text/html"] and "Hint" not in ok["text/html"]


def test_html_is_escaped():
    r = CheckResult("x.<b>", "wrong", 0, 1, "grading.check.crashed", {"error": "<script>alert(1)</script>"}, "en")
    assert "<script>" not in r.html() and "&lt;script&gt;" in r.html()


def _numbers(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?!\w)", text))  # "16", not the 16 of "bf16"


def test_no_hint_gives_its_answer_away():
    registry.load_questions()
    checked = 0
    for q in registry.all_questions():
        if callable(q.answer) or q.answer is registry._UNSET or isinstance(q.answer, bool):
            continue
        forms = {str(q.answer)}
        if isinstance(q.answer, float) and 0 < q.answer < 1:
            forms |= {f"{q.answer * 100:g}", f"{q.answer:g}".lstrip("0")}
        keys = [q.hint_key] + [key for _, key in q.mistakes]
        for lang in ("en", "ro"):
            for key in keys:
                text = t(key, lang)
                assert not (forms & _numbers(text)), f"{key} ({lang}) gives away {q.answer}: {text}"
                checked += 1
    assert checked >= 8  # the course's example questions and the fixture's
