"""Peak memory per rank for models far larger than this machine, without allocating them.

    from labkit import estimate
    e = estimate.estimate_peak("llama-7b", world_size=8, precision="bf16", checkpointing=True)
    print(e)        # the breakdown at the peak, the analytical model beside it, and why they differ

    labkit estimate --model llama-70b --nproc 64      # the same from a shell (--no-checkpointing to compare)

How. A subprocess (so that the fake process group, and whatever torch caches, never enter the
notebook's kernel; and so that a hang is ended by a timeout) does what a lesson's training
script does, on tensors that have shapes but no data:

1. joins a fake process group of N ranks as rank 0 (``torch.testing._internal.distributed.fake_pg``,
   a private torch module: every collective returns at once);
2. builds ``TransformerLM`` under ``FakeTensorMode`` and wraps it with FSDP2 as the lessons do:
   ``fully_shard`` on each ``TransformerBlock``, then on the root, with
   ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`` for bf16; activation
   checkpointing with ``checkpoint_wrapper`` on each block;
3. creates AdamW's state (``foreach=False``: its state is exactly the two moments and a step
   counter per parameter; ``foreach=True``'s temporaries are as large as all the states);
4. runs one real training step (forward, backward, optimizer step) under ``labkit.memtrack``'s
   tracker, the same that measures real runs, so the categories mean the same thing.

Rank 0 is measured: FSDP2 gives it the largest shard when rows do not divide evenly.

Depth. Every transformer block is the same, so each category's bytes at the peak (and after
each phase) grow by the same amount per block: an affine function of the depth. A model
deeper than ``sum(DEPTHS)`` blocks (where it pays) is traced at ``DEPTHS`` = 4, 5 and 6 blocks
and the line through them is read off at the model's depth (``extrapolate=False``: trace it whole). Checked on
every estimate: the three traces agree on where the peak falls and lie on one line (to
0.1%), and no phase's end, extrapolated, exceeds the extrapolated peak; otherwise the model
is traced whole. Why not 2 or 3 blocks: with so few, the peak of a 70B model falls at
another point of backward. ``tests/test_estimate.py`` checks the extrapolation against a
whole trace; ``benchmarks/estimate_speed.py`` prints both and their time (a 70B estimate:
11 s of CPU time on this 2-core machine, against 34 s traced whole).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
from typing import Any

from labkit.fmt import fmt_bytes, fmt_number, fmt_spec, markdown_to_html, render_table
from labkit.i18n import known, t
from labkit.memory import model as mm
from labkit.memory.faketrace import Spec, config_of, shard_group
from labkit.wire.errors import LabkitError, OptionError
from labkit.wire.setting import Flavor, Strategy

__all__ = ["DEPTHS", "Estimate", "Spec", "analytical", "combine", "estimate_many", "estimate_peak", "register"]


FSDP2_STRATEGIES = ("ZERO3", "ZERO2", Strategy.HYBRID_SHARD)  # what fully_shard can do, in memory_model's names


# ---------------------------------------------------------------------------------------
# The notebook's side
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Rank 0's memory in a fake-tensor run of one step, beside the analytical model."""

    spec: Spec
    peak: dict[str, int]  # bytes per category at the moment of the peak
    phases: dict[str, dict[str, int]]  # after forward, after backward, after the optimizer step
    stage: str  # forward / backward / optimizer: where the peak happened
    seconds: float  # wall time of the run in the subprocess
    analytical: mm.MemoryBreakdown
    cpu_seconds: float = 0.0  # CPU time of the same: what a busy machine does not stretch
    traced_layers: tuple[int, ...] = ()  # the depths traced and extrapolated from; () for a whole trace

    @property
    def total(self) -> int:
        return sum(self.peak.values())

    def differences(self) -> dict[str, float | None]:
        """Per category, (fake run - model) / model in percent; None where the model has 0."""
        out: dict[str, float | None] = {}
        for c in (*mm.CATEGORIES, "total"):
            est = self.total if c == "total" else self.peak.get(c, 0)
            ref = self.analytical.total if c == "total" else getattr(self.analytical, c)
            out[c] = 100.0 * (est - ref) / ref if ref else None
        return out

    def explain(self) -> list[str]:
        """Why the fake run and the model differ, category by category, with the numbers."""
        s, cfg = self.spec, config_of(self.spec)
        n = shard_group(s)
        local = mm.local_numel(cfg, n, Flavor.FSDP2, rank=0)
        pad = 4 * (local["params"] - cfg.num_params() / n)
        lines = []
        if pad >= 1:
            lines.append(t("memory.est.why.params", n=n, pad=fmt_bytes(pad, "GB")))
        else:
            lines.append(t("memory.est.why.params_exact", n=n))
        tensors = sum(len(shapes) for _, shapes in mm.transformer_units(cfg))
        lines.append(t("memory.est.why.optimizer", steps=fmt_bytes(4 * tensors, "GB")))
        full = self.phases.get("backward", {}).get("grads", 0)
        lines.append(
            t(
                "memory.est.why.grads",
                measured=fmt_bytes(self.peak["grads"], "GB"),
                full=fmt_bytes(full, "GB"),
                unit=fmt_bytes(self.analytical.grads, "GB"),
            )
        )
        lines.append(
            t(
                "memory.est.why.unsharded",
                measured=fmt_bytes(self.peak["params_unsharded"], "GB"),
                dtype=mm.resolve_precision(s.precision),
                model=fmt_bytes(self.analytical.params_unsharded, "GB"),
            )
        )
        acts = mm.activation_memory(cfg, s.micro_batch, s.seq_len, s.checkpointing, s.precision)
        lines.append(
            t(
                "memory.est.why.activations",
                stored=fmt_bytes(self.phases.get("forward", {}).get("activations", 0), "GB"),
                formula="labkit",
                predicted=fmt_bytes(acts.stored, "GB"),
                at_peak=fmt_bytes(self.peak["activations"], "GB"),
                model=fmt_bytes(acts.peak, "GB"),
                how=t("memory.est.why.act_ac") if s.checkpointing else t("memory.est.why.act_all"),
            )
        )
        logits = 4 * s.micro_batch * (s.seq_len or cfg.seq_len) * cfg.vocab_size
        lines.append(t("memory.est.why.other", logits=fmt_bytes(logits, "GB")))
        return lines

    def table(self) -> str:
        s = self.spec
        head = [
            t("memory.est.col.category"),
            t("memory.est.col.fake"),
            t("memory.est.col.model"),
            t("memory.est.col.diff"),
        ]
        rows = [head]
        diffs = self.differences()
        for c in (*mm.CATEGORIES, "total"):
            est = self.total if c == "total" else self.peak.get(c, 0)
            ref = self.analytical.total if c == "total" else getattr(self.analytical, c)
            d = diffs[c]
            label = t("memory.total") if c == "total" else t(f"memory.cat.{c}")
            rows.append(
                [
                    label,
                    fmt_number(est / mm.GB, 2),
                    fmt_number(ref / mm.GB, 2),
                    "" if d is None else fmt_spec(d, "+.1f") + "%",
                ]
            )
        cfg = config_of(s)
        title = t(
            "memory.est.title",
            model=s.model,
            world=s.world_size,
            precision=s.precision,
            ac=t("memory.est.ac") if s.checkpointing else "",
            b=s.micro_batch,
            s=s.seq_len or cfg.seq_len,
        )
        if self.traced_layers:
            depths = ", ".join(str(d) for d in self.traced_layers)
            footer = t(
                "memory.est.footer.extrapolated",
                stage=_stage(self.stage),
                layers=cfg.n_layers,
                depths=depths,
                seconds=self.seconds,
            )
        else:
            footer = t("memory.est.footer", stage=_stage(self.stage), seconds=self.seconds)
        return render_table(rows, "markdown", title=title, notes=[footer, *self.explain()])

    def _repr_html_(self) -> str:
        return markdown_to_html(self.table())

    def __str__(self) -> str:
        return self.table()

    def as_dict(self) -> dict[str, Any]:
        return {
            "spec": dataclasses.asdict(self.spec),
            "peak": self.peak,
            "phases": self.phases,
            "stage": self.stage,
            "seconds": self.seconds,
            "cpu_seconds": self.cpu_seconds,
            "analytical": self.analytical.as_dict(),
            "differences": self.differences(),
            "traced_layers": list(self.traced_layers),
        }


