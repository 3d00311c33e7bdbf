"""%%torchrun through a real Jupyter kernel (nbclient, papermill, jupyter_client):
what a student's notebook, a papermill sweep and an interrupt actually do."""

from __future__ import annotations

import os
import time

import nbformat
import pytest
from ipc_kernels import AsyncIpcKernelManager, IpcKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from labkit.testing.processes import leftover_ranks, our_rank_processes

pytestmark = pytest.mark.usefixtures("no_orphans")


def notebook(*cells: str, params: str | None = None) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    if params is not None:
        nb.cells.append(nbformat.v4.new_code_cell(params, metadata={"tags": ["parameters"]}))
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def execute(nb, **kw):
    NotebookClient(nb, timeout=180, kernel_name="python3", kernel_manager_class=AsyncIpcKernelManager, **kw).execute()
    return nb


def text_of(cell) -> str:
    parts = []
    for out in cell.outputs:
        if out.output_type == "stream":
            parts.append(out.text)
        elif "data" in out and "text/plain" in out.data:
            parts.append(out.data["text/plain"])
        elif out.output_type == "error":
            parts.append("\n".join(out.traceback))
    return "\n".join(parts)


@pytest.mark.slow
def test_magic_runs_cell_and_summary_lands_in_that_cell():  # F32
    nb = execute(
        notebook(
            "%load_ext labkit",
            # a few steps long enough for a memory curve, so the static figure has something to show
            "%%torchrun -n 2\nimport time\nfrom labkit import rank\nimport torch.distributed as dist\n"
            "for i in rank.steps(3):\n    time.sleep(0.3)\nrank.report(r=rank.rank(), w=dist.get_world_size())",
            "import labkit\nprint(_.values, _ is labkit.last_run, _.ok)",
        )
    )
    run_cell = nb.cells[1]
    text = text_of(run_cell)
    assert "2 ranks, backend gloo" in text and "all ranks finished" in text
    kinds = {mime for out in run_cell.outputs for mime in out.get("data", {})}
    assert "application/vnd.jupyter.widget-view+json" in kinds, "the live dashboard was displayed"
    assert "image/png" in kinds, "one static figure at the end"
    assert text_of(nb.cells[2]).strip() == "{0: {'r': 0, 'w': 2}, 1: {'r': 1, 'w': 2}} True True"


@pytest.mark.slow
def test_rank_error_in_notebook_names_rank_and_cell_line():
    nb = notebook(
        "%load_ext labkit",
        "%%torchrun -n 2\nfrom labkit import rank\nx = 1\nif rank.rank() == 1:\n    raise KeyError('missing')\n",
    )
    with pytest.raises(CellExecutionError) as info:
        execute(nb)
    err = nb.cells[1].outputs[-1]
    assert err.ename == "RankError"
    assert "rank 1 failed (cell line 5): KeyError: 'missing'" in err.evalue
    assert any('File "<cell>", line 5' in line for line in err.traceback)
    assert "launcher.py" not in "\n".join(err.traceback), "no labkit frames in what the student sees"
    assert "RankError" in str(info.value)


@pytest.mark.slow
@pytest.mark.parametrize(
    "magic,needle",
    [
        ("%%torchrun -n 0\npass", "nproc must be at least 1"),
        ("%%torchrun --backend tcp\npass", "unknown backend"),
        ("%%torchrun --vars nothere\npass", "'nothere'"),
        ("%%torchrun --bogus\npass", "unrecognized arguments"),
        ("%%torchrun\nif True\n    pass", "SyntaxError"),
    ],
)
def test_bad_options_are_one_clear_line(magic, needle):
    nb = notebook("%load_ext labkit", magic)
    with pytest.raises(CellExecutionError):
        execute(nb)
    err = nb.cells[1].outputs[-1]
    assert needle in "\n".join(err.traceback)
    assert len(err.traceback) <= 4


