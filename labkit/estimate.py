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

Rank 0 is measured: FSDP2 gives it the largest shard when rows do not divide evenly. The
model runs at its full depth (one unit per layer, as in training). CPU time per estimate on
this 2-core machine: see benchmarks/memory_accuracy.py (about 15 s for llama-1b, 25 s for 7B,
60 s for 70B; wall time is longer when the machine is shared).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from labkit import memory_model as mm
from labkit.errors import LabkitError, OptionError
from labkit.i18n import catalog, t
from labkit.units import fmt_bytes, markdown_to_html, render_table

catalog(
    {
        "est.help": {
            "en": "estimate peak memory per rank with fake tensors (no GPU, no memory)",
            "ro": "estimează memoria de vârf per rang cu tensori falși (fără GPU, fără memorie)",
        },
        "est.help.model": {"en": "model preset, e.g. llama-7b", "ro": "presetul modelului, de ex. llama-7b"},
        "est.help.nproc": {"en": "number of ranks (world size)", "ro": "numărul de ranguri (world size)"},
        "est.help.precision": {"en": "fp32, bf16 or fp16", "ro": "fp32, bf16 sau fp16"},
        "est.help.ac": {
            "en": "activation checkpointing on every block",
            "ro": "recalcularea activărilor pe fiecare bloc",
        },
        "est.help.strategy": {
            "en": "FULL_SHARD, SHARD_GRAD_OP or HYBRID_SHARD",
            "ro": "FULL_SHARD, SHARD_GRAD_OP sau HYBRID_SHARD",
        },
        "est.help.group": {
            "en": "HYBRID_SHARD: ranks per shard group (default 8)",
            "ro": "HYBRID_SHARD: ranguri per grup de fragmentare (implicit 8)",
        },
        "est.help.micro_batch": {"en": "sequences per rank per step", "ro": "secvențe per rang per pas"},
        "est.help.seq_len": {
            "en": "sequence length (default: the preset's)",
            "ro": "lungimea secvenței (implicit: a presetului)",
        },
        "est.help.timeout": {"en": "seconds before giving up", "ro": "secunde până la renunțare"},
        "est.help.json": {"en": "print the result as JSON", "ro": "afișează rezultatul ca JSON"},
        "est.failed": {
            "en": "the fake-tensor estimate failed (exit {code}):\n{tail}",
            "ro": "estimarea cu tensori falși a eșuat (cod {code}):\n{tail}",
        },
        "est.timeout": {
            "en": "the fake-tensor estimate took longer than {timeout:.0f} s and was stopped",
            "ro": "estimarea cu tensori falși a durat mai mult de {timeout:.0f} s și a fost oprită",
        },
        "est.strategy": {
            "en": "estimates run FSDP2; choose FULL_SHARD, SHARD_GRAD_OP or HYBRID_SHARD, not {name!r}",
            "ro": "estimările rulează FSDP2; alegeți FULL_SHARD, SHARD_GRAD_OP sau HYBRID_SHARD, nu {name!r}",
        },
        "est.title": {
            "en": "{model} on {world} ranks, {precision}{ac}, micro-batch {b} x {s} tokens: rank 0 (GB)",
            "ro": "{model} pe {world} ranguri, {precision}{ac}, micro-lot {b} x {s} tokeni: rangul 0 (GB)",
        },
        "est.ac": {"en": ", activation checkpointing", "ro": ", cu recalcularea activărilor"},
        "est.col.category": {"en": "category", "ro": "categorie"},
        "est.col.fake": {"en": "fake-tensor run", "ro": "rulare cu tensori falși"},
        "est.col.model": {"en": "analytical model", "ro": "modelul analitic"},
        "est.col.diff": {"en": "difference", "ro": "diferență"},
        "est.footer": {
            "en": "peak reached in {stage}; the run took {seconds:.0f} s",
            "ro": "vârful a fost atins în {stage}; rularea a durat {seconds:.0f} s",
        },
        "est.why.params": {
            "en": "parameters: FSDP2 pads each parameter's rows to a multiple of {n}: {pad} more than Ψ/N",
            "ro": "parametri: FSDP2 completează rândurile fiecărui parametru la un multiplu de {n}: cu {pad} peste Ψ/N",
        },
        "est.why.params_exact": {
            "en": "parameters: 4 bytes × Ψ/N, the fp32 shard (no padding needed at {n} ranks)",
            "ro": "parametri: 4 octeți × Ψ/N, fragmentul fp32 (nu e nevoie de completare la {n} ranguri)",
        },
        "est.why.optimizer": {
            "en": "optimizer: two fp32 moments of the rows this rank owns, plus a 4-byte step counter per tensor ({steps})",
            "ro": "optimizator: două momente fp32 pentru rândurile acestui rang, plus un contor de 4 octeți per tensor ({steps})",
        },
        "est.why.grads": {
            "en": "gradients at the peak: {measured}, the shards of the units already reduced and the unsharded "
            "gradients still held ({full} of shards after backward); the model, at its peak moment, counts {unit}",
            "ro": "gradienți la vârf: {measured}, fragmentele unităților deja reduse și gradienții nefragmentați "
            "încă ținuți ({full} de fragmente după backward); modelul, în momentul vârfului său, numără {unit}",
        },
        "est.why.unsharded": {
            "en": "unsharded parameters at the peak: {measured} gathered; the model counts the units gathered "
            "at its peak moment, in {dtype} ({model})",
            "ro": "parametri nefragmentați la vârf: {measured} adunați; modelul numără unitățile adunate "
            "în momentul vârfului său, în {dtype} ({model})",
        },
        "est.why.activations": {
            "en": "activations: {stored} stored at the end of forward ({formula} formula: {predicted}); {at_peak} "
            "alive at the peak; the model counts {model} ({how})",
            "ro": "activări: {stored} stocate la sfârșitul forward ({formula}: {predicted}); {at_peak} în viață "
            "la vârf; modelul numără {model} ({how})",
        },
        "est.why.act_ac": {
            "en": "every layer's input, plus one layer rebuilt at a time in backward",
            "ro": "intrarea fiecărui strat, plus câte un strat reconstruit în backward",
        },
        "est.why.act_all": {
            "en": "all of them, though backward frees them as it goes",
            "ro": "pe toate, deși backward le eliberează pe parcurs",
        },
        "est.why.other": {
            "en": "other: backward temporaries (activation gradients, the logits' fp32 gradient of "
            "b·s·v·4 = {logits}, all-gather and reduce-scatter buffers); the model counts them term by term "
            "(memory_model.peak_memory(...).explain())",
            "ro": "altele: temporare din backward (gradienții activărilor, gradientul fp32 al logiturilor de "
            "b·s·v·4 = {logits}, bufferele all-gather și reduce-scatter); modelul le numără termen cu termen "
            "(memory_model.peak_memory(...).explain())",
        },
    }
)