def _stage(stage: str) -> str:
    """The phase the peak fell in, in words: "trecerea inversă" in Romanian, not "backward"."""
    return t(f"memory.est.stage.{stage}") if known(f"memory.est.stage.{stage}") else stage


def _check(spec: Spec) -> Spec:
    name = mm.resolve_strategy(spec.strategy).name
    if name not in FSDP2_STRATEGIES:
        raise OptionError(t("memory.est.strategy", name=spec.strategy))
    mm.resolve_precision(spec.precision)
    shard_group(spec)
    config_of(spec)  # a wrong preset name fails here, not in the subprocess
    return spec


def analytical(spec: Spec) -> mm.MemoryBreakdown:
    """The model's figure for the same run: FSDP2 keeps fp32 shards ("torch" convention)."""
    return mm.peak_memory(
        config_of(spec),
        spec.strategy,
        spec.world_size,
        spec.precision,
        "adamw",
        micro_batch=spec.micro_batch,
        seq_len=spec.seq_len,
        checkpointing=spec.checkpointing,
        shard_group_size=spec.shard_group_size,
        convention="torch",
    )


DEPTHS = (4, 5, 6)  # blocks traced for a deeper model; see the module's docstring


def estimate_many(specs: list[Spec], timeout: float = 600.0, extrapolate: bool = True) -> list[Estimate]:
    """Run several estimates in one subprocess (one torch import for all).

    ``extrapolate``: a model deeper than ``sum(DEPTHS)`` blocks is traced at ``DEPTHS`` blocks and
    extrapolated to its depth; where the traces do not lie on one line it is traced whole.
    """
    specs = [_check(s) for s in specs]
    plans = [_plan(s) if extrapolate else [s] for s in specs]
    runs = iter(_run([s for plan in plans for s in plan], timeout))
    out: list[Estimate | None] = []
    for spec, plan in zip(specs, plans):
        traced = [next(runs) for _ in plan]
        out.append(combine(spec, plan, traced) if len(plan) > 1 else _estimate(spec, traced[0]))
    if any(e is None for e in out):  # off the line: trace those whole
        whole = iter(_run([s for s, e in zip(specs, out) if e is None], timeout))
        out = [e if e is not None else _estimate(s, next(whole)) for s, e in zip(specs, out)]
    return [e for e in out if e is not None]


