"""Collectives counted in the ranks against theory: DDP 2Ψ, FULL_SHARD 3Ψ, SHARD_GRAD_OP 2Ψ.

.venv/bin/pytest tests/test_comm.py -q

The launched jobs (labkit/testing/comm_job.py, tiny model, gloo) are shared with
test_timeline.py and test_simulate.py through labkit/testing/comm_launch.py.
"""

from __future__ import annotations

import pytest

from labkit import comm
from labkit.models.config import get_config
from labkit.testing.comm_launch import CONFIGS_2, of_config, run_job

CONFIGS_4 = ("ddp", "fsdp2:reshard", "fsdp1:HYBRID_SHARD")
PSI = get_config("tiny").num_params()  # 196,928 parameters, fp32


def job2():
    return run_job(2, "tiny", 3, *CONFIGS_2)


def job4():
    return run_job(4, "tiny", 2, *CONFIGS_4, cross_check=False)


def last_comm(events, config, rank=0):
    msgs = [m for m in of_config(events, config)[rank] if m["t"] == "comm"]
    assert msgs, f"no comm message for {config}"
    return msgs[-1]


def padded_units(events, config, rank=0):
    """Elements each unit's all-gather returns, as FSDP padded them (sent with the timeline)."""
    return [m for m in of_config(events, config)[rank] if m["t"] == "spans"][-1]["padded_units"]


# -- theory, no ranks -----------------------------------------------------------------


def test_ring_factors():
    assert comm.ring_factor("all_gather", 4) == pytest.approx(0.75)
    assert comm.ring_factor("reduce_scatter", 2) == pytest.approx(0.5)
    assert comm.ring_factor("all_reduce", 4) == pytest.approx(1.5)  # reduce-scatter + all-gather
    assert comm.ring_factor("all_reduce", 1) == 0.0


@pytest.mark.parametrize("n", [2, 4, 8])
def test_theory_ratios(n):
    """In units of (N-1)/N·Ψ·bytes: DDP 2, FULL_SHARD 3, SHARD_GRAD_OP 2."""
    unit = (n - 1) / n * PSI * 4
    ddp = comm.total(comm.theory_bytes(PSI, "DDP", n))
    full = comm.total(comm.theory_bytes(PSI, "FULL_SHARD", n))
    zero2 = comm.total(comm.theory_bytes(PSI, "SHARD_GRAD_OP", n))
    assert (ddp / unit, full / unit, zero2 / unit) == pytest.approx((2.0, 3.0, 2.0))
    assert comm.total(comm.theory_bytes(PSI, "NO_SHARD", n)) == pytest.approx(ddp)
    assert comm.total(comm.theory_bytes(PSI, "FULL_SHARD", n), "bytes") == pytest.approx(3 * PSI * 4)


def test_theory_options():
    bf16 = comm.theory_bytes(PSI, "FULL_SHARD", 2, dtype_bytes=2, reduce_dtype_bytes=4)
    assert bf16["all_gather"]["bytes"] == 2 * PSI * 2 and bf16["reduce_scatter"]["bytes"] == PSI * 4
    kept = comm.theory_bytes(PSI, "FULL_SHARD", 2, unsharded_root_params=1000)
    assert kept["all_gather"]["bytes"] == (2 * PSI - 1000) * 4
    hybrid = comm.theory_bytes(PSI, "HYBRID_SHARD", 8, shard_size=4)
    assert hybrid["all_gather"]["wire_bytes"] == pytest.approx(2 * PSI * 4 * 3 / 4)
    assert hybrid["all_reduce"]["bytes"] == pytest.approx(PSI / 4 * 4)  # each rank's shard
    assert hybrid["all_reduce"]["wire_bytes"] == pytest.approx(PSI * 2 / 4 * 4 / 2)  # 2 replicas
    assert comm.theory_bytes(PSI, "FULL_SHARD", 1) == {}  # one rank moves nothing
    with pytest.raises(ValueError, match="unknown strategy"):
        comm.theory_bytes(PSI, "ZERO4", 2)
    with pytest.raises(ValueError, match="shard_size"):
        comm.theory_bytes(PSI, "HYBRID_SHARD", 6, shard_size=4)


def test_padding():
    assert comm.padded_numel(65600, 3) == 65601
    assert comm.padded_numel(65664, 4) == 65664


def test_table_says_what_it_shows():
    rows = {"all_gather": {"calls": 6, "bytes": 2**20, "wire_bytes": 2**19}}
    text = comm.table(rows, comm.theory_bytes(2**18, "FULL_SHARD", 2))
    assert "all_gather" in text and "1.000 MiB / 2.000 MiB" in text and "reduce_scatter" in text


