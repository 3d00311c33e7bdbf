"""The grader judges; the notebook only reports. No kernels here: records and functions by hand.

- a record's status, points or feedback are never what is scored: a forged "correct" scores 0;
- a formula is judged from the function's source, run again (``labkit.grading.evaluate``) at the
  student's unseen points and at the grader's own, so a lookup table of the student's points fails;
- multiple choice is judged on the first answer recorded;
- the student install's hashed answers accept what the exact comparison accepts, at the rounding
  boundary too, and name the known mistakes;
- the judge process runs each task in a child of its own, forked before any task was read: a function
  cannot patch the judge for a later task, read the other tasks' arguments, or write the results;
- a child that dies or hangs is reported for its own question only, by how it ended, never by what
  it printed; what a function raised at the grader's own points is named by its type only;
- a judge process that dies runs once more, and how it ended reaches the student's feedback.

    .venv/bin/pytest tests/test_grading_judge.py -q
"""

from __future__ import annotations

import math
import os
import time

import pytest

from labkit.grading import checks, evaluate, hashed, judge, registry, snapshot
from labkit.grading.grade import score
from labkit.grading.points import GRADER_UNSEEN
from labkit.i18n import t
from labkit.wire.grading import JudgeResult, JudgeTask, TaskKind

HELPER_BYTES = 4  # read by a function of the notebook below: a snapshot carries it


def _record(qid, value, **context):
    return checks.check(qid, value, **context).graded()


def _results(records):
    """What the judge process returns for these records (run here, in-process: these are our own functions)."""
    lesson = records[0][1]["id"].split(".")[0]
    chosen = judge.choose(records)
    tasks = judge.tasks(registry.lesson_questions(lesson), chosen, {})
    return {t.key: JudgeResult(t.key, evaluate.call_task(t)) for t in tasks}


def test_a_forged_record_scores_nothing(capsys):
    registry.load_questions()
    forged = [
        (i, {"id": q.id, "status": "correct", "correct": True, "points": q.points, "max_points": q.points})
        for i, q in enumerate(registry.lesson_questions("lesson1"))
    ]
    rows = score("lesson1", forged, {}, {})
    assert rows and all(r.points == 0 for r in rows)
    assert {r.key for r in rows} == {"grading.judge.no_report"}
    # a report that claims a kind it is not, or a run nobody observed, scores nothing either
    rec = _record("lesson1.bytes_per_param", lambda n_params: 16 * n_params)
    rec["report"]["question"] = "sealed"
    assert score("lesson1", [(0, rec)], {}, {})[0].points == 0
    run_rec = {"id": "lesson1.ddp_by_hand", "report": {"kind": "claim", "question": "run", "run": "run-made-up"}}
    row = next(r for r in score("lesson1", [(0, run_rec)], {}, {}) if r.id == "lesson1.ddp_by_hand")
    assert (row.points, row.key) == (0, "grading.exercise.rerun.no_functions")  # nothing to re-run
    capsys.readouterr()


def test_a_formula_is_run_again_from_its_source(capsys):
    def mixed_state_bytes(n_params):
        return (2 + 2 + HELPER_BYTES + HELPER_BYTES + HELPER_BYTES) * n_params

    records = [(0, _record("lesson1.bytes_per_param", mixed_state_bytes))]
    assert records[0][1]["report"]["function"]["env"]["HELPER_BYTES"] == {"value": 4}
    results = _results(records)
    assert len(results["lesson1.bytes_per_param"].values) == 4 + len(next(iter(GRADER_UNSEEN.values())))
    row = next(r for r in score("lesson1", records, results, {}) if r.id == "lesson1.bytes_per_param")
    assert row.status == "correct" and row.points == 1
    # the notebook said "correct" for a function that changed afterwards: the source recorded is what counts
    records[0][1]["report"]["function"]["source"] = "def mixed_state_bytes(n_params):\n    return 12 * n_params\n"
    row = next(r for r in score("lesson1", records, _results(records), {}) if r.id == "lesson1.bytes_per_param")
    assert row.status == "wrong" and row.key == "grading.q.lesson1.bytes_per_param.mistake0"
    capsys.readouterr()


def test_a_lookup_table_of_the_unseen_points_fails_at_the_graders_own(capsys):
    q = registry.get("lesson2.zero1_bytes")
    table = {(p["n_params"], p["world_size"]): q.answer(**p) for p in q.samples()}  # what hashes could give away

    def zero1_bytes(n_params, world_size):
        return table[(n_params, world_size)]

    assert checks.check(q.id, zero1_bytes).status == "correct"  # the notebook cannot tell
    records = [(0, _record(q.id, zero1_bytes))]
    row = next(r for r in score("lesson2", records, _results(records), {}) if r.id == q.id)
    assert row.points == 0 and row.key == "grading.check.crashed" and "KeyError" in row.fields["error"]
    capsys.readouterr()


