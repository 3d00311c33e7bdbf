"""The peak of one training step, phase by phase, as FSDP1, FSDP2 and DDP really hold it.

A rank's memory peaks at one of a few moments, and what it holds at each differs by
flavor and strategy. This module lists, for each moment, the named quantities alive then
(every one a count from the model's shapes, see ``labkit.memory.shapes``), and the peak
is the largest sum. ``labkit.memory_model.peak_memory`` fills in the numbers.

The moments (measured with ``labkit.memtrack`` on torch 2.13, gloo, and cross-checked with
torch's ``FSDPMemTracker`` for FSDP2):

* ``forward``: at the cross-entropy, all activations are stored and the logits in the
  compute dtype still live beside their log-softmax.
* ``loss``: the start of backward: the gradients that ``nll_loss`` and ``log_softmax``
  return, two fp32 tensors as large as the logits, beside every stored activation.
* ``block k``: inside the k-th block that backward differentiates (the last layer is
  block 1), at the SwiGLU's ``mul`` (``memory_shapes.block_backward_bytes``). The
  activations of the head and of the k-1 blocks already done are freed; the gradients of
  the head (output projection, final norm) wait in the root unit until the very end; each
  finished block has left its sharded gradient.
* ``flatten`` (FSDP1): the end of a block's backward, when the gradients of its parameters
  (views of the FlatParameter) are put together into the FlatParameter's gradient: both
  are alive, the block still gathered, its activations already freed. Where a block's
  parameters outweigh its activations (short sequences, small batches, wide layers),
  this is the step's peak.
* ``reduce`` (FSDP1, sharded): a block's post-backward, its parameters resharded: the flat
  gradient twice (AccumulateGrad stores a clone while autograd still holds the original),
  and where the unit's numel does not divide by N (odd N, grouped-query attention's
  smaller k and v projections...), ``F.pad``'s copy of it at the padded size, plus the
  shard the reduce-scatter writes. ``reduce_root``: the same for the root unit.
* ``reduce`` (FSDP2): the end of a block's backward, when its unsharded gradients are copied
  (cast to the reduce dtype first, under mixed precision) into the reduce-scatter input.
* ``end``: the end of backward, where the root unit's gradient is put together for its
  reduce-scatter: the parameters' gradients and the one flat tensor made from them are
  both alive (the largest moment when the whole model is one unit).
* ``optimizer``: parameters, gradients and optimizer state, all at once, and the
  temporaries of the update of the largest tensor the optimizer sees. Single-tensor AdamW
  (``foreach=False``, torch's choice for CPU tensors) computes ``exp_avg_sq.sqrt()``, its
  bias-corrected denominator and the update, each as large as that tensor: under FSDP1
  the tensor is a unit's FlatParameter shard, under FSDP2 and DDP one parameter (shard).

What is gathered (compute dtype), from measurement:

* FSDP1 FULL_SHARD / HYBRID_SHARD: the root unit stays gathered from the end of forward
  through backward (FSDP1 does not reshard the root after forward). In backward, the root,
  the current block and, with ``BackwardPrefetch.BACKWARD_PRE`` (the default), the next
  block, gathered before the current one finishes. ``BACKWARD_POST`` prefetches after the
  current block's gradients are reduced and its parameters freed, and no prefetch gathers
  nothing early: root + current block either way. With ``forward_prefetch=True`` the
  post-backward of a block (its reshard and reduce-scatter) ran one block late in every run:
  from the second block on, the previous block's parameters and unsharded gradient are
  still there. ``limit_all_gathers`` changes nothing here: it bounds the all-gathers in
  flight on a GPU's streams, and on the CPU every collective completes in order.
* FSDP2 ``fully_shard`` (FULL_SHARD): the root is resharded after forward but re-gathered
  when backward starts, and then held to the end like FSDP1's, so backward holds root +
  current block. With more than one rank per shard group, the output buffer of the last
  all-gather (one block) is kept until the next all-gather; in backward that buffer is
  the prefetched block, not yet copied out. The input of the last reduce-scatter (one
  block's unsharded gradient) is likewise kept until the next one. With one rank per
  group (N=1, or a replicate-only mesh) there is no separate all-gather buffer.
* SHARD_GRAD_OP (FSDP2 ``reshard_after_forward=False``): every unit stays gathered from its
  forward to its backward.
* NO_SHARD (FSDP1; also any FSDP1 strategy at N=1): the parameters are whole; nothing is
  gathered. DDP: the same, plus its gradient buckets (gradient_as_bucket_view=False), as
  large as the gradients, from the first forward on.
"""