def _plan(spec: Spec) -> list[Spec]:
    depth = config_of(spec).n_layers
    if spec.layers or depth <= sum(DEPTHS):  # tracing it whole costs no more
        return [spec]
    return [dataclasses.replace(spec, layers=d) for d in DEPTHS]


def _estimate(spec: Spec, r: dict[str, Any], traced: tuple[int, ...] = ()) -> Estimate:
    return Estimate(spec, r["peak"], r["phases"], r["stage"], r["seconds"], analytical(spec), r["cpu_seconds"], traced)


def combine(spec: Spec, plan: list[Spec], traced: list[dict[str, Any]]) -> Estimate | None:
    """The line through the traces, read off at the model's depth; None where they are not on one line."""
    depths = [s.layers or 0 for s in plan]
    target = config_of(spec).n_layers
    if len({r["stage"] for r in traced}) != 1:
        return None

    def line(values: list[dict[str, int]]) -> dict[str, int] | None:
        keys = set().union(*values)
        points = [[v.get(k, 0) for v in values] for k in sorted(keys)]
        scale = max(1, *(sum(p[i] for p in points) for i in range(len(values))))
        out = {}
        for k, p in zip(sorted(keys), points):
            slope = (p[-1] - p[0]) / (depths[-1] - depths[0])
            off_line = max(abs(p[0] + slope * (d - depths[0]) - v) for d, v in zip(depths, p))
            if off_line > 1e-3 * scale:
                return None
            out[k] = round(p[-1] + slope * (target - depths[-1]))
        return out

    peak = line([r["peak"] for r in traced])
    phases = {p: line([r["phases"][p] for r in traced]) for p in traced[-1]["phases"]}
    if peak is None or any(v is None for v in phases.values()):
        return None
    if any(sum(v.values()) > sum(peak.values()) for v in phases.values() if v):  # another stage would peak
        return None
    r = {
        "peak": peak,
        "phases": phases,
        "stage": traced[-1]["stage"],
        "seconds": sum(x["seconds"] for x in traced),
        "cpu_seconds": sum(x["cpu_seconds"] for x in traced),
    }
    return _estimate(spec, r, tuple(depths))


