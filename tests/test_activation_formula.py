"""The activation formula that lesson 6's sweep compares with, against activations measured by
``labkit.memtrack`` on a real step of ``TransformerLM`` (in this process: no ranks, so it is fast).

What the formula leaves out, and the test therefore allows: the loss keeps the int64 targets
(a copy when the micro-batch has more than one sequence, 8 bytes per token) and two fp32
scalars (its output and its total weight). Nothing else: the gap is asserted to the byte, and
the ratio within 1% at every point of a sequence-length by micro-batch sweep, in fp32 and bf16,
with and without checkpointing every block.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from labkit.memory import model as mm
from labkit.models.config import get_config
from labkit.ranks import memtrack

SWEEP = [(16, 2), (32, 2), (32, 4), (64, 2)]  # (seq_len, micro_batch): activations grow with s·b
TOLERANCE = 0.01  # measured / formula


def stored_activations(preset: str, seq_len: int, micro_batch: int, dtype: str, checkpointing: bool) -> int:
    """The activations alive when the forward returns (what backward will read), measured."""
    from labkit.models.transformer import synthetic_batch
    from labkit.testing.mem_job import plain_model

    cfg = get_config(preset)
    model = plain_model(preset, dtype, checkpointing)
    tracker = memtrack.track(model, send=False)
    inputs, targets = synthetic_batch(replace(cfg, seq_len=seq_len), micro_batch, 0)
    with tracker.step(0):
        model(inputs, targets).backward()
    return next(m for m in tracker.results if m["phase"] == "forward")["categories"]["activations"]


def left_out(seq_len: int, micro_batch: int) -> int:
    """What the loss keeps that the formula does not count: the int64 targets and two fp32 scalars."""
    return 8 * micro_batch * seq_len + 2 * 4


def test_the_formula_follows_a_sequence_length_and_batch_sweep() -> None:
    preset = "tiny"  # lesson 6's model; "small" below
    for seq_len, micro_batch in SWEEP:
        measured = stored_activations(preset, seq_len, micro_batch, "fp32", checkpointing=False)
        formula = mm.activation_memory(preset, micro_batch, seq_len, precision="fp32").stored
        assert measured - formula == left_out(seq_len, micro_batch), (preset, seq_len, micro_batch)
        assert measured / formula == pytest.approx(1, rel=TOLERANCE)


@pytest.mark.parametrize(("dtype", "checkpointing"), [("bf16", False), ("fp32", True), ("bf16", True)])
def test_the_formula_holds_in_bf16_and_with_checkpointing(dtype: str, checkpointing: bool) -> None:
    seq_len, micro_batch = 32, 4
    measured = stored_activations("small", seq_len, micro_batch, dtype, checkpointing)
    formula = mm.activation_memory("small", micro_batch, seq_len, precision=dtype, checkpointing=checkpointing)
    assert measured - formula.stored == left_out(seq_len, micro_batch)
    assert measured / formula.stored == pytest.approx(1, rel=TOLERANCE)


def test_activations_grow_with_tokens_not_with_the_square_of_the_sequence() -> None:
    """The fused attention stores no s×s scores: doubling s costs what doubling b costs."""
    longer = stored_activations("tiny", 64, 2, "fp32", checkpointing=False)
    wider = stored_activations("tiny", 32, 4, "fp32", checkpointing=False)
    assert longer == wider
    paper = mm.activation_memory("tiny", 2, 64, formula="korthikanti").per_layer
    assert paper / mm.activation_memory("tiny", 4, 32, formula="korthikanti").per_layer > 1  # the s² term


def test_the_checkpointed_blocks_question_is_the_formulas_stored_inputs() -> None:
    """Lesson 6's question (the bytes every checkpointed block keeps) is what the formula adds per block."""
    from labkit.grading import registry

    registry.load_questions()
    checkpointed_blocks = registry.get("lesson6.checkpointed_blocks").answer
    cfg = get_config("small")
    for precision in ("fp32", "bf16"):
        full = mm.activation_memory(cfg, 4, 32, precision=precision, checkpointing=True).stored
        outside = full - checkpointed_blocks(4, 32, cfg.dim, cfg.n_layers, precision)
        assert outside == mm.labkit_outside_layers(cfg, 4, 32, 4 if precision == "fp32" else 2)


HELD_BY_A_COLLECTIVE = """
import sys, torch, torch.distributed as dist
from labkit.ranks import memtrack
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
held = []  # what gloo's thread does with a finished work's tensors on a busy machine: holds them a while

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(64, 64)

    def forward(self, x):
        buf = torch.empty(4096)  # a communication buffer made in forward (16 KiB)
        dist.all_reduce(buf.fill_(1.0))
        held.append(buf)
        return self.lin(x).sum()

model = Net()
tracker = memtrack.track(model, send=False)
with tracker.step(0):
    model(torch.ones(8, 64)).backward()
cats = next(m for m in tracker.results if m["phase"] == "forward")["categories"]
print(cats["activations"], cats["other"])
dist.destroy_process_group()
"""


def test_a_collectives_buffer_alive_after_forward_is_not_an_activation(tmp_path) -> None:
    """A storage a collective used is a communication buffer ("other"), even when forward made it
    and something still holds it when forward ends (gloo's thread, on a loaded machine, once put
    FSDP2's 256 KiB all-gather input among the activations)."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", HELD_BY_A_COLLECTIVE, str(tmp_path / "store")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    activations, other = int(out[-2]), int(out[-1])
    assert other >= 4096 * 4  # the buffer
    assert activations < 4096 * 4  # the linear layer's input and output only
