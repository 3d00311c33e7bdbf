"""Romanian numbers and counts: what labkit prints with ``LABKIT_LANG=ro`` writes 2,5 and 1.024 (never 2.5),
and a count takes the noun's Romanian form (1 rang, 2 ranguri, 20 de ranguri); English keeps 2.5.

The printing paths run here on small inputs made for the purpose (a recorded run under
tests/fixtures/diagnose, a made-up fake-tensor estimate, a hand-built simulator profile): the test is
about how numbers are written, not about what they are.

.venv/bin/pytest tests/test_ro_numbers.py -q
"""

from __future__ import annotations

import html
import json
import re
import string
from pathlib import Path

import pytest

from labkit import fmt, i18n

FIXTURES = Path(__file__).parent / "fixtures"
FIXTURE_QUESTIONS = FIXTURES / "grading" / "fixture_questions.py"

# a number written with a decimal point: 2.5, 15.00, 7.5B; not a version (2.13.0), not an address
POINT = re.compile(r"(?<![\w.])\d+\.\d+(?![.\d])")
# Romanian groups thousands with dots: 1.024, 12.345.678, 1.103,6 (read first, as one number)
RO_GROUPED = re.compile(r"(?<![\w.,])[1-9]\d{0,2}(?:\.\d{3})+(?:,\d+)?(?![.\d])")


def points_in(text: str) -> list[str]:
    """The numbers of ``text`` written with a decimal point, outside `code` and HTML tags."""
    text = html.unescape(re.sub(r"<[^>]*>", " ", text))
    text = re.sub(r"`[^`]*`|PCIe \d\.\d", " ", text)  # code, and a link's name (PCIe 4.0)
    return POINT.findall(RO_GROUPED.sub(" ", text))


# -- plural forms --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "ro", "en"),
    [
        (0, "0 ranguri", "0 ranks"),
        (1, "1 rang", "1 rank"),
        (2, "2 ranguri", "2 ranks"),
        (19, "19 ranguri", "19 ranks"),
        (20, "20 de ranguri", "20 ranks"),
        (64, "64 de ranguri", "64 ranks"),
        (100, "100 de ranguri", "100 ranks"),
        (101, "101 ranguri", "101 ranks"),
        (119, "119 ranguri", "119 ranks"),
        (120, "120 de ranguri", "120 ranks"),
        (1000, "1.000 de ranguri", "1,000 ranks"),
        (1001, "1.001 ranguri", "1,001 ranks"),
        (1.5, "1,5 ranguri", "1.5 ranks"),
    ],
)
def test_a_count_takes_the_nouns_form_for_its_number(n, ro, en):
    assert fmt.plural(n, ("rang", "ranguri"), "ro") == ro
    assert fmt.plural(n, ("rank", "ranks"), "en") == en


def test_plural_categories_and_formatted_counts():
    assert [fmt.plural_category(x, "ro") for x in ("1", "2", "0", "1,0", "20", "200", "7,5B", "197K")] == [
        "one",
        "few",
        "few",
        "few",
        "other",
        "other",
        "other",
        "other",
    ]
    assert fmt.plural(1.0, ("secundă", "secunde"), "ro", ".1f") == "1,0 secunde"  # a written fraction: few
    assert fmt.plural(fmt.fmt_count(7.5e9, "ro"), ("parametru", "parametri"), "ro") == "7,5 mld. de parametri"
    assert fmt.plural(fmt.fmt_count(7.5e9, "en"), ("parameter", "parameters"), "en") == "7.5B parameters"


@pytest.mark.parametrize(
    ("n", "ro", "en"),
    [
        (512, "512", "512"),
        (1_000, "1 mie", "1K"),
        (2_000, "2 mii", "2K"),
        (196_928, "197 de mii", "197K"),
        (7.5e6, "7,5 mil.", "7.5M"),
        (1e9, "1 mld.", "1B"),
        (7.5e9, "7,5 mld.", "7.5B"),
        (70.6e9, "70,6 mld.", "70.6B"),
    ],
)
def test_romanian_writes_billions_as_mld_not_b(n, ro, en):
    # "B" after a number reads as bytes in Romanian; a count says the word it abbreviates
    assert fmt.fmt_count(n, "ro") == ro and fmt.fmt_count(n, "en") == en
    assert fmt.plural_category(ro, "ro") == ("few" if n == 512 else "other")
    assert fmt.fmt_spec(-2.25, "+.1f", "ro") == "-2,2" and fmt.fmt_spec(1234.5, ",.1f", "ro") == "1.234,5"


def test_messages_count_with_the_plural_spec():
    with i18n.language("ro"):
        assert i18n.t("memory.strategy_table", n="7,5 mld.", world=64, unit="GB").startswith(
            "7,5 mld. de parametri pe 64 de "
        )
        assert "1 rang," in i18n.t("memory.title", strategy="DDP", world=1, precision="bf16", optimizer="adamw")
        assert "20 de ranguri" in i18n.t("views.dash.text", run_id="r", nproc=20, backend="gloo")
    assert i18n.t("views.dash.text", "en", run_id="r", nproc=1, backend="gloo").endswith("1 rank, gloo")