@pytest.mark.slow
def test_romanian_messages_from_the_magic():
    nb = notebook("%load_ext labkit\n%labkit_lang ro", "%%torchrun -n 0\npass")
    with pytest.raises(CellExecutionError):
        execute(nb)
    assert "trebuie să fie cel puțin 1" in nb.cells[1].outputs[-1].evalue


@pytest.mark.slow
def test_papermill_parameters_and_timeout(tmp_path):  # F31
    import papermill

    src = tmp_path / "in.ipynb"
    nbformat.write(
        notebook(
            "%load_ext labkit",
            "%%torchrun -n $nproc --vars seconds\nimport time\nfrom labkit import rank\ntime.sleep(seconds)\nrank.report(n=rank.world_size())",
            params="nproc = 2\nseconds = 0.1",
        ),
        src,
    )
    out = papermill.execute_notebook(
        str(src),
        str(tmp_path / "out.ipynb"),
        parameters={"nproc": 3},
        kernel_name="python3",
        kernel_manager_class=AsyncIpcKernelManager,
    )
    assert "3 ranks" in text_of(out.cells[-1])

    t0 = time.time()
    from nbclient.exceptions import CellTimeoutError

    with pytest.raises((papermill.PapermillExecutionError, CellTimeoutError)):
        papermill.execute_notebook(
            str(src),
            str(tmp_path / "slow.ipynb"),
            parameters={"seconds": 60},
            kernel_name="python3",
            kernel_manager_class=AsyncIpcKernelManager,
            execution_timeout=10,
        )
    assert time.time() - t0 < 10 + 5 + 20
    assert leftover_ranks(10) == []
    saved = nbformat.read(tmp_path / "slow.ipynb", as_version=4)  # papermill kept the notebook
    assert saved.cells[-1].source.startswith("%%torchrun")


def wait_idle(kc, msg_id: str, timeout: float = 30) -> None:
    """Read the kernel's IOPub messages until it says it is idle after the request ``msg_id``."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.time()))
        if (
            msg["msg_type"] == "status"
            and msg["content"]["execution_state"] == "idle"
            and msg["parent_header"].get("msg_id") == msg_id
        ):
            return
    raise AssertionError(f"the kernel did not go idle after {msg_id} in {timeout} s")


@pytest.mark.slow
def test_interrupt_and_shutdown_leave_no_rank():  # the kernel's own interrupt and shutdown
    km = IpcKernelManager(kernel_name="python3")  # jupyter_client's start_new_kernel, on Unix sockets
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    try:
        kc.execute_interactive("%load_ext labkit", timeout=60)
        interrupted = kc.execute("%%torchrun -n 2\nimport time\ntime.sleep(1000)")

        deadline = time.time() + 60
        while len(our_rank_processes()) < 3 and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)
        t0 = time.time()
        km.interrupt_kernel()
        assert leftover_ranks(5.0) == []
        assert time.time() - t0 < 5.5
        reply = kc.get_shell_msg(timeout=10)  # the interrupted cell's reply
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "RunInterrupted"
        # After an error, ipykernel aborts the requests that reach it before it has finished handling the
        # error (stop_on_error): a cell sent the instant the reply came can be "aborted" on a loaded machine,
        # as in any kernel. The kernel is idle once that is done.
        wait_idle(kc, interrupted)
        # the kernel is usable right away: a new run succeeds
        reply = kc.execute_interactive(
            "%%torchrun -n 2 --quiet\nfrom labkit import rank\nrank.report(again=1)", timeout=120
        )
        assert reply["content"]["status"] == "ok"

        kc.execute("%%torchrun -n 2\nimport time\ntime.sleep(1000)")
        deadline = time.time() + 60
        while len(our_rank_processes()) < 3 and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)
    assert leftover_ranks(10.0) == [], "ranks outlived their kernel"
    assert not os.path.exists(f"/proc/{km.provisioner.pid}") if km.provisioner else True