def test_snapshots_carry_helpers_modules_lambdas_and_closures():
    import math as m

    def helper(x):
        return m.sqrt(x) + HELPER_BYTES

    def outer(k):
        def inner(n_params):
            return helper(n_params) * k

        return inner

    fn = outer(3)
    again = snapshot.rebuild(snapshot.snapshot(fn))
    assert again(16) == fn(16) == (4 + HELPER_BYTES) * 3
    square = lambda n: n * n  # noqa: E731 - what a student may write
    assert snapshot.rebuild(snapshot.snapshot(square))(7) == 49
    with pytest.raises(snapshot.NotAFunction):
        snapshot.snapshot(math.sqrt)
    data = {"a": (1, 2.5), "b": {1, 2}, 3: [float("inf")]}
    assert snapshot.from_plain(snapshot.to_plain(data)) == data


def test_a_stub_is_unanswered_and_a_crash_is_reported():
    def stub(world_size):
        raise NotImplementedError()

    snap = snapshot.snapshot(stub)
    got = evaluate.call_task(JudgeTask("q", TaskKind.CALLS, function=snap, calls=[{"world_size": 3}]))
    assert got[0]["$error"] == "NotImplementedError"
    broken = {"name": "f", "source": "def f(world_size:\n", "env": {}}
    assert evaluate.call_task(JudgeTask("q", TaskKind.CALLS, function=broken, calls=[{}]))[0]["$error"] == "SyntaxError"


def test_multiple_choice_counts_the_first_answer(capsys):
    qid = "lesson0.step_gradient"
    first_wrong = [(5, _record(qid, "a")), (6, _record(qid, "b"))]
    row = next(r for r in score("lesson0", first_wrong, {}, {}) if r.id == qid)
    assert (row.status, row.attempts) == ("wrong", 2)
    first_right = [(5, _record(qid, "b")), (6, _record(qid, "a"))]
    assert next(r for r in score("lesson0", first_right, {}, {}) if r.id == qid).points == 1
    capsys.readouterr()


# -- the student install's hashes ----------------------------------------------------------------


def _sealed(value, rel=1e-6, abs_=0.0):
    return hashed.seal(value, rel, abs_, "salt", "q|0")


def _accepts(ref, value, rel=1e-6, abs_=0.0):
    sealed = _sealed(ref, rel, abs_)
    got = hashed.student_digests(value, sealed, rel, abs_, "salt", "q|0")
    return not isinstance(got, registry.Verdict) and hashed.matches(got, sealed)


def test_hashes_accept_what_the_exact_comparison_accepts_at_the_boundary_too():
    rel = 1e-6
    width = -math.log1p(-rel)
    for ref in (19_753_086_256, 0.75, 3.0e-9, -42.5, 1e22):
        k = math.floor(math.log(abs(ref)) / width)
        edge = math.copysign(math.exp((k + 1) * width), ref)  # the top of the reference's bucket
        for value in (ref, ref * (1 + 0.99 * rel), ref * (1 - 0.99 * rel), edge * (1 + 0.5 * rel)):
            if math.isclose(value, ref, rel_tol=rel):
                assert _accepts(ref, value), (ref, value)
        assert not _accepts(ref, ref * (1 + 5 * rel)) and not _accepts(ref, -ref)
    assert _accepts(0, 0) and not _accepts(0, 1e-12)
    assert _accepts(0.0, 3e-7, abs_=1e-6) and not _accepts(0.0, 5e-6, abs_=1e-6)
    assert _accepts("SHARD_GRAD_OP", " shard_grad_op ") and _accepts({"all_gather"}, {"all_gather"})
    assert _accepts([1.0, 2.0], (1.0, 2.0)) and not _accepts([1.0, 2.0], [1.0, 2.5])
    assert hashed.student_digests("x", _sealed(2.0), rel, 0, "salt", "q|0").key == "grading.check.type.number"
    assert all(len(h) == 2 * hashed.DIGEST_BYTES for h in _sealed(2.0)["leaves"][""])


# -- the judge process -------------------------------------------------------------------------------


def _judge(tasks, tmp_path, box=None):
    from labkit.grading import grade, sandbox

    tmp_path.mkdir(exist_ok=True)
    return grade.evaluate(box or sandbox.find(), tmp_path, tasks, {"LABKIT_HOME": grade.labkit_home()})