# every Romanian plural noun a message puts after a number field; such a field must count (``{n:@one|few}``)
COUNTED = (
    "ranguri|pași|blocuri|parametri|GPU-uri|secunde|procese|fișiere|straturi|unități|noduri|celule|linii|"
    "încercări|rulări|notebook-uri|elemente|studenți|tokeni|gazde|înregistrări|regresii|schimbări|"
    "fire|dispozitive|nuclee|octeți|avertismente|intervale|colective|verificări|seturi|bucăți|lecții"
)
BARE_COUNT = re.compile(rf"\{{(?!rank\b)[\w.]+(?:![rs])?\}}\s+(?:de\s+)?(?:{COUNTED})\b")
HEDGED = re.compile(r"\w\((?:uri|e|s)\)")  # rang(uri), dispozitiv(e), rank(s): the number's own form instead


def test_romanian_counts_use_the_plural_spec_not_a_hedge():
    from labkit.grading import registry

    registry.load_questions()
    messages = i18n.all_messages()
    bare = {k: m["ro"] for k, m in messages.items() if BARE_COUNT.search(m["ro"])}
    assert not bare, f"count these with {{n:@rang|ranguri}}: {bare}"
    hedged = {f"{k} ({lang})": m[lang] for k, m in messages.items() for lang in m if HEDGED.search(m[lang])}
    assert not hedged, f"write the form the number takes, not a hedge: {hedged}"


# -- every message: its number fields in the language's format ------------------------------------


def numeric_fields(text: str) -> dict[str, object]:
    """A value for each field whose format spec takes a number: a float, or an int where the spec asks one."""
    out: dict[str, object] = {}
    for _, name, spec, _ in string.Formatter().parse(text):
        if not name or not spec:
            continue
        head = re.split(r"[.\[]", name)[0]
        spec = spec.split("@")[0]
        out[head] = 1234567 if spec.endswith("d") or spec == "," else 1234.5678
    return out


def test_every_message_writes_its_numbers_the_languages_way():
    from labkit.grading import registry

    registry.load_questions()
    wrong, english = {}, 0
    for key, texts in i18n.all_messages().items():
        fields = {name: "x" for _, name, _, _ in string.Formatter().parse(texts["en"] + texts["ro"]) if name}
        fields = {re.split(r"[.\[]", name)[0]: value for name, value in fields.items()}
        numbers = numeric_fields(texts["en"]) | numeric_fields(texts["ro"])
        if not numbers:
            continue
        fields |= numbers
        ro, en = i18n.t(key, "ro", **fields), i18n.t(key, "en", **fields)
        if points_in(ro):
            wrong[key] = ro
        english += bool(points_in(en))
    assert not wrong, f"numbers with a decimal point in Romanian: {wrong}"
    assert english > 10, "the English messages still write 1,234.6"


# -- labkit's printing paths, in both languages ------------------------------------------------------


