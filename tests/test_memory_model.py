"""The analytical memory model against the ZeRO paper's numbers and hand-computed cases.

    .venv/bin/pytest tests/test_memory_model.py

Activations are checked against measured runs in test_memtrack.py, the transient units and
padding against FSDP1/FSDP2 runs there too, and the whole peak against fake-tensor runs in
test_estimate.py.
"""

from __future__ import annotations

import math

import pytest

from labkit.i18n import set_lang
from labkit.memory import model as mm
from labkit.models.config import get_config
from labkit.views import memory as memory_view
from labkit.wire.errors import OptionError

GB = 1e9


# -- model states: the ZeRO paper (Rajbhandari et al. 2020), Figure 1 / Table 1 ---------


@pytest.mark.parametrize(
    ("strategy", "paper_gb"),
    [("DDP", 120.0), ("ZERO1", 31.4), ("ZERO2", 16.6), ("ZERO3", 1.9)],
)
def test_zero_paper_7_5b_on_64_gpus(strategy: str, paper_gb: float) -> None:
    b = mm.model_states(7.5e9, strategy, 64, "fp16", "adam")
    assert b.model_states / GB == pytest.approx(paper_gb, rel=0.02)


def test_zero_paper_arithmetic_exactly() -> None:
    psi, n = 7.5e9, 64
    assert mm.model_states(psi, "DDP", n).model_states == (2 + 2 + 12) * psi
    assert mm.model_states(psi, "ZERO1", n).model_states == 2 * psi + 2 * psi + 12 * psi / n
    assert mm.model_states(psi, "ZERO2", n).model_states == 2 * psi + (2 + 12) * psi / n
    assert mm.model_states(psi, "ZERO3", n).model_states == 16 * psi / n


def test_three_quarters_is_optimizer_state() -> None:
    b = mm.model_states(1e9, "DDP", 1, "bf16", "adamw")
    assert b.optimizer / b.model_states == 0.75
    assert "75%" in b.table()


def test_conventions_16_and_18_bytes() -> None:
    assert mm.bytes_per_param("bf16", "adamw", "zero").total == 16
    assert mm.bytes_per_param("bf16", "adamw", "deepspeed").total == 18  # fp32 gradients
    torch_way = mm.bytes_per_param("bf16", "adamw", "torch")
    assert (torch_way.param, torch_way.grad, torch_way.optimizer, torch_way.compute) == (4, 4, 8, 2)
    for convention in mm.CONVENTIONS:  # fp32 training: all three agree
        assert mm.bytes_per_param("fp32", "adamw", convention) == mm.PerParam(4, 4, 8, 4)


def test_70b_model_states_per_gpu() -> None:
    # torch-facts.md reference figures, 16 bytes per parameter
    psi = 70e9
    assert mm.model_states(psi, "DDP", 8).model_states / GB == pytest.approx(1120)
    for n, expected in [(8, 140), (16, 70), (64, 17.5)]:
        assert mm.model_states(psi, "FULL_SHARD", n).model_states / GB == pytest.approx(expected)


def test_hand_computed_optimizers_and_precisions() -> None:
    psi = 1e6
    assert mm.model_states(psi, "DDP", 1, "fp32", "sgd").model_states == 8 * psi  # weights + grads
    assert mm.model_states(psi, "DDP", 1, "fp32", "sgd_momentum").model_states == 12 * psi
    assert mm.model_states(psi, "DDP", 1, "bf16", "sgd").model_states == (2 + 2 + 4) * psi  # master copy
    assert mm.model_states(psi, "DDP", 1, "fp16", "adam").optimizer == 12 * psi
    assert mm.model_states(psi, "ZERO2", 4, "fp32", "adamw").model_states == 4 * psi + 12 * psi / 4


