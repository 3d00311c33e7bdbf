"""Warm ranks (labkit.launch.warm) on CPU/gloo: state across cells, failures, the kernel's end, the magics.

Each session here is a real torchrun group; ``no_leaks``/``no_orphans`` then check that
no rank process, listening socket or file descriptor is left behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import labkit
from labkit.launch.group import find_run_processes
from labkit.launch.warm import CUT_WAIT, INTERRUPT_WAIT, Session, SessionEnded
from labkit.wire.errors import RankError, RunTimeout

pytestmark = pytest.mark.slow  # every test here starts warm ranks


def start(nproc: int = 2, **kw) -> Session:
    kw.setdefault("pg_timeout", 30)
    return Session(nproc=nproc, backend="gloo", display="none", **kw)


def left(run_id: str, timeout: float = 10.0) -> list[int]:
    """Processes of this one run still alive after ``timeout`` (other runs on the machine do not count)."""
    deadline = time.time() + timeout
    pids = find_run_processes(run_id)
    while pids and time.time() < deadline:
        time.sleep(0.1)
        pids = find_run_processes(run_id)
    return pids


@pytest.fixture
def session(no_leaks):
    s = start()
    yield s
    s.stop()


def cell(code: str) -> str:
    return textwrap.dedent(code)


# -- state across cells -----------------------------------------------------------

BUILD = """
import torch, torch.distributed as dist
from labkit import rank
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
print("built", flush=True)
rank.report(params=sum(p.numel() for p in model.parameters()))
"""
WRAP = """
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
fully_shard(model, mesh=init_device_mesh("cpu", (dist.get_world_size(),)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
rank.report(local=sum(p.to_local().numel() for p in model.parameters()))
"""
TRAIN = """
torch.manual_seed(1)
x = torch.randn(4, 8)
losses = []
for i in rank.steps(3):
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    losses.append(loss.item())
print("trained", flush=True)
rank.report(losses=losses)
"""


def reference_losses() -> list[float]:
    """The same three steps in this process, without any distribution."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.manual_seed(1)
    x = torch.randn(4, 8)
    losses = []
    for _ in range(3):
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def test_state_persists_across_cells(session):
    """Build a model in one cell, wrap it in FSDP2 in the next, train it in a third."""
    built = session.run(cell(BUILD))
    assert built.ok and built.values[0] == {"params": 161} and labkit.last_run is built
    wrapped = session.run(cell(WRAP))
    local = [v["local"] for v in wrapped.values.values()]
    assert sum(local) == 161 and max(local) < 161, "FSDP2 sharded the model of cell 1"
    trained = session.run(cell(TRAIN))
    assert trained.ok
    expected = reference_losses()
    for r in (0, 1):
        assert trained.values[r]["losses"] == pytest.approx(expected, rel=1e-5), (
            "the model of cell 1, trained in cell 3"
        )
        assert len(trained.step_times[r]) == 3
        assert trained.memory[r], "memory is sampled in a warm cell too"
        assert trained.logs[r].stdout.splitlines() == ["trained"], "a cell's log holds that cell's output only"
        assert built.logs[r].stdout.splitlines() == ["built"]
    assert session.cells == 3 and session.unsafe is None

    r = session.run("rank.report(scaled=lr * rank.rank())", vars={"lr": 0.5})
    assert r.values == {0: {"scaled": 0.0}, 1: {"scaled": 0.5}}

    with pytest.raises(SyntaxError):
        session.run("if True\n    pass")
    assert session.cells == 4, "a cell that does not compile is never sent"

    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        session.run("pass")
        times.append(time.perf_counter() - t0)
    assert sorted(times)[5] < 0.05, f"a warm round trip should take milliseconds, took {sorted(times)[5]:.3f} s"


def test_exception_is_reported_per_rank_and_the_session_survives(session):
    with pytest.raises(RankError) as info:
        session.run(
            cell("""
            from labkit import rank
            raise ValueError(f"bad {rank.rank()}")
            """)
        )
    run = info.value.run
    assert {r: s.error["message"] for r, s in run.ranks.items()} == {0: "bad 0", 1: "bad 1"}
    assert 'File "<cell 1>", line 3' in info.value.traceback
    other = 1 - info.value.rank
    # the same type at the same cell line is one failure, whatever the message (labkit.launch.diagnose.same_failure)
    assert f"rank {other} failed the same way" in str(info.value) and "because of it" not in str(info.value)
    with pytest.raises(RankError) as info:  # different failures: each is told as its own (nobody stopped another)
        session.run("from labkit import rank\nif rank.rank() == 0:\n    raise ValueError('a')\nraise KeyError('b')")
    assert "rank 1 failed too: KeyError: 'b'" in str(info.value) or "rank 0 failed too: ValueError: a" in str(
        info.value
    )
    with pytest.raises(RankError, match="rank [01] failed the same way"):
        session.run("undefined_name")

    with pytest.raises(RankError) as info:
        session.run("from labkit import rank\nif rank.rank() == 1:\n    raise KeyError('missing')")
    err = info.value
    assert err.rank == 1 and "rank 1 failed (cell line 3): KeyError: 'missing'" in str(err)
    assert err.run.ranks[0].status == "done"
    assert session.alive and session.unsafe is None, "nobody was left in a collective"

    r = session.run("import sys\nif rank.rank() == 0:\n    sys.exit()\nrank.report(still=rank.rank())")
    assert r.ok and r.values == {0: {}, 1: {"still": 1}}, "sys.exit() ends the cell, not the rank"
    assert session.alive

    with pytest.raises(RankError) as info:  # rank 1 is done; rank 0 waits for it until the group's timeout
        session.run(
            cell("""
            import datetime, torch, torch.distributed as dist
            group = dist.new_group(timeout=datetime.timedelta(seconds=2))
            if rank.rank() == 0:
                dist.all_reduce(torch.ones(1), group=group)
            """)
        )
    err = str(info.value)
    assert info.value.rank == 0 and "ranks 1 had finished the cell" in err and "same collective calls" in err
    assert "cell 6" in session.unsafe


def test_state_survives_an_interrupted_collective_then_restart(session):
    """A rank fails while its peer waits in a collective (the timing: test_fault_ends_in_bounded_time)."""
    session.run("import torch, torch.distributed as dist\nfrom labkit import rank\nkept = rank.rank() + 10")
    with pytest.raises(RankError) as info:
        session.run("if rank.rank() == 1:\n    raise ValueError('boom')\ndist.all_reduce(torch.ones(1))")
    err = info.value
    assert err.rank == 1 and "ValueError: boom" in str(err)
    assert "ranks 0 were still running" in str(err) and "restart" in str(err)
    assert err.run.ranks[0].status == "stopped" and err.run.ranks[1].status == "failed"
    assert session.alive and "cell 2 was interrupted" in session.unsafe
    r = session.run("rank.report(kept=kept)")  # the state survived the interruption
    assert r.values == {0: {"kept": 10}, 1: {"kept": 11}}

    old = session.start_run.run_id
    session.restart()
    assert left(old) == [] and session.unsafe is None and session.cells == 0
    r = session.run(
        cell("""
        import torch, torch.distributed as dist
        from labkit import rank
        x = torch.ones(1)
        dist.all_reduce(x)
        rank.report(fresh="kept" not in globals(), total=x.item())
        """)
    )
    assert r.values == {0: {"fresh": True, "total": 2.0}, 1: {"fresh": True, "total": 2.0}}


def test_rank_that_ignores_the_interrupt_ends_the_session(session):
    with pytest.raises(RunTimeout) as info:
        session.run("import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(1000)", timeout=2)
    assert "did not stop when interrupted" in str(info.value) and "session has ended" in str(info.value)
    assert not session.alive and left(session.start_run.run_id) == []
    with pytest.raises(SessionEnded, match="not running"):
        session.run("pass")


def test_dead_rank_between_cells_is_found_by_the_next_cell(session):
    session.run("x = 1")
    os.kill(session.pids[0], signal.SIGKILL)
    time.sleep(1.0)
    with pytest.raises(RankError) as info:
        session.run("print(x)")
    assert info.value.rank == 0 and "killed by SIGKILL" in str(info.value) and "session has ended" in str(info.value)
    assert left(session.start_run.run_id) == []


def test_four_ranks_stop_and_context_manager(no_leaks):
    with start(4) as s:
        s.run("import torch, torch.distributed as dist\nfrom labkit import rank\nx = torch.ones(1) * (rank.rank() + 1)")
        r = s.run("dist.all_reduce(x)\nrank.report(total=x.item())")
        assert r.values == {i: {"total": 10.0} for i in range(4)}
    assert not s.alive and left(s.start_run.run_id) == []
    s.stop()  # again: nothing happens
    with pytest.raises(SessionEnded, match="stopped"):
        s.run("pass")


# -- the kernel: interrupt, exit, death -----------------------------------------------

STAND_IN = """
import sys, time
from labkit.launch.warm import Session
s = Session(nproc=2, backend="gloo", display="none", pg_timeout=30)
print(s.start_run.run_id, flush=True)
{body}
"""
INTERRUPTED = """
try:
    s.run("import time\\nprint('up', flush=True)\\ntime.sleep(1000)")
except KeyboardInterrupt as e:
    print("INTERRUPTED", type(e).__name__, str(e).replace("\\n", " | "), flush=True)
r = s.run("from labkit import rank\\nrank.report(after=rank.rank())")
print("AFTER", r.values, s.unsafe is not None, flush=True)
time.sleep(1000)
"""


def stand_in(tmp_path, body: str) -> tuple[subprocess.Popen, str]:
    """A 'kernel': a process in its own session running a Session, like jupyter_client starts one."""
    script = tmp_path / "kernel.py"
    script.write_text(STAND_IN.format(body=body))
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    run_id = proc.stdout.readline().strip()
    assert run_id.startswith("run-"), run_id
    return proc, run_id


def test_interrupt_then_death_of_the_kernel(tmp_path, no_orphans):
    """The kernel's interrupt stops the cell on every rank and the session lives on; the kernel's
    SIGKILL (between cells: no atexit, no finally) takes the ranks along through their lifeline."""
    proc, run_id = stand_in(tmp_path, INTERRUPTED)
    time.sleep(1.0)  # the cell is sleeping on both ranks
    t0 = time.time()
    os.killpg(proc.pid, signal.SIGINT)
    line = proc.stdout.readline()
    assert line.startswith("INTERRUPTED RunInterrupted") and "stopped on every rank" in line and "restart" in line, line
    assert time.time() - t0 < INTERRUPT_WAIT + CUT_WAIT + 10, "far below the collective timeout (30 s)"
    line = proc.stdout.readline()
    assert line.startswith("note: cell 1 was interrupted"), "the next cell says the session is unsafe"
    line = proc.stdout.readline()
    assert line.strip() == "AFTER {0: {'after': 0}, 1: {'after': 1}} True", line

    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    proc.stdout.close()
    assert left(run_id) == []


# -- the magics, in a real kernel -------------------------------------------------------


def test_magics_in_a_notebook(no_orphans):
    import nbformat
    from nbclient import NotebookClient

    cells = [
        "%load_ext labkit",
        # a short cell shows its end only, a longer one the live widgets (dashboard.SHOW_AFTER): both are
        # seen here, whatever the machine's load, by moving the limit
        "%torchrun_start -n 2 --pg-timeout 30\nfrom labkit.views import dashboard\ndashboard.SHOW_AFTER = 60",
        "%%ranks\nfrom labkit import rank\nimport torch\nw = torch.full((2,), float(rank.rank()))\nprint('made', rank.rank())",
        "dashboard.SHOW_AFTER = 0",
        "%%ranks --timeout 60\nrank.report(total=float(w.sum()))\nprint('used w')",
        "print(_.values, _.ok, _.logs[1].stdout)",
        "%%ranks\nif rank.rank() == 1:\n    raise KeyError('missing')",
        "%torchrun_stop",
        "%%ranks\npass",
        "%torchrun_restart",
        "%%ranks --quiet\nfrom labkit import rank\nrank.report(has_w='w' in globals())",
        "import labkit.launch.magic\nprint(_.values, labkit.launch.magic.current().start_run.run_id)",
    ]  # the session is left running: it must end with the kernel
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=True).execute()

    def text(i: int) -> str:
        parts = []
        for out in nb.cells[i].outputs:
            if out.output_type == "stream":
                parts.append(out.text)
            elif "data" in out and "text/plain" in out.data:
                parts.append(out.data["text/plain"])
            elif out.output_type == "error":
                parts.append(out.ename + ": " + out.evalue + "\n" + "\n".join(out.traceback))
        return "\n".join(parts)

    assert "2 warm ranks (gloo) ready" in text(1)
    # a cell over within the dashboard's SHOW_AFTER: its end as one output, the dashboard's HTML,
    # the summary for text readers, the run's record; a longer one: the live dashboard of %%torchrun
    (out,) = [out for out in nb.cells[2].outputs if "data" in out]
    assert "<div class='labkit-dashboard'>" in out.data["text/html"] and "made 1" in out.data["text/html"]
    assert "all ranks finished" in out.data["text/plain"] and "application/vnd.labkit.run+json" in out.data
    kinds = {mime for out in nb.cells[4].outputs for mime in out.get("data", {})}
    assert "application/vnd.jupyter.widget-view+json" in kinds, "the same live dashboard as %%torchrun"
    assert "all ranks finished" in text(4)
    assert text(5).strip() == "{0: {'total': 0.0}, 1: {'total': 2.0}} True used w"
    assert "RankError" in text(6) and "rank 1 failed (cell line 3): KeyError: 'missing'" in text(6)
    assert "stopped" in text(7)
    assert "SessionEnded" in text(8) and "not running" in text(8)
    assert "ready" in text(9)
    values, run_id = text(11).strip().rsplit(" ", 1)
    assert values == "{0: {'has_w': False}, 1: {'has_w': False}}"
    assert left(run_id) == [], "the warm ranks ended with their kernel"
