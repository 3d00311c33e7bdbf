"""The grader's re-run of the exercises on the ranks is fair: answers right in different ways score full,
wrong ones score 0, whatever the inputs of the grading.

Each entry of ``CORPUS`` is written as a student would write it: the exercise cell of the built notebook
with its solution regions replaced. It goes through what the grader does with a submission: the
student's functions taken from a notebook-like list of cells (``rerun.functions_of``), the grader's own
ranks given inputs made from a seed (``rerun.run_task``), and the verdict computed here from that seed
(``rerun.verdict``). The Romanian edition's cell gives the same code (its comments aside), and the
verdict's message renders in both languages.

    .venv/bin/pytest tests/test_grading_fairness.py -q                       # all (launches ranks: slow)
    .venv/bin/pytest tests/test_grading_fairness.py -q -m "not slow"         # extraction and verdicts only
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import nbformat
import pytest
from lesson8_answers import L8_ALL_REDUCE_SLICE, L8_DIVIDE_FIRST, L8_PER_GRADIENT

from labkit.grading import rerun
from labkit.grading.build import BEGIN_SOLUTION, END_SOLUTION
from labkit.i18n import t

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = {
    "lesson0.mean_on_ranks": "00_setup",
    "lesson1.ddp_by_hand": "01_ddp_memory_wall",
    "lesson2.mini_zero3": "02_zero3_sharding",
    "lesson3.wrap_units": "03_wrap_policies",
    "lesson4.forward_prefetch": "04_prefetch_overlap",
    "lesson5.mixed_precision": "05_offload_mixed_precision",
    "lesson6.accumulation": "06_activations_recomputation",
    "lesson7.checkpoint_budget": "07_fsdp2_70b",
    "lesson8.overlap_hooks": "08_overlap_by_hand",
    "lesson8.bucketed": "08_overlap_by_hand",
    "lesson8.zero1_by_hand": "08_overlap_by_hand",
    "lesson9.compose": "09_composing_parallelisms",
}
RIGHT = None  # the verdict a right answer gets: correct


L8_AFTER = (
    "def finish():\n"
    "    for p in model.parameters():\n"
    "        dist.all_reduce(p.grad)\n"
    "        p.grad /= dist.get_world_size()\n"
    "\n"
    "return finish"
)
L8_BUCKETS = (  # the solution's buckets, written out (the overlap exercise's cell has no make_buckets)
    "world, pending, buckets, current, size = dist.get_world_size(), [], [], [], 0\n"
    "for p in reversed(list(model.parameters())):\n"
    "    current.append(p)\n"
    "    size += p.numel() * p.element_size()\n"
    "    if size >= bucket_bytes:\n"
    "        buckets.append(current)\n"
    "        current, size = [], 0\n"
    "buckets += [current] if current else []\n"
    "ready = [0] * len(buckets)\n"
    "\n"
    "def hook_for(b):\n"
    "    def hook(p):\n"
    "        ready[b] += 1\n"
    "        if ready[b] == len(buckets[b]):\n"
    "            flat = torch.cat([q.grad.reshape(-1) for q in buckets[b]])\n"
    "            pending.append((b, flat, dist.all_reduce(flat, async_op=True)))\n"
    "    return hook\n"
    "\n"
    "for b, bucket in enumerate(buckets):\n"
    "    for p in bucket:\n"
    "        p.register_post_accumulate_grad_hook(hook_for(b))\n"
    "\n"
    "def finish():\n"
    "    for b, flat, work in pending:\n"
    "        work.wait()\n"
    "        flat /= world\n"
    "        for q, part in zip(buckets[b], flat.split([q.numel() for q in buckets[b]])):\n"
    "            q.grad.copy_(part.view_as(q.grad))\n"
    "    pending.clear()\n"
    "    ready[:] = [0] * len(buckets)\n"
    "\n"
    "return finish"
)

# (name, {solution region: what the student wrote there}, RIGHT or the message key a wrong answer gets)
CORPUS: dict[str, list[tuple[str, dict[int, str], str | None]]] = {
    "lesson0.mean_on_ranks": [
        ("clone, all_reduce, divide", {}, RIGHT),
        (
            "all_gather, then the mean",
            {
                0: "parts = [torch.empty_like(mine) for _ in range(dist.get_world_size())]\n"
                "dist.all_gather(parts, mine)\n"
                "return torch.stack(parts).mean(dim=0)"
            },
            RIGHT,
        ),
        (
            "all_reduce on a stacked copy, with a count of the ranks",
            {0: "both = torch.stack([mine, torch.ones_like(mine)])\ndist.all_reduce(both)\nreturn both[0] / both[1]"},
            RIGHT,
        ),
        ("its own values", {0: "return mine.clone()"}, "grading.exercise.calls"),
        (
            "the sum, not the mean",
            {0: "total = mine.clone()\ndist.all_reduce(total)\nreturn total"},
            "grading.exercise.not_mean",
        ),
        (
            "a world of two, hard-coded",
            {0: "total = mine.clone()\ndist.all_reduce(total)\nreturn total / 2"},
            "grading.exercise.wrong_values",
        ),
    ],
    "lesson1.ddp_by_hand": [
        ("one all_reduce per parameter", {}, RIGHT),
        (
            "one flattened all_reduce",
            {
                0: "grads = [p.grad for p in model.parameters()]\n"
                "flat = torch.cat([g.reshape(-1) for g in grads])\n"
                "dist.all_reduce(flat)\n"
                "flat /= dist.get_world_size()\n"
                "offset = 0\n"
                "for g in grads:\n"
                "    g.copy_(flat[offset : offset + g.numel()].view_as(g))\n"
                "    offset += g.numel()"
            },
            RIGHT,
        ),
        (
            "buckets of two parameters",
            {
                0: "params = list(model.parameters())\n"
                "for i in range(0, len(params), 2):\n"
                "    bucket = [p.grad for p in params[i : i + 2]]\n"
                "    flat = torch.cat([g.flatten() for g in bucket]) / dist.get_world_size()\n"
                "    dist.all_reduce(flat)\n"
                "    for g, part in zip(bucket, flat.split([g.numel() for g in bucket])):\n"
                "        g.copy_(part.view_as(g))"
            },
            RIGHT,
        ),
        ("no collective", {0: "pass"}, "grading.exercise.calls"),
        (
            "the sum, not divided",
            {0: "for p in model.parameters():\n    dist.all_reduce(p.grad)"},
            "grading.exercise.not_mean",
        ),
        (
            "only some parameters",
            {
                0: "for p in list(model.parameters())[:2]:\n"
                "    dist.all_reduce(p.grad)\n"
                "    p.grad /= dist.get_world_size()"
            },
            "grading.exercise.grads_differ",
        ),
    ],
    "lesson2.mini_zero3": [
        ("all_gather_into_tensor; reduce_scatter_tensor, then divide", {}, RIGHT),
        (
            "all_gather into a list, then cat; reduce_scatter of a list of chunks",
            {
                0: "parts = [torch.empty_like(shard) for _ in range(world)]\n"
                "dist.all_gather(parts, shard)\n"
                "return torch.cat(parts)",
                1: "mine = torch.empty(flat_grad.numel() // world)\n"
                "dist.reduce_scatter(mine, list(flat_grad.chunk(world)))\n"
                "return mine / world",
            },
            RIGHT,
        ),
        (
            "an all_reduce, then this rank's slice",
            {
                1: "total = flat_grad.clone()\n"
                "dist.all_reduce(total)\n"
                "return total.chunk(world)[dist.get_rank()] / world"
            },
            "grading.exercise.calls",
        ),
        (
            "local values",
            {0: "return shard.repeat(world)", 1: "return flat_grad.chunk(world)[dist.get_rank()].clone()"},
            "grading.exercise.calls",
        ),
        (
            "the sum, not the mean",
            {
                1: "mine = flat_grad.new_empty(flat_grad.numel() // world)\n"
                "dist.reduce_scatter_tensor(mine, flat_grad)\n"
                "return mine"
            },
            "grading.exercise.not_mean",
        ),
    ],
    "lesson3.wrap_units": [
        ("a policy of TransformerBlock; fully_shard per block, then the root", {}, RIGHT),
        ("a policy that wraps nothing", {0: "return recurse"}, "grading.exercise.units"),
    ],
    "lesson4.forward_prefetch": [
        ("one block ahead", {}, RIGHT),
        (
            "two blocks ahead",
            {
                0: "blocks = list(model.layers)\n"
                "for i, block in enumerate(blocks[:-1]):\n"
                "    block.set_modules_to_forward_prefetch(blocks[i + 1 : i + 3])"
            },
            RIGHT,
        ),
        ("no prefetch", {0: "pass"}, "grading.exercise.prefetch_config"),
    ],
    "lesson5.mixed_precision": [
        ("bf16 parameters, fp32 reduction", {}, RIGHT),
        (
            "fp16 parameters, fp32 reduction",
            {0: "return MixedPrecisionPolicy(param_dtype=torch.float16, reduce_dtype=torch.float32)"},
            RIGHT,
        ),
        (
            "bf16 reduction too",
            {0: "return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)"},
            "grading.exercise.dtype",
        ),
    ],
    "lesson6.accumulation": [
        ("only the last micro-batch syncs", {}, RIGHT),
        (
            "sync off for the loop, on again for the last",
            {
                0: "model.set_requires_gradient_sync(False)\n"
                "*first, last = micro_batches\n"
                "for inputs, targets in first:\n"
                "    (model(inputs, targets) / len(micro_batches)).backward()\n"
                "model.set_requires_gradient_sync(True)\n"
                "(model(*last) / len(micro_batches)).backward()"
            },
            RIGHT,
        ),
        (
            "sync every micro-batch",
            {0: "for inputs, targets in micro_batches:\n    (model(inputs, targets) / len(micro_batches)).backward()"},
            "grading.exercise.accumulate_sync",
        ),
    ],
    "lesson7.checkpoint_budget": [
        ("every block", {}, RIGHT),
        (  # the lesson's budget is 60% of the activations: on the grader's deeper models this meets it
            "every block but the first",
            {
                0: "later = list(model.layers)[1:]\n"
                "apply_activation_checkpointing(model, check_fn=lambda m: any(m is b for b in later))"
            },
            RIGHT,
        ),
        (  # recomputing, but one block of five or six: over the budget
            "the first block only",
            {0: "apply_activation_checkpointing(model, check_fn=lambda m: m is model.layers[0])"},
            "grading.exercise.over_budget",
        ),
        ("none", {0: "pass"}, "grading.exercise.no_recompute"),
    ],
    "lesson8.overlap_hooks": [
        ("an all-reduce per gradient, from its hook", {}, RIGHT),
        ("divided before the all-reduce", {0: L8_DIVIDE_FIRST}, RIGHT),
        ("buckets", {0: L8_BUCKETS.replace("bucket_bytes", "2**16")}, RIGHT),
        ("lesson 1's averaging, after backward", {0: L8_AFTER}, "grading.exercise.overlap.none"),
        (
            "a blocking all-reduce in the hook",
            {
                0: L8_DIVIDE_FIRST.replace(
                    "pending.append(dist.all_reduce(p.grad, async_op=True))", "dist.all_reduce(p.grad)"
                )
            },
            "grading.exercise.overlap.blocking",
        ),
        (  # step 2 waits on step 1's handles again and divides its own gradients twice
            "the handles never cleared",
            {0: L8_PER_GRADIENT.replace("    pending.clear()\n", "")},
            "grading.exercise.overlap.grads",
        ),
    ],
    "lesson8.bucketed": [
        ("a count per bucket", {}, RIGHT),
        ("a bucket per gradient", {0: L8_PER_GRADIENT}, "grading.exercise.overlap.buckets"),
        (
            "one bucket for everything",
            {0: L8_BUCKETS.replace("bucket_bytes", "2**40")},
            "grading.exercise.overlap.buckets",
        ),
        (  # the last bucket, not full, waits for finish
            "only full buckets sent from the hooks",
            {
                0: L8_BUCKETS.replace(
                    "if ready[b] == len(buckets[b]):", "if ready[b] == len(buckets[b]) and b < len(buckets) - 1:"
                )
            },
            "grading.exercise.overlap.late",
        ),
    ],
    "lesson8.zero1_by_hand": [
        ("reduce-scatter, step, all-gather", {}, RIGHT),
        ("all-reduce, own slice, all-gather", {0: L8_ALL_REDUCE_SLICE}, RIGHT),
        (
            "the updated slices never gathered",
            {0: L8_ALL_REDUCE_SLICE.split("parts = ")[0]},
            "grading.exercise.zero1.params",
        ),
        ("the sum, not the mean", {0: L8_ALL_REDUCE_SLICE.replace(" / world", "")}, "grading.exercise.zero1.params"),
    ],
    "lesson9.compose": [
        ("tensor parallelism in the MLP, then FSDP2 over dp", {}, RIGHT),
        (
            "one block at a time, both in one loop",
            {
                0: 'plan = {"ffn.w1": ColwiseParallel(), "ffn.w3": ColwiseParallel(), "ffn.w2": RowwiseParallel()}\n'
                "for block in model.layers:\n"
                '    parallelize_module(block, mesh["tp"], plan)\n'
                '    fully_shard(block, mesh=mesh["dp"])\n'
                'fully_shard(model, mesh=mesh["dp"])\n'
                "return model"
            },
            RIGHT,
        ),
        (
            "FSDP2 only",
            {
                0: 'for block in model.layers:\n    fully_shard(block, mesh=mesh["dp"])\nfully_shard(model, mesh=mesh["dp"])\nreturn model'
            },
            "grading.exercise.compose.tp_missing",
        ),
        (
            "tensor parallelism only",
            {
                0: 'plan = {"ffn.w1": ColwiseParallel(), "ffn.w3": ColwiseParallel(), "ffn.w2": RowwiseParallel()}\n'
                "for block in model.layers:\n"
                '    parallelize_module(block, mesh["tp"], plan)\n'
                "return model"
            },
            "grading.exercise.compose.dp_missing",
        ),
    ],
}
REGION = re.compile(rf"^([ \t]*){re.escape(BEGIN_SOLUTION)}\n(.*?)^[ \t]*{re.escape(END_SOLUTION)}\n?", re.M | re.S)


def notebook_cells(qid: str, lang: str = "en") -> tuple[list[str], int, int]:
    """(the notebook's code cell sources, the exercise cell's index, its check's index)."""
    nb = nbformat.read(ROOT / "notebooks" / lang / f"{NOTEBOOKS[qid]}.ipynb", as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "code"]
    check = next(i for i, c in enumerate(cells) if f'labkit.check("{qid}", labkit.last_run)' in c)
    exercise = next(i for i in reversed(range(check)) if cells[i].startswith("%%torchrun"))
    return cells, exercise, check


def written(source: str, replace: dict[int, str]) -> str:
    """The cell as a student hands it in: each solution region kept, or replaced (indented like its marker)."""
    count = iter(range(1000))

    def one(m: re.Match) -> str:
        i = next(count)
        body = replace.get(i, m.group(2))
        indent = m.group(1) if i in replace else ""
        return "\n".join(indent + line for line in body.rstrip("\n").split("\n")) + "\n"

    return REGION.sub(one, source)


def handed_in(qid: str, replace: dict[int, str], lang: str = "en") -> str:
    """The student's functions, as the grader extracts them from a notebook holding this answer."""
    cells, exercise, check = notebook_cells(qid, lang)
    cells[exercise] = written(cells[exercise], replace)
    functions = rerun.EXERCISES[qid].functions
    cells.append("".join(f"def {fn}(*args):\n    raise RuntimeError('after the check')\n" for fn in functions))
    code = rerun.functions_of(cells, qid, before=check)
    assert code is not None, qid
    return code


ENTRIES = [(qid, name) for qid, entries in CORPUS.items() for name, _, _ in entries]


def entry(qid: str, name: str) -> tuple[dict[int, str], str | None]:
    return next((replace, want) for n, replace, want in CORPUS[qid] if n == name)


# -- the corpus, through the grader's own ranks ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("qid", "name"), ENTRIES, ids=[f"{q}:{n}" for q, n in ENTRIES])
def test_right_answers_score_full_and_wrong_ones_zero(qid, name):
    replace, want = entry(qid, name)
    code = handed_in(qid, replace)
    seed = 1000 + ENTRIES.index((qid, name))  # a grading of its own for each entry
    result = json.loads(json.dumps(rerun.run_task(rerun.task(qid, code, seed), timeout=300)))
    verdict = rerun.verdict(qid, seed, result)
    if want is RIGHT:
        assert verdict.correct, (verdict, result.get("error"))
    else:
        assert not verdict.correct and verdict.key == want, (verdict, result.get("error"))
        for lang in ("en", "ro"):
            text = t(verdict.key, lang, **verdict.fields)
            assert text and "{" not in text, (lang, text)
    # the Romanian edition's cell: its comments translated, the same code, so the same verdict
    ro = handed_in(qid, replace, "ro")
    assert ast.dump(ast.parse(ro)) == ast.dump(ast.parse(code))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_student_editions_stub_scores_zero_as_not_answered():
    code = handed_in("lesson0.mean_on_ranks", {0: "# YOUR CODE HERE\nraise NotImplementedError()"})
    result = rerun.run_task(rerun.task("lesson0.mean_on_ranks", code, 7), timeout=120)
    verdict = rerun.verdict("lesson0.mean_on_ranks", 7, result)
    assert not verdict.correct and verdict.key == "grading.check.unanswered"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_rank_cannot_read_another_ranks_inputs():
    """The inputs of the other ranks are gone before the student's code runs, even a decorator."""
    spy = (  # the harness's frame names the task's folder: look there for every rank's inputs
        "import glob, os, sys\n"
        "def _peek(f):\n"
        "    frame = sys._getframe(1)\n"
        "    while 'folder' not in frame.f_locals:\n"
        "        frame = frame.f_back\n"
        "    f.seen = glob.glob(os.path.join(frame.f_locals['folder'], 'in.*.json'))\n"
        "    return f\n"
        "@_peek\n"
        "def mean_of(mine):\n"
        "    import torch\n"
        "    return torch.tensor([float(len(mean_of.seen))] * mine.numel())\n"
    )
    result = rerun.run_task(rerun.task("lesson0.mean_on_ranks", spy, 3), timeout=120)
    assert result["ok"], result
    assert all(out["mean"] == [0.0] * len(out["mean"]) for out in result["outputs"].values())


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_hang_and_a_crash_are_said_and_never_raised():
    hang = "import time\ndef mean_of(mine):\n    time.sleep(600)\n"
    result = rerun.run_task(rerun.task("lesson0.mean_on_ranks", hang, 1), timeout=8)
    verdict = rerun.verdict("lesson0.mean_on_ranks", 1, result)
    assert verdict.key == "grading.exercise.rerun.timeout", result
    crash = "def mean_of(mine):\n    return 1 / 0\n"
    result = rerun.run_task(rerun.task("lesson0.mean_on_ranks", crash, 1), timeout=120)
    verdict = rerun.verdict("lesson0.mean_on_ranks", 1, result)
    assert verdict.key == "grading.exercise.rerun.crashed" and "ZeroDivisionError" in verdict.fields["error"]
    assert t(verdict.key, "ro", **verdict.fields).startswith("evaluatorul")


# -- extraction, inputs and verdicts, without ranks -------------------------------------------------------


def test_every_run_question_has_a_rerun_and_a_corpus():
    from labkit.grading import registry

    registry.load_questions()
    runs = {q.id for q in registry.all_questions() if q.kind == "run"}
    assert rerun.rerun_questions() == runs == set(CORPUS)
    for qid, entries in CORPUS.items():
        assert any(w is RIGHT for _, _, w in entries) and any(w is not RIGHT for _, _, w in entries), qid


@pytest.mark.parametrize("qid", list(CORPUS))
def test_the_solution_cell_gives_its_functions_alone(qid):
    code = handed_in(qid, {})
    tree = ast.parse(code)
    kinds = {type(node) for node in tree.body}
    assert kinds <= {ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef}, kinds
    assert set(rerun.EXERCISES[qid].functions) <= {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def test_functions_of_takes_the_last_cell_before_the_check_and_drops_magics():
    cells = [
        "def mean_of(mine):\n    return 'first'\n",
        "%%torchrun -n 2\n%matplotlib inline\n!ls\nimport torch\ndef mean_of(mine):\n    return 'second'\n",
        "labkit.check('lesson0.mean_on_ranks', labkit.last_run)",
        "def mean_of(mine):\n    return 'after the check'\n",
    ]
    code = rerun.functions_of(cells, "lesson0.mean_on_ranks", before=2)
    assert "second" in code and "%" not in code and "!ls" not in code and "import torch" in code
    assert "after the check" in rerun.functions_of(cells, "lesson0.mean_on_ranks")
    assert rerun.functions_of(cells, "lesson0.mean_on_ranks", before=0) is None
    assert rerun.functions_of(cells, "lesson9.nothing") is None


def test_functions_of_survives_hostile_cells(tmp_path):
    marker = tmp_path / "ran"
    qid = "lesson0.mean_on_ranks"
    assert rerun.functions_of(["def mean_of(mine):\n    return (\n"], qid) is None  # a syntax error
    assert rerun.functions_of(["if True:\n    def mean_of(mine):\n        return mine\n"], qid) is None  # not top-level
    assert rerun.functions_of([None, 3, "x = 1"], qid) is None  # not text, or no function
    twice = "def mean_of(mine):\n    return 'one'\n\n\ndef mean_of(mine):\n    return 'two'\n"
    namespace: dict = {}
    exec(rerun.functions_of([twice], qid), namespace)
    assert namespace["mean_of"](None) == "two"  # the last definition wins, as in the notebook
    outside = (
        f"open({str(marker)!r}, 'w').write('x')\n"
        "import os\n"
        "def mean_of(mine):\n    return mine\n"
        "for i in range(3):\n    print(i)\n"
        "with open('x') as f:\n    pass\n"
        "class Helper:\n    pass\n"
    )
    code = rerun.functions_of([outside], qid)
    exec(code, {})
    assert not marker.exists()
    assert [type(n).__name__ for n in ast.parse(code).body] == ["Import", "FunctionDef", "ClassDef"]


def test_the_inputs_come_from_the_seed_and_differ_between_ranks_and_gradings():
    for qid in CORPUS:
        assert rerun.inputs_of(qid, 5) == rerun.inputs_of(qid, 5)  # a regrade sees the same inputs
        assert rerun.task(qid, "", 5)["ranks"] == rerun.inputs_of(qid, 5)[1]
    shared, ranks = rerun.inputs_of("lesson0.mean_on_ranks", 5)
    assert len(ranks) == 3 and len({json.dumps(r) for r in ranks}) == 3  # three ranks, each its own numbers
    sizes = {rerun.inputs_of("lesson0.mean_on_ranks", s)[0]["n"] for s in range(40)}
    assert len(sizes) > 3 and 4 not in sizes  # sizes vary, and are never the notebook's four
    widths = {tuple(rerun.inputs_of("lesson1.ddp_by_hand", s)[0]["widths"]) for s in range(10)}
    assert len(widths) > 5
    layers = {rerun.inputs_of("lesson4.forward_prefetch", s)[0]["cfg"]["n_layers"] for s in range(20)}
    assert layers == {3, 4}


def test_a_failed_rerun_is_said_in_both_languages():
    cases = [
        ({"error": {"kind": "timeout", "seconds": 60}}, "grading.exercise.rerun.timeout"),
        ({"error": {"kind": "crashed", "rank": 1, "message": "ValueError: x"}}, "grading.exercise.rerun.crashed"),
        ({"error": {"kind": "syntax", "message": "SyntaxError: bad"}}, "grading.exercise.rerun.crashed"),
        ({"error": {"kind": "unanswered"}}, "grading.check.unanswered"),
        ({"error": None, "outputs": {}, "calls": {}}, "grading.exercise.calls"),
        ({"error": None, "outputs": {"0": {"x": 1}}, "calls": {}}, "grading.exercise.rerun.no_output"),
    ]
    for result, key in cases:
        qid = "lesson0.mean_on_ranks" if key != "grading.exercise.rerun.no_output" else "lesson3.wrap_units"
        verdict = rerun.verdict(qid, 1, result)
        assert not verdict.correct and verdict.key == key, (result, verdict)
        for lang in ("en", "ro"):
            assert "{" not in t(key, lang, **verdict.fields)


def test_a_forged_result_that_does_not_hold_the_right_values_fails():
    """The verdict computes the expected outputs from the seed: a result with the right collectives
    observed but values made up (they cannot be known without every rank's inputs) fails."""
    qid, seed = "lesson0.mean_on_ranks", 11
    _, ranks = rerun.inputs_of(qid, seed)
    calls = {str(r): [{"k": "call", "fn": "mean_of", "op": "all_reduce"}] for r in range(3)}
    own = {str(r): {"mean": ranks[r]["mine"]} for r in range(3)}
    assert (
        rerun.verdict(qid, seed, {"error": None, "outputs": own, "calls": calls}).key == "grading.exercise.wrong_values"
    )
    mean = [sum(col) / 3 for col in zip(*(r["mine"] for r in ranks))]
    right = {str(r): {"mean": mean} for r in range(3)}
    assert rerun.verdict(qid, seed, {"error": None, "outputs": right, "calls": calls}).correct
    assert not rerun.verdict(qid, seed + 1, {"error": None, "outputs": right, "calls": calls}).correct


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("qid", list(CORPUS))
def test_the_notebooks_known_shortcuts_fail_in_the_graders_run_too(qid):
    """The shortcuts ``tests/test_grading_exercises.py`` shows the notebook's check failing fail here too,
    so that the notebook and the grader agree (a shortcut that reads the cell's own variables, such as
    lesson 1's copy of DDP's gradients, finds none in the grader's ranks)."""
    from test_grading_exercises import SHORTCUTS

    region, replacement, _ = SHORTCUTS[qid]
    code = handed_in(qid, {region: replacement})
    result = json.loads(json.dumps(rerun.run_task(rerun.task(qid, code, 77), timeout=300)))
    verdict = rerun.verdict(qid, 77, result)
    assert not verdict.correct, (verdict, result.get("error"))


def test_a_notebook_without_the_functions_gets_a_verdict_that_names_them():
    verdict = rerun.no_functions("lesson2.mini_zero3")
    assert not verdict.correct and "gather_params, reduce_scatter_grads" in t(verdict.key, "en", **verdict.fields)
    assert "reduce_scatter_grads" in t(verdict.key, "ro", **verdict.fields)
