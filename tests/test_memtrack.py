"""Memory measured by category inside the ranks, against the analytical model.

    .venv/bin/pytest tests/test_memtrack.py

Three torchrun jobs (1, 2 and 4 ranks, gloo, CPU) train the "tiny" transformer under
FSDP1 (``FullyShardedDataParallel``) and FSDP2 (``fully_shard``) and measure step 1 with
``labkit.memtrack``. The model's prediction for fp32 AdamW is 4 + 4 + 8 bytes per parameter,
divided by N when sharded. FSDP pads what it shards (FSDP1 each unit's FlatParameter to a
multiple of N elements, FSDP2 each parameter's rows to a multiple of N); "tiny" needs no
padding at N <= 4, so the "odd" model, whose sizes divide by nothing, checks the padding
arithmetic of ``memory_model.local_numel`` to the byte. The benchmark
(benchmarks/memory_accuracy.py) does the same for "small" and prints the differences.
"""

from __future__ import annotations

import pytest

from labkit.memory import model as mm
from labkit.models.config import get_config
from labkit.ranks import memtrack
from labkit.testing.mem_job import BATCH, ODD, SHAPES
from labkit.testing.mem_launch import (
    ODD_WORLD_JOBS,
    REF_CONFIGS,
    TEST_JOBS,
    model_args,
    odd_world_job,
    phase,
    test_job,
    torch_peak,
)
from labkit.views import memory as memory_view

TINY = get_config("tiny")
PSI = TINY.num_params()


def job(n: int) -> dict[int, list[dict]]:
    return test_job(n)


def states(cats: dict[str, int]) -> int:
    return cats["params"] + cats["grads"] + cats["optimizer"]


def step_counters(cfg, flavor: str) -> int:
    """AdamW's ``step`` is a 4-byte tensor per parameter tensor: FSDP1 has one per unit."""
    units = mm.transformer_units(cfg)
    return 4 * (len(units) if flavor == "fsdp1" else sum(len(shapes) for _, shapes in units))


# -- FULL_SHARD at 1, 2, 4 ranks: the model within 2%, and to the byte with padding ----


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 2, 4])
@pytest.mark.parametrize("flavor", ["fsdp1", "fsdp2"])
def test_full_shard_states_match_the_model(n: int, flavor: str) -> None:
    config = "fsdp1:FULL_SHARD" if flavor == "fsdp1" else "fsdp2:reshard"
    predicted = mm.model_states(PSI, "FULL_SHARD", n, "fp32", "adamw")
    local = mm.local_numel(TINY, n, flavor)
    events = job(n)
    for r in range(n):
        after = phase(events, config, r, "optimizer")  # after the step: parameters, gradients, state
        assert states(after) == pytest.approx(predicted.model_states, rel=0.02)
        assert after["params"] == 4 * local["params"] == predicted.params  # no padding needed here
        assert after["grads"] == 4 * local["grads"]
        assert after["optimizer"] == 8 * local["optimizer"] + step_counters(TINY, flavor)
        assert after["activations"] == 0 and after["params_unsharded"] == 0  # all freed, all resharded


@pytest.mark.slow
@pytest.mark.parametrize("flavor", ["fsdp1", "fsdp2"])
def test_padding_is_accounted_for(flavor: str) -> None:
    config = ("fsdp1:FULL_SHARD" if flavor == "fsdp1" else "fsdp2:reshard") + "@odd"
    events = job(4)
    unpadded = 4 * ODD.num_params() / 4
    for r in range(4):
        local = mm.local_numel(ODD, 4, flavor, rank=r)
        after = phase(events, config, r, "optimizer")
        assert after["params"] == 4 * local["params"] > unpadded  # padding is real and exactly predicted
        assert after["grads"] == 4 * local["grads"]
        assert after["optimizer"] == 8 * local["optimizer"] + step_counters(ODD, flavor)


@pytest.mark.slow
def test_no_shard_holds_everything_on_every_rank() -> None:
    predicted = mm.model_states(PSI, "NO_SHARD", 2, "fp32", "adamw")
    events = job(2)
    for r in range(2):
        after = phase(events, "fsdp1:NO_SHARD", r, "optimizer")
        assert after["params"] == after["grads"] == 4 * PSI
        assert states(after) == pytest.approx(predicted.model_states, rel=0.02)