def _calls(key, fn, calls):
    return JudgeTask(key, TaskKind.CALLS, function=snapshot.snapshot(fn), calls=calls, seconds=30)


def _patches_the_judge(n_params):
    import __main__
    from labkit.grading import evaluate as ev

    ev.model_loss = lambda task: [2.0]  # what a hostile function tried: the model's loss, made up
    __main__.model_loss = ev.model_loss
    ev.call_task = lambda task: [16 * c["n_params"] for c in task.calls]  # every later function "right"
    return 16 * n_params


def _wrong(n_params):
    return 12 * n_params


def _reads_everything(n_params):
    import gc
    import os

    found = [o for o in gc.get_objects() if isinstance(o, (bytes, str)) and "grader-secret" in o]
    files = []
    for root, _, names in os.walk("/submission"):
        files += [os.path.join(root, n) for n in names]
    raise RuntimeError(f"found {len(found)} {files} {n_params}")


def test_a_function_cannot_change_the_judge_for_the_tasks_after_it(tmp_path):
    tasks = [_calls("a", _patches_the_judge, [{"n_params": 1}]), _calls("b", _wrong, [{"n_params": 1}])]
    results, why = _judge(tasks, tmp_path)
    assert why == {} and results["a"].values == [16] and results["b"].values == [12]


def test_a_function_sees_no_other_task_and_no_task_file(tmp_path):
    secret = [{"n_params": 1}, {"n_params": "grader-secret"}]  # the second task's points: never in the first's child
    tasks = [_calls("a", _reads_everything, [{"n_params": 1}]), _calls("b", _wrong, secret)]
    results, _ = _judge(tasks, tmp_path)
    message = results["a"].values[0]["message"]
    assert message.startswith("found 0 []") or message.startswith("found 0 ['/submission/judge"), message
    assert "tasks.json" not in message and results["b"].values[0] == 12


def _dies(n_params):
    if os.path.isdir("/submission"):  # in the judge's sandbox only, not when the check runs it here
        print("about to leave with a secret", flush=True)
        os._exit(7)
    return 16 * n_params


def _hangs(n_params):
    if os.path.isdir("/submission"):
        time.sleep(600)
    return 16 * n_params


def test_a_child_that_dies_or_hangs_costs_its_own_question_only(tmp_path):
    tasks = [_calls("lesson1.bytes_per_param", _dies, [{"n_params": 1}]), _calls("b", _wrong, [{"n_params": 1}])]
    hang = JudgeTask("lesson2.zero1_bytes", TaskKind.CALLS, function=snapshot.snapshot(_hangs), calls=[{"n_params": 1}],
                     seconds=2)  # fmt: skip
    results, why = _judge([*tasks, hang], tmp_path)
    assert why == {} and results["b"].values == [12]
    assert results["lesson1.bytes_per_param"].how == "exit 7" and results["lesson2.zero1_bytes"].how == "timeout 2 s"
    rec = _record("lesson1.bytes_per_param", _dies)
    row = next(r for r in score("lesson1", [(0, rec)], results) if r.id == "lesson1.bytes_per_param")
    assert (row.status, row.key) == ("wrong", "grading.judge.died") and "secret" not in row.feedback
    assert row.feedback == "the grader's process for this answer ended (exit 7) before it checked it"
    assert t("grading.judge.died", "ro", how="exit 7").startswith("procesul de notare pentru acest răspuns")
    rec = _record("lesson2.zero1_bytes", _hangs)
    row = next(r for r in score("lesson2", [(0, rec)], results) if r.id == "lesson2.zero1_bytes")
    assert row.key == "grading.judge.timeout" and row.feedback.endswith("ran past 2 s before it checked it")


def _raises_with_its_arguments(n_params):
    raise ValueError(f"my arguments: {n_params}")


def test_an_error_at_the_graders_points_is_named_by_its_type_only():
    q = registry.get("lesson1.bytes_per_param")
    n = len(q.samples())
    values = [16 * p["n_params"] for p in q.samples()] + [{"$error": "ValueError", "message": "points: 405000000041"}]
    rec = _record(q.id, _raises_with_its_arguments)
    row = next(r for r in score("lesson1", [(0, rec)], {q.id: JudgeResult(q.id, values)}) if r.id == q.id)
    assert row.key == "grading.check.crashed" and row.fields == {"error": "ValueError"}
    values = [{"$error": "ValueError", "message": "my arguments: 3"}] * n
    row = next(r for r in score("lesson1", [(0, rec)], {q.id: JudgeResult(q.id, values)}) if r.id == q.id)
    assert row.fields == {"error": "ValueError: my arguments: 3"}  # the notebook's own points: shown there anyway


