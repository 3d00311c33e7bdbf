"""The exercises on the ranks are verified from what labkit observed, and check the mechanism.

Each lesson's exercise cell is taken from the built notebook (so the test follows the lessons),
run on 2 warm gloo ranks once as the solution wrote it and once with a known shortcut in place
of the solution, and judged by the question's verifier on the observations in the cell's
``Run`` (what ``labkit.check`` does in the notebook, for immediate feedback; the grader re-runs the
exercise on ranks of its own instead: tests/test_grading_fairness.py). The solution passes; each shortcut fails with a message that names what
is wrong, and no hint shows solution code.

    .venv/bin/pytest tests/test_grading_exercises.py -q
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from lesson8_answers import L8_ALL_REDUCE_SLICE, L8_DIVIDE_FIRST, L8_PER_GRADIENT

from labkit.grading import registry
from labkit.grading.build import BEGIN_SOLUTION, END_SOLUTION
from labkit.grading.observed import observations_of
from labkit.i18n import t

ROOT = Path(__file__).resolve().parents[1]
EXERCISES = {
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

# a shortcut a student might take instead of the mechanism: (which solution region, what in its place), and
# the message it must get
SHORTCUTS = {
    "lesson0.mean_on_ranks": (
        0,
        "return mine / (dist.get_rank() + 1) * (dist.get_world_size() + 1) / 2  # known without asking the others",
        "grading.exercise.calls",
    ),
    "lesson1.ddp_by_hand": (  # copy DDP's gradients
        0,
        "for a, b in zip(model.parameters(), ddp.module.parameters()):\n    a.grad.copy_(b.grad)",
        "grading.exercise.calls",
    ),
    "lesson2.mini_zero3": (  # an all-reduce, then a reduce-scatter nobody uses
        1,
        "dist.all_reduce(flat_grad)\n"
        "dummy = flat_grad.new_empty(flat_grad.numel() // world)\n"
        "dist.reduce_scatter_tensor(dummy, flat_grad.clone())\n"
        "return flat_grad.chunk(world)[dist.get_rank()] / world",
        "grading.exercise.calls",
    ),
    "lesson3.wrap_units": (0, "return recurse", "grading.exercise.units"),  # a policy that wraps nothing
    "lesson4.forward_prefetch": (0, "pass", "grading.exercise.prefetch_config"),
    "lesson5.mixed_precision": (
        0,
        "return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)",
        "grading.exercise.dtype",
    ),
    "lesson6.accumulation": (  # sync every micro-batch: right gradients, four rounds of reduce-scatters
        0,
        "for inputs, targets in micro_batches:\n    (model(inputs, targets) / len(micro_batches)).backward()",
        "grading.exercise.accumulate_sync",
    ),
    "lesson7.checkpoint_budget": (0, "pass", "grading.exercise.no_recompute"),
    "lesson8.overlap_hooks": (  # lesson 1's averaging, after backward: nothing overlaps
        0,
        "def finish():\n"
        "    for p in model.parameters():\n"
        "        dist.all_reduce(p.grad)\n"
        "        p.grad /= dist.get_world_size()\n"
        "\n"
        "return finish",
        "grading.exercise.overlap.none",
    ),
    "lesson8.bucketed": (0, L8_PER_GRADIENT, "grading.exercise.overlap.buckets_seen"),  # a bucket per gradient
    "lesson8.zero1_by_hand": (  # DDP's averaging, no sharded step
        0,
        "for p in model.parameters():\n    dist.all_reduce(p.grad)\n    p.grad /= dist.get_world_size()",
        "grading.exercise.calls",
    ),
    "lesson9.compose": (  # FSDP2 alone: right losses, nothing split over mesh['tp']
        0,
        'for block in model.layers:\n    fully_shard(block, mesh=mesh["dp"])\n'
        'fully_shard(model, mesh=mesh["dp"], reshard_after_forward=False)\nreturn model',
        "grading.exercise.compose.no_tp",
    ),
}

# right in another way than the solution: the notebook's check must pass them too (issue 45's fair checks)
OTHER_RIGHT = {
    ("lesson0.mean_on_ranks", "all_gather"): (
        0,
        "parts = [torch.empty_like(mine) for _ in range(dist.get_world_size())]\n"
        "dist.all_gather(parts, mine)\n"
        "return torch.stack(parts).mean(dim=0)",
    ),
    ("lesson1.ddp_by_hand", "flattened"): (
        0,
        "grads = [p.grad for p in model.parameters()]\n"
        "flat = torch.cat([g.reshape(-1) for g in grads])\n"
        "dist.all_reduce(flat)\n"
        "flat /= dist.get_world_size()\n"
        "for g, part in zip(grads, flat.split([g.numel() for g in grads])):\n"
        "    g.copy_(part.view_as(g))",
    ),
    ("lesson4.forward_prefetch", "two ahead"): (
        0,
        "blocks = list(model.layers)\n"
        "for i, block in enumerate(blocks[:-1]):\n"
        "    block.set_modules_to_forward_prefetch(blocks[i + 1 : i + 3])",
    ),
    ("lesson7.checkpoint_budget", "one block of two"): (
        0,
        "apply_activation_checkpointing(model, check_fn=lambda m: m is model.layers[-1])",
    ),
    ("lesson8.overlap_hooks", "divided before the all-reduce"): (0, L8_DIVIDE_FIRST),
    ("lesson8.zero1_by_hand", "all-reduce, own slice, all-gather"): (0, L8_ALL_REDUCE_SLICE),
}

# the notebook's parameters an exercise cell takes through --vars (the warm session has no notebook)
VARS = {"lesson9.compose": {"model_size": "tiny", "steps": 2, "batch": 4}}

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def exercise_cell(qid: str) -> str:
    """The body of the %%torchrun cell whose Run the check of ``qid`` reads (magic line dropped)."""
    nb = nbformat.read(ROOT / "notebooks" / "en" / f"{EXERCISES[qid]}.ipynb", as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    i = next(i for i, c in enumerate(cells) if f'labkit.check("{qid}", labkit.last_run)' in c.source)
    cell = next(c for c in reversed(cells[:i]) if c.source.startswith("%%torchrun"))
    return cell.source.split("\n", 1)[1]


REGION = re.compile(rf"^([ \t]*){re.escape(BEGIN_SOLUTION)}\n(.*?)^[ \t]*{re.escape(END_SOLUTION)}\n?", re.M | re.S)


def with_solution(source: str, replace: dict[int, str] | None = None) -> str:
    """``source`` with the solution regions kept (markers dropped), except region i replaced by ``replace[i]``,
    indented like its marker."""
    replace = replace or {}
    count = iter(range(1000))

    def one(m: re.Match) -> str:
        i = next(count)
        body = replace[i] if i in replace else m.group(2)
        indent = m.group(1) if i in replace else ""
        return "\n".join(indent + line for line in body.rstrip("\n").split("\n")) + "\n"

    return REGION.sub(one, source)


@pytest.fixture(scope="module")
def runs():
    """Every exercise cell, as solved and with its shortcut, on one warm session of 2 gloo ranks."""
    import labkit

    registry.load_questions()
    out = {}
    reset = "for _name in [n for n in globals() if not n.startswith('__')]:\n    del globals()[_name]"
    with labkit.Session(nproc=2, backend="gloo", quiet=True, display="none") as session:
        for qid in EXERCISES:
            source = exercise_cell(qid)
            region, replacement, _ = SHORTCUTS[qid]
            for kind, code in (
                ("solution", with_solution(source)),
                ("shortcut", with_solution(source, {region: replacement})),
            ):
                session.run(reset, raise_on_error=False)
                out[qid, kind] = session.run(code, vars=VARS.get(qid, {}), timeout=600, raise_on_error=False)
        for (qid, name), (region, replacement) in OTHER_RIGHT.items():
            session.run(reset, raise_on_error=False)
            code = with_solution(exercise_cell(qid), {region: replacement})
            out[qid, name] = session.run(code, timeout=600, raise_on_error=False)
        session.run(reset, raise_on_error=False)  # lesson 5's five precision settings, for its halved_collectives
        variables = {"model_size": "tiny", "steps": 2}
        out["precision"] = session.run(precision_cell(), vars=variables, timeout=600, raise_on_error=False)
    return out


def precision_cell() -> str:
    nb = nbformat.read(ROOT / "notebooks" / "en" / "05_offload_mixed_precision.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.source.startswith("%%torchrun") and "SETTINGS = {" in c.source)
    return cell.source.split("\n", 1)[1]


@pytest.mark.parametrize("qid", list(EXERCISES))
def test_the_solution_passes_from_what_labkit_observed(runs, qid):
    run = runs[qid, "solution"]
    assert run.ok, [s.error for s in run.ranks.values()]
    observations = observations_of(run)
    assert sorted(observations) == [0, 1] and all(o["ok"] for o in observations.values())
    verdict = registry.get(qid).observe(observations)
    assert verdict.correct, verdict


@pytest.mark.parametrize("qid", list(EXERCISES))
def test_a_shortcut_fails_and_is_told_what_is_wrong(runs, qid):
    observations = observations_of(runs[qid, "shortcut"])
    verdict = registry.get(qid).observe(observations)
    assert not verdict.correct
    assert verdict.key == SHORTCUTS[qid][2], verdict
    assert t(verdict.key, "en", **verdict.fields) and t(verdict.key, "ro", **verdict.fields)


@pytest.mark.parametrize(("qid", "name"), list(OTHER_RIGHT))
def test_an_answer_right_in_another_way_passes_too(runs, qid, name):
    """A flattened all-reduce, an all-gather's mean, prefetching two blocks ahead, checkpointing some blocks:
    right, so the notebook's check passes them (whether the blocks checkpointed meet the budget is measured
    by the grader's own run, ``labkit.grading.rerun``)."""
    run = runs[qid, name]
    assert run.ok, [s.error for s in run.ranks.values()]
    verdict = registry.get(qid).observe(observations_of(run))
    assert verdict.correct, verdict