def test_hybrid_shard_divides_by_the_group() -> None:
    psi = 8e9
    hsdp = mm.model_states(psi, "HYBRID_SHARD", 64, shard_group_size=8)
    assert hsdp.model_states == mm.model_states(psi, "FULL_SHARD", 8).model_states
    assert mm.model_states(psi, "HYBRID_SHARD", 4).model_states == 16 * psi / 4  # group = min(N, 8)
    with pytest.raises(OptionError, match="shard_group_size"):
        mm.model_states(psi, "HYBRID_SHARD", 12, shard_group_size=8)


def test_offload_moves_bytes_to_the_host() -> None:
    psi = 1e9
    opt = mm.model_states(psi, "FULL_SHARD", 8, offload="optimizer")
    assert (opt.params, opt.grads, opt.optimizer) == (2 * psi / 8, 0, 0)
    assert (opt.host_grads, opt.host_optimizer) == (2 * psi / 8, 12 * psi / 8)
    params = mm.model_states(psi, "FULL_SHARD", 8, offload="params", convention="torch")
    assert params.model_states == 0
    assert params.host_total == 16 * psi / 8
    peak = mm.peak_memory("llama-1b", "FULL_SHARD", 8, offload="params", convention="torch")
    assert peak.params == 0 and peak.params_unsharded > 0  # the gathered units still live on the device
    assert "host" in peak.table() and "parameters" in peak.notes[0]


def test_names_are_forgiving_and_errors_suggest() -> None:
    assert mm.resolve_strategy("zero-3").name == "ZERO3"
    assert mm.resolve_strategy("full_shard").name == "ZERO3"
    assert mm.resolve_strategy("NO_SHARD").name == "DDP"
    assert mm.resolve_strategy("shard grad op").name == "ZERO2"
    with pytest.raises(OptionError, match="did you mean 'FULL_SHARD'"):
        mm.model_states(1e9, "FULL_SHRD")
    with pytest.raises(OptionError, match="did you mean 'bf16'"):
        mm.model_states(1e9, "DDP", 1, "bf61")
    with pytest.raises(OptionError, match="adamw"):
        mm.model_states(1e9, "DDP", 1, "bf16", "adamx")
    with pytest.raises(OptionError, match="world_size"):
        mm.model_states(1e9, "DDP", 0)


def test_romanian_table() -> None:
    set_lang("ro")
    try:
        text = mm.model_states(1e9, "ZERO3", 8).table()
        assert "stările optimizatorului" in text and "gradienți" in text
        assert "\u015f" not in text and "\u0163" not in text  # comma below, never cedilla
    finally:
        set_lang(None)


# -- shapes, units, padding ------------------------------------------------------------


@pytest.mark.parametrize("preset", ["tiny", "small", "llama-1b", "llama-7b", "llama-70b"])
def test_units_match_the_real_module(preset: str) -> None:
    import torch

    from labkit.models.config import get_config
    from labkit.models.transformer import TransformerLM

    with torch.device("meta"):
        model = TransformerLM(preset)
    real: dict[str, list[tuple[int, ...]]] = {}
    for name, p in model.named_parameters():
        unit = ".".join(name.split(".")[:2]) if name.startswith("layers.") else "root"
        real.setdefault(unit, []).append(tuple(p.shape))
    ours = {unit: sorted(shapes) for unit, shapes in mm.transformer_units(preset)}
    assert ours == {unit: sorted(shapes) for unit, shapes in real.items()}
    assert sum(mm.unit_sizes(preset)) == get_config(preset).num_params()


def test_padding_hand_computed() -> None:
    from labkit.models.config import ModelConfig

    # one unit of two parameters: 10 x 3 and 5 (no blocks)
    cfg = ModelConfig(vocab_size=10, dim=3, n_layers=0, n_heads=1, tied_embeddings=True)
    # root = embedding (10, 3) + final norm (3,) = 33 elements
    assert mm.local_numel(cfg, 4, "fsdp1") == {"params": 9, "grads": 9, "optimizer": 9}  # ceil(33 / 4)
    # FSDP2, per parameter on dim 0: rows 10 -> 3 per rank (padded), rows 3 -> 1 per rank
    assert mm.local_numel(cfg, 4, "fsdp2", rank=0) == {"params": 3 * 3 + 1, "grads": 10, "optimizer": 10}
    assert mm.local_numel(cfg, 4, "fsdp2", rank=3)["optimizer"] == 1 * 3 + 0  # 10 = 3+3+3+1 rows; 3 = 1+1+1+0


