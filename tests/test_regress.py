"""Regression records, comparisons, sweeps' grids and the torch hooks, without launching anything.

    .venv/bin/python -m pytest tests/test_regress.py -q

The records here are built the way ``labkit.regress.record`` builds them from a ``Run`` (a
real ``Run`` filled with the messages ranks send), then changed as a regression would change
them: one all-gather more per step, 5% more optimizer state, a check gone wrong. The runs that
make real records are in ``tests/test_regress_runs.py`` (slow).
"""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path
from typing import Any

import nbformat
import pytest

from labkit.launch.run import Run
from labkit.ranks import torch_hooks
from labkit.regress import compare, record, report, sweep
from labkit.regress.compare import Tolerances, regressions
from labkit.wire.record import RecordError
from labkit.wire.run_record import NotebookRecord, RunRecord

STEPS = 3


def fake_run(nproc: int = 2, extra_all_gather: int = 0, optimizer_bytes: int = 800_000) -> Run:
    """A ``Run`` fed the messages a 2-rank FSDP run sends: steps, samples, memcat, comm, comm_total."""
    run = Run("run-test", nproc, "gloo", "/nonexistent")
    for r in range(nproc):
        run.ingest({"t": "hello", "rank": r, "pid": 100 + r})
        run.ingest({"t": "rank_env", "rank": r, "torch": "2.13.0+cpu", "cuda": None, "nccl": None})
        counts = {}
        for i in range(STEPS):
            run.ingest({"t": "step", "rank": r, "i": i, "dt": 0.1 + 0.01 * i})
            run.ingest({"t": "mem", "rank": r, "rss": 300_000_000 + i, "tensor_bytes": 1_000_000})
            calls = 5 + extra_all_gather
            counts = {
                "all_gather": {"calls": calls * (i + 1), "bytes": 4096 * calls * (i + 1)},
                "reduce_scatter": {"calls": 3 * (i + 1), "bytes": 4096 * 3 * (i + 1)},
            }
        cats = {"params": 400_000, "grads": 400_000, "optimizer": optimizer_bytes, "activations": 90_000, "other": 0}
        for phase in ("forward", "backward", "optimizer", "peak"):
            run.ingest({"t": "memcat", "rank": r, "step": 2, "phase": phase, "device": "cpu", "categories": cats})
        run.ingest({"t": "comm_total", "rank": r, "counts": counts, "at_steps": [], "world_size": nproc})
        run.ingest({"t": "report", "rank": r, "values": {"loss": 5.25, "pid": 4000 + r, "units": {"root": 65600}}})
        run.ingest({"t": "done", "rank": r})
    return run


