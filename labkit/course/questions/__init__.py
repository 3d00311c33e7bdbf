"""The course's questions: ``questions/lessonN.py`` registers lesson N's, one ``question(...)``
per ``labkit.check("lessonN.name", ...)`` in that lesson.

The registry (``labkit.grading.registry``) imports this package for every check and for the
grader, so a new lesson's questions need nothing but their file. Answers that depend on the
student's own run are computed from the ``run=`` (or other context) the check is given, never
from numbers written here; hints say where to look, never what the answer is.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

from labkit.grading.points import grader_points

# Where only the grader checks formulas (see labkit.grading.points): values the notebooks never use, and
# that no student install holds, so that a function which looks up answers it found for UNSEEN fails here.
grader_points(
    {
        "n_params": (987_654_323, 2_345_678_917, 405_000_000_041, 31_415_926_537),
        "world_size": (5, 96, 12, 336),  # with gpus_per_node and global_rank: clusters that exist
        "gpus_per_node": (1, 4, 2, 16),
        "global_rank": (3, 50, 7, 335),
        "precision": ("fp16", "bf16", "fp32", "bf16"),
        "gpu_bytes": (12e9, 192e9, 33.3e9, 64e9),
        "root_params": (3_141_593, 999_983, 12_345_679, 65_537),
        "block_params": (2_718_281, 16_777_259, 98_765_431, 1_048_583),
        "n_blocks": (9, 40, 1, 126),
        "fp32_gathered": (2_222_224, 9_999_992, 555_556, 31_337_332),
        "micro_batch": (2, 7, 32, 4),
        "seq_len": (2048, 777, 131_072, 64),
        "dim": (4096, 1536, 640, 12288),
    }
)

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
    if re.fullmatch(r"lesson\d+", _info.name):
        importlib.import_module(f"{__name__}.{_info.name}")