# -- activations -----------------------------------------------------------------------


def test_korthikanti_formula_by_hand() -> None:
    s, b, h, a = 2048, 1, 4096, 32
    assert mm.korthikanti_per_layer(s, b, h, a) == s * b * h * 34 + 5 * a * s * s * b
    acts = mm.activation_memory("llama-7b", 1, 2048, formula="korthikanti")
    assert acts.stored == 32 * s * b * h * (34 + 5 * a * s / h)
    ac = mm.activation_memory("llama-7b", 1, 2048, checkpointing=True, formula="korthikanti")
    assert ac.stored == 32 * 2 * s * b * h  # full recomputation keeps each layer's 16-bit input
    assert ac.peak == ac.stored + acts.per_layer


def test_labkit_formula_by_hand() -> None:
    # tiny: d=64, f=256, 4 heads, vocab 512; b=2, s=32, fp32
    b, s, d, f, v, a = 2, 32, 64, 256, 512, 4
    per_layer = (8 * s * b * d + 2 * s * b * d + 4 * s * b * f + 2 * s * b) * 4 + b * a * s * 4
    outside = (3 * s * b * d + s * b) * 4 + b * s * v * 4
    acts = mm.activation_memory("tiny", b, s, precision="fp32")
    assert acts.per_layer == per_layer and acts.stored == 2 * per_layer + outside
    ac = mm.activation_memory("tiny", b, s, checkpointing=True, precision="fp32")
    assert ac.stored == 2 * s * b * d * 4 + outside and ac.peak == ac.stored + per_layer
    with pytest.raises(OptionError):
        mm.activation_memory("tiny", formula="chinchilla")


# -- peak: the transient term ----------------------------------------------------------


def test_no_auto_wrap_policy_keeps_ddps_parameter_and_gradient_bytes() -> None:
    kw = {"precision": "fp32", "convention": "torch", "micro_batch": 1}
    psi = 6.74e9
    ddp = mm.peak_memory("llama-7b", "DDP", 8, **kw)
    one_unit = mm.peak_memory("llama-7b", "FULL_SHARD", 8, wrap="none", **kw)
    blocks = mm.peak_memory("llama-7b", "FULL_SHARD", 8, **kw)
    gathered = one_unit.params_unsharded + one_unit.grads
    assert gathered >= ddp.params + ddp.grads  # the whole model gathered, whole gradients before reduce-scatter
    assert one_unit.params_unsharded == pytest.approx(4 * psi, rel=0.01)
    assert blocks.params_unsharded + blocks.grads < 0.2 * gathered
    assert blocks.total - blocks.activations < 0.4 * (one_unit.total - one_unit.activations)
    assert any("auto_wrap_policy" in n for n in one_unit.notes)