def executed_notebook(*runs: Run, checks: dict[str, str] | None = None) -> nbformat.NotebookNode:
    """What papermill leaves: a parameters cell, its injected cell, the runs' record outputs, the checks."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["labkit"] = {"lesson": "lesson9", "lang": "en"}
    params = nbformat.v4.new_code_cell("nproc = 2", metadata={"tags": ["parameters"]})
    injected = nbformat.v4.new_code_cell("nproc = 4", metadata={"tags": ["injected-parameters"]})
    cells = [params, injected, nbformat.v4.new_code_cell("%load_ext labkit")]
    for run in runs:
        out = nbformat.v4.new_output("display_data", data={record.MIME: record.run_record(run), "text/plain": ""})
        cells.append(nbformat.v4.new_code_cell("%%torchrun -n $nproc\ntrain()", outputs=[out]))
    for qid, status in (checks or {}).items():
        data = {"application/vnd.labkit.check+json": {"id": qid, "status": status}, "text/plain": status}
        cells.append(
            nbformat.v4.new_code_cell(
                f"labkit.check({qid!r}, x)", outputs=[nbformat.v4.new_output("display_data", data=data)]
            )
        )
    nb.cells = cells
    return nb


def notebook_rec(*runs: Run, checks: dict[str, str] | None = None) -> dict[str, Any]:
    nb = executed_notebook(*runs, checks=checks or {"lesson9.q1": "correct"})
    return record.notebook_record(nb, "en/09_fixture", {"nproc": 2, "backend": "gloo"}, "ok", 12.0)


def side(rec: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(rec["notebook"], sweep.slug(rec["parameters"])): rec}


# -- the record ---------------------------------------------------------------------------


def test_a_run_record_holds_memory_collectives_steps_and_where_it_ran():
    rec = record.run_record(fake_run())
    assert rec["schema"] == record.SCHEMA and rec["ok"] and rec["nproc"] == 2
    assert rec["memory"]["categories_at_peak"]["0"]["optimizer"] == 800_000
    assert [p["phase"] for p in rec["memory"]["phases"]["1"]] == ["forward", "backward", "optimizer", "peak"]
    assert rec["memory"]["sampled_peak"]["0"] == {"rss": 300_000_002, "tensor_bytes": 1_000_000}
    assert rec["comm"]["total"]["0"]["counts"]["all_gather"] == {"calls": 15, "bytes": 15 * 4096}
    assert rec["steps"]["1"]["count"] == STEPS and rec["steps"]["1"]["median"] == pytest.approx(0.11)
    assert rec["fingerprint"]["torch"] == "2.13.0+cpu"  # from the ranks' rank_env: the kernel need not import torch
    assert {"python", "cpu", "labkit", "commit", "gpus"} <= set(rec["fingerprint"])
    json.dumps(rec)  # plain JSON


def test_the_notebook_record_counts_cells_as_in_the_source_notebook():
    rec = notebook_rec(fake_run(), fake_run())
    # the injected-parameters cell is skipped: the runs are cells 2 and 3 of the source notebook
    assert [(r["cell"], r["index"], r["source"]) for r in rec["runs"]] == [
        (2, 0, "%%torchrun -n $nproc"),
        (3, 0, "%%torchrun -n $nproc"),
    ]
    assert rec["checks"] == [{"id": "lesson9.q1", "cell": 4, "status": "correct"}]
    assert rec["lesson"] == "lesson9" and rec["parameters"] == {"nproc": 2, "backend": "gloo"}


def test_the_records_are_declared_and_the_committed_baselines_still_load():
    """The run and notebook records are ``labkit.wire.run_record``'s; their JSON is the form the
    baselines were written in ("schema": "labkit.run/1", no "kind"), so every baseline reads back equal."""
    rec = record.run_record(fake_run())
    assert "kind" not in rec and list(rec)[:3] == ["schema", "run_id", "nproc"]
    assert RunRecord.from_dict(rec).to_dict() == rec
    files = sorted((Path(__file__).resolve().parents[1] / "baselines").rglob("*.record.json"))
    assert files, "the committed baselines"
    for f in files:
        raw = json.loads(f.read_text())
        nb = NotebookRecord.from_dict(raw)
        assert nb.to_dict() == raw, f
        assert all(RunRecord.from_dict(r["record"]).schema_name() == record.SCHEMA for r in nb.runs)
    with pytest.raises(RecordError, match="labkit.run: schema 2"):
        RunRecord.from_dict({**rec, "schema": "labkit.run/2"})  # a newer labkit's: refused, not misread
    with pytest.raises(RecordError, match="labkit.run.nproc: expected int, got str"):
        RunRecord.from_dict({**rec, "nproc": "2"})


def test_a_record_output_that_is_not_one_is_named_not_compared():
    """A run record in a notebook's output that is not one (a field of another type) is left out of the
    runs and named in the notebook's errors: the comparison then shows it, rather than a KeyError."""
    run = fake_run()
    bad = {**record.run_record(run), "memory": []}
    nb = executed_notebook(run)
    cell = next(c for c in nb.cells if any(record.MIME in o.get("data", {}) for o in c.get("outputs", [])))
    cell.outputs[0]["data"][record.MIME] = bad
    rec = record.notebook_record(nb, "en/09_fixture")
    assert rec["runs"] == [] and rec["errors"][0]["ename"] == "RecordError"
    assert "labkit.run.memory: expected an object, got list" in rec["errors"][0]["evalue"]


def test_the_record_output_shows_nothing_to_text_readers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """nbval and a plain notebook view read text/plain: the record's is empty; the JSON lands in the folder too."""
    from labkit.views import dashboard

    shown = []
    monkeypatch.setattr("labkit.views.dashboard.in_kernel", lambda: True)
    monkeypatch.setattr("IPython.display.display", lambda obj, raw=False: shown.append((obj, raw)))
    monkeypatch.setenv("LABKIT_RECORD_DIR", str(tmp_path))
    bundle = record.emit(fake_run())  # what the run's view shows with its own last output, or alone:
    dashboard.QuietView().finish(fake_run(), bundle)
    ((bundle, raw),) = shown
    assert raw and bundle["text/plain"] == "" and bundle[record.MIME]["schema"] == record.SCHEMA
    assert json.loads((tmp_path / "run-test.json").read_text())["run_id"] == "run-test"
    monkeypatch.setenv("LABKIT_RECORD", "0")
    assert record.emit(fake_run()) is None


# -- the comparison -------------------------------------------------------------------------


def test_a_sweep_compared_with_itself_passes():
    rec = notebook_rec(fake_run(), fake_run())
    assert regressions(compare.compare(side(rec), side(copy.deepcopy(rec)), Tolerances())) == []