def recorded_run():
    """The recorded run of fixture f1 (two ranks, rank 1 raises at step 3), with memory samples,
    per-category memory and reported values added: everything a run summary and dashboard show."""
    from labkit.launch.run import Run

    folder = FIXTURES / "diagnose" / "f1_raise_at_step"
    run = Run("f1_raise_at_step", 2, "gloo", str(folder))
    for line in (folder / "messages.jsonl").read_text().splitlines():
        run.ingest(json.loads(line))
    run.flush_logs()
    for r in (0, 1):
        for i in range(3):
            run.ingest({"t": "mem", "rank": r, "time": run.started + i * 0.75, "rss": (i + 1) * 2**20 * 1.5})
        run.ingest({"t": "report", "rank": r, "values": {"loss": 2.345678, "lr": 0.0003}})
        cats = {"params": 3 * 2**20 + 12345, "grads": 2**20 // 3, "optimizer": 6 * 2**20 + 7, "activations": 555_555}
        run.ingest({"t": "memcat", "rank": r, "phase": "peak", "step": 2, "categories": cats})
    run.ended = run.started + 2.5
    return run


def estimate_result():
    """A fake-tensor estimate as its subprocess would hand it back, for llama-1b on 8 ranks."""
    from labkit.memory import estimate

    spec = estimate.Spec("llama-1b", 8, "bf16", checkpointing=True)
    model = estimate.analytical(spec)
    peak = {c: int(getattr(model, c) * 1.013) for c in ("params", "params_unsharded", "grads", "optimizer")}
    peak |= {"activations": 123_456_789, "other": 98_765_432}
    phases = {p: dict(peak) for p in ("forward", "backward", "optimizer")}
    return estimate.Estimate(spec, peak, phases, "backward", 12.75, model, 11.5, estimate.DEPTHS)


def simulated():
    from labkit.timing import simulate

    ms = 1e-3
    prof = simulate.Profile(
        forward=[("a", 1.25 * ms), ("b", 1.5 * ms)],
        backward=[("b", 2.5 * ms), ("a", 2.25 * ms)],
        param_bytes={"a": 1.5e6, "b": 1.5e6},
        grad_bytes={"a": 1.5e6, "b": 1.5e6},
        world_size=2,
        flavor="fsdp2",
    )
    return [simulate.simulate(prof, "pcie4", backward_prefetch=pf) for pf in simulate.PREFETCH]


def printed() -> dict[str, str]:
    """What labkit prints on its printing paths, in the current language."""
    from labkit.grading.checks import CheckResult
    from labkit.memory import model as mm
    from labkit.regress import report as regress_report
    from labkit.regress.compare import Finding
    from labkit.timing import simulate, theory
    from labkit.views import dashboard, runview
    from labkit.views.memory import MemoryTable, breakdown_html

    out: dict[str, str] = {}
    out["strategy_table 7.5B"] = mm.strategy_table(7.5e9, 64)
    out["strategy_table tiny"] = mm.strategy_table("tiny", 1, units="GiB")
    states = mm.model_states(7.5e9, "ZERO3", 64, offload="optimizer")
    out["model_states"] = states.table() + "\n" + str(states)
    peak = mm.peak_memory("llama-1b", "ZERO3", 8, checkpointing=True, micro_batch=2)
    out["peak explain"] = peak.explain() + "\n" + peak.table()
    out["fits"] = str(mm.fits(7e9, "H100-80GB", "ZERO3", 8)) + "\n" + str(mm.fits(70e9, "H100-80GB", "DDP", 8))
    est = estimate_result()
    out["estimate"] = str(est) + "\n" + est.table()
    results = simulated()
    out["simulate"] = "\n".join(repr(r) for r in results) + "\n" + simulate.table(results)
    rows = {"all_gather": {"calls": 4, "bytes": 3.5 * 2**20, "wire_bytes": 1.75 * 2**20}}
    out["comm table"] = theory.table(rows, rows)
    run = recorded_run()
    out["run summary"] = runview.summary(run)
    out["dashboard"] = "\n".join(
        (dashboard.header_html(run), dashboard.rank_table_html(run), dashboard.memory_svg(run))
    )
    table = MemoryTable({0: {"peak": {"params": 3 * 2**20 + 12345, "grads": 2**20 // 3}}})
    out["memory table"] = str(table) + "\n" + table.to_markdown()
    out["membars"] = dashboard.membars_html(run) + breakdown_html({0: run.last_message(0, "memcat")})
    half = CheckResult("fixture.bytes_per_param", "wrong", 0.5, 1.5, None, {}, i18n.get_lang())
    out["check line"] = half.line() + "\n" + half.html()
    slower = Finding(
        "04.ipynb", "lesson4", "p", 3, "cell", 0, "steps.median", "0", 0.0125, 0.01875, "time", "regression"
    )
    loss = Finding("04.ipynb", "lesson4", "p", 3, "cell", 0, "values.loss", "0", 2.5, 2.75, "value", "regression")
    out["regress line"] = regress_report.line(slower) + "\n" + regress_report.line(loss)
    return out


@pytest.fixture
def lang(monkeypatch):
    monkeypatch.setenv("LABKIT_QUESTIONS", str(FIXTURE_QUESTIONS))
    i18n.set_lang(None)  # LABKIT_LANG decides, as in a fresh kernel (an earlier test may have forced one)
    yield lambda code: monkeypatch.setenv("LABKIT_LANG", code)
    i18n.set_lang(None)


def test_printing_paths_write_romanian_numbers_with_a_decimal_comma(lang):
    lang("ro")
    texts = printed()
    wrong = {where: points_in(text) for where, text in texts.items() if points_in(text)}
    assert not wrong, f"numbers with a decimal point when LABKIT_LANG=ro: {wrong}"
    assert "7,5 mld. de parametri pe 64 de ranguri" in texts["strategy_table 7.5B"]
    assert "rang(uri)" not in "".join(texts.values())
    billions = {where: re.findall(r"\d[KMB]\b", text) for where, text in texts.items()}
    assert not {where: found for where, found in billions.items() if found}, "write 7,5 mld., not 7,5B"
    assert re.search(r"\d,\d", texts["run summary"]) and re.search(r"\d,\d", texts["simulate"])


def test_printing_paths_in_english_keep_the_decimal_point(lang):
    lang("en")
    texts = printed()
    for where in ("strategy_table 7.5B", "model_states", "estimate", "simulate", "run summary", "dashboard"):
        assert points_in(texts[where]), where
    assert "7.5B parameters on 64 ranks" in texts["strategy_table 7.5B"]
