"""torch.profiler around a rank's cell, opt-in (``%%torchrun --profile``): each rank's Kineto trace.

The kernel names the folder (``LABKIT_PROFILE_DIR``: ``labkit-traces/<run id>/`` under the
kernel's working folder, which Jupyter sets to the notebook's), and each rank writes
``rank<r>.json`` there when its cell ends, also when the cell failed. A rank that is killed
writes nothing. Open a file in ui.perfetto.dev: torch's operators on the rank's threads,
gloo's collectives among them (on a GPU, the kernels on their streams too).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from labkit.wire import env as envvars


def profile_dir(run_id: str) -> str:
    """Where ``--profile`` puts each rank's trace (the kernel's side names it)."""
    return os.path.join(os.getcwd(), "labkit-traces", run_id)


@contextlib.contextmanager
def maybe_profile(rank: int) -> Iterator[None]:
    """Profile the block when the kernel asked for it; otherwise do nothing."""
    folder = envvars.get("LABKIT_PROFILE_DIR")
    if not folder:
        yield
        return
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    prof = profile(activities=activities, record_shapes=True)
    prof.start()
    try:
        yield
    finally:
        prof.stop()
        try:
            os.makedirs(folder, exist_ok=True)
            prof.export_chrome_trace(os.path.join(folder, f"rank{rank}.json"))
        except Exception as exc:  # the cell's own outcome matters more than its trace
            print(f"labkit: the profiler trace could not be written: {exc}", file=sys.stderr, flush=True)
