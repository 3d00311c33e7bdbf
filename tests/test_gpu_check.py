"""benchmarks/gpu_check.py: its dry run on gloo and the CPU, and its GPU-only branches on fake inputs.

The dry run is the same script a GPU hub runs, so it cannot rot before a GPU arrives. The parts
that only a GPU would reach (NCCL kernels per stream in a profiler trace, the caching allocator's
category, one rank) are fed recorded-shape inputs here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def load():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


gc = load()


@pytest.mark.slow
@pytest.mark.extended  # the second tier: the device script's runs rehearsed on CPU, which the lessons' tests run
@pytest.mark.timeout(900)
def test_dry_run_passes_and_says_what_it_skipped(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(gc.gpus.AUDIT_ENV, None)
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run", "--out", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=840,
    )
    took = time.monotonic() - t0
    out = proc.stdout
    assert proc.returncode == 0, out[-6000:] + proc.stderr[-3000:]
    for name in ("seed", "memory", "comm", "timeline", "faults", "lessons", "cuda-audit", "cleanup"):
        assert any(line.startswith(f"PASS  {name} ") for line in out.splitlines()), (name, out)
    assert "could not check here:" in out and "dry run on gloo and the CPU" in out and "only 'tiny'" in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [r["status"] for r in summary["results"]] == ["PASS"] * 8
    assert summary["plan"]["backend"] == "gloo" and len(summary["plan"]["lessons"]) == 1
    print(f"dry run: {took:.0f} s")  # shown with -s: its budget in the suite is a minute


def test_the_seed_cell_is_lesson_0s_example_made_device_neutral() -> None:
    code = gc.seed_cell("nccl")
    assert 'dist.init_process_group("nccl"' in code and "device_id=rank.device()" in code
    assert "device=rank.device())" in code and "gloo" not in code.split("#")[0]
    assert code.index("FullyShardedDataParallel(") < code.index("torch.optim.AdamW(")
    nb = gc.seed_notebook(SimpleNamespace(nproc=4, backend="nccl", model="medium"), Path("/x/seed.json"))
    assert nb.cells[3].source.startswith("%%torchrun -n 4 --backend nccl --vars model_size,steps")
    assert nb.cells[0].source.startswith("from labkit.wire import devices as gpus\ngpus.audit_cuda")


def test_no_gpu_without_dry_run_is_refused_before_anything_is_written(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(gc.gpus, "visible_gpus", lambda: [])
    monkeypatch.setattr(gc.tempfile, "tempdir", str(tmp_path))  # where a folder of its own would go
    with pytest.raises(SystemExit, match="no GPU"):
        gc.make_plan(gc.argparse.Namespace(dry_run=False, out=None, model="medium", jobs=4, budget=420))
    assert list(tmp_path.iterdir()) == []


def kernel(name: str, stream: int, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur, "args": {"stream": stream}}


def test_overlap_of_nccl_and_compute_kernels_from_a_cuda_trace() -> None:
    # the shape torch.profiler writes for CUDA kernels: an all-gather on NCCL's stream 20
    # while a GEMM and a norm run on the compute stream 7
    trace = {
        "traceEvents": [
            kernel("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 20, 100.0, 50.0),
            kernel("ampere_sgemm_128x64_tn", 7, 90.0, 30.0),  # 100..120 under the all-gather
            kernel("vectorized_layer_norm_kernel", 7, 130.0, 40.0),  # 130..150
            kernel("ncclDevKernel_ReduceScatter_Sum_f32_RING_LL", 20, 300.0, 10.0),  # exposed
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0.0, "dur": 500.0},
        ]
    }
    found = gc.trace_streams(trace)
    assert found["nccl_streams"] == [20] and found["compute_streams"] == [7]
    assert gc.overlap_us(found["nccl"], found["compute"]) == pytest.approx(40.0)


def test_timeline_on_nccl_passes_only_with_overlap(tmp_path: Path) -> None:
    spans = [
        {"unit": "layers.0", "kind": k, "start": 0.0, "end": 1.0, "stream": "compute"} for k in ("forward", "backward")
    ]
    recorded = [
        {"t": "spans", "config": "recorded", "spans": spans},
        {"t": "gpu_timing", "plain": [0.010, 0.011], "synced": [0.013, 0.012], "synchronize": True},
    ]

    def run_with(events: list[dict], nproc: int = 1) -> SimpleNamespace:
        path = tmp_path / "trace.json"
        path.write_text(json.dumps({"traceEvents": events}))
        values = {r: {"trace": str(path), "profiled": "DDP"} for r in range(nproc)}
        return SimpleNamespace(values=values, events=dict.fromkeys(range(nproc), recorded))

    plan = SimpleNamespace(backend="nccl", nproc=1)
    hidden = [kernel("ncclDevKernel_AllReduce_Sum_f32", 20, 0.0, 10.0), kernel("sgemm", 7, 5.0, 10.0)]
    res = gc.check_timeline(plan, run_with(hidden))
    assert res.status == "PASS" and "0.01 ms of it under compute on streams [7]" in res.notes[1]
    assert "synchronize=True): 2 spans, step 10.0 ms unrecorded, 12.0 ms recorded" in res.notes[0]
    assert any("needs 2 or more GPUs" in n for n in res.notes)
    serial = [kernel("ncclDevKernel_AllReduce_Sum_f32", 20, 0.0, 10.0), kernel("sgemm", 7, 10.0, 10.0)]
    assert gc.check_timeline(plan, run_with(serial)).status == "FAIL"
    alone = gc.check_timeline(plan, run_with([kernel("sgemm", 7, 10.0, 10.0)]))  # one rank, NCCL idle
    assert alone.status == "SKIP" and "2 or more GPUs" in alone.notes[-1]
    two = SimpleNamespace(backend="nccl", nproc=2)
    assert gc.check_timeline(two, run_with(serial[1:], 2)).status == "FAIL"  # two ranks and no NCCL kernel
    assert gc.check_timeline(two, run_with(hidden, 2)).status == "PASS"
    recorded.pop(0)  # no spans from labkit.timeline: a failure too
    assert gc.check_timeline(plan, run_with(hidden)).status == "FAIL"


def memcat(params: int, grads: int, opt: int) -> dict:
    cats = {"params": params, "grads": grads, "optimizer": opt, "activations": 0, "other": 4096}
    return {"t": "memcat", "step": 1, "phase": "optimizer", "categories": cats}


def test_memory_shows_the_allocator_cache_as_its_own_category() -> None:
    psi = 1_000_000  # fp32 AdamW at 2 ranks: 2 + 2 + 4 MB of model states per rank
    alloc = {"t": "allocator", "allocated": 9_000_000, "reserved": 20_971_520, "max_reserved": 20_971_520}
    events = {r: [memcat(2_000_000, 2_000_000, 4_000_040), alloc] for r in (0, 1)}
    run = SimpleNamespace(values={0: {"num_params": psi}}, events=events)
    res = gc.check_memory(SimpleNamespace(nproc=2, backend="nccl"), run)
    assert res.status == "PASS" and "allocator cache 11.4 MiB" in res.notes[0]
    events = {r: [memcat(2_000_000, 2_000_000, 4_200_000)] for r in (0, 1)}  # 2.5% off
    res = gc.check_memory(SimpleNamespace(nproc=2, backend="gloo"), SimpleNamespace(values=run.values, events=events))
    assert res.status == "FAIL"


def test_one_rank_cannot_check_bytes_on_a_link() -> None:
    counts = {"all_reduce": {"calls": 1, "bytes": 4_000_000, "wire_bytes": 0.0}}
    events = {
        0: [
            {"t": "comm", "config": "zero3", "counts": {}, "padded": 10**6},
            {"t": "comm", "config": "ddp", "counts": counts},
        ]
    }
    res = gc.check_comm(
        SimpleNamespace(nproc=1, backend="nccl"), SimpleNamespace(values={0: {"num_params": 10**6}}, events=events)
    )
    assert res.status == "SKIP" and "payload 1.00Ψ" in res.figure and "2 or more GPUs" in res.notes[0]