FSDP2_STRATEGIES = ("ZERO3", "ZERO2", "HYBRID_SHARD")  # what fully_shard can do, in memory_model's names


# ---------------------------------------------------------------------------------------
# The notebook's side
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Spec:
    """One estimate to run."""

    model: str
    world_size: int
    precision: str = "bf16"
    checkpointing: bool = True
    micro_batch: int = 1
    seq_len: int | None = None
    strategy: str = "FULL_SHARD"
    shard_group_size: int | None = None


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
        s, cfg = self.spec, _config(self.spec)
        n = mm.shard_group(mm.resolve_strategy(s.strategy), s.world_size, s.shard_group_size)
        local = mm.local_numel(cfg, n, "fsdp2", rank=0)
        pad = 4 * (local["params"] - cfg.num_params() / n)
        lines = []
        if pad >= 1:
            lines.append(t("est.why.params", n=n, pad=fmt_bytes(pad, "GB")))
        else:
            lines.append(t("est.why.params_exact", n=n))
        tensors = sum(len(shapes) for _, shapes in mm.transformer_units(cfg))
        lines.append(t("est.why.optimizer", steps=fmt_bytes(4 * tensors, "GB")))
        full = self.phases.get("backward", {}).get("grads", 0)
        lines.append(
            t(
                "est.why.grads",
                measured=fmt_bytes(self.peak["grads"], "GB"),
                full=fmt_bytes(full, "GB"),
                unit=fmt_bytes(self.analytical.grads, "GB"),
            )
        )
        lines.append(
            t(
                "est.why.unsharded",
                measured=fmt_bytes(self.peak["params_unsharded"], "GB"),
                dtype=mm.resolve_precision(s.precision),
                model=fmt_bytes(self.analytical.params_unsharded, "GB"),
            )
        )
        acts = mm.activation_memory(cfg, s.micro_batch, s.seq_len, s.checkpointing, s.precision)
        lines.append(
            t(
                "est.why.activations",
                stored=fmt_bytes(self.phases.get("forward", {}).get("activations", 0), "GB"),
                formula="labkit",
                predicted=fmt_bytes(acts.stored, "GB"),
                at_peak=fmt_bytes(self.peak["activations"], "GB"),
                model=fmt_bytes(acts.peak, "GB"),
                how=t("est.why.act_ac") if s.checkpointing else t("est.why.act_all"),
            )
        )
        logits = 4 * s.micro_batch * (s.seq_len or cfg.seq_len) * cfg.vocab_size
        lines.append(t("est.why.other", logits=fmt_bytes(logits, "GB")))
        return lines

    def table(self) -> str:
        s = self.spec
        head = [t("est.col.category"), t("est.col.fake"), t("est.col.model"), t("est.col.diff")]
        rows = [head]
        diffs = self.differences()
        for c in (*mm.CATEGORIES, "total"):
            est = self.total if c == "total" else self.peak.get(c, 0)
            ref = self.analytical.total if c == "total" else getattr(self.analytical, c)
            d = diffs[c]
            label = t("mm.total") if c == "total" else t(f"mm.cat.{c}")
            rows.append([label, f"{est / mm.GB:,.2f}", f"{ref / mm.GB:,.2f}", "" if d is None else f"{d:+.1f}%"])
        cfg = _config(s)
        title = t(
            "est.title",
            model=s.model,
            world=s.world_size,
            precision=s.precision,
            ac=t("est.ac") if s.checkpointing else "",
            b=s.micro_batch,
            s=s.seq_len or cfg.seq_len,
        )
        notes = [t("est.footer", stage=self.stage, seconds=self.seconds), *self.explain()]
        return render_table(rows, "markdown", title=title, notes=notes)

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
        }


