"""The course's questions test understanding, not copying.

- every known wrong answer (a constant, a wrong value of the context, or a wrong formula)
  gets its own hint, in both languages, as the notebook shows it;
- the four common mistakes (seconds vs ms, root + 1 block, bf16 vs fp32 bytes,
  4Ψ/N vs 16Ψ/N) are planted as a student would write them;
- formulas are checked at points the notebook never uses, tightly: a function that only
  returns the notebook's own figure, or a rounded one, does not pass;
- multiple choice is graded on the first answer recorded, and the notebook never says
  whether it was right;
- every number the built notebooks print (their prose and stored outputs, both editions),
  handed in as the answer to every question, passes none.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import nbformat
import pytest

from labkit.grading import checks, registry
from labkit.grading.grade import score
from labkit.i18n import t

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(ROOT.glob("notebooks/en/*.ipynb")) + sorted(ROOT.glob("notebooks/ro/*.ipynb"))


def questions() -> list[registry.Question]:
    registry.load_questions()
    return [q for q in registry.all_questions() if q.lesson.startswith("lesson")]


def a_profile() -> Any:
    """A small step profile for the simulator (what lesson 4's check receives as profile=)."""
    from labkit.timing import simulate

    ms = 1e-3
    units = ["root", "layers.0", "layers.1", "layers.2"]
    forward = [(u, 2 * ms) for u in units]
    backward = [(u, 4 * ms) for u in reversed(units)]
    sizes = dict.fromkeys(units, 4e6)
    return simulate.Profile(forward, backward, sizes, dict(sizes), 4, 1 * ms)


def a_context(q: registry.Question) -> dict[str, Any]:
    """A context for the questions whose answer depends on more than the value."""
    from labkit.timing import simulate

    if q.id == "lesson4.saved_ms":
        return {"profile": a_profile(), "link": simulate.link(2e9, 20e-6)}
    if q.id == "lesson7.min_gpus":
        return {"model": "llama-70b"}
    return {}


# -- planted wrong answers ---------------------------------------------------------------


def planted(q: registry.Question, wrong: Any, context: dict[str, Any]) -> Any:
    """The wrong answer as a student hands it in: a function for a formula, else a value."""
    if q.formula:
        return wrong
    return registry._call(q, wrong, context) if callable(wrong) else wrong


def test_every_planted_mistake_gets_its_own_hint():
    planted_count = 0
    for q in questions():
        context = a_context(q)
        for wrong, key in q.mistakes:
            value = planted(q, wrong, context)
            if q.sealed:
                status, got, _ = checks.judge_record(q, value)
            else:
                verdict = q.judge(value, context)
                status, got = ("correct" if verdict.correct else "wrong"), verdict.key
            assert (status, got) == ("wrong", key), f"{q.id}: planted {wrong!r} got {got}"
            for lang in ("en", "ro"):
                assert t(key, lang) and "{" not in t(key, lang)
            planted_count += 1
    assert planted_count >= 25


def _line(qid: str, value: Any, **context: Any) -> str:
    return checks.check(qid, value, **context).line("en")


def test_the_four_common_mistakes_get_their_hints(capsys: pytest.CaptureFixture[str]):
    from labkit.timing import simulate

    # seconds instead of milliseconds
    prof, link = a_profile(), simulate.link(2e9, 20e-6)
    without = simulate.simulate(prof, link, backward_prefetch=None).step_time
    with_pre = simulate.simulate(prof, link, backward_prefetch="BACKWARD_PRE").step_time
    assert without > with_pre
    assert "in seconds" in _line("lesson4.saved_ms", without - with_pre, profile=prof, link=link)
    assert "correct" in _line("lesson4.saved_ms", (without - with_pre) * 1000, profile=prof, link=link)

    # root + 1 block, where prefetch holds the next block too
    def root_and_block_pre(root_params, block_params, precision):
        return {"fp32": 4, "bf16": 2, "fp16": 2}[precision] * (root_params + block_params)

    assert "peak without prefetch" in _line("lesson4.peak_gathered_pre", root_and_block_pre)

    # bf16 vs fp32 bytes
    def in_bf16(n_params):
        return 2 * n_params

    assert "2 bytes per element is bf16" in _line("lesson3.none_gathered", in_bf16)

    def unchanged(fp32_gathered):
        return fp32_gathered

    assert "each gathered element takes 2 bytes" in _line("lesson5.bf16_gathered", unchanged)

    def always_fp32(root_params, block_params, precision):
        return 4 * (root_params + 2 * block_params)

    assert "whatever the precision" in _line("lesson4.peak_gathered_pre", always_fp32)

    # the table's mixed-precision ZeRO-1 where the question asks for plain fp32
    def mixed_zero1(n_params, world_size):
        return 4 * n_params + 12 * n_params / world_size

    assert "mixed-precision row" in _line("lesson2.zero1_bytes", mixed_zero1)

    # HSDP divided by every GPU, as FULL_SHARD would
    def over_all(n_params, world_size, gpus_per_node):
        return 12 * n_params / world_size

    assert "FULL_SHARD over every GPU" in _line("lesson2.hsdp_rank_bytes", over_all)

    # an int reshard_after_forward counted as True
    def own_shard(n_params, world_size, gpus_per_node):
        return 4 * n_params / world_size

    assert "reshard_after_forward=True" in _line("lesson7.hpz_bytes", own_shard)

    def sixteen_psi(n_params, world_size):
        return 16 * n_params / world_size

    assert "whole training state" in _line("lesson7.rank_bytes", sixteen_psi)
    capsys.readouterr()


# -- formulas at unseen points -----------------------------------------------------------


def test_formulas_pass_only_as_functions_right_at_every_unseen_point():
    formulas = [q for q in questions() if q.formula]
    assert len(formulas) >= 15
    for q in formulas:
        points = q.samples()
        reference = q.answer
        assert q.judge(reference, {}).correct, q.id

        # the notebook's own figure, as a number or as a function that returns it
        figure = reference(**points[0])
        assert not q.judge(figure, {}).correct
        assert q.judge(figure, {}).key == "grading.check.type.function"

        def constant(*_: Any, _figure: Any = figure, **__: Any) -> Any:
            return _figure

        assert not q.judge(constant, {}).correct, q.id

        # a figure rounded as a notebook prints it (4 significant digits) is outside the tolerance
        def rounded(_reference: Any = reference, **kw: Any) -> Any:
            v = _reference(**kw)
            return [float(f"{x:.4g}") for x in v] if isinstance(v, list) else float(f"{v:.4g}")

        if any(_rounding_matters(reference(**p)) for p in points):
            assert not q.judge(rounded, {}).correct, q.id


def _rounding_matters(v: Any) -> bool:
    values = v if isinstance(v, list) else [v]
    return any(float(f"{x:.4g}") != x for x in values)


def test_unseen_points_are_not_the_notebooks_defaults():
    for values in registry.UNSEEN.values():
        assert len(values) == registry.SAMPLES
    assert 2 not in registry.UNSEEN["world_size"] and 4 not in registry.UNSEEN["world_size"]
    assert 80e9 not in registry.UNSEEN["gpu_bytes"]


def test_a_formula_with_the_wrong_arguments_says_which_it_needs(capsys: pytest.CaptureFixture[str]):
    def zero1(params, gpus):
        return 8 * params + 8 * params / gpus

    line = _line("lesson2.zero1_bytes", zero1)
    assert "n_params, world_size" in line and "0/1" in line
    capsys.readouterr()


def test_a_stub_that_raises_not_implemented_is_unanswered(capsys: pytest.CaptureFixture[str]):
    def zero1(n_params, world_size):
        raise NotImplementedError()

    assert checks.check("lesson2.zero1_bytes", zero1).status == "unanswered"
    capsys.readouterr()


# -- answers that must come from the ranks ---------------------------------------------------


def test_run_exercises_take_a_run_not_a_number(capsys: pytest.CaptureFixture[str]):
    on_ranks = [q for q in questions() if q.takes == "run"]
    assert {q.lesson for q in on_ranks} == {*(f"lesson{i}" for i in range(8)), "lesson9"}
    for q in on_ranks:
        verdict = q.judge(12345, {})
        assert not verdict.correct and verdict.key == "grading.check.type.run"
        empty = SimpleNamespace(nproc=2, values={0: {}, 1: {}})
        assert not q.judge(empty, {}).correct, q.id  # a failed run (nothing reported) scores nothing
    capsys.readouterr()


# -- multiple choice: sealed, first answer counts ---------------------------------------------


def _record(qid: str, value: Any) -> dict[str, Any]:
    return checks.check(qid, value).graded()


def test_multiple_choice_is_recorded_without_a_verdict(capsys: pytest.CaptureFixture[str]):
    sealed = [q for q in questions() if q.sealed]
    assert {q.id for q in sealed} >= {"lesson0.step_gradient", "lesson4.prefetched_unit"}
    for q in sealed:
        right, wrong = checks.check(q.id, q.answer), checks.check(q.id, "z")
        assert right.status == wrong.status == "recorded"
        assert right.line() == wrong.line() and right.html() == wrong.html()
    capsys.readouterr()


def test_multiple_choice_is_graded_on_the_first_answer(capsys: pytest.CaptureFixture[str]):
    qid = "lesson0.step_gradient"
    first_wrong = [(5, _record(qid, "a")), (6, _record(qid, "b"))]
    first_right = [(5, _record(qid, "b")), (6, _record(qid, "a"))]
    by_id = {s.id: s for s in score("lesson0", first_wrong)}
    assert by_id[qid].status == "wrong" and by_id[qid].points == 0 and by_id[qid].attempts == 2
    assert by_id[qid].feedback  # the hint, in the report
    by_id = {s.id: s for s in score("lesson0", first_right)}
    assert by_id[qid].status == "correct" and by_id[qid].points == 1
    capsys.readouterr()


# -- printed numbers never pass -----------------------------------------------------------------

NUMBER = re.compile(r"(?<![\w.])-?\d[\d,.]*(?:e[-+]?\d+)?")


def printed_numbers(nb: nbformat.NotebookNode) -> set[float]:
    """Every number in the prose and in the stored outputs, read both as English (1,234.5) and
    as Romanian (1.234,5) would write it, and scaled by the units a table may print it in."""
    texts = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            texts.append(cell.source)
        for out in cell.get("outputs", []):
            texts.append(out.get("text", ""))
            data = out.get("data", {})
            texts.append(data.get("text/plain", "") if isinstance(data.get("text/plain"), str) else "")
    found: set[float] = set()
    for text in texts:
        for token in NUMBER.findall(text):
            token = token.rstrip(".,")
            for form in (token.replace(",", ""), token.replace(".", "").replace(",", ".")):
                try:
                    x = float(form)
                except ValueError:
                    continue
                found |= {x * scale for scale in (1, 1e3, 1e6, 1e9, 2**10, 2**20, 2**30, 1e-3, 1e-2)}  # 1e-2: a %
    return found


@pytest.mark.slow
def test_the_offline_wrap_makes_the_units_fsdp_makes(tmp_path: Path):
    """lesson 3 checks a student's min_num_params on unseen models by emulating FSDP1's wrap: compare
    the emulation with FSDP1 itself (one gloo rank, in a child process) on two of them."""
    code = """
import functools, json, os, torch, torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel
from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy
from labkit import comm
from labkit.course.questions.lesson3 import UNSEEN_CONFIGS
from labkit.models.config import ModelConfig
from labkit.models.transformer import TransformerLM
dist.init_process_group("gloo", init_method="file://" + os.environ["STORE"], rank=0, world_size=1)
out = []
for config, m in ((UNSEEN_CONFIGS[1], 90000), (UNSEEN_CONFIGS[1], 102401), (UNSEEN_CONFIGS[2], 18433)):
    policy = functools.partial(size_based_auto_wrap_policy, min_num_params=m)
    model = FullyShardedDataParallel(TransformerLM(ModelConfig(**config)), auto_wrap_policy=policy,
                                     device_id=torch.device("cpu"))
    out.append(sorted(comm.padded_units(model)))
dist.destroy_process_group()
print(json.dumps(out))
"""
    import json
    import os
    import subprocess
    import sys

    from labkit.course.questions.lesson3 import UNSEEN_CONFIGS
    from labkit.grading.wrap import meta_model, size_policy_units

    env = {**os.environ, "STORE": str(tmp_path / "store")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    fsdp = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = [
        size_policy_units(meta_model(UNSEEN_CONFIGS[1]), 90000),
        size_policy_units(meta_model(UNSEEN_CONFIGS[1]), 102401),
        size_policy_units(meta_model(UNSEEN_CONFIGS[2]), 18433),
    ]
    assert fsdp == ours
    assert ours[1] == ["layers.0", "layers.1", "root"] and ours[0] != ours[1]


_FROZEN: dict[str, registry.Question] = {}


def frozen(q: registry.Question) -> registry.Question:
    """``q`` with its answer and its known wrong answers computed once for ``a_context(q)``: judging
    thousands of printed numbers then costs one comparison each, not a recomputation of the answer."""
    if q.verify is not None or q.formula or q.sealed:
        return q
    if q.id not in _FROZEN:
        context = a_context(q)

        def value(x: Any) -> Any:
            if not callable(x):
                return x
            names = inspect.signature(x).parameters
            return x(**{k: v for k, v in context.items() if k in names})

        _FROZEN[q.id] = dataclasses.replace(
            q, answer=value(q.answer), mistakes=tuple((value(w), k) for w, k in q.mistakes)
        )
    return _FROZEN[q.id]


def passes(q: registry.Question, value: float) -> bool:
    context = a_context(q)
    q = frozen(q)
    if q.verify is not None and q.takes is None:  # a verifier that reads a run: give it an empty one
        context = {**context, "run": SimpleNamespace(nproc=1, values={0: {}})}
    try:
        if q.sealed:
            return checks.judge_record(q, value)[0] == "correct"
        return q.judge(value, context).correct
    except Exception:  # a number where a run, a model or a function is needed
        return False


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_printed_number_answers_any_question(path: Path):
    nb = nbformat.read(path, as_version=4)
    numbers = printed_numbers(nb)
    assert len(numbers) > 20
    lesson = nb.metadata.labkit.lesson
    leaks = [(q.id, x) for q in questions() if q.lesson == lesson for x in sorted(numbers) if passes(q, x)]
    assert leaks == []


def test_every_question_is_checked_in_its_lesson():
    ids = set()
    for nb in NOTEBOOKS:
        source = "\n".join(c.source for c in nbformat.read(nb, as_version=4).cells if c.cell_type == "code")
        ids |= set(re.findall(r'labkit\.check\("([\w.]+)"', source))
    assert ids == {q.id for q in questions()}


@pytest.mark.slow
def test_grading_imports_no_course_code_and_grade_does_not_import_report():
    import subprocess
    import sys

    code = (
        "import sys, labkit.grading.registry, labkit.grading.checks, labkit.grading.grade, labkit.grading.report, "
        "labkit.grading.cli, labkit.grading.build\n"
        "print(sorted(m for m in sys.modules if m.startswith('labkit.course')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
    grade_source = (ROOT / "labkit/grading/grade.py").read_text()
    assert "grading.report" not in grade_source and "import report" not in grade_source
    registry_source = (ROOT / "labkit/grading/registry.py").read_text()
    assert "labkit.course" not in registry_source


def test_every_check_of_the_student_edition_reads_what_a_stub_replaced():
    """Why the student edition scores 0 (run for real for lesson 1 in tests/test_notebooks.py): the value
    each check reads is defined only inside a solution the build replaced, or in a cell where it replaced
    one, or is the Run of a %%torchrun cell whose solution it replaced."""
    from labkit.grading.build import student_notebook

    checked = 0
    for path in NOTEBOOKS:
        cells = [
            c for c in student_notebook(nbformat.read(path, as_version=4), path.name).cells if c.cell_type == "code"
        ]
        for i, cell in enumerate(cells):
            for m in re.finditer(r'labkit\.check\("[\w.]+",\s*([\w.]+)', cell.source):
                value = m.group(1)
                if value == "labkit.last_run":
                    defining = [c for c in cells[:i] if c.source.startswith("%%torchrun")][-1:]
                else:
                    pattern = rf"^\s*(def {value}\(|{value}\s*=)"
                    defining = [c for c in cells[:i] if re.search(pattern, c.source, re.M)][-1:]
                # no earlier cell defines it (the stub replaced the definition), or the last that does is stubbed
                assert not defining or "raise NotImplementedError()" in defining[0].source, (path.name, value)
                checked += 1
    assert checked == 2 * len(questions())
