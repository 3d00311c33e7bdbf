"""The tests' own kernels on Unix sockets, as ``labkit.grading.runner`` has the grader's. Over TCP,
jupyter_client picks five free ports, closes them and hands them to the kernel to bind; in between
another process can take one (a CI sweep's kernel died so while other tests' ranks opened
connections).

``kernel_manager_class=AsyncIpcKernelManager`` for nbclient and papermill; ``-p ipc_kernels`` (with
this folder on ``PYTHONPATH``) for an nbval run: it gives nbval's kernel manager the same."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from typing import Any

from jupyter_client.manager import AsyncKernelManager, KernelManager


def on_unix_sockets(base: type) -> type:
    """``base`` whose kernels' channels are Unix sockets in a folder of their own (removed at exit)."""

    class OnUnixSockets(base):  # type: ignore[misc, valid-type]
        def __init__(self, **kw: Any) -> None:
            folder = tempfile.mkdtemp(prefix="labkit-test-kernel-")
            atexit.register(shutil.rmtree, folder, True)
            kw.setdefault("transport", "ipc")
            kw.setdefault("ip", os.path.join(folder, "kernel"))
            super().__init__(**kw)

    OnUnixSockets.__name__ = f"Ipc{base.__name__}"
    return OnUnixSockets


IpcKernelManager = on_unix_sockets(KernelManager)
AsyncIpcKernelManager = on_unix_sockets(AsyncKernelManager)


def pytest_configure(config: Any) -> None:
    """Loaded as a plugin (an nbval run): nbval 0.11 starts its kernel through this name."""
    import nbval.kernel

    nbval.kernel.KernelManager = IpcKernelManager
