"""Regression runs for real: sweeps of notebooks, a planted change found, the course's CPU baseline, the doctor.

    .venv/bin/python -m pytest tests/test_regress_runs.py -q

- a small notebook, swept as it is and with changes planted in its %%torchrun cell (one
  all-gather more per step; 5% more optimizer state), compared: the comparison fails and names
  each metric, the lesson and the cell (a sweep against itself, run twice, is the CI run below);
- the course's own regression run: lessons 1 and 3 (the two cheapest that measure memory and
  collectives) at 2 and 4 ranks, compared with the committed CPU baseline (``baselines/cpu``);
- ``labkit doctor`` passes here, and fails with a clear line when a private torch API it checks
  is taken away (a ``sitecustomize`` on PYTHONPATH renames it in every process of the run).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from labkit.regress import report, sweep
from labkit.regress.compare import Tolerances, regressions

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "baselines" / "cpu"
CI_LESSONS = ("01_ddp_memory_wall", "03_wrap_policies")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

TRAIN = """
%%torchrun -n $nproc --backend $backend --vars plant
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from labkit.models import TransformerLM, get_config, synthetic_batch
from labkit.ranks import memtrack, rank

cfg = get_config("tiny")
torch.manual_seed(0)
model = TransformerLM(cfg)
mesh = init_device_mesh("cpu", (rank.world_size(),))
for block in model.layers:
    fully_shard(block, mesh=mesh, reshard_after_forward=True)
fully_shard(model, mesh=mesh, reshard_after_forward=True)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
tracker = memtrack.track(model, optimizer, steps=[2])
for step in rank.steps(3):
    inputs, targets = synthetic_batch(cfg, 2, step, rank.rank())
    with tracker.step(step):
        model(inputs, targets).backward()
        if "all_gather" in plant:  # one collective more per step
            gathered = torch.empty(4 * rank.world_size())
            dist.all_gather_into_tensor(gathered, torch.ones(4))
        optimizer.step()
        optimizer.zero_grad()
    if step == 0 and "optimizer" in plant:  # 5% more optimizer state: AdamW keeps 2 tensors a parameter
        for state in optimizer.state.values():
            local = state["exp_avg"].to_local()
            state["planted"] = torch.zeros(local.numel() // 10)
rank.report(loss=float(model(*synthetic_batch(cfg, 2, 9, rank.rank())).item()))
"""


def fixture_notebook(folder: Path, plant: list[str]) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["labkit"] = {"lesson": "fixture", "lang": "en"}
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell('nproc = 2\nbackend = "gloo"', metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("%load_ext labkit"),
        nbformat.v4.new_code_cell(f"plant = {plant!r}"),
        nbformat.v4.new_code_cell(textwrap.dedent(TRAIN).strip()),
    ]
    path = folder / "en" / "regress_fixture.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def swept(tmp_path: Path, name: str, plant: list[str]) -> Path:
    src = fixture_notebook(tmp_path / f"src-{name}", plant)
    out = tmp_path / f"run-{name}"
    (outcome,) = sweep.sweep([src], {"nproc": [2]}, out, timeout=300, echo=lambda s: None)
    assert (outcome.status, outcome.errors, outcome.runs_ok) == ("ok", [], 1), outcome
    return out


def test_a_planted_change_fails_and_names_metric_lesson_and_cell(tmp_path: Path):
    clean = swept(tmp_path, "clean", [])
    code, findings, _ = report.run_compare(str(clean), str(clean), Tolerances())
    assert code == 0 and findings == []
    planted = swept(tmp_path, "planted", ["all_gather", "optimizer"])
    code, findings, md = report.run_compare(str(clean), str(planted), Tolerances())
    bad = regressions(findings)
    assert code == 1 and all(f.cell == 3 for f in bad), "only the cell with the planted change is blamed"

    gathered = [f for f in bad if f.metric == "comm.total.all_gather.calls"]
    assert {f.rank for f in gathered} == {"0", "1"}
    line = report.line(gathered[0])
    assert line.startswith("REGRESSION comm.total.all_gather.calls: lesson fixture (en/regress_fixture, nproc=2)")
    assert ", cell 3 `%%torchrun -n $nproc --backend $backend --vars plant`" in line
    assert "+3, +14.3%, +1 per step over 3 steps" in line  # 7 all-gathers a step: 21 -> 24

    optimizer = [f for f in bad if f.metric == "memory.at_peak.optimizer"]
    assert {f.rank for f in optimizer} == {"0", "1"}
    assert "+5.0%" in report.line(optimizer[0]) and "| memory.at_peak.optimizer [memory] |" in md


@pytest.mark.extended  # the second tier: lessons 1 and 3 again, against the committed records
def test_the_course_matches_its_cpu_baseline(tmp_path: Path):
    """The CI regression run: the lessons' numbers on this machine's CPU ranks, against the committed records."""
    notebooks = [ROOT / "notebooks" / "en" / f"{name}.ipynb" for name in CI_LESSONS]
    out = tmp_path / "ci"
    outcomes = sweep.sweep(notebooks, {"nproc": [2, 4], "backend": ["gloo"]}, out, workers=2, timeout=600)
    assert [(o.status, o.errors) for o in outcomes] == [("ok", [])] * 4
    # times on a shared CI machine wander far more than elsewhere: only a tenfold slowdown counts here
    code, findings, md = report.run_compare(
        str(BASELINE), str(out), Tolerances(time_tol=9.0), md_path=str(tmp_path / "report.md"), only_b=True
    )
    assert code == 0, md


def sitecustomize(folder: Path) -> dict[str, str]:
    """An environment whose every Python process renames FSDP2's ``FSDPModule._get_fsdp_state``, as a
    torch release that moved it would: FSDP2 itself trains without it; labkit's units lose it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(
        "from torch.distributed.fsdp import FSDPModule\n"
        "FSDPModule._moved_fsdp_state = FSDPModule._get_fsdp_state\n"
        "del FSDPModule._get_fsdp_state\n"
    )
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "LABKIT_LANG": "en"}


def doctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "labkit.cli", "doctor", *args]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=300, env=env or {**os.environ, "LABKIT_LANG": "en"}
    )


def test_doctor_passes_here():
    proc = doctor()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    for needed in ("PASS  torch 2.13", "PASS  FSDP1 timeline", "PASS  FSDP2 memtrack", "PASS  fake-tensor estimator"):
        assert any(line.startswith(needed) for line in lines), proc.stdout
    assert "0 failed" in lines[-1]


def test_doctor_fails_with_a_clear_line_when_a_hook_is_gone(tmp_path: Path):
    proc = doctor("--skip", "agent,estimate,userns,shm", env=sitecustomize(tmp_path / "site"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    hook = next(line for line in out.splitlines() if line.startswith("FAIL  private API FSDP2"))
    assert "torch 2.13.0+cpu has no torch.distributed.fsdp:FSDPModule._get_fsdp_state" in hook
    assert "not named after them in the timeline" in hook
    run = next(line for line in out.splitlines() if line.startswith("FAIL  FSDP2 timeline"))
    assert "FSDPModule._get_fsdp_state" in run, "the run itself says which API it missed"
    assert any(line.startswith("PASS  FSDP1 timeline") for line in out.splitlines()), "FSDP1 is untouched"
    assert "what to do:" in out