from __future__ import annotations

from dataclasses import dataclass

from labkit.i18n import t
from labkit.wire.setting import Flavor


@dataclass(frozen=True)
class Term:
    """One named quantity alive at a phase: ``key`` names it, ``category`` is memtrack's."""

    key: str
    category: str
    bytes: float
    detail: str = ""  # e.g. which units are gathered

    @property
    def label(self) -> str:
        units = " + ".join(t(f"memory.peak.unit.{u}") for u in self.detail.split("+")) if self.detail else ""
        return t(f"memory.peak.term.{self.key}", units=units)


@dataclass(frozen=True)
class Phase:
    key: str  # forward, loss, block, optimizer
    terms: tuple[Term, ...]
    block: int = 0  # for "block": 1 is the last layer, the first that backward differentiates

    @property
    def total(self) -> float:
        return sum(x.bytes for x in self.terms)

    @property
    def label(self) -> str:
        return t(f"memory.peak.phase.{self.key}", k=self.block)

    def by_category(self, categories: tuple[str, ...]) -> dict[str, float]:
        out = dict.fromkeys(categories, 0.0)
        for x in self.terms:
            out[x.category] += x.bytes
        return out


@dataclass(frozen=True)
class StepShape:
    """Everything the phases need, in bytes per rank (``memory_model.peak_memory`` fills it).

    ``mode``: "full" (FULL_SHARD, HYBRID_SHARD: units gathered one at a time), "grad_op"
    (every unit gathered from forward to backward) or "whole" (NO_SHARD, DDP, or FSDP1
    with one rank per shard group: the parameters are whole, nothing gathered).
    """

    flavor: str  # fsdp1 | fsdp2 | ddp
    mode: str
    shard: int  # ranks in one shard group
    params: float
    grads: float
    optimizer: float
    root: float  # the root unit's parameters in the compute dtype
    blocks: tuple[float, ...]  # each block's parameters in the compute dtype, last layer first
    all_units: float  # every unit, as SHARD_GRAD_OP holds them
    block_grad: float  # one block's sharded gradient, as it stays after its reduce-scatter
    activations: float = 0.0  # stored at the end of forward
    outside: float = 0.0  # of which the head's (final norm, log-softmax), freed first in backward
    per_layer_kept: float = 0.0  # what each block keeps for backward (its input under checkpointing)
    recomputed: float = 0.0  # one block's activations rebuilt in backward (checkpointing), else 0
    logits: float = 0.0  # the logits in the compute dtype
    loss_grads: float = 0.0  # 2 × b·s·V·4
    head_grads: float = 0.0
    block_temps: float = 0.0
    root_grad: float = 0.0  # the root unit's unsharded gradient
    flat_grads: tuple[float, ...] = ()  # FSDP1: each unit's FlatParameter gradient, unpadded, root first
    buckets: float = 0.0  # DDP
    one_unit: bool = False  # no auto_wrap_policy: the root unit is the whole model
    optimizer_temps: float = 0.0
    elem: int = 4  # bytes of the compute dtype
    reduce_elem: int = 4  # bytes of the dtype gradients are reduced in
    grad_in: float = 0.0  # the gradient entering a block, s·b·d
    prefetch: str | None = "pre"  # FSDP1 backward_prefetch: "pre", "post", None
    forward_prefetch: bool = False


def phases(s: StepShape) -> list[Phase]:
    """Every candidate moment of the step; the peak is the one with the largest total."""
    base = [Term("params", "params", s.params), Term("optimizer", "optimizer", s.optimizer)]
    if s.buckets:
        base.append(Term("buckets", "other", s.buckets))
    fsdp2_buffer = s.flavor == Flavor.FSDP2 and s.shard > 1 and s.mode != "whole"
    out = [
        Phase(
            "forward",
            (*base, *_gathered_at_loss(s), *_ag(s, fsdp2_buffer), *_acts(s), Term("logits", "other", s.logits)),
        ),
        Phase(
            "loss",
            (
                *base,
                *_gathered_at_loss(s, backward=True),
                *_ag(s, fsdp2_buffer and s.mode == "full"),
                *_acts(s),
                Term("loss_grads", "other", s.loss_grads),
            ),
        ),
    ]
    for k in range(1, len(s.blocks) + 1):
        out.append(Phase("block", tuple(_block(s, k, base, fsdp2_buffer)), block=k))
        if s.flavor == Flavor.FSDP2 and s.mode == "full" and s.blocks[k - 1]:
            out.append(Phase("reduce", tuple(_reduce(s, k, base, fsdp2_buffer)), block=k))
        if s.flavor == Flavor.FSDP1 and s.blocks[k - 1]:
            out.append(Phase("flatten", tuple(_flatten(s, k, base)), block=k))
            if s.mode != "whole" and s.flat_grads:
                out.append(Phase("reduce", tuple(_fsdp1_reduce(s, k, base)), block=k))
    if (s.flavor != Flavor.DDP and s.mode != "whole") or s.flavor == Flavor.FSDP1:
        out.append(Phase("end", tuple(_end(s, base))))
    if s.flavor == Flavor.FSDP1 and s.mode != "whole" and s.flat_grads:
        out.append(Phase("reduce_root", tuple(_fsdp1_reduce(s, 0, base))))
    step = (*base, Term("grads", "grads", s.grads), Term("optimizer_temps", "other", s.optimizer_temps))
    out.append(Phase("optimizer", step))
    return out