def test_prefetch_and_the_root_by_flavor() -> None:
    """Units of 1e8 parameters (bf16): FSDP1 holds root + current + next block in backward with
    BACKWARD_PRE, root + current without prefetch; FSDP2 holds root + current, the next block
    waiting in its all-gather buffer ("other")."""
    kw = {"largest_unit": 1e8}
    pre = mm.peak_memory(1e9, "FULL_SHARD", 8, flavor="fsdp1", **kw)
    post = mm.peak_memory(1e9, "FULL_SHARD", 8, flavor="fsdp1", backward_prefetch="BACKWARD_POST", **kw)
    none = mm.peak_memory(1e9, "FULL_SHARD", 8, flavor="fsdp1", prefetch=False, **kw)
    fsdp2 = mm.peak_memory(1e9, "FULL_SHARD", 8, flavor="fsdp2", **kw)

    def gathered(b: mm.MemoryBreakdown) -> float:
        return b.phase("block", 1).by_category(mm.CATEGORIES)["params_unsharded"]

    assert gathered(pre) == 3 * 2 * 1e8
    assert gathered(post) == gathered(none) == 2 * 2 * 1e8
    assert gathered(fsdp2) == 2 * 2 * 1e8
    assert any(x.key == "ag_buffer" and x.bytes == 2 * 1e8 for x in fsdp2.phase("block", 1).terms)
    # FSDP1's forward_prefetch: the previous block's post-backward runs late (measured), from block 2 on
    late = mm.peak_memory("small", "FULL_SHARD", 4, "fp32", flavor="fsdp1", forward_prefetch=True, micro_batch=2)
    block2 = next(p for p in late.phases if p.key == "block" and p.block == 2)
    assert (
        any(x.key == "late_grad" for x in block2.terms)
        and late.total > mm.peak_memory("small", "FULL_SHARD", 4, "fp32", flavor="fsdp1", micro_batch=2).total
    )
    # limit_all_gathers bounds the all-gathers in flight on a GPU: no term changes
    assert mm.peak_memory(1e9, "FULL_SHARD", 8, flavor="fsdp1", limit_all_gathers=False, **kw) == pre
    with pytest.raises(OptionError, match="fsdp1"):
        mm.peak_memory(1e9, "FULL_SHARD", 8, flavor="fsdp3")


def test_block_peak_by_hand() -> None:
    """ "small" (d=128, f=512, V=1024, 4 blocks), fp32 AdamW, micro-batch 2 x 64 tokens, FSDP1
    FULL_SHARD on 2 ranks: the peak is inside the last block's backward, term by term."""
    b, s, d, f, v = 2, 64, 128, 512, 1024
    root, block = v * d * 2 + d, 4 * d * d + 2 * d + 3 * d * f
    psi = root + 4 * block
    layer = (8 * s * b * d + 2 * s * b * d + 4 * s * b * f + 2 * s * b) * 4 + b * 4 * s * 4
    expected = (
        4 * psi / 2  # fp32 parameter shards
        + 8 * psi / 2  # AdamW moments
        + 4 * (root + 2 * block)  # root kept, current block, next block prefetched
        + 4 * layer  # every block's activations (the head's are freed first)
        + 4 * (v * d + d)  # the head's gradients wait in the root unit
        + 4 * (s * b * d + d * f + 2 * s * b * f)  # the block's backward temporaries
    )
    got = mm.peak_memory("small", "FULL_SHARD", 2, "fp32", flavor="fsdp1", micro_batch=b, convention="torch")
    assert got.total == expected and got.peak.block == 1
    text = got.explain()
    assert "backward of block 1" in text and "head gradients" in text and "◀" in text


def test_the_peak_moves_with_the_strategy() -> None:
    kw = {"precision": "fp32", "convention": "torch", "micro_batch": 2}
    assert mm.peak_memory("small", "DDP", 2, **kw).peak.key == "loss"  # all activations, the loss gradients
    assert mm.peak_memory("small", "SHARD_GRAD_OP", 4, flavor="fsdp2", **kw).peak.key == "forward"
    assert mm.peak_memory("tiny", "NO_SHARD", 2, flavor="fsdp1", **kw).peak.key == "optimizer"
    assert mm.peak_memory("tiny", "FULL_SHARD", 2, flavor="fsdp1", wrap="none", **kw).peak.key == "end"
    ddp = mm.peak_memory("small", "DDP", 2, **kw)
    assert ddp.other >= 4 * get_config("small").num_params()  # its gradient buckets


def test_shard_grad_op_gathers_everything_in_fsdp() -> None:
    b = mm.peak_memory(1e9, "SHARD_GRAD_OP", 8, "bf16", convention="torch", largest_unit=1e8)
    assert b.params == 4e9 / 8 and b.params_unsharded == 2e9  # fp32 shard at rest, bf16 copy of all units
    zero2 = mm.peak_memory(1e9, "ZERO2", 8, "bf16")  # DeepSpeed: the 16-bit weights stay whole
    assert zero2.params == 2e9 and zero2.params_unsharded == 0


