"""Fake-tensor estimates against the analytical model, against a real run, and extrapolated in depth.

    .venv/bin/pytest tests/test_estimate.py

One subprocess runs five estimates: llama-1b on 8 fake ranks (bf16, activation checkpointing),
traced whole (16 blocks) and extrapolated from 4, 5 and 6 blocks;
"tiny" on 2 fake ranks exactly as labkit/testing/mem_job.py trains it for real, so that the
fake run can be compared with the real one category by category; and "tiny" under
HYBRID_SHARD and SHARD_GRAD_OP. Larger models (7B to
70B, 8 to 1024 ranks) are in benchmarks/memory_accuracy.py: each takes 25-60 s here.
"""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from labkit.memory import estimate, faketrace
from labkit.memory import model as mm
from labkit.models.config import get_config
from labkit.testing.mem_job import BATCH
from labkit.testing.mem_launch import phase, test_job
from labkit.wire.errors import LabkitError, OptionError

LLAMA = estimate.Spec("llama-1b", 8, "bf16", checkpointing=True)
TINY = estimate.Spec("tiny", 2, "fp32", checkpointing=False, micro_batch=BATCH)
HYBRID = estimate.Spec("tiny", 4, "fp32", checkpointing=False, strategy="HYBRID_SHARD", shard_group_size=2)
GRAD_OP = estimate.Spec("tiny", 4, "fp32", checkpointing=True, strategy="SHARD_GRAD_OP")


@pytest.fixture(scope="module")
def results() -> dict[str, estimate.Estimate]:
    whole = dataclasses.replace(LLAMA, layers=get_config("llama-1b").n_layers)  # an explicit depth: traced whole
    found = estimate.estimate_many([whole, LLAMA, TINY, HYBRID, GRAD_OP], timeout=600)
    return dict(zip(("llama", "llama_extrapolated", "tiny", "hybrid", "grad_op"), found))


@pytest.mark.slow
def test_extrapolated_equals_a_whole_trace(results: dict[str, estimate.Estimate]) -> None:
    """Every category at the peak and after each phase, traced at 4-6 blocks and read off at 16."""
    whole, line = results["llama"], results["llama_extrapolated"]
    assert whole.traced_layers == () and line.traced_layers == estimate.DEPTHS
    assert line.stage == whole.stage
    assert line.total == pytest.approx(whole.total, rel=0.01)
    for c, v in whole.peak.items():
        assert line.peak[c] == pytest.approx(v, rel=0.01, abs=1024), c
    for p, cats in whole.phases.items():
        for c, v in cats.items():
            assert line.phases[p][c] == pytest.approx(v, rel=0.01, abs=1024), (p, c)
    assert "extrapolated to 16 layers" in line.table()


def test_off_the_line_falls_back() -> None:
    """Traces that do not lie on one line, or that disagree on the peak's stage, give no extrapolation."""
    plan = [dataclasses.replace(LLAMA, layers=d) for d in estimate.DEPTHS]

    def trace(d: int, extra: int = 0, stage: str = "backward") -> dict:
        peak = {"params": 100 * d, "activations": 50 + extra}
        return {
            "peak": peak,
            "phases": {"forward": {"params": 100 * d}},
            "stage": stage,
            "seconds": 1.0,
            "cpu_seconds": 1.0,
        }

    on_line = estimate.combine(LLAMA, plan, [trace(4), trace(5), trace(6)])
    assert on_line is not None and on_line.peak == {"params": 1600, "activations": 50}
    assert estimate.combine(LLAMA, plan, [trace(4), trace(5, extra=40), trace(6)]) is None
    assert estimate.combine(LLAMA, plan, [trace(4), trace(5), trace(6, stage="forward")]) is None


@pytest.mark.slow
def test_llama_1b_on_8_ranks(results: dict[str, estimate.Estimate]) -> None:
    e = results["llama"]
    cfg = get_config("llama-1b")
    local = mm.local_numel(cfg, 8, "fsdp2", rank=0)
    tensors = sum(len(s) for _, s in mm.transformer_units(cfg))
    # persistent state: exactly the fp32 shards, padding and step counters included
    assert e.peak["params"] == 4 * local["params"]
    assert e.peak["optimizer"] == 8 * local["optimizer"] + 4 * tensors
    assert e.phases["backward"]["grads"] == 4 * local["grads"]
    # the same as the analytical model's "torch" convention, to 0.1%
    for c in ("params", "optimizer"):
        assert e.peak[c] == pytest.approx(getattr(e.analytical, c), rel=1e-3)
    # the gathered units: the root and one block in bf16, as the model counts them
    assert e.peak["params_unsharded"] == pytest.approx(e.analytical.params_unsharded, rel=0.01)
    # activations stored by forward, with checkpointing: the formula's count
    acts = mm.activation_memory(cfg, 1, None, checkpointing=True, precision="bf16")
    assert e.phases["forward"]["activations"] == pytest.approx(acts.stored, rel=0.01)
    # the whole peak: the model's largest moment of the step (memory_model.peak_memory, per flavor)
    assert e.total == pytest.approx(e.analytical.total, rel=0.05)
    assert e.stage == "backward"


