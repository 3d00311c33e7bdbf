"""Run one submitted notebook with papermill: the program ``labkit grade`` starts in each sandbox.

    python -m labkit.grading.runner NOTEBOOK OUT_DIR --results-fd N --timeout 600 [--parameters JSON]

The notebook runs top to bottom in a fresh kernel of this Python, with its saved outputs cleared
first; a crashing cell does not stop the cells after it; ``--timeout`` is for all its cells together.
``OUT_DIR`` is the sandbox's own small folder (gone with it): the executed notebook and the kernel's
log are written there. When the run has ended, this process sends what came out of it to the
grader over the pipe ``--results-fd`` (inherited; no other process of the sandbox can reach it:
this one is non-dumpable and the kernel does not inherit it), as frames (``labkit.wire.grading.Frame``):
how the run ended, the executed notebook, the kernel's log. The grader never opens a
file the sandbox could write. Nothing sent is trusted: the grader judges it as the student's claims
(``labkit.grading.judge``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from labkit.grading.sandbox import not_dumpable
from labkit.wire import env as envvars
from labkit.wire.grading import Frame, FrameKind, NotebookStatus, RunnerStatus

# nbformat validates with jsonschema, which imports rfc3987_syntax (when installed: Jupyter's server
# brings it) for its "iri" format and builds a grammar for it: 0.9 s of CPU, in the sandbox of every
# notebook graded. No notebook schema uses that format; without the module jsonschema leaves it out.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
import nbformat  # noqa: E402

KERNEL_ENV = ("LABKIT_LANG",)  # what the kernel gets from this process


def cleared(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy with no outputs: a cell the run never reaches must not keep what the student saved."""
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def _kernel_manager_class(env: dict[str, str], log: Any, sockets: str) -> type:
    """A kernel manager whose kernel is ``sys.executable`` with ``env`` added, its output to ``log``.

    The kernelspec is built here rather than looked up, so a stale ``python3`` spec in
    the user's Jupyter folders (pointing at another Python) cannot be picked up.

    The kernel's channels are Unix sockets in ``sockets`` (``transport="ipc"``), not TCP ports:
    jupyter_client picks five free ports, closes them and hands them to the kernel to bind, and
    in between another process can take one (measured in CI: a sweep's kernel died before its
    first reply, ``Address already in use``, while the ranks of other tests opened connections).
    """
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager

    class GradingSpecs(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
            return KernelSpec(argv=argv, env=env, display_name="Python 3 (labkit grader)", language="python")

    class GradingKernelManager(AsyncKernelManager):
        def __init__(self, **kw: Any) -> None:
            kw.setdefault("transport", "ipc")
            kw.setdefault("ip", os.path.join(sockets, "kernel"))  # kernel-1 ... kernel-5
            super().__init__(**kw)

        def _kernel_spec_manager_default(self) -> KernelSpecManager:
            return GradingSpecs()

        async def start_kernel(self, **kw: Any) -> None:  # type: ignore[override]  # jupyter_client's is untyped *args
            kw.setdefault("stdout", log)
            kw.setdefault("stderr", log)
            await super().start_kernel(**kw)

    return GradingKernelManager


def execute(
    nb: nbformat.NotebookNode,
    out_path: Path,
    timeout: float,
    env: dict[str, str] | None = None,
    parameters: dict[str, Any] | None = None,
    name: str | None = None,
) -> tuple[str, str]:
    """Run ``nb`` with papermill into ``out_path``; (status, message). ``timeout`` is for all the
    cells together, the kernel's start not included. ``name``: the notebook's file name as handed in;
    the kernel's working folder holds a copy of it by that name, as Jupyter's would."""
    import papermill  # type: ignore[import-untyped]  # papermill ships no types
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from papermill.exceptions import PapermillExecutionError  # type: ignore[import-untyped]

    deadline: float | None = None

    def cell_timeout(cell: Any) -> int:
        nonlocal deadline
        if deadline is None:  # the clock starts with the first cell
            deadline = time.monotonic() + timeout
        return max(1, math.ceil(deadline - time.monotonic()))

    status, message = "ok", ""
    with (
        open(out_path.with_suffix(".kernel.log"), "w") as log,
        tempfile.TemporaryDirectory() as cwd,
        tempfile.TemporaryDirectory(prefix="labkit-kernel-") as sockets,
    ):
        if name and os.path.basename(name) == name and name.endswith(".ipynb"):
            nbformat.write(cleared(nb), os.path.join(cwd, name))
        try:
            papermill.execute_notebook(
                cleared(nb),
                str(out_path),
                parameters=parameters,
                kernel_name="python3",
                kernel_manager_class=_kernel_manager_class(dict(env or {}), log, sockets),
                allow_errors=True,  # a crashing cell must not stop the checks after it
                timeout_func=cell_timeout,
                resources={"metadata": {"path": cwd}},  # the kernel's working folder: empty, thrown away
                progress_bar=False,
            )
        except PapermillExecutionError:
            status = "errors"
        except CellTimeoutError:
            status, message = "timeout", f"{timeout:g} s"
        except DeadKernelError as e:
            status, message = "died", str(e)
        except Exception as e:  # a kernel that does not start, a broken notebook: report it, go on
            status, message = "failed", f"{type(e).__name__}: {e}"
    return status, message


MAX_NOTEBOOK = 128 << 20
MAX_LOG = 8 << 20  # the kernel log's end


def read_regular(path: Path, cap: int, tail: bool = False) -> bytes | None:
    """A regular file's bytes (its last ``cap`` with ``tail``, else None when longer), never through a link,
    never blocking on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(fd).st_size
        if not stat.S_ISREG(os.fstat(fd).st_mode) or (size > cap and not tail):
            return None
        if size > cap:
            f.seek(size - cap)
        return f.read(cap)


def frames(out: Path, status: str, message: str) -> Iterator[tuple[Frame, bytes]]:
    """What the grader gets back: how the run ended, the executed notebook, the kernel's log."""
    body = RunnerStatus(NotebookStatus(status), message[:2000]).to_json().encode()
    yield Frame(FrameKind.STATUS, len(body)), body
    for what, name, cap, tail in ((FrameKind.NOTEBOOK, "executed.ipynb", MAX_NOTEBOOK, False),
                                  (FrameKind.KERNEL_LOG, "executed.kernel.log", MAX_LOG, True)):  # fmt: skip
        data = read_regular(out / name, cap, tail)
        if data is not None:
            yield Frame(what, len(data)), data


def send(fd: int, out: Path, status: str, message: str) -> None:
    with os.fdopen(fd, "wb") as pipe:
        try:
            for frame, data in frames(out, status, message):
                pipe.write(frame.to_json().encode() + b"\n")
                pipe.write(data)
        except BrokenPipeError:  # the grader took what it wanted
            pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m labkit.grading.runner")
    p.add_argument("notebook")
    p.add_argument("out")
    p.add_argument("--results-fd", type=int, required=True, help="the pipe to the grader")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--parameters", default=None, help="papermill parameters, as a JSON object")
    p.add_argument("--name", default=None, help="the notebook's file name as handed in")
    args = p.parse_args(argv)
    not_dumpable()  # before the kernel starts: it must not reach this process's pipe to the grader
    os.set_inheritable(args.results_fd, False)
    out = Path(args.out)
    try:
        nb = nbformat.read(args.notebook, as_version=4)
        env = {k: v for k in KERNEL_ENV if (v := envvars.get(k, None)) is not None}
        env["LABKIT_GRADING"] = "1"  # the notebook's labkit.submit() cell is not a hand-in (labkit.classroom.client)
        parameters = json.loads(args.parameters) if args.parameters else None
        status, message = execute(nb, out / "executed.ipynb", args.timeout, env, parameters, args.name)
    except Exception as e:  # the notebook did not even load: say so, the grader goes on
        status, message = "failed", f"{type(e).__name__}"
    send(args.results_fd, out, status, message)
    return 0


if __name__ == "__main__":
    sys.exit(main())