# -- measured on gloo, 2 ranks -----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "config, strategy, theory_ratio",
    [
        ("ddp", "DDP", 2.0),
        ("fsdp1:NO_SHARD", "NO_SHARD", 2.0),
        ("fsdp2:reshard", "FULL_SHARD", 3.0),
        ("fsdp1:SHARD_GRAD_OP", "SHARD_GRAD_OP", 2.0),
        ("fsdp2:keep", "SHARD_GRAD_OP", 2.0),
    ],
)
def test_measured_bytes_match_theory(config, strategy, theory_ratio):
    """Wire bytes per step and rank, from the collectives the ranks ran, within 5% of theory."""
    for r in (0, 1):
        msg = last_comm(job2(), config, r)
        psi = sum(padded_units(job2(), config, r).values()) or PSI  # padded, as gathered
        measured = comm.total(msg["counts"])
        assert measured / ((2 - 1) / 2 * PSI * 4) == pytest.approx(theory_ratio, rel=0.05)
        for op, row in comm.theory_bytes(psi, strategy, 2).items():
            assert msg["counts"][op]["bytes"] == pytest.approx(row["bytes"], rel=0.05), op
            assert msg["counts"][op]["wire_bytes"] == pytest.approx(row["wire_bytes"], rel=0.05), op
        unexpected = set(msg["counts"]) - set(comm.theory_bytes(psi, strategy, 2))
        assert not unexpected, f"{config}: collectives theory does not have: {unexpected}"


@pytest.mark.slow
def test_fsdp1_full_shard_keeps_its_root():
    """FSDP1 does not gather the root again in backward: 2Ψ - Ψ_root, not 2Ψ. Theory says so when told."""
    msg = last_comm(job2(), "fsdp1:FULL_SHARD:BACKWARD_PRE")
    units = padded_units(job2(), "fsdp1:FULL_SHARD:BACKWARD_PRE")
    assert set(units) == {"root", "layers.0", "layers.1"}
    theory = comm.theory_bytes(sum(units.values()), "FULL_SHARD", 2, unsharded_root_params=units["root"])
    assert msg["counts"]["all_gather"]["bytes"] == theory["all_gather"]["bytes"]  # exact: no padding at N=2
    assert msg["counts"]["all_gather"]["calls"] == 5  # root, 2 blocks forward; 2 blocks backward
    assert msg["counts"]["reduce_scatter"]["calls"] == 3
    naive = comm.theory_bytes(PSI, "FULL_SHARD", 2)["all_gather"]["bytes"]
    assert msg["counts"]["all_gather"]["bytes"] < 0.9 * naive  # the root is a third of the tiny model


@pytest.mark.slow
def test_counts_per_call():
    """Each call is kept with its c10d operator, payload, dtype and group; calls add up to the counts."""
    msg = last_comm(job2(), "fsdp2:reshard")
    calls = msg["calls"]
    assert [c["op"] for c in calls].count("all_gather") == 6 == msg["counts"]["all_gather"]["calls"]
    assert {c["c10d"] for c in calls} == {"c10d::_allgather_base_", "c10d::_reduce_scatter_base_"}
    assert all(c["group_size"] == 2 and c["dtype"] == "float32" and c["done"] >= c["issued"] for c in calls)
    assert sum(c["bytes"] for c in calls if c["op"] == "reduce_scatter") == msg["counts"]["reduce_scatter"]["bytes"]


@pytest.mark.slow
def test_ddp_all_reduce_is_asynchronous_fsdp_blocks():
    ddp = last_comm(job2(), "ddp")["calls"]
    fsdp = last_comm(job2(), "fsdp1:FULL_SHARD:BACKWARD_PRE")["calls"]
    assert [c["blocking"] for c in ddp] == [False]  # the reducer waits at the end of backward
    assert all(c["blocking"] for c in fsdp)


@pytest.mark.slow
def test_same_calls_as_commdebugmode():
    """torch's own CommDebugMode counts the same operators, the same number of times."""
    for config in ("ddp", "fsdp1:FULL_SHARD:BACKWARD_PRE", "fsdp2:reshard", "fsdp1:NO_SHARD"):
        (msg,) = [m for m in of_config(job2(), config)[0] if m["t"] == "commdebug"]
        assert msg["labkit"] == msg["commdebugmode"], config


# -- measured on gloo, 4 ranks -----------------------------------------------------------


@pytest.mark.slow
def test_four_ranks():
    """(N-1)/N at N=4, and HYBRID_SHARD on a 2x2 mesh: shard in pairs, all-reduce across them."""
    unit = 3 / 4 * PSI * 4
    for r in range(4):
        assert comm.total(last_comm(job4(), "ddp", r)["counts"]) / unit == pytest.approx(2.0, rel=0.05)
        assert comm.total(last_comm(job4(), "fsdp2:reshard", r)["counts"]) / unit == pytest.approx(3.0, rel=0.05)
    msg = last_comm(job4(), "fsdp1:HYBRID_SHARD")
    units = padded_units(job4(), "fsdp1:HYBRID_SHARD")
    theory = comm.theory_bytes(
        sum(units.values()), "HYBRID_SHARD", 4, shard_size=2, unsharded_root_params=units["root"]
    )
    for op in ("all_gather", "reduce_scatter", "all_reduce"):
        assert msg["counts"][op]["wire_bytes"] == pytest.approx(theory[op]["wire_bytes"], rel=0.05), op
    assert {c["group_size"] for c in msg["calls"] if c["op"] == "all_gather"} == {2}


# -- reading back ------------------------------------------------------------------------


@pytest.mark.slow
def test_from_events():
    steps = comm.from_events(of_config(job2(), "ddp")[1])
    assert [s.step for s in steps] == [0, 1, 2]
    assert steps[-1].world_size == 2 and steps[-1].counts["all_reduce"]["calls"] == 1
    # DDP's first steps also broadcast (the bucket order is rebuilt once); the last one does not
    assert "broadcast" not in steps[-1].counts
