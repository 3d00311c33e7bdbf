"""The run folders: one private (0700) folder per run, under a private folder of this user's, the
most recent ones kept so their logs can be read.

A run folder holds the channel's socket, the job, the ranks' logs and torchrun's. The kernel makes
it (``labkit.launch.group``); old ones are pruned by the kernel, or by the prefork server once it has
handed a run its agent (``labkit.launch.forkserver``), so the cell does not wait for it.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from labkit.wire import env as envvars
from labkit.wire.errors import LaunchError

KEEP_RUN_DIRS = 30


def runs_root(shared: bool = False) -> str:
    """A private (0700) folder of ours for run folders: the socket and logs live there.

    ``shared``: ranks on other nodes read the job and write their logs there too, so it must be
    a folder every node sees: LABKIT_RUN_ROOT, else under the home folder (shared on clusters).
    """
    base = os.environ.get("XDG_RUNTIME_DIR")
    if not base or not os.access(base, os.W_OK):
        base = tempfile.gettempdir()
    root = os.path.join(base, f"labkit-{os.getuid()}")
    if shared:
        root = envvars.get("LABKIT_RUN_ROOT") or os.path.expanduser("~/.cache/labkit-runs")
    if len(root) > 60 and not shared:  # AF_UNIX paths are limited to 107 bytes
        root = f"/tmp/labkit-{os.getuid()}"
    os.makedirs(root, mode=0o700, exist_ok=True)
    st = os.stat(root)
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        os.chmod(root, 0o700) if st.st_uid == os.getuid() else None
        if os.stat(root).st_mode & 0o077 or st.st_uid != os.getuid():
            raise LaunchError(f"{root} is not a private folder of this user; remove it")
    return root


def prune_runs(root: str, keep: int = KEEP_RUN_DIRS) -> None:
    """Old run folders go; the most recent ones stay, so their logs can be read."""
    dirs = [os.path.join(root, d) for d in os.listdir(root) if d.startswith("run-")]
    dirs = [d for d in dirs if not os.path.exists(os.path.join(d, "ch.sock"))]  # a live run (a warm session) stays
    dirs.sort(key=os.path.getmtime)
    for d in dirs[:-keep] if len(dirs) > keep else []:
        shutil.rmtree(d, ignore_errors=True)
