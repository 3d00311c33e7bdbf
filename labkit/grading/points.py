"""Where formulas are checked: values of each argument that the notebooks never use or print.

The i-th sample takes the i-th value of every argument the reference function names.
``UNSEEN`` is in the student's install too: the notebook checks a formula there, against
salted hashes of the reference's values (``labkit.grading.hashed``). ``labkit grade`` also
checks it at the points its questions add with ``grader_points`` (only the instructor's
install has them), so a function that looks its answers up at the student's points, even
with values it recovered from the hashes, still fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SAMPLES = 4
UNSEEN: dict[str, tuple[Any, ...]] = {
    "n_params": (1_234_567_891, 6_700_000_017, 70_553_706_496, 13_000_000_003),
    # physically possible together: whole nodes (world_size a multiple of gpus_per_node), a rank in the world
    "world_size": (12, 48, 1000, 7),
    "gpus_per_node": (4, 16, 8, 1),
    "global_rank": (9, 37, 999, 5),
    "precision": ("bf16", "fp32", "fp16", "fp32"),
    "gpu_bytes": (23e9, 141e9, 47.5e9, 96e9),
    "root_params": (1_234_567, 53_000_011, 2_000_003, 777_777),
    "block_params": (7_654_321, 201_326_593, 12_582_917, 3_333_331),
    "n_blocks": (6, 80, 12, 3),
    "fp32_gathered": (1_234_568, 40_000_004, 7_777_780, 123_456),
    "micro_batch": (3, 1, 16, 5),
    "seq_len": (1000, 8192, 333, 4097),
    "dim": (5120, 96, 8192, 1000),
    # a 2-D mesh (lesson 9): the parameters tensor parallelism splits, the rest, and the mesh's two sides
    "mlp_params": (6_442_450_944, 100_663_296, 1_811_939_347, 3_538_947),
    "other_params": (1_310_720_001, 33_554_433, 262_144_007, 999_999),
    "dp": (16, 4, 64, 3),
    "tp": (8, 2, 4, 2),
}
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}

GRADER_UNSEEN: dict[str, tuple[Any, ...]] = {}  # filled by the instructor's questions (grader_points)


def grader_points(values: Mapping[str, tuple[Any, ...]]) -> None:
    """Add points only ``labkit grade`` checks formulas at (every argument, the same number of values)."""
    lengths = {len(v) for v in values.values()}
    if len(lengths) != 1:
        raise ValueError("every argument needs the same number of grader points")
    GRADER_UNSEEN.update({k: tuple(v) for k, v in values.items()})


def samples(names: list[str], grader: bool = False) -> list[dict[str, Any]]:
    """The points for a function of ``names``: UNSEEN's, then (for the grader) GRADER_UNSEEN's."""
    points = [{n: UNSEEN[n][i] for n in names} for i in range(SAMPLES)]
    if grader and GRADER_UNSEEN and all(n in GRADER_UNSEEN for n in names):
        count = len(next(iter(GRADER_UNSEEN.values())))
        points += [{n: GRADER_UNSEEN[n][i] for n in names} for i in range(count)]
    return points