@pytest.mark.slow
def test_shard_grad_op_lands_where_the_model_says() -> None:
    """At rest and after the step as FULL_SHARD; between forward and backward, all units gathered."""
    events = job(2)
    model = mm.peak_memory(TINY, "SHARD_GRAD_OP", 2, "fp32", convention="torch")
    full = mm.peak_memory(TINY, "FULL_SHARD", 2, "fp32", convention="torch")
    for r in range(2):
        after = phase(events, "fsdp1:SHARD_GRAD_OP", r, "optimizer")
        at_rest = mm.model_states(PSI, "SHARD_GRAD_OP", 2, "fp32", convention="torch").model_states
        assert states(after) == pytest.approx(at_rest, rel=0.02)
        # DeepSpeed's ZeRO-2 keeps its weights whole; FSDP shards the fp32 parameter, gathers to compute
        assert at_rest < mm.model_states(PSI, "ZERO2", 2, "fp32", convention="zero").model_states
        assert after["params"] == model.params == 4 * PSI / 2
        forward = phase(events, "fsdp1:SHARD_GRAD_OP", r, "forward")
        assert forward["params_unsharded"] == model.params_unsharded == 4 * PSI  # every unit stays gathered
        # FULL_SHARD reshards after forward; FSDP1 keeps only its root unit for backward
        root_unit = 4 * mm.unit_sizes(TINY)[0]
        assert phase(events, "fsdp1:FULL_SHARD", r, "forward")["params_unsharded"] == root_unit
        assert phase(events, "fsdp2:reshard", r, "forward")["params_unsharded"] == 0
        assert full.params_unsharded < model.params_unsharded
    for r in range(2):  # FSDP2 reshard_after_forward=False is SHARD_GRAD_OP
        assert phase(events, "fsdp2:keep", r, "forward")["params_unsharded"] == 4 * PSI


@pytest.mark.slow
def test_one_unit_gathers_the_whole_model_at_the_peak() -> None:
    events = job(2)
    model = mm.peak_memory(TINY, "FULL_SHARD", 2, "fp32", wrap="none", convention="torch")
    blocks = 4 * max(mm.unit_sizes(TINY))
    for r in range(2):
        one = phase(events, "fsdp1:FULL_SHARD:nowrap", r, "peak")
        assert one["params_unsharded"] == model.params_unsharded == 4 * PSI
        wrapped = phase(events, "fsdp1:FULL_SHARD", r, "peak")
        assert wrapped["params_unsharded"] <= 3 * blocks  # root kept, current and prefetched block
        assert sum(one.values()) > sum(wrapped.values())


@pytest.mark.slow
def test_fsdp2_agrees_with_torch_fsdpmemtracker() -> None:
    for n in (1, 2, 4):
        events = job(n)
        for r in range(n):
            ref = next(m for m in events[r] if m["t"] == "fsdpmemtracker" and m["config"] == "fsdp2:reshard")
            torch_says = ref["after_backward"]
            ours = phase(events, "fsdp2:reshard", r, "backward")
            assert ours["params"] == torch_says["Sharded Param"]
            assert ours["grads"] == torch_says["Sharded Grad"] + torch_says["Unsharded Grad"]
            assert ours["optimizer"] == torch_says["OptState"]


@pytest.mark.slow
def test_activations_in_the_ranks_match_the_formula() -> None:
    predicted = mm.activation_memory(TINY, BATCH, precision="fp32").stored
    for n in (1, 2, 4):
        events = job(n)
        for r in range(n):
            for config in ("fsdp1:FULL_SHARD", "fsdp2:reshard"):
                assert phase(events, config, r, "forward")["activations"] == pytest.approx(predicted, rel=0.01)


@pytest.mark.slow
def test_peak_is_the_largest_total() -> None:
    events = job(2)
    for config in TEST_JOBS[2]:
        for r in range(2):
            peak = sum(phase(events, config, r, "peak").values())
            for p in ("forward", "backward", "optimizer"):
                assert peak >= sum(phase(events, config, r, p).values())


