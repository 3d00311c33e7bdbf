"""Shapes of ``labkit.models.TransformerLM``: its FSDP units, the padding of their shards,
and the tensors a step holds for backward (activations) or makes during it (temporaries).

Pure arithmetic on a ``ModelConfig``, in elements or bytes; ``labkit.memory_model`` names
the strategies and precisions and adds these up into a peak. The tests check every count
here against ``named_parameters()`` or against storages measured in real and fake runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from labkit.wire.setting import Flavor


def config(model: Any) -> Any:
    if isinstance(model, str):
        from labkit.models.config import get_config

        return get_config(model)
    return model


def transformer_units(cfg: Any) -> list[tuple[str, list[tuple[int, ...]]]]:
    """``labkit.models.TransformerLM``'s parameter shapes, grouped into FSDP units as the
    lessons wrap it (one unit per ``TransformerBlock``, the rest in the root unit).

    Pure arithmetic on the config; a test checks it against ``named_parameters()``.
    """
    cfg = config(cfg)
    d, f, kv, v = cfg.dim, cfg.hidden_ffn, cfg.kv_dim, cfg.vocab_size
    block = [(d,), (d, d), (kv, d), (kv, d), (d, d), (d,), (f, d), (f, d), (d, f)]
    root = [(v, d), (d,)] + ([] if cfg.tied_embeddings else [(v, d)])
    return [("root", root)] + [(f"layers.{i}", list(block)) for i in range(cfg.n_layers)]


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def local_numel(model: Any, world_size: int, flavor: str = Flavor.FSDP2, rank: int = 0) -> dict[str, int]:
    """Elements one rank holds under FULL_SHARD, padding included, per kind of tensor.

    FSDP1 flattens each unit into one FlatParameter and pads it to a multiple of N
    elements, so every rank holds ceil(numel/N) per unit, for parameters, gradients and
    optimizer state alike. FSDP2 shards each parameter on dim 0: every rank allocates
    ceil(rows/N) rows (the padded shard that parameters and gradients live in), but the
    tensor it exposes, and so the optimizer state made with ``zeros_like``, has only the
    rows that rank owns, fewer on the last ranks when rows do not divide evenly.
    """
    units = transformer_units(model)
    if flavor == Flavor.FSDP1:
        n = sum(math.ceil(sum(numel(s) for s in shapes) / world_size) for _, shapes in units)
        return {"params": n, "grads": n, "optimizer": n}
    padded = owned = 0
    for _, shapes in units:
        for shape in shapes:
            rows, rest = shape[0], numel(shape[1:])
            chunk = math.ceil(rows / world_size)
            padded += chunk * rest
            owned += max(0, min(chunk, rows - rank * chunk)) * rest
    return {"params": padded, "grads": padded, "optimizer": owned}


@dataclass(frozen=True)
class Activations:
    """Bytes of activations per rank: stored for backward, and the peak while recomputing."""

    per_layer: float  # everything a layer saves for backward
    stored: float  # what lives at the end of the forward pass
    peak: float  # the most alive at once (with checkpointing: stored + one layer recomputed)
    formula: str


def korthikanti_per_layer(seq_len: int, micro_batch: int, hidden: int, heads: int) -> float:
    """Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
    Models" (arXiv:2205.05198), Eq. 1: bytes one GPT layer stores for backward, with
    16-bit activations, dropout masks of one byte, no tensor or sequence parallelism:

        s·b·h·(34 + 5·a·s/h)

    34·s·b·h from the linear inputs, layer norms, GeLU and dropout masks; 5·a·s²·b from
    the attention scores, their softmax and its dropout mask (absent with a fused,
    flash-style attention kernel). With full activation recomputation a layer keeps only
    its 16-bit input: 2·s·b·h (Sec. 4.1)."""
    s, b, h, a = seq_len, micro_batch, hidden, heads
    return s * b * h * (34 + 5 * a * s / h)


def labkit_per_layer(cfg: Any, micro_batch: int, seq_len: int, elem: int) -> float:
    """The same count as Korthikanti et al. (every tensor autograd saves), done for
    ``labkit.models.TransformerBlock``: RMSNorm, grouped-query attention through
    ``scaled_dot_product_attention`` (fused: no s² term), SwiGLU, no dropout.

    Per layer, in elements of the compute dtype (``elem`` bytes):
      8·s·b·d: the block input and the attention residual (each read by an RMSNorm),
               each norm's x·rsqrt and output, q, and the attention output (the fused
               kernel returns it in (b, s, heads, d_head) layout, so the reshape that
               feeds wo is a view, not a copy);
      2·s·b·d_kv: k and v (repeated to d when the heads are grouped);
      4·s·b·f: the SwiGLU gate, its SiLU, the up projection and their product;
      2·s·b: the two norms' rsqrt;
    plus the attention's log-sum-exp, b·a·s in fp32.
    """
    cfg = config(cfg)
    b, s, d, f, a = micro_batch, seq_len, cfg.dim, cfg.hidden_ffn, cfg.n_heads
    kv = cfg.kv_dim if (cfg.n_kv_heads or cfg.n_heads) == cfg.n_heads else d
    return (8 * s * b * d + 2 * s * b * kv + 4 * s * b * f + 2 * s * b) * elem + b * a * s * 4


def labkit_outside_layers(cfg: Any, micro_batch: int, seq_len: int, elem: int) -> float:
    """What the model stores outside its blocks: the final RMSNorm (input, x·rsqrt,
    output and rsqrt) and the fp32 log-softmax of the logits that cross-entropy keeps."""
    cfg = config(cfg)
    b, s = micro_batch, seq_len
    return (3 * s * b * cfg.dim + s * b) * elem + b * s * cfg.vocab_size * 4


def logits_bytes(cfg: Any, micro_batch: int, seq_len: int) -> float:
    """One fp32 tensor of logits, b·s·V·4: cross-entropy upcasts the logits, and its
    log-softmax (kept for backward), the gradient that ``nll_loss`` returns and the one
    that ``log_softmax`` returns are each this large."""
    return micro_batch * seq_len * config(cfg).vocab_size * 4


def block_backward_bytes(cfg: Any, micro_batch: int, seq_len: int, elem: int) -> dict[str, float]:
    """What a block's backward holds at its own peak, beyond the activations it stored.

    Backward runs the block in reverse, so it starts in the SwiGLU feed-forward
    ``w2(silu(w1 h) * w3 h)``. Right after the product's backward, ``mul``, these are alive:
    the gradient that entered the block (s·b·d), the gradient of ``w2``'s weight (d·f), and
    the gradients of the product, of its SiLU input and of ``w3``'s output (3·s·b·f), while
    the product itself (s·b·f, saved only for ``w2``) has been freed: net 2·s·b·f. Later
    operators free more activations than they make, so this is the block's peak.
    """
    cfg = config(cfg)
    b, s, d, f = micro_batch, seq_len, cfg.dim, cfg.hidden_ffn
    return {
        "grad_in": s * b * d * elem,
        "grad_w2": d * f * elem,
        "grad_swiglu": 2 * s * b * f * elem,
    }


def head_grad_bytes(cfg: Any, elem: int) -> float:
    """The gradients of the output projection and the final norm (V·d + d): computed at the
    very start of backward, they wait in the root unit until its reduce-scatter at the end,
    because the root also holds the embedding, whose gradient comes last."""
    cfg = config(cfg)
    return (cfg.vocab_size * cfg.dim + cfg.dim) * elem