def _acts(s: StepShape) -> list[Term]:
    return [Term("activations", "activations", s.activations)]


def _ag(s: StepShape, on: bool) -> list[Term]:
    return [Term("ag_buffer", "other", max(s.blocks, default=0.0))] if on and s.blocks else []


def _gathered_at_loss(s: StepShape, backward: bool = False) -> list[Term]:
    """Forward's end: the root. Backward's start: FSDP1's root pre-backward also prefetches the last block."""
    if s.mode == "grad_op":
        return [Term("gathered", "params_unsharded", s.all_units, "all")]
    if s.mode != "full":
        return []
    if backward and s.flavor == Flavor.FSDP1 and s.prefetch == "pre" and s.blocks and s.blocks[0]:
        return [Term("gathered", "params_unsharded", s.root + s.blocks[0], "root+next")]
    return [Term("gathered", "params_unsharded", s.root, "root")]


def _end(s: StepShape, base: list[Term]) -> list[Term]:
    """The end of backward: the root unit's gradients are gathered into one tensor for its
    reduce-scatter (FSDP1 concatenates the parameters' gradients into the FlatParameter's,
    FSDP2 copies them into the reduce-scatter input), so two copies of them are alive."""
    terms = list(base)
    if not s.one_unit and s.blocks:
        terms.append(Term("grads_done", "grads", len(s.blocks) * s.block_grad))
    if s.mode != "whole":  # every block has been resharded by now, SHARD_GRAD_OP's too
        terms.append(Term("gathered", "params_unsharded", s.root, "root"))
    terms.append(Term("root_grads", "other", 2 * s.root_grad))
    return terms


def _reduce(s: StepShape, k: int, base: list[Term], fsdp2_buffer: bool) -> list[Term]:
    """FSDP2 at the end of the k-th block's backward: the block's parameters are resharded, but
    its unsharded gradients (compute dtype), their copy in the reduce dtype and the
    reduce-scatter input they are copied into are alive (the previous block's input, kept
    until now, is released first); the block's activations are freed."""
    i, unit = k - 1, s.blocks[k - 1]
    terms = list(base)
    if i:
        terms.append(Term("grads_done", "grads", i * s.block_grad))
    terms.append(Term("gathered", "params_unsharded", s.root, "root"))  # the block is resharded first
    terms += _ag(s, fsdp2_buffer and k < len(s.blocks))
    terms.append(Term("activations_left", "activations", s.activations - s.outside - k * s.per_layer_kept))
    terms.append(Term("head_grads", "grads", s.head_grads))
    terms.append(Term("grad_in", "other", s.grad_in))
    terms.append(Term("block_grads", "other", unit))
    if s.reduce_elem != s.elem:
        terms.append(Term("block_grads_cast", "other", unit * s.reduce_elem / s.elem))
    terms.append(Term("rs_input", "other", unit * s.reduce_elem / s.elem))
    return terms