def test_one_extra_all_gather_per_step_fails_naming_metric_lesson_and_cell():
    a, b = notebook_rec(fake_run(), fake_run()), notebook_rec(fake_run(), fake_run(extra_all_gather=1))
    bad = regressions(compare.compare(side(a), side(b), Tolerances()))
    calls = [f for f in bad if f.metric == "comm.total.all_gather.calls"]
    assert {f.rank for f in calls} == {"0", "1"} and all(f.cell == 3 for f in calls)
    line = report.line(calls[0])
    assert "comm.total.all_gather.calls" in line and "lesson9" in line and "cell 3" in line
    assert "+3" in line and "+1 per step over 3 steps" in line
    assert all(f.cell == 3 for f in bad), "the unchanged run in cell 2 is not blamed"


def test_five_percent_more_memory_in_one_category_fails_and_half_a_percent_does_not():
    a = notebook_rec(fake_run())
    worse = notebook_rec(fake_run(optimizer_bytes=840_000))
    bad = regressions(compare.compare(side(a), side(worse), Tolerances()))
    assert {f.metric for f in bad} == {"memory.at_peak.optimizer"} | {
        f"memory.phases[{i}:step=2].{p}.optimizer" for i, p in enumerate(("forward", "backward", "optimizer", "peak"))
    }
    assert "+5.0%" in report.line(bad[0])
    noise = notebook_rec(fake_run(optimizer_bytes=804_000))
    assert regressions(compare.compare(side(a), side(noise), Tolerances())) == []


def test_times_are_loose_and_volatile_values_are_information():
    a = notebook_rec(fake_run())
    b = copy.deepcopy(a)
    rec = b["runs"][0]["record"]
    rec["steps"]["0"]["median"] *= 2.5  # a loaded machine: slower, within the loose bound
    rec["values"]["0"]["pid"] = 99  # a new process every run
    rec["memory"]["sampled_peak"]["0"]["rss"] += 50_000_000
    found = compare.compare(side(a), side(b), Tolerances())
    assert regressions(found) == [] and {f.metric for f in found} == {
        "steps.median",
        "values.pid",
        "memory.sampled_peak.rss",
    }
    rec["steps"]["0"]["median"] *= 4  # 10x
    assert [f.metric for f in regressions(compare.compare(side(a), side(b), Tolerances()))] == ["steps.median"]


def test_a_check_gone_wrong_a_lost_run_and_a_changed_loss_regress():
    a = notebook_rec(fake_run(), fake_run(), checks={"lesson9.q1": "correct"})
    b = notebook_rec(fake_run(), checks={"lesson9.q1": "wrong"})
    b["runs"][0]["record"]["values"]["1"]["loss"] = 5.4  # +2.9%
    bad = regressions(compare.compare(side(a), side(b), Tolerances()))
    kinds = {(f.metric, f.verdict) for f in bad}
    assert ("check.lesson9.q1", "regression") in kinds
    assert ("values.loss", "regression") in kinds
    assert [(f.metric, f.cell) for f in bad if f.verdict == "missing"] == [("run", 3)], "the second run is gone"


def test_only_b_compares_the_part_of_a_baseline_that_b_ran():
    a = notebook_rec(fake_run())
    other = dict(copy.deepcopy(a), notebook="en/10_other")
    both = side(a) | side(other)
    assert regressions(compare.compare(both, side(a), Tolerances())) != []  # en/10_other missing in B
    assert regressions(compare.compare(both, side(a), Tolerances(), only_b=True)) == []


def test_reports_markdown_junit_and_the_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    for name, run in (("a", fake_run()), ("b", fake_run(extra_all_gather=1))):
        folder = tmp_path / name / "en" / "09_fixture"
        folder.mkdir(parents=True)
        (folder / f"nproc-2_backend-gloo{sweep.RECORD_SUFFIX}").write_text(json.dumps(notebook_rec(run)))
    from labkit import cli

    md, xml = tmp_path / "r.md", tmp_path / "r.xml"
    assert cli.main(["regress", "compare", str(tmp_path / "a"), str(tmp_path / "a")]) == 0
    code = cli.main(
        ["regress", "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--markdown", str(md), "--junit", str(xml)]
    )
    assert code == 1
    out = capsys.readouterr().out
    assert "REGRESSION comm.total.all_gather.calls: lesson lesson9 (en/09_fixture, nproc=2 backend=gloo), cell 2" in out
    assert "| comm.total.all_gather.calls [exact] |" in md.read_text()
    import xml.etree.ElementTree as ET

    suite = ET.parse(xml).getroot()
    assert suite.get("failures") == "1" and "comm.total.all_gather.calls" in suite.find("testcase/failure").get(
        "message"
    )
    assert cli.main(["regress", "compare", str(tmp_path / "a"), str(tmp_path / "nothing")]) == 2


