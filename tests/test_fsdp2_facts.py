"""What the lessons say about FSDP2 in torch 2.13, shown on two gloo ranks (issue 49, item 1).

    PYTHONPATH=$PWD .venv/bin/python -m pytest -q tests/test_fsdp2_facts.py     # one launch, about 20 s

- ``fully_shard`` registers *new* ``nn.Parameter`` objects, whose data are DTensors: an
  optimizer built before it holds the old ones, and its step leaves the model unchanged
  (lesson 7, section 1: build the optimizer after ``fully_shard``, in FSDP2 as in FSDP1).
- ``reshard_after_forward`` defaults to ``None``: ``True`` for every module but the root, which
  the root's lazy initialization (its first forward) sets to ``False``; so with the default the
  backward gathers only the blocks, and with ``True`` passed to the root it gathers the root
  again (lessons 2, 4 and 7).
- ``checkpoint_wrapper`` (through ``apply_activation_checkpointing``) and the composable
  ``checkpoint`` both work with FSDP2, applied before ``fully_shard``: the same loss and
  gradients as without, and every block's forward runs again in the backward (lesson 6).

One launch runs all three; each test reads its part of rank 0's and rank 1's reports.
"""

from __future__ import annotations

import textwrap

import pytest

import labkit

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_leaks")]

CELL = """
import torch
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing
from torch.distributed._composable import checkpoint
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

from labkit import comm, rank
from labkit.models import TransformerBlock, TransformerLM, get_config, synthetic_batch

cfg = get_config("tiny")
mesh = init_device_mesh("cpu", (rank.world_size(),))
batch = synthetic_batch(cfg, 2, 0, rank.rank())


def sharded(root=None, prepare=None):
    torch.manual_seed(0)
    model = TransformerLM(cfg)
    if prepare is not None:
        prepare(model)  # activation checkpointing: before fully_shard
    for block in model.layers:
        fully_shard(block, mesh=mesh)
    if root is None:
        fully_shard(model, mesh=mesh)  # every default, as a user who sets nothing
    else:
        fully_shard(model, mesh=mesh, reshard_after_forward=root)
    return model


def parameters():
    torch.manual_seed(0)
    model = TransformerLM(cfg)
    originals = dict(model.named_parameters())
    before = torch.optim.SGD(model.parameters(), lr=1.0)  # built too early
    for block in model.layers:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    now = dict(model.named_parameters())
    snapshot = {name: p.detach().full_tensor().clone() for name, p in now.items()}
    model(*batch).backward()
    before.step()
    unchanged = all(torch.equal(p.detach().full_tensor(), snapshot[name]) for name, p in now.items())
    after = torch.optim.SGD(model.parameters(), lr=1.0)
    after.step()
    moved = any(not torch.equal(p.detach().full_tensor(), snapshot[name]) for name, p in now.items())
    return {"names_kept": list(now) == list(originals), "same_objects": sum(now[n] is originals[n] for n in now),
            "parameters": len(now), "dtensors": sum(isinstance(p, DTensor) for p in now.values()),
            "registered": all(isinstance(p, torch.nn.Parameter) for p in now.values()),
            "old_optimizer_changed_nothing": unchanged, "new_optimizer_moved": moved}


def group_reshards(module):
    return module._get_fsdp_state()._fsdp_param_group._reshard_after_forward


def reshard_default(root):
    model = sharded(root)
    before_forward = group_reshards(model)  # the root is known only at lazy init, in the first forward
    loss = model(*batch)
    after_forward = {"root": group_reshards(model), "blocks": [group_reshards(b) for b in model.layers]}
    with comm.count(send=False) as counted:
        loss.backward()
    gathers = counted.totals().get("all_gather", {}).get("calls", 0)
    return {"before_forward": before_forward, **after_forward, "backward_all_gathers": gathers,
            "blocks_n": len(model.layers)}


def checkpointing(name):
    def wrapper(model):
        apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, TransformerBlock))

    def composable(model):
        for block in model.layers:
            checkpoint(block)

    model = sharded(prepare={"none": None, "checkpoint_wrapper": wrapper, "composable": composable}[name])
    calls = []
    for block in model.modules():
        if isinstance(block, TransformerBlock):
            block.attn.register_forward_hook(lambda *_: calls.append(1))  # fires in the rerun forward too
    loss = model(*batch)
    forward_calls = len(calls)
    loss.backward()
    grads = torch.cat([p.grad.full_tensor().flatten() for p in model.parameters()])
    return {"loss": loss.item(), "forward_calls": forward_calls, "backward_calls": len(calls) - forward_calls,
            "wrapped": type(model.layers[0]).__name__}, grads


def compare_checkpointing():
    runs, reference = {}, None
    for name in ("none", "checkpoint_wrapper", "composable"):
        runs[name], grads = checkpointing(name)
        reference = grads if reference is None else reference
        runs[name]["grad_diff"] = (grads - reference).abs().max().item()  # against no checkpointing
    return runs


rank.report(parameters=parameters(),
            reshard={"default": reshard_default(None), "true": reshard_default(True)},
            checkpointing=compare_checkpointing())
"""


@pytest.fixture(scope="module")
def facts() -> dict:
    run = labkit.torchrun(textwrap.dedent(CELL), nproc=2, backend="gloo", display="none", quiet=True)
    assert run.ok, run
    return run.values


def test_fully_shard_registers_new_parameter_objects(facts):
    for r in (0, 1):
        p = facts[r]["parameters"]
        assert p["names_kept"] and p["registered"]
        assert p["same_objects"] == 0 and p["dtensors"] == p["parameters"] > 0
        # an optimizer built before fully_shard holds the old objects: its step changes nothing
        assert p["old_optimizer_changed_nothing"] and p["new_optimizer_moved"]


def test_reshard_after_forward_defaults_to_false_for_the_root_only(facts):
    for r in (0, 1):
        default, true = facts[r]["reshard"]["default"], facts[r]["reshard"]["true"]
        assert default["before_forward"] is True  # None is stored as True until the root is known
        assert default["root"] is False and default["blocks"] == [True] * default["blocks_n"]
        assert true["root"] is True and true["blocks"] == [True] * true["blocks_n"]
        # with the default, backward gathers the blocks only; with True, the root once more
        assert default["backward_all_gathers"] == default["blocks_n"]
        assert true["backward_all_gathers"] == true["blocks_n"] + 1


def test_both_activation_checkpointing_apis_work_with_fsdp2(facts):
    for r in (0, 1):
        runs = facts[r]["checkpointing"]
        plain = runs["none"]
        # fully_shard keeps the module and prefixes its class; the wrapper is a module around the block
        assert (
            plain["backward_calls"] == 0 and plain["wrapped"] == runs["composable"]["wrapped"] == "FSDPTransformerBlock"
        )
        assert runs["checkpoint_wrapper"]["wrapped"] == "FSDPCheckpointWrapper"
        for name in ("checkpoint_wrapper", "composable"):
            ac = runs[name]
            assert ac["loss"] == plain["loss"]
            assert ac["grad_diff"] <= 1e-6
            assert ac["forward_calls"] == plain["forward_calls"] > 0
            assert ac["backward_calls"] == plain["forward_calls"]  # each block's forward ran again