# The largest peak a late collective can add on gloo: FSDP2 reduce-scatters and all-gathers run
# asynchronously, and one that waits for a slower peer keeps its buffers a little longer, so a
# rank now and then peaks with one more unit's gradient alive (seen on rank 0 or 1, never both).
LATE_COLLECTIVE = 4 * max(mm.unit_sizes(TINY))


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 2, 4])
def test_peak_model_matches_every_run(n: int) -> None:
    """Every flavor, strategy, prefetch mode, checkpointing and bf16 run at N ranks: the whole peak of
    each rank against ``peak_memory``, within 5% (the benchmark prints the same for "small")."""
    events = job(n)
    for config in TEST_JOBS[n]:
        strategy, kw = model_args(config, n)
        model = mm.peak_memory(ODD if config.endswith("@odd") else TINY, strategy, n, **kw)
        for r in range(n):
            measured = sum(phase(events, config, r, "peak").values())
            slack = LATE_COLLECTIVE if config.startswith("fsdp2") else 0
            assert model.total * 0.95 <= measured <= model.total * 1.05 + slack, (config, r, measured, model.total)


# -- odd world sizes, GQA, tied embeddings, uneven shards: against torch's own trackers --


@pytest.mark.slow
@pytest.mark.parametrize("n", sorted(ODD_WORLD_JOBS))
@pytest.mark.parametrize("config", REF_CONFIGS)
def test_peak_model_matches_torch_trackers_on_unseen_shapes(n: int, config: str) -> None:
    """Shapes the presets never had (3 ranks: grouped-query attention; 5 ranks: tied
    embeddings), no unit and no parameter's rows divisible by N: every rank's peak within
    2% of torch's ``MemTracker`` (DDP, FSDP1) or ``FSDPMemTracker`` (FSDP2). FSDP1 peaks in
    a block's post-backward there, where ``F.pad`` copies the unsharded flat gradient."""
    cfg = SHAPES[ODD_WORLD_JOBS[n]]
    assert all(u % n for u in mm.unit_sizes(cfg))  # uneven: FSDP1 must pad every unit
    assert cfg.tied_embeddings or (cfg.n_kv_heads or cfg.n_heads) < cfg.n_heads
    events = odd_world_job(n)
    strategy, kw = model_args(config, n)
    model = mm.peak_memory(cfg, strategy, n, **kw)
    # FSDP2's collectives are asynchronous on gloo: under load one that waits for a slower peer can keep one
    # more unit's buffers alive at the peak (as LATE_COLLECTIVE above; measured once in CI at 5 ranks,
    # fsdp2:reshard rank 0: 797,940 B against the model's 754,844 and 758,015 measured on an idle machine)
    late = 4 * max(mm.unit_sizes(cfg)) if config.startswith("fsdp2") else 0
    for r in range(n):
        measured = torch_peak(events, config, r)
        within = model.total == pytest.approx(measured, rel=0.02)
        assert within or model.total < measured <= model.total * 1.02 + late, (config, r, measured, model.total)
        # memtrack too: it reads the peak at its own instants, so the late unit may be in one tracker's and
        # not the other's (CI under load: memtrack 747,792 B, FSDPMemTracker 787,740 at 5 ranks)
        ours = sum(phase(events, config, r, "peak").values())
        assert ours == pytest.approx(measured, rel=0.005) or abs(ours - measured) <= late, (config, r, ours, measured)
    if config.startswith("fsdp1:FULL_SHARD"):
        assert model.peak.key == "reduce"  # the padded copy of the flat gradient sets the peak


# -- in this process: a plain model, activations, checkpointing, bf16 ------------------


def one_step(model, opt, cfg, steps=None, batch: int = 2):
    from labkit.models.transformer import synthetic_batch

    tracker = memtrack.track(model, opt, steps=steps, send=False)
    for i in range(2):
        x, y = synthetic_batch(cfg, batch, i)
        with tracker.step(i):
            model(x, y).backward()
            opt.step()
            opt.zero_grad()
    return {m["phase"]: m["categories"] for m in tracker.results if m["step"] == 1}, tracker


