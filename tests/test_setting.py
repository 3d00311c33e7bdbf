"""``labkit.wire.setting``: every configuration string the repository holds parses and prints back
exactly (baselines, notebooks, lessons, benchmarks, docs, the code and the tests), a wrong one is
refused with the word and the choices, and labkit's code names flavors, strategies, prefetch modes,
backends and displays through the enums, not as string literals. Nothing is launched.

    .venv/bin/python -m pytest tests/test_setting.py -q
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from labkit.wire.job import MODES, JobMode, JobSpec
from labkit.wire.setting import (
    Backend,
    Display,
    Flavor,
    Fsdp2,
    Option,
    Prefetch,
    Setting,
    SettingError,
    Strategy,
)

ROOT = Path(__file__).resolve().parents[1]
# a flavor, then one or more :WORDs, maybe @MODEL: how a setting is written anywhere
SPEC = re.compile(r"(?<![\w.:/-])(?:fsdp1|fsdp2|ddp|plain)(?::[A-Za-z0-9_]+)+(?:@[a-z0-9_]+)?(?![\w:])")
# the grammar written out in docstrings and lessons, not settings: fsdp1:STRATEGY[:PREFETCH] and the like
PLACEHOLDERS = {"STRATEGY", "STRATEGIE", "PREFETCH", "WORD", "HEAD", "OPTION", "MODEL"}
SCANNED = ("baselines", "notebooks", "labkit", "benchmarks", "docs", "tests")
SUFFIXES = {".py", ".md", ".json", ".ipynb", ".txt", ".yaml", ".yml"}


def written_settings() -> dict[str, set[str]]:
    """Every setting string in the repository -> the files that hold it."""
    found: dict[str, set[str]] = {}
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            if not path.is_file() or path.suffix not in SUFFIXES or "__pycache__" in path.parts:
                continue
            if path in (Path(__file__).resolve(), ROOT / "labkit" / "wire" / "setting.py"):
                continue  # the refused examples here and in the module's docstring
            try:
                text = path.read_text()
            except UnicodeDecodeError:
                continue
            for spec in SPEC.findall(text):
                if not PLACEHOLDERS & set(re.split("[:@]", spec)):
                    found.setdefault(spec, set()).add(str(path.relative_to(ROOT)))
    return found


def test_the_scan_sees_the_repository():
    found = written_settings()
    assert "fsdp1:FULL_SHARD:BACKWARD_PRE" in found and "fsdp2:explicit" in found
    files = {f for spec in found for f in found[spec]}
    assert any(f.startswith("baselines/") for f in found["fsdp1:FULL_SHARD"])
    assert "labkit/course/lessons/04_prefetch_overlap.md" in found["fsdp1:FULL_SHARD:BACKWARD_PRE"]
    assert {"notebooks/en/04_prefetch_overlap.ipynb", "benchmarks/comm_overlap.py", "docs/netem.md"} <= files
    assert "fsdp1:FULL_SHARD@odd" in found and "fsdp2:reshard:sync" in found
    assert len(found) >= 20, sorted(found)


def test_every_setting_in_the_repository_round_trips():
    bad = {}
    for spec, files in sorted(written_settings().items()):
        try:
            back = str(Setting.parse(spec))
        except SettingError as err:
            bad[spec] = f"{err} ({', '.join(sorted(files)[:3])})"
            continue
        if back != spec:
            bad[spec] = f"printed back as {back!r}"
    assert not bad, "\n".join(f"{k}: {v}" for k, v in bad.items())


@pytest.mark.parametrize(
    ("spec", "flavor", "strategy", "prefetch", "reshard"),
    [
        ("ddp", Flavor.DDP, Strategy.DDP, None, None),
        ("plain", Flavor.PLAIN, None, None, None),
        ("fsdp1:FULL_SHARD", Flavor.FSDP1, Strategy.FULL_SHARD, Prefetch.BACKWARD_PRE, True),
        ("fsdp1:FULL_SHARD:NONE", Flavor.FSDP1, Strategy.FULL_SHARD, Prefetch.NONE, True),
        ("fsdp1:FULL_SHARD:post", Flavor.FSDP1, Strategy.FULL_SHARD, Prefetch.BACKWARD_POST, True),
        ("fsdp1:FULL_SHARD:noprefetch", Flavor.FSDP1, Strategy.FULL_SHARD, Prefetch.NONE, True),
        ("fsdp1:SHARD_GRAD_OP", Flavor.FSDP1, Strategy.SHARD_GRAD_OP, Prefetch.BACKWARD_PRE, False),
        ("fsdp1:HYBRID_SHARD:bf16", Flavor.FSDP1, Strategy.HYBRID_SHARD, Prefetch.BACKWARD_PRE, True),
        ("fsdp2:reshard", Flavor.FSDP2, Strategy.FULL_SHARD, None, True),
        ("fsdp2:keep", Flavor.FSDP2, Strategy.SHARD_GRAD_OP, None, False),
        ("fsdp2:hsdp", Flavor.FSDP2, Strategy.HYBRID_SHARD, None, True),
        ("fsdp2:replicate", Flavor.FSDP2, Strategy.NO_SHARD, None, True),
        ("fsdp2:explicit:bf16", Flavor.FSDP2, Strategy.FULL_SHARD, None, True),
    ],
)
def test_what_a_setting_means(spec, flavor, strategy, prefetch, reshard):
    s = Setting.parse(spec)
    assert (s.flavor, s.strategy, s.backward_prefetch, s.reshard_after_forward) == (flavor, strategy, prefetch, reshard)
    assert s.flavor is flavor and (s.strategy is strategy)  # the enums themselves, not equal strings
    assert str(s) == spec


def test_options_and_model():
    s = Setting.parse("fsdp1:FULL_SHARD:fwd:nolimit:ac:nowrap:sync@odd")
    assert s.forward_prefetch and not s.limit_all_gathers and s.checkpointing and not s.wrap and s.sync
    assert s.model == "odd" and s.options == (Option.FWD, Option.NOLIMIT, Option.AC, Option.NOWRAP, Option.SYNC)
    assert Setting.parse("fsdp2:explicit").explicit and not Setting.parse("fsdp2:implicit").explicit
    built = Setting(Flavor.FSDP1, Strategy.FULL_SHARD, Prefetch.BACKWARD_PRE)
    assert str(built) == "fsdp1:FULL_SHARD:BACKWARD_PRE" and built == Setting.parse(str(built))
    assert Setting("fsdp2", fsdp2="keep") == Setting(Flavor.FSDP2, fsdp2=Fsdp2.KEEP)  # strings become the enums


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("fsdp3:FULL_SHARD", ["'fsdp3'", "did you mean 'fsdp2'", "plain, ddp, fsdp1, fsdp2"]),
        ("fsdp1:full_shard", ["'full_shard'", "did you mean 'FULL_SHARD'", "SHARD_GRAD_OP"]),
        ("fsdp1:FULL_SHARD:BACKWARD_PER", ["'BACKWARD_PER'", "did you mean 'BACKWARD_PRE'", "BACKWARD_POST"]),
        ("fsdp1", ["''", "FULL_SHARD"]),
        ("fsdp2:reshrd", ["'reshrd'", "did you mean 'reshard'", "implicit"]),
        ("ddp:fwd", ["'fwd'", "option of ddp", "ac, sync"]),
        ("fsdp2:keep:fwd", ["'fwd'", "option of fsdp2"]),
        ("fsdp1:FULL_SHARD:post:post", ["'post' twice"]),
        ("fsdp1:FULL_SHARD:BACKWARD_PRE:noprefetch", ["BACKWARD_PRE and noprefetch"]),
        ("fsdp1:FULL_SHARD@", ["must follow the @"]),
    ],
)
def test_a_wrong_setting_is_refused_with_the_word_and_the_choices(spec, says):
    with pytest.raises(SettingError) as err:
        Setting.parse(spec)
    assert all(s in str(err.value) for s in says), str(err.value)
    assert isinstance(err.value, ValueError)


def test_the_enums_are_the_strings_they_stand_for():
    read_back = json.loads(json.dumps({"flavor": Flavor.FSDP1, "strategy": Strategy.HYBRID_SHARD_ZERO2}))
    assert read_back == {"flavor": "fsdp1", "strategy": "_HYBRID_SHARD_ZERO2"}
    assert read_back["flavor"] == Flavor.FSDP1 and f"{Prefetch.NONE}" == "NONE" and repr(Flavor.DDP) == "'ddp'"
    assert {"fsdp1": 1}[Flavor.FSDP1] == 1 and {Flavor.FSDP1: 1}["fsdp1"] == 1  # hashed as the string
    assert Backend.choices() == ("auto", "gloo", "nccl") and Display.choices() == ("auto", "widgets", "text", "none")
    assert Strategy.HYBRID_SHARD.hybrid and not Strategy.NO_SHARD.sharded and Strategy.FULL_SHARD.reshards


def test_a_jobs_mode_is_a_mode():
    spec = JobSpec.from_json(JobSpec("serve", "gloo", 60.0).to_json())
    assert spec.mode is JobMode.SERVE and MODES == ("code", "path", "function", "serve")
    assert json.loads(spec.to_json())["mode"] == "serve"
    with pytest.raises(ValueError, match="job mode must be one of"):
        JobSpec("cell", "gloo", 60.0)


# -- the literals ------------------------------------------------------------------------------------

# a word an enum stands for, as a string literal in labkit's code (not in a docstring): name it through the enum
WORDS = {m.value for e in (Flavor, Strategy, Prefetch) for m in e}
# the backends' and displays' words are common English ("auto", "text", "none"): only a comparison with
# something called backend or display, or a tuple of the choices, counts
CHOICES = {m.value for e in (Backend, Display) for m in e}
ENUMS = ("labkit/wire/setting.py",)
# (file, word): why it stays a string
ALLOWED = {
    (
        "labkit/grading/rerun_exercises.py",
        "plain",
    ): "the re-run's name for the step without checkpointing, beside 'yours'",
    ("labkit/grading/exercises.py", "ddp"): "the name of the student's variable (_global(obs, 'ddp'), name='ddp')",
    ("labkit/grading/exercises.py", "fsdp2"): "the name of the student's variable (_global(obs, 'fsdp2'))",
    ("labkit/grading/rerun_lesson8.py", "ddp"): "the name of lesson 8's reference variable (_global(obs, 'ddp'))",
    ("labkit/memory/states.py", "DDP"): "the memory model's own vocabulary: ZeRO stages and their aliases",
    ("labkit/memory/states.py", "NO_SHARD"): "an alias in the memory model's STRATEGY_ALIASES",
    ("labkit/memory/states.py", "SHARD_GRAD_OP"): "an alias in the memory model's STRATEGY_ALIASES",
    ("labkit/memory/states.py", "FULL_SHARD"): "an alias in the memory model's STRATEGY_ALIASES",
    ("labkit/memory/states.py", "HYBRID_SHARD"): "a name in the memory model's STRATEGIES and STRATEGY_ALIASES",
    ("labkit/memory/model.py", "DDP"): "the memory model's ZeRO-stage vocabulary (DDP, ZERO1, ZERO2, ZERO3)",
    ("labkit/views/memory.py", "DDP"): "the memory model's ZeRO-stage vocabulary (DDP, ZERO1, ZERO2, ZERO3)",
}
# backend and display: labkit.export.runtime is copied into exported scripts that run where labkit is not installed
CHOICES_ALLOWED = ("labkit/export/runtime.py",)


def docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def is_str(node: ast.AST, words: set[str]) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in words


def about_choice(node: ast.AST) -> bool:
    text = ast.unparse(node).lower()
    return "backend" in text or "display" in text


def literals(path: Path) -> list[tuple[int, str]]:
    """(line, word) of each flavor, strategy or prefetch literal, and each backend or display literal
    compared with a backend or a display or listed as the choices, in ``path``."""
    tree = ast.parse(path.read_text())
    skip = docstrings(tree)
    found = [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if is_str(n, WORDS) and id(n) not in skip and not isinstance(n.value, bool)
    ]
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(about_choice(s) for s in sides if not isinstance(s, (ast.Constant, ast.Tuple))):
                for side in sides:
                    elts = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                    found += [(e.lineno, e.value) for e in elts if is_str(e, CHOICES)]
        elif isinstance(node, ast.Tuple) and len(node.elts) >= 3 and all(is_str(e, CHOICES) for e in node.elts):
            found += [(node.lineno, ast.unparse(node))]
    return found


def test_the_literal_scan_sees_literals(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""fsdp1 in a docstring is prose."""\n'
        'x = "fsdp1"\n'
        'if cfg.backend == "nccl": pass\n'
        'MODES = ("auto", "widgets", "text", "none")\n'
        'y = "text"\n'
    )
    assert [w for _, w in literals(sample)] == ["fsdp1", "nccl", "('auto', 'widgets', 'text', 'none')"]


def test_labkit_names_flavors_strategies_and_prefetch_modes_through_the_enums():
    bad = []
    for path in sorted((ROOT / "labkit").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel in ENUMS:
            continue
        for line, word in literals(path):
            if word in CHOICES or word.startswith("("):
                if not rel.startswith(CHOICES_ALLOWED):
                    bad.append(f"{rel}:{line} {word}")
            elif (rel, word) not in ALLOWED:
                bad.append(f"{rel}:{line} {word!r}")
    assert not bad, "name these through labkit.wire.setting (Flavor, Strategy, Prefetch, Backend, Display):\n" + (
        "\n".join(bad)
    )


def test_the_allow_list_is_still_needed():
    used = {(str(p.relative_to(ROOT)), w) for p in (ROOT / "labkit").rglob("*.py") for _, w in literals(p)}
    stale = sorted(k for k in ALLOWED if k not in used)
    assert not stale, f"ALLOWED lists literals the code no longer has: {stale}"