@pytest.mark.slow
def test_fake_run_matches_the_real_run(results: dict[str, estimate.Estimate]) -> None:
    """The same model, batch and wrapping, rank 0 of 2: fake tensors vs gloo on CPU."""
    e = results["tiny"]
    real = test_job(2)
    for p in ("forward", "backward", "optimizer"):
        measured = phase(real, "fsdp2:reshard", 0, p)
        for c in ("params", "params_unsharded", "grads", "optimizer"):
            assert e.phases[p][c] == measured[c], (p, c)
        # the real batch's targets are a non-contiguous slice that cross-entropy copies (b*s int64)
        assert e.phases[p]["activations"] == pytest.approx(measured["activations"], abs=8 * BATCH * 32 + 64)
    real_peak = phase(real, "fsdp2:reshard", 0, "peak")
    assert e.total == pytest.approx(sum(real_peak.values()), rel=0.05)


@pytest.mark.slow
def test_hybrid_and_shard_grad_op(results: dict[str, estimate.Estimate]) -> None:
    psi = get_config("tiny").num_params()
    hybrid, grad_op = results["hybrid"], results["grad_op"]
    assert hybrid.phases["optimizer"]["params"] == 4 * psi / 2 == hybrid.analytical.params  # sharded over 2, not 4
    assert grad_op.phases["optimizer"]["params"] == 4 * psi / 4 == grad_op.analytical.params
    assert grad_op.phases["forward"]["params_unsharded"] == 4 * psi == grad_op.analytical.params_unsharded


@pytest.mark.slow
def test_explanations_and_table(results: dict[str, estimate.Estimate]) -> None:
    e = results["llama"]
    lines = e.explain()
    assert len(lines) == 6 and all(any(ch.isdigit() for ch in line) for line in lines)
    table = e.table()
    assert "fake-tensor run" in table and "analytical model" in table and "peak reached in backward" in table
    diffs = e.differences()
    assert diffs["params"] == pytest.approx(0, abs=0.1) and diffs["other"] is not None  # temporaries modelled too
    json.dumps(e.as_dict())  # the CLI's --json
    assert "<table" in e._repr_html_()


@pytest.mark.parametrize(("rows", "n"), [(10, 4), (8, 4), (3, 4), (0, 2), (1001, 64), (7, 1)])
def test_lazy_chunks_are_fsdp2s_chunks(rows: int, n: int) -> None:
    import torch
    from torch.distributed.fsdp._fully_shard._fsdp_common import _chunk_with_empty

    x = torch.arange(rows * 3).reshape(rows, 3)
    theirs, ours = _chunk_with_empty(x, n, dim=0), faketrace.Chunks(x, n, dim=0)
    assert len(ours) == len(theirs) == n
    for a, b in zip(theirs, ours):
        assert a.shape == b.shape and torch.equal(a, b)
        assert a.numel() == 0 or a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()  # views, no copies
    assert torch.equal(ours[-1], theirs[-1])


def test_bad_input_fails_before_any_subprocess() -> None:
    t0 = time.perf_counter()
    with pytest.raises(OptionError, match="FULL_SHARD"):
        estimate.estimate_peak("llama-1b", 8, strategy="DDP")
    with pytest.raises(OptionError, match="llama-7b"):
        estimate.estimate_peak("llama-7", 8)
    with pytest.raises(OptionError, match="shard_group_size"):
        estimate.estimate_peak("llama-1b", 12, strategy="HYBRID_SHARD", shard_group_size=8)
    assert time.perf_counter() - t0 < 5


@pytest.mark.slow
def test_timeout_stops_the_subprocess() -> None:
    with pytest.raises(LabkitError, match="longer than"):
        estimate.estimate_peak("llama-1b", 8, timeout=0.5)


@pytest.mark.slow
def test_cli(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="labkit")
    estimate.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["estimate", "--model", "llama-70b", "--nproc", "64"])
    assert (args.model, args.nproc, args.checkpointing, args.precision) == ("llama-70b", 64, True, "bf16")
    args = parser.parse_args(
        ["estimate", "--no-checkpointing", "--strategy", "HYBRID_SHARD", "--shard-group-size", "4"]
    )
    assert (args.checkpointing, args.strategy, args.shard_group_size) == (False, "HYBRID_SHARD", 4)
    assert args.func is estimate.cmd_estimate
    assert estimate.main(["--model", "llama-1b", "--strategy", "NO_SHARD"]) == 1
    assert "FULL_SHARD" in capsys.readouterr().err
