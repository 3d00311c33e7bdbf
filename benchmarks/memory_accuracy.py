"""How far the measured breakdown and the fake-tensor estimate are from the analytical model.

    .venv/bin/python benchmarks/memory_accuracy.py            # "small" at 1, 2, 4 ranks (about 3 min)
    .venv/bin/python benchmarks/memory_accuracy.py --llama    # and Llama-like 1B to 70B, 8 to 1024 ranks

For the "small" transformer (fp32 AdamW, micro-batch 2 x 64 tokens), at 1, 2 and 4 ranks:
measured = a real torchrun job on gloo (labkit/testing/mem_job.py, step 1 measured by
labkit.memtrack), FSDP1 FULL_SHARD and FSDP2 fully_shard; estimate = labkit.estimate's
fake-tensor run of the same FSDP2 setup. Each cell is (value - model) / model in percent:

* params, grads, optimizer: after the optimizer step, vs ``model_states`` (4 + 4 + 8 bytes / N);
* activations: at the end of forward, vs ``activation_memory(...).stored``;
* peak rows: the breakdown at the step's peak vs ``peak_memory(..., convention="torch")``,
  which sums each category's largest value (two gathered units, every gradient shard plus
  one unit's unsharded gradient, all activations) and leaves out backward temporaries
  ("other", shown in percent of the model's total).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from labkit import estimate
from labkit import memory_model as mm
from labkit.models import get_config
from labkit.testing.mem_job import BATCH
from labkit.testing.mem_launch import phase, run_job

WORLDS = (1, 2, 4)
CONFIGS = {"fsdp1": "fsdp1:FULL_SHARD", "fsdp2": "fsdp2:reshard"}
ROWS = [
    ("optimizer", "params"),
    ("optimizer", "grads"),
    ("optimizer", "optimizer"),
    ("forward", "activations"),
    ("peak", "params_unsharded"),
    ("peak", "grads"),
    ("peak", "activations"),
    ("peak", "other"),
    ("peak", "total"),
]


def reference(cfg, n: int) -> dict[tuple[str, str], float]:
    states = mm.model_states(cfg.num_params(), "FULL_SHARD", n, "fp32", "adamw")
    peak = mm.peak_memory(cfg, "FULL_SHARD", n, "fp32", micro_batch=BATCH, convention="torch")
    acts = mm.activation_memory(cfg, BATCH, precision="fp32")
    ref = {("optimizer", c): getattr(states, c) for c in ("params", "grads", "optimizer")}
    ref[("forward", "activations")] = acts.stored
    ref |= {("peak", c): getattr(peak, c) for c in mm.CATEGORIES}
    ref[("peak", "total")] = peak.total
    return ref


def value(cats: dict[str, int], category: str) -> float:
    return sum(cats.values()) if category == "total" else cats.get(category, 0)


def percent(got: float, ref: float, total: float | None = None) -> str:
    """The difference in percent of the model's value; where the model has 0 (it leaves the
    backward temporaries out), the measured bytes in percent of the model's total instead."""
    if ref:
        return f"{100 * (got - ref) / ref:+.2f}%"
    return f"{100 * got / total:.1f}% of total" if total else "0"


def small_table() -> tuple[str, dict]:
    cfg = get_config("small")
    measured = {n: run_job(n, "small", 2, *CONFIGS.values()) for n in WORLDS}
    specs = [estimate.Spec("small", n, "fp32", checkpointing=False, micro_batch=BATCH) for n in WORLDS]
    fake = dict(zip(WORLDS, estimate.estimate_many(specs)))
    columns = [(f"measured {f} N={n}", f, n) for f in CONFIGS for n in WORLDS] + [
        (f"estimate N={n}", "fake", n) for n in WORLDS
    ]
    head = ["phase", "category"] + [c[0] for c in columns]
    rows, raw = [head], {}
    for ph, cat in ROWS:
        row = [ph, cat]
        for label, source, n in columns:
            refs = reference(cfg, n)
            ref = refs[(ph, cat)]
            if source == "fake":
                e = fake[n]
                cats = e.peak if ph == "peak" else e.phases[ph]
            else:
                cats = phase(measured[n], CONFIGS[source], 0, ph)
            got = value(cats, cat)
            raw[f"{label}/{ph}/{cat}"] = {"bytes": got, "model": ref}
            row.append(percent(got, ref, refs[("peak", "total")]))
        rows.append(row)
    return mm._render(rows, "markdown"), raw


def llama_table() -> tuple[str, dict]:
    runs = [
        ("llama-1b", 8),
        ("llama-7b", 8),
        ("llama-7b", 64),
        ("llama-13b", 64),
        ("llama-70b", 64),
        ("llama-70b", 1024),
    ]
    specs = [estimate.Spec(m, n, "bf16", checkpointing=True) for m, n in runs]
    results = estimate.estimate_many(specs, timeout=1800)
    head = ["model", "ranks", "fake-tensor peak (GB)", "model peak (GB)", "difference", "model states (GB)"]
    head += ["wall s", "CPU s"]
    rows, raw = [head], {}
    for e in results:
        s = e.spec
        rows.append(
            [
                s.model,
                str(s.world_size),
                f"{e.total / mm.GB:.2f}",
                f"{e.analytical.total / mm.GB:.2f}",
                percent(e.total, e.analytical.total),
                f"{e.analytical.model_states / mm.GB:.2f}",
                f"{e.seconds:.0f}",
                f"{e.cpu_seconds:.0f}",
            ]
        )
        raw[f"{s.model}@{s.world_size}"] = e.as_dict()
    return mm._render(rows, "markdown"), raw


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--llama", action="store_true", help="also estimate llama-1b..70b on 8..1024 ranks")
    p.add_argument("--json", type=Path, default=None, help="write the raw numbers here")
    args = p.parse_args()
    text, raw = small_table()
    print("small transformer, fp32 AdamW, rank 0; (value - model) / model\n")
    print(text)
    if args.llama:
        ltext, lraw = llama_table()
        print("\nLlama-like configs, bf16, activation checkpointing, FSDP2 FULL_SHARD, rank 0\n")
        print(ltext)
        raw["llama"] = lraw
    if args.json:
        args.json.write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    main()