def _run(specs: list[Spec], timeout: float) -> list[dict[str, Any]]:
    """Every spec traced in one subprocess (``labkit.memory.faketrace``), one JSON result each."""
    if not specs:
        return []
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "labkit.memory.faketrace", json.dumps([dataclasses.asdict(s) for s in specs])]
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise LabkitError(t("memory.est.timeout", timeout=timeout)) from None
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or len(lines) != len(specs):
        raise LabkitError(t("memory.est.failed", code=proc.returncode, tail=(err or out)[-3000:]))
    return [json.loads(line) for line in lines]


def estimate_peak(
    model: str = "llama-7b",
    world_size: int = 8,
    precision: str = "bf16",
    checkpointing: bool = True,
    micro_batch: int = 1,
    seq_len: int | None = None,
    strategy: str = Strategy.FULL_SHARD,
    shard_group_size: int | None = None,
    timeout: float = 300.0,
    extrapolate: bool = True,
) -> Estimate:
    """Rank 0's memory by category at the peak of one FSDP2 training step, from fake-tensor runs
    (traced at 4, 5 and 6 blocks and extrapolated to the model's depth unless ``extrapolate=False``)."""
    spec = Spec(model, world_size, precision, checkpointing, micro_batch, seq_len, strategy, shard_group_size)
    return estimate_many([spec], timeout, extrapolate)[0]


# ---------------------------------------------------------------------------------------
# The CLI: ``labkit estimate``
# ---------------------------------------------------------------------------------------


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="llama-7b", help=t("memory.est.help.model"))
    p.add_argument("-n", "--nproc", "--world-size", dest="nproc", type=int, default=8, help=t("memory.est.help.nproc"))
    p.add_argument("--precision", default="bf16", help=t("memory.est.help.precision"))
    p.add_argument("--checkpointing", action=argparse.BooleanOptionalAction, default=True, help=t("memory.est.help.ac"))
    p.add_argument("--strategy", default=Strategy.FULL_SHARD, help=t("memory.est.help.strategy"))
    p.add_argument("--shard-group-size", type=int, default=None, help=t("memory.est.help.group"))
    p.add_argument("--micro-batch", type=int, default=1, help=t("memory.est.help.micro_batch"))
    p.add_argument("--seq-len", type=int, default=None, help=t("memory.est.help.seq_len"))
    p.add_argument("--timeout", type=float, default=300.0, help=t("memory.est.help.timeout"))
    p.add_argument("--json", action="store_true", help=t("memory.est.help.json"))
    p.add_argument("--full", action="store_true", help=t("memory.est.help.full"))


def cmd_estimate(args: argparse.Namespace) -> int:
    try:
        e = estimate_peak(
            args.model,
            args.nproc,
            args.precision,
            args.checkpointing,
            args.micro_batch,
            args.seq_len,
            args.strategy,
            args.shard_group_size,
            timeout=args.timeout,
            extrapolate=not args.full,
        )
    except LabkitError as err:
        print(err, file=sys.stderr)
        return 1
    print(json.dumps(e.as_dict(), indent=1) if args.json else e.table())
    return 0


def register(subparsers: Any) -> None:
    """Add ``labkit estimate`` to the ``labkit`` command (see labkit/cli.py)."""
    p = subparsers.add_parser("estimate", help=t("memory.est.help"))
    _add_arguments(p)
    p.set_defaults(func=cmd_estimate)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="labkit estimate", description=t("memory.est.help"))
    _add_arguments(p)
    return cmd_estimate(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
