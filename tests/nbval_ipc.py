"""A pytest plugin for the tests' nbval runs (``-p nbval_ipc``): the kernel's channels on Unix
sockets in a folder of their own, as ``labkit.grading.runner`` has them. Over TCP, jupyter_client
picks five free ports, closes them and hands them to the kernel to bind; in between another
process can take one (a CI sweep's kernel died so while other tests' ranks opened connections)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from typing import Any

import nbval.kernel
from jupyter_client.manager import KernelManager


class IpcKernelManager(KernelManager):
    def __init__(self, **kw: Any) -> None:
        folder = tempfile.mkdtemp(prefix="labkit-kernel-")
        atexit.register(shutil.rmtree, folder, True)
        kw.setdefault("transport", "ipc")
        kw.setdefault("ip", os.path.join(folder, "kernel"))
        super().__init__(**kw)


nbval.kernel.KernelManager = IpcKernelManager  # what nbval's RunningKernel starts
