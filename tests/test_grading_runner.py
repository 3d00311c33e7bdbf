"""The grader's papermill run (labkit.grading.runner), the one ``labkit sweep`` uses too."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat

from labkit.grading import runner

PRINT_TRANSPORT = """
import json, ipykernel
info = json.load(open(ipykernel.get_connection_file()))
print(info["transport"], info["ip"])
"""


def test_the_kernel_talks_over_unix_sockets_not_tcp_ports(tmp_path: Path):
    """Five TCP ports picked, closed and handed to the kernel can be taken by another process in
    between (a sweep's kernel died so in CI while other tests' ranks opened connections): the
    kernel's channels are Unix sockets in a folder of their own, removed after the run."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PRINT_TRANSPORT)])
    status, message = runner.execute(nb, tmp_path / "out.ipynb", timeout=60)
    assert (status, message) == ("ok", "")
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[0].outputs
    transport, ip = "".join(o.get("text", "") for o in out).split()
    folder = os.path.dirname(ip)
    assert transport == "ipc" and os.path.basename(folder).startswith("labkit-kernel-")
    assert not os.path.exists(folder)