def test_grade_refuses_without_a_sandbox_unless_told(tmp_path, monkeypatch, capsys):
    from labkit.grading import sandbox
    from labkit.grading.cli import main

    (tmp_path / "subs").mkdir()
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    assert main(["grade", str(tmp_path / "subs"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "bwrap is not on PATH" in err and "apt-get install bubblewrap" in err and "--no-sandbox" in err
    assert isinstance(sandbox.find(no_sandbox=True), sandbox.Plain)


def test_a_judge_the_machine_killed_once_is_run_again_for_what_it_did_not_answer(tmp_path):
    """The first judge answers one task and is killed (as a machine can kill it); the second answers the rest."""
    from labkit.grading import sandbox

    real = sandbox.find()

    class OnceDead:
        runs = 0
        name = "bubblewrap"

        def run(self, argv, env, mounts, timeout, log, pipes=None):
            self.runs += 1
            if self.runs == 1:  # answer the first task only, then "die"
                os.close(pipes.stdin)
                with os.fdopen(pipes.keep[0], "w") as out:
                    out.write(JudgeResult("a", [16]).to_json() + "\n")
                return sandbox.Outcome(137, 0.1)
            return real.run(argv, env, mounts, timeout, log, pipes)

    box = OnceDead()
    tasks = [_calls("a", _wrong, [{"n_params": 1}]), _calls("b", _wrong, [{"n_params": 2}])]
    results, why = _judge(tasks, tmp_path, box)
    assert why == {} and box.runs == 2 and results["a"].values == [16] and results["b"].values == [24]


def test_a_judge_past_its_time_runs_once_and_says_so(tmp_path):
    """A judge killed at its wall-clock limit is not run again (a function that loops would take the
    time twice); the feedback names the limit."""
    from labkit.grading import grade
    from labkit.grading.sandbox import Outcome

    class Slow:
        runs = 0

        def run(self, argv, env, mounts, timeout, log, pipes=None):
            self.runs += 1
            for fd in (pipes.stdin, *pipes.keep):
                os.close(fd)
            return Outcome(None, timeout, timed_out=True)

    box = Slow()
    results, why = grade.evaluate(box, tmp_path, [_calls("lesson1.bytes_per_param", _wrong, [{"n_params": 1}])], {})
    assert (results, why, box.runs) == ({}, {"seconds": grade.JUDGE_SECONDS}, 1)
    rec = _record("lesson1.bytes_per_param", _wrong)
    row = next(r for r in score("lesson1", [(0, rec)], results, why) if r.id == "lesson1.bytes_per_param")
    assert row.key == "grading.judge.timeout"
    assert row.feedback == f"the grader's process for this answer ran past {grade.JUDGE_SECONDS} s before it checked it"


# -- a loader, on the grader's own checkpoint -----------------------------------------------------


def _right_loader(checkpoint_dir, cfg):
    import torch.distributed.checkpoint as dcp

    from labkit.models import TransformerLM

    plain = TransformerLM(cfg)
    state = {"train": {"model": plain.state_dict()}}
    dcp.load(state, checkpoint_id=checkpoint_dir, no_dist=True)
    plain.load_state_dict(state["train"]["model"])
    return plain


def _fresh_model(checkpoint_dir, cfg):  # forgot to load
    from labkit.models import TransformerLM

    return TransformerLM(cfg)


def _forges_the_measure(checkpoint_dir, cfg):
    """What a hostile loader tries: patch the measure, and hand back a model that is not one."""
    import sys

    ev = sys.modules.get("labkit.grading.evaluate")
    if ev is not None:
        ev.model_loss = lambda task: [1.0, 1.0]
    raise RuntimeError("no model")


def test_a_loader_is_judged_on_a_checkpoint_of_the_graders_own(tmp_path, capsys):
    q = registry.get("lesson7.reloaded_loss")
    verdicts = {}
    for fn in (_right_loader, _fresh_model, _forges_the_measure):
        rec = {"id": q.id, "report": checks.claim(q, fn, None, {})}
        tasks = judge.tasks([q], judge.choose([(0, rec)]), seed=1234)
        assert [t.does for t in tasks] == [TaskKind.LOAD, TaskKind.MODEL_LOSS] and tasks[0].seed == 1234
        results, why = _judge(tasks, tmp_path / fn.__name__)
        verdicts[fn.__name__] = judge.verdict(q, rec, results, why, 1234)
    assert verdicts["_right_loader"].correct, verdicts
    assert verdicts["_fresh_model"].key == "grading.exercise.reloaded"
    assert verdicts["_forges_the_measure"].key == "grading.check.crashed"
    capsys.readouterr()