def _config(spec: Spec) -> Any:
    from labkit.models import get_config

    try:
        cfg = get_config(spec.model)
    except ValueError as err:  # an unknown preset: say so before any subprocess starts
        raise OptionError(str(err)) from None
    return dataclasses.replace(cfg, seq_len=spec.seq_len) if spec.seq_len else cfg


def _check(spec: Spec) -> Spec:
    name = mm.resolve_strategy(spec.strategy).name
    if name not in FSDP2_STRATEGIES:
        raise OptionError(t("est.strategy", name=spec.strategy))
    mm.resolve_precision(spec.precision)
    mm.shard_group(mm.resolve_strategy(spec.strategy), spec.world_size, spec.shard_group_size)
    _config(spec)  # a wrong preset name fails here, not in the subprocess
    return spec


def analytical(spec: Spec) -> mm.MemoryBreakdown:
    """The model's figure for the same run: FSDP2 keeps fp32 shards ("torch" convention)."""
    return mm.peak_memory(
        _config(spec),
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


def estimate_many(specs: list[Spec], timeout: float = 600.0) -> list[Estimate]:
    """Run several estimates in one subprocess (one torch import for all)."""
    specs = [_check(s) for s in specs]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "labkit.estimate", "--worker", json.dumps([dataclasses.asdict(s) for s in specs])]
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise LabkitError(t("est.timeout", timeout=timeout)) from None
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or len(lines) != len(specs):
        raise LabkitError(t("est.failed", code=proc.returncode, tail=(err or out)[-3000:]))
    results = []
    for spec, line in zip(specs, lines):
        r = json.loads(line)
        results.append(
            Estimate(spec, r["peak"], r["phases"], r["stage"], r["seconds"], analytical(spec), r["cpu_seconds"])
        )
    return results


def estimate_peak(
    model: str = "llama-7b",
    world_size: int = 8,
    precision: str = "bf16",
    checkpointing: bool = True,
    micro_batch: int = 1,
    seq_len: int | None = None,
    strategy: str = "FULL_SHARD",
    shard_group_size: int | None = None,
    timeout: float = 300.0,
) -> Estimate:
    """Rank 0's memory by category at the peak of one FSDP2 training step, from a fake-tensor run."""
    spec = Spec(model, world_size, precision, checkpointing, micro_batch, seq_len, strategy, shard_group_size)
    return estimate_many([spec], timeout)[0]


# ---------------------------------------------------------------------------------------
# The subprocess's side
# ---------------------------------------------------------------------------------------