def test_a_baseline_is_the_records_alone(tmp_path: Path):
    from labkit import cli

    run = tmp_path / "run" / "en" / "09_fixture"
    run.mkdir(parents=True)
    (run / f"p{sweep.RECORD_SUFFIX}").write_text(json.dumps(notebook_rec(fake_run())))
    (run / "p.ipynb").write_text("{}")
    assert cli.main(["regress", "baseline", str(tmp_path / "run"), "--out", str(tmp_path / "base")]) == 0
    assert [p.relative_to(tmp_path / "base").as_posix() for p in (tmp_path / "base").rglob("*.*")] == [
        f"en/09_fixture/p{sweep.RECORD_SUFFIX}"
    ]
    kept = json.loads((tmp_path / "base" / "en" / "09_fixture" / f"p{sweep.RECORD_SUFFIX}").read_text())
    assert kept["runs"][0]["record"]["values"]["0"] == {"loss": 5.25, "pid": None, "units": {"root": 65600}}


# -- the sweep's grid ---------------------------------------------------------------------------


def test_parameters_grid_and_file_names():
    grid = sweep.parse_params([("nproc", "2,4"), ("backend", "gloo"), ("lr", "1e-3")])
    assert grid == {"nproc": [2, 4], "backend": ["gloo"], "lr": [0.001]}
    assert sweep.points(grid) == [
        {"nproc": 2, "backend": "gloo", "lr": 0.001},
        {"nproc": 4, "backend": "gloo", "lr": 0.001},
    ]
    assert sweep.slug({"nproc": 2, "backend": "gloo"}) == "nproc-2_backend-gloo"
    assert sweep.slug({}) == "default"
    assert sweep.notebook_name(Path("notebooks/ro/01_x.ipynb")) == "ro/01_x"
    with pytest.raises(ValueError, match="identifier"):
        sweep.parse_params([("n-proc", "2")])
    with pytest.raises(FileNotFoundError):
        sweep.find_notebooks(["/nonexistent/*.ipynb"])


# -- the torch contract ------------------------------------------------------------------------


def test_every_private_api_labkit_reads_is_present_in_this_torch():
    assert {h.id: h.probe() for h in torch_hooks.HOOKS} == {h.id: [] for h in torch_hooks.HOOKS}


def test_a_removed_private_api_is_named_with_the_torch_version(monkeypatch: pytest.MonkeyPatch):
    from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup

    monkeypatch.delattr(FSDPParamGroup, "post_backward")
    gone = torch_hooks.BY_ID["fsdp2.param_group"].probe()
    assert gone == ["torch.distributed.fsdp._fully_shard._fsdp_param_group:FSDPParamGroup.post_backward"]
    text = torch_hooks.missing_message(gone[0], "ranks.hooks.lost.fsdp2", version="2.99.0")
    assert "torch 2.99.0 has no" in text and "(tested on torch 2.13)" in text and "not named after them" in text


def test_an_fsdp_unit_without_the_hook_warns_instead_of_finding_no_units(monkeypatch: pytest.MonkeyPatch):
    sent = []
    monkeypatch.setattr(torch_hooks, "is_fsdp2", lambda m: True)
    monkeypatch.setattr(torch_hooks, "_said", set())
    monkeypatch.setattr("labkit.ranks.rank.send", lambda kind, **kw: sent.append((kind, kw)))

    class Renamed:  # an FSDP2 module of a torch where _get_fsdp_state moved
        pass

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert torch_hooks.fsdp2_group(Renamed()) is None
        assert torch_hooks.fsdp2_group(Renamed()) is None  # said once per process
    (w,) = [w for w in caught if issubclass(w.category, torch_hooks.TorchHookWarning)]
    assert "FSDPModule._get_fsdp_state" in str(w.message) and torch_hooks.torch_version() in str(w.message)
    assert [(k, kw["hook"]) for k, kw in sent] == [("hook_missing", "fsdp2.param_group")]


def test_the_torch_range_in_pyproject_is_the_one_labkit_states():
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    lo, hi = torch_hooks.MIN_TORCH, torch_hooks.MAX_TORCH
    assert f'"torch>={lo[0]}.{lo[1]},<{hi[0]}"' in text
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert all(v in readme for v in torch_hooks.TESTED)


def test_an_fsdp2_rows_peak_split_is_shown_not_compared():
    """Its instant moves with the load (asynchronous collectives on gloo); FSDP1's and its traffic do not."""
    from labkit.regress.compare import EXACT, INFO, rule_of

    assert rule_of("values.fully_shard(blocks).peak.activations", 5_121_028) == INFO
    assert rule_of("values.transformer.peak.activations", 5_121_028) == EXACT
    assert rule_of("values.fully_shard(blocks).traffic.all_gather", 1_282) == EXACT