def _block(s: StepShape, k: int, base: list[Term], fsdp2_buffer: bool) -> list[Term]:
    """The k-th block differentiated (1 = the last layer), at its own peak."""
    i = k - 1
    terms = list(base)
    late = s.flavor == Flavor.FSDP1 and s.mode == "full" and s.forward_prefetch and i > 0  # see the module docstring
    if i - late:
        terms.append(Term("grads_done", "grads", (i - late) * s.block_grad))
    gathered_units = ["root", "current"]
    gathered = s.root + s.blocks[i]
    if s.mode == "grad_op":  # blocks already differentiated are resharded by their post-backward
        gathered_units = ["all"] if i == 0 else ["root", "current", "rest"]
        gathered = s.all_units - sum(s.blocks[:i])
    elif s.flavor == Flavor.FSDP1 and s.mode == "full":
        if s.prefetch == "pre" and k < len(s.blocks):
            gathered_units.append("next")
            gathered += s.blocks[k]
        if late:
            gathered_units.append("previous")
            gathered += s.blocks[i - 1]
            terms.append(Term("late_grad", "grads", s.blocks[i - 1]))
    elif s.mode == "whole":
        gathered = 0.0
    if gathered:
        terms.append(Term("gathered", "params_unsharded", gathered, "+".join(gathered_units)))
    if s.flavor == Flavor.FSDP2 and s.mode == "full":
        terms += _ag(s, fsdp2_buffer and k < len(s.blocks))
        if i:
            terms.append(Term("rs_buffer", "other", s.blocks[i - 1] * s.reduce_elem / s.elem))
    left = s.activations - s.outside - i * s.per_layer_kept
    terms.append(Term("activations_left", "activations", left))
    if s.recomputed:
        terms.append(Term("recomputed", "activations", s.recomputed))
    terms.append(Term("head_grads", "grads", s.head_grads))
    terms.append(Term("block_temps", "other", s.block_temps))
    return terms


def _flatten(s: StepShape, k: int, base: list[Term]) -> list[Term]:
    """FSDP1 at the end of the k-th block's backward, before its post-backward hook: the
    parameters autograd saw are views of the block's FlatParameter, so their gradients are
    put together into one flat gradient (the backward of the split that made the views)
    while they are all still alive, and the block is still gathered. The block's own
    activations and temporaries are freed by then; what is left is the gradient it hands
    to the block before it. (The post-backward that follows frees the block's parameters
    before it pads the flat gradient to a multiple of N for the reduce-scatter, so it
    never holds more than this moment.)"""
    drop = ("activations_left", "recomputed", "block_temps")
    terms = [x for x in _block(s, k, base, False) if x.key not in drop]
    terms.append(Term("activations_left", "activations", s.activations - s.outside - k * s.per_layer_kept))
    terms.append(Term("grad_in", "other", s.grad_in))
    terms.append(Term("flat_grads", "other", 2 * (s.flat_grads[k] if s.flat_grads else s.blocks[k - 1])))
    return terms


def _fsdp1_reduce(s: StepShape, k: int, base: list[Term]) -> list[Term]:
    """FSDP1's post-backward of the k-th block (0: the root unit, at the end of backward).
    AccumulateGrad kept a clone of the flat gradient, not the gradient itself (autograd
    still holds its input while the hook runs), so two are alive; the unit is resharded
    first, and then, if its numel does not divide by N, ``F.pad`` copies the gradient to
    the padded size for the reduce-scatter, beside the shard that receives the result.
    Without padding this moment is smaller than ``flatten``; with it, larger by a shard."""
    terms = list(base)
    done = len(s.blocks) if k == 0 else k - 1
    if done and not s.one_unit:
        terms.append(Term("grads_done", "grads", done * s.block_grad))
    unit, grad = (s.root, s.flat_grads[0]) if k == 0 else (s.blocks[k - 1], s.flat_grads[k])
    if s.mode == "grad_op":  # the blocks not yet differentiated, and the root
        gathered, names = s.all_units - sum(s.blocks[:k]) - (unit if k == 0 else 0), ["root", "rest"]
    else:  # the root, and the next block prefetched before this reduce-scatter
        nxt = s.prefetch is not None and 0 < k < len(s.blocks)
        gathered, names = (s.root if k else 0) + (s.blocks[k] if nxt else 0), ["root"] + ["next"] * nxt
    if gathered:
        terms.append(Term("gathered", "params_unsharded", gathered, "+".join(names)))
    if k:
        terms.append(Term("activations_left", "activations", s.activations - s.outside - k * s.per_layer_kept))
        terms.append(Term("head_grads", "grads", s.head_grads))
        terms.append(Term("grad_in", "other", s.grad_in))
    terms.append(Term("flat_grad_clone", "other", 2 * grad))
    if unit > grad:
        terms.append(Term("rs_input", "other", unit))
    terms.append(Term("rs_output", "other", unit / s.shard))
    return terms


def peak_phase(s: StepShape) -> Phase:
    return max(phases(s), key=lambda p: p.total)