def test_values_the_cell_reported_are_not_what_is_judged(runs):
    """The shortcut of lesson 0 reports the right mean (it computed it without a collective); a Run
    made up in the notebook has no observations at all. Neither passes."""
    run = runs["lesson0.mean_on_ranks", "shortcut"]
    q = registry.get("lesson0.mean_on_ranks")
    assert not q.judge(run, {}).correct
    made_up = SimpleNamespace(values=dict(runs["lesson0.mean_on_ranks", "solution"].values), nproc=2, events={})
    assert q.judge(made_up, {}).key == "grading.exercise.no_observation"
    assert q.judge(SimpleNamespace(values={}, nproc=2), {}).key == "grading.check.type.run"


def test_hints_escalate_and_show_no_solution_code():
    """Every exercise on the ranks has three hints; none holds a line of the solution or a call."""
    registry.load_questions()
    for qid in EXERCISES:
        q = registry.get(qid)
        assert q.levels == 3 and len({q.hint_for(n) for n in (1, 2, 3, 9)}) == 3
        regions = [m.group(2) for m in REGION.finditer(exercise_cell(qid))]
        lines = {line.strip() for region in regions for line in region.split("\n") if len(line.strip()) > 8}
        assert lines
        for n in (1, 2, 3):
            for lang in ("en", "ro"):
                text = t(q.hint_for(n), lang)
                assert not any(line in text for line in lines), (qid, n, lang)
                assert not re.search(r"[\w\]]\(", text), (qid, n, lang, "a call in a hint")


def test_which_collectives_bf16_halved_is_judged_from_the_observed_dtypes(runs):
    """Lesson 5's answer: the notebook reads the dtypes and bytes labkit saw each setting's collectives move
    (the settings told apart by the model each trained); the grader's reference, which judges the value
    alone, agrees with that real run, and judges a record of it without any run."""
    from labkit.grading import judge

    run = runs["precision"]
    assert run.ok
    q = registry.get("lesson5.halved_collectives")
    assert q.judge({"all_gather"}, {"run": run}).correct
    assert not q.judge({"all_gather", "reduce_scatter"}, {"run": run}).correct
    for answer in ({"all_gather"}, ["all_gather"], {"all_gather", "reduce_scatter"}, {"reduce_scatter"}, set()):
        assert q.reference(answer) == q.judge(answer, {"run": run}).correct, answer
    record = {"id": q.id, "report": {"kind": "claim", "question": "value", "value": {"$set": ["all_gather"]}}}
    assert judge.verdict(q, record, {}).correct