class _Chunks:
    """``torch.chunk(x, n, dim)`` padded with empty chunks to n, as FSDP2's ``_chunk_with_empty``
    returns it, but made one chunk at a time when asked for. FSDP2 reads two of the n chunks
    (its own and chunk 0); under fake tensors, making all n costs about a millisecond each,
    which for 70B on 1024 ranks is 740,000 chunks and most of a quarter of an hour."""

    def __init__(self, x: Any, n: int, dim: int) -> None:
        self.x, self.n, self.dim = x, n, dim
        self.size = -(-x.size(dim) // n) if x.size(dim) else 0  # torch.chunk's chunk size

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        i = i + self.n if i < 0 else i
        if not 0 <= i < self.n:
            raise IndexError(i)
        rows, start = self.x.size(self.dim), i * self.size
        if rows == 0:  # torch.chunk gives n empty views of an empty tensor
            return self.x.narrow(self.dim, 0, 0)
        if start >= rows:  # torch.chunk made fewer than n chunks; FSDP2 pads with empty ones
            return self.x.new_empty(0)
        return self.x.narrow(self.dim, start, min(self.size, rows - start))

    def __iter__(self) -> Any:
        return (self[i] for i in range(self.n))


def _measure(spec: Spec) -> dict[str, Any]:
    """One step of ``spec`` under fake tensors and a fake process group; rank 0's memcat results."""
    from unittest import mock

    import torch
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.distributed.fsdp._fully_shard import _fsdp_param
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from labkit import memtrack
    from labkit.models import TransformerLM

    cfg = _config(spec)
    strat = mm.resolve_strategy(spec.strategy)
    n = spec.world_size
    t0, cpu0 = time.perf_counter(), time.process_time()
    dist.init_process_group("fake", rank=0, world_size=n, store=FakeStore())
    try:
        if strat.name == "HYBRID_SHARD":
            group = mm.shard_group(strat, n, spec.shard_group_size)
            mesh = init_device_mesh("cpu", (n // group, group), mesh_dim_names=("replicate", "shard"))
        else:
            mesh = init_device_mesh("cpu", (n,))  # outside fake mode: the mesh holds real rank lists
        dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[mm.resolve_precision(spec.precision)]
        mp = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32 if dtype else None)
        reshard = strat.name != "ZERO2"  # SHARD_GRAD_OP keeps units gathered until backward
        # Initial values do not exist under fake tensors: skip the init kernels, keep the shapes;
        # and let FSDP2 cut only the chunks it reads (see _Chunks).
        with (
            FakeTensorMode(),
            mock.patch.object(TransformerLM, "reset_parameters", lambda self: None),
            mock.patch.object(_fsdp_param, "_chunk_with_empty", _Chunks),
        ):
            model = TransformerLM(cfg)
            if spec.checkpointing:
                for i, block in enumerate(model.layers):
                    model.layers[i] = checkpoint_wrapper(block)
            for block in model.layers:
                fully_shard(block, mesh=mesh, reshard_after_forward=reshard, mp_policy=mp)
            fully_shard(model, mesh=mesh, reshard_after_forward=reshard, mp_policy=mp)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
            # The state AdamW makes on its first step, made directly: a real first step on fake
            # gradients would cost as much as the measured one and make the same tensors.
            for p in model.parameters():
                opt.state[p] = {
                    "step": torch.tensor(0.0),
                    "exp_avg": torch.zeros_like(p),
                    "exp_avg_sq": torch.zeros_like(p),
                }
            x = torch.randint(0, cfg.vocab_size, (spec.micro_batch, cfg.seq_len))
            y = torch.randint(0, cfg.vocab_size, (spec.micro_batch, cfg.seq_len))
            tracker = memtrack.track(model, opt, send=False)
            with tracker.step(1):
                model(x, y).backward()
                opt.step()
                opt.zero_grad()
    finally:
        dist.destroy_process_group()
    by_phase = {m["phase"]: m for m in tracker.results}
    return {
        "peak": by_phase["peak"]["categories"],
        "phases": {p: m["categories"] for p, m in by_phase.items() if p != "peak"},
        "stage": by_phase["peak"].get("stage", ""),
        "seconds": time.perf_counter() - t0,
        "cpu_seconds": time.process_time() - cpu0,
    }


def _worker(payload: str) -> None:
    import torch

    torch.set_num_threads(1)
    for spec in json.loads(payload):
        print(json.dumps(_measure(Spec(**spec))), flush=True)


# ---------------------------------------------------------------------------------------
# The CLI: ``labkit estimate``
# ---------------------------------------------------------------------------------------


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="llama-7b", help=t("est.help.model"))
    p.add_argument("-n", "--nproc", "--world-size", dest="nproc", type=int, default=8, help=t("est.help.nproc"))
    p.add_argument("--precision", default="bf16", help=t("est.help.precision"))
    p.add_argument("--checkpointing", action=argparse.BooleanOptionalAction, default=True, help=t("est.help.ac"))
    p.add_argument("--strategy", default="FULL_SHARD", help=t("est.help.strategy"))
    p.add_argument("--shard-group-size", type=int, default=None, help=t("est.help.group"))
    p.add_argument("--micro-batch", type=int, default=1, help=t("est.help.micro_batch"))
    p.add_argument("--seq-len", type=int, default=None, help=t("est.help.seq_len"))
    p.add_argument("--timeout", type=float, default=300.0, help=t("est.help.timeout"))
    p.add_argument("--json", action="store_true", help=t("est.help.json"))


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
        )
    except LabkitError as err:
        print(err, file=sys.stderr)
        return 1
    print(json.dumps(e.as_dict(), indent=1) if args.json else e.table())
    return 0


def register(subparsers: Any) -> None:
    """Add ``labkit estimate`` to the ``labkit`` command (see labkit/cli.py)."""
    p = subparsers.add_parser("estimate", help=t("est.help"))
    _add_arguments(p)
    p.set_defaults(func=cmd_estimate)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        _worker(argv[1])
        return 0
    p = argparse.ArgumentParser(prog="labkit estimate", description=t("est.help"))
    _add_arguments(p)
    return cmd_estimate(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