@pytest.mark.parametrize(
    ("preset", "checkpointing", "dtype"),
    [("tiny", False, "fp32"), ("tiny", True, "fp32"), ("tiny", False, "bf16")],
)
def test_activations_plain_model(preset: str, checkpointing: bool, dtype: str) -> None:
    import torch

    from labkit.testing.mem_job import plain_model

    cfg = get_config(preset)
    model = plain_model(preset, dtype, checkpointing)
    opt = torch.optim.AdamW(model.parameters(), foreach=False)
    got, _ = one_step(model, opt, cfg)
    predicted = mm.activation_memory(cfg, 2, precision=dtype, checkpointing=checkpointing)
    assert got["forward"]["activations"] == pytest.approx(predicted.stored, rel=0.01)
    elem = 2 if dtype == "bf16" else 4
    assert got["backward"]["params"] == got["backward"]["grads"] == elem * cfg.num_params()
    assert got["optimizer"]["optimizer"] == 2 * elem * cfg.num_params() + step_counters(cfg, "fsdp2")
    if checkpointing:  # recomputation in backward rebuilds one layer at a time
        assert got["peak"]["activations"] <= predicted.peak * 1.05


def test_only_the_chosen_steps_are_measured() -> None:
    import torch
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    from labkit.models.transformer import TransformerLM

    cfg = get_config("tiny")
    model = TransformerLM(cfg)
    opt = torch.optim.AdamW(model.parameters())
    tracker = memtrack.track(model, opt, steps=[1], send=False)
    with tracker.step():
        assert _get_current_dispatch_mode() is None  # step 0: nothing installed, no cost
    assert tracker.results == []
    with tracker.step():
        assert _get_current_dispatch_mode() is not None
        with pytest.raises(RuntimeError, match="nest"), tracker.step(1):
            pass
    assert [m["phase"] for m in tracker.results] == ["peak"]  # no forward ran: only the peak
    assert _get_current_dispatch_mode() is None and torch.UntypedStorage.resize_ is tracker._orig_resize


def test_split_by_role_counts_each_storage_once() -> None:
    import torch

    from labkit.models.config import ModelConfig
    from labkit.models.transformer import TransformerLM

    cfg = ModelConfig(vocab_size=64, dim=16, n_layers=1, n_heads=2, seq_len=8, tied_embeddings=True)
    model = TransformerLM(cfg)
    assert memtrack.split_by_role(model)["params"] == 4 * cfg.num_params()  # tied weight counted once
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    assert memtrack.split_by_role(model)["grads"] == 4 * cfg.num_params()


def test_memcat_messages_are_sent(tmp_path, monkeypatch) -> None:
    import json

    import torch

    from labkit.models.transformer import TransformerLM, synthetic_batch

    monkeypatch.setenv("LABKIT_REPORT_DIR", str(tmp_path))
    cfg = get_config("tiny")
    model = TransformerLM(cfg)
    opt = torch.optim.AdamW(model.parameters())
    tracker = memtrack.track(model, opt, steps=[0])
    x, y = synthetic_batch(cfg, 2, 0)
    with tracker.step():
        model(x, y).backward()
        opt.step()
    msgs = [json.loads(line) for line in (tmp_path / "rank0.jsonl").read_text().splitlines()]
    assert [m["phase"] for m in msgs] == ["forward", "backward", "optimizer", "peak"]
    assert all(
        m["t"] == "memcat" and m["device"] == "cpu" and set(m["categories"]) == set(memtrack.CATEGORIES) for m in msgs
    )


# -- in the notebook: table, plot, live bars ------------------------------------------


@pytest.mark.slow
def test_table_plot_and_bars_from_a_run() -> None:
    import matplotlib

    matplotlib.use("Agg")
    events = {r: [m for m in evs if m.get("config") in (None, "fsdp1:FULL_SHARD")] for r, evs in job(2).items()}
    table = memory_view.memory_table(events)
    assert set(table.data) == {0, 1} and set(table.data[0]) == set(memtrack.PHASES)
    text = str(table)
    assert "after backward" in text and "peak" in text and "optimizer state" in text
    assert table.to_markdown().count("\n|") == 2 + 2 * 4  # header, rule, 2 ranks x 4 phases
    assert "<table" in table._repr_html_()
    fig = memory_view.plot_breakdown(events)
    assert len(fig.axes[0].patches) == 2 * 4 * len(memtrack.CATEGORIES)
    latest = {r: phases["peak"] for r, phases in memory_view.latest(events).items()}
    svg = memory_view.breakdown_html(latest)
    assert svg.startswith("<svg") and svg.count("<rect") >= 2 * 4 + len(memtrack.CATEGORIES)
    assert "rank 1" in svg
    assert "memtrack.track" in memory_view.breakdown_html({}) and "memtrack.track" in str(memory_view.memory_table({}))