# -- questions a student asks ----------------------------------------------------------


def test_fits_and_presets() -> None:
    assert not mm.fits("llama-70b", "H100-80GB", "DDP")
    ok = mm.fits("llama-7b", "A100-80GB", "FULL_SHARD", 8, checkpointing=True)
    assert ok and ok.headroom > 0 and "fits" in str(ok)
    assert mm.gpu_bytes("H200-141GB") == 141e9 and mm.gpu_bytes("24GB") == 24e9 and mm.gpu_bytes("24GiB") == 24 * 2**30
    assert mm.gpu_bytes(12_345) == 12_345
    with pytest.raises(OptionError, match="did you mean"):
        mm.gpu_bytes("H100-80")


def test_largest_model_that_fits() -> None:
    assert mm.max_params_that_fit("DDP", 64, "80GB") == 5_000_000_000  # 80 GB / 16 bytes
    assert mm.max_params_that_fit("ZERO3", 8, "80GB") == 40_000_000_000
    # ZeRO-1 and ZeRO-2 level off at capacity / 4 and / 2 bytes, however many GPUs
    assert mm.max_params_that_fit("ZERO1", 1024, "80GB") < 20e9 < mm.max_params_that_fit("ZERO2", 1024, "80GB") < 40e9


def test_smallest_world_size_that_fits() -> None:
    kw = {"checkpointing": True, "micro_batch": 1}
    n = mm.min_world_size("llama-70b", "FULL_SHARD", "H100-80GB", **kw)
    assert n is not None and n > 8
    assert mm.fits("llama-70b", "H100-80GB", "FULL_SHARD", n, **kw)
    assert not mm.fits("llama-70b", "H100-80GB", "FULL_SHARD", n - 1, **kw)
    assert mm.min_world_size("llama-70b", "DDP", "H100-80GB", **kw) is None  # DDP never fits
    assert mm.min_world_size("llama-1b", "DDP", "H100-80GB", **kw) == 1
    # HYBRID_SHARD shards over its group only: adding groups never helps a model that one group cannot hold
    assert mm.min_world_size("llama-13b", "HYBRID_SHARD", "H100-80GB", shard_group_size=8, **kw) == 8
    assert mm.min_world_size("llama-70b", "HYBRID_SHARD", "H200-141GB", shard_group_size=8, **kw) is None


def test_strategy_table() -> None:
    text = mm.strategy_table(7.5e9, 64, precision="fp16", optimizer="adam")
    assert "| DDP | 15.00 | 15.00 | 90.00 | 120.00 |" in text
    assert "| ZERO3 |" in text


# -- plots -----------------------------------------------------------------------------


def test_plots() -> None:
    import matplotlib

    matplotlib.use("Agg")
    fig = memory_view.plot_memory_vs_gpus("llama-13b", "H100-80GB")
    lines = fig.axes[0].get_lines()
    assert len(lines) == 5  # four strategies and the capacity
    ddp, zero3 = lines[0].get_ydata(), lines[3].get_ydata()
    assert ddp[0] == ddp[-1] > 80  # DDP is flat and above the wall
    assert zero3[-1] < 80 < zero3[0]  # ZeRO-3 crosses it
    fig2 = memory_view.plot_max_model_vs_gpus("H100-80GB")
    flat = fig2.axes[0].get_lines()[0].get_ydata()
    assert all(math.isclose(y, 5.0) for y in flat)  # DDP's wall: 5B parameters on 80 GB
    peak = memory_view.plot_memory_vs_gpus("llama-7b", peak=True, checkpointing=True, world_sizes=(8, 64))
    assert len(peak.axes[0].get_lines()[0].get_ydata()) == 2


def test_repr_html() -> None:
    html = mm.peak_memory("llama-1b", "FULL_SHARD", 8)._repr_html_()
    assert html.count("<tr>") >= 5 and "<table" in html
