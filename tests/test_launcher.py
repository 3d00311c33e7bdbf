"""The launcher against the fault matrix (shared/reliability.md §8), on CPU/gloo.

Each test runs real torchrun ranks; the ``no_leaks`` fixture then checks that no
rank process, listening socket or file descriptor is left behind.
"""

from __future__ import annotations

import glob
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import pytest

import labkit
from labkit.testing.processes import leftover_ranks, our_rank_processes
from labkit.wire.errors import OptionError, RankError, RunTimeout

pytestmark = pytest.mark.usefixtures("no_leaks")

ALLREDUCE = """
import torch, torch.distributed as dist
from labkit import rank
x = torch.ones(1) * (rank.rank() + 1)
dist.all_reduce(x)
rank.report(total=x.item(), world=dist.get_world_size())
"""


def run(code: str, **kw):
    kw.setdefault("nproc", 2)
    kw.setdefault("backend", "gloo")
    kw.setdefault("display", "none")
    return labkit.torchrun(textwrap.dedent(code), **kw)


@pytest.mark.slow
@pytest.mark.parametrize("nproc", [2, 4])
def test_values_come_back_from_every_rank(nproc):
    r = run(ALLREDUCE, nproc=nproc)
    expected = nproc * (nproc + 1) / 2
    assert r.ok and r.exit_codes == {i: 0 for i in range(nproc)}
    assert r.values == {i: {"total": expected, "world": nproc} for i in range(nproc)}
    assert labkit.last_run is r
    assert all(r.memory[i] for i in range(nproc)), "memory is sampled without being asked"


@pytest.mark.slow
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_both_ways_of_starting_ranks(method, monkeypatch):
    """fork (the default on Linux): ranks are copies of torchrun's agent, each in a process group
    of its own; spawn: a fresh interpreter per rank, as plain torchrun starts a script."""
    monkeypatch.setenv("LABKIT_START_METHOD", method)
    probe = "import multiprocessing, os\nrank.report(own_group=os.getpgid(0) == os.getpid(), "
    probe += "forked=multiprocessing.parent_process() is not None)"
    r = run(ALLREDUCE + probe, nproc=3)
    assert r.ok and [r.values[i]["total"] for i in range(3)] == [6.0] * 3
    assert all(r.values[i]["own_group"] for i in range(3)), "the lifeline kills this rank's group only"
    assert [r.values[i]["forked"] for i in range(3)] == [method == "fork"] * 3


def test_an_unknown_start_method_is_refused_before_spawning(monkeypatch):
    monkeypatch.setenv("LABKIT_START_METHOD", "forkserver")
    with pytest.raises(OptionError, match="LABKIT_START_METHOD must be fork or spawn"):
        run("pass")


@pytest.mark.slow
def test_steps_timed_and_logs_kept_per_rank():
    r = run(
        """
        import time
        from labkit import rank
        for i in rank.steps(3):
            time.sleep(0.05)
            print(f"rank {rank.rank()} step {i}")
        """
    )
    for i in range(2):
        assert len(r.step_times[i]) == 3 and all(0.04 < dt < 2 for dt in r.step_times[i])
        assert r.logs[i].stdout.splitlines() == [f"rank {i} step {s}" for s in range(3)]
    assert r.wall_time > 0.15
    # torchrun's own files (the ranks' error files) are in the run folder, pruned with it: not in a
    # /tmp/torchelastic_* folder of their own that nothing removes (one was left per cold cell)
    assert glob.glob(os.path.join(r.run_dir, "torchelastic", f"{r.run_id}_*"))
    assert not glob.glob(os.path.join(tempfile.gettempdir(), "torchelastic_*", f"{r.run_id}_*"))


@pytest.mark.slow
def test_cell_that_inits_its_own_process_group():
    r = run(
        """
        import torch.distributed as dist
        dist.init_process_group("gloo")
        from labkit import rank
        rank.report(init_by_cell=dist.is_initialized())
        dist.destroy_process_group()
        """
    )
    assert r.ok and r.values[1] == {"init_by_cell": True}


@pytest.mark.slow
def test_function_target_and_vars_shipped_by_value():
    scale = 10

    def work(offset):
        import torch.distributed as dist

        from labkit.ranks import rank

        return {"r": rank.rank() * scale + offset, "world": dist.get_world_size()}

    r = labkit.torchrun(work, nproc=2, backend="gloo", display="none", args=(1,))
    assert r.results == {0: {"r": 1, "world": 2}, 1: {"r": 11, "world": 2}}

    r = run("from labkit import rank\nrank.report(v=data['k'] * 2)", vars={"data": {"k": 21}})
    assert r.values[0] == {"v": 42}


# -- faults in a rank ---------------------------------------------------------


@pytest.mark.slow
def test_sys_exit_code():  # F2
    with pytest.raises(RankError, match="rank 1 exited with code 3"):
        run("import sys\nfrom labkit import rank\nif rank.rank() == 1: sys.exit(3)\nimport time; time.sleep(30)")


@pytest.mark.slow
def test_early_clean_exit_is_the_root_cause():  # F3
    with pytest.raises(RankError) as info:
        run(
            """
            import torch, torch.distributed as dist
            from labkit import rank
            if rank.rank() == 1:
                raise SystemExit(0)
            import time; time.sleep(0.5)
            dist.all_reduce(torch.ones(1))
            """,
            env={"LABKIT_PG_TIMEOUT": "15"},
        )
    assert info.value.rank == 1
    assert "rank 1 finished early" in str(info.value)


@pytest.mark.slow
def test_the_same_error_on_every_rank_is_not_blamed_on_the_first():
    with pytest.raises(RankError) as info:
        run("from labkit import rank\nraise ValueError(f'bad input on rank {rank.rank()}')", nproc=3)
    text = str(info.value)
    # The other ranks that reached the raise failed the same way; one that torchrun stopped before it
    # got there (a rank forked later than the others) is told as stopped, not as failed.
    ranks = info.value.run.ranks
    same = sorted(r for r, s in ranks.items() if s.error and r != info.value.rank)
    assert same, text
    assert all(ranks[r].status == "stopped" for r in set(ranks) - set(same) - {info.value.rank}), text
    said = f"ranks {', '.join(map(str, same))}" if len(same) > 1 else f"rank {same[0]}"
    assert "ValueError" in text and f"{said} failed the same way" in text
    assert "because of it" not in text


@pytest.mark.slow
def test_a_cell_that_returns_at_once_does_not_race_the_slower_ranks_init():
    # rank 0 would otherwise be done and gone while rank 3 is still joining the group
    for _ in range(2):
        r = run("x = 1", nproc=4)
        assert r.ok, r.error


@pytest.mark.slow
def test_rank_killed_by_sigsegv():  # F6 (SIGKILL, F4: test_fault_ends_in_bounded_time)
    with pytest.raises(RankError) as info:
        run("import os, time\nfrom labkit import rank\nif rank.rank() == 1: os.kill(os.getpid(), 11)\ntime.sleep(30)")
    err = info.value
    assert err.rank == 1 and err.signal == "SIGSEGV" and err.exit_code == -11
    assert "rank 1 was killed by SIGSEGV" in str(err) and "faulthandler" in str(err)


@pytest.mark.slow
def test_grandchildren_are_swept():  # F16
    with pytest.raises(RankError):
        run(
            """
            import subprocess, time
            from labkit import rank
            subprocess.Popen(["sleep", "1000"], start_new_session=True)
            time.sleep(0.5)
            if rank.rank() == 1:
                raise RuntimeError("fail with a child alive")
            time.sleep(30)
            """
        )


@pytest.mark.slow
def test_import_error_on_workers():  # F28
    with pytest.raises(RankError, match="ModuleNotFoundError"):
        run("import labkit_no_such_module")


@pytest.mark.slow
def test_output_flood_and_bad_bytes():  # F29, F30
    r = run(
        """
        import os, sys
        from labkit import rank
        if rank.rank() == 0:
            for i in range(0, 1_000_000, 100_000):
                sys.stdout.write("".join(f"line {j}\\n" for j in range(i, i + 100_000)))
        else:
            os.write(1, b"\\xff\\xfe\\x80\\x1b[2J<script>x</script>\\n")
            sys.stdout.write("x" * 3_000_000)
        """,
        timeout=120,
    )
    log0 = r.logs[0]
    assert log0.streams["stdout"][-1] == "line 999999"
    assert "earlier lines not shown" in log0.stdout and log0.stdout_path in log0.stdout
    assert log0.read_all().count("\n") == 1_000_000, "the whole log is on disk"
    first = r.logs[1].streams["stdout"][0]
    assert "\ufffd" in first and "\x1b" not in first


# -- the same faults, cold (a %%torchrun cell) and warm (a %%ranks cell) -----------------

FAULT_CELLS = {  # rank 1 misbehaves in step 2 while rank 0 goes on to the next collective
    "raise": "if rank.rank() == 1 and i == 2:\n        raise ValueError('boom')",
    "kill": "if rank.rank() == 1 and i == 2:\n        os.kill(os.getpid(), 9)",
    "hang": "if rank.rank() == 1 and i == 2:\n        time.sleep(1000)",
}
FAULT_CODE = """import os, time, torch, torch.distributed as dist
from labkit import rank
print("before the collective", flush=True)
for i in rank.steps(4):
    {fault}
    dist.all_reduce(torch.ones(1))
"""
HANG_TIMEOUT = {"cold": 8.0, "warm": 4.0}  # a cold run's timeout counts torchrun's start too


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["raise", "kill", "hang"])
@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_fault_ends_in_bounded_time(mode, fault):  # F1, F4, F7
    """The error names rank 1 and the cause, in bounded time, and nothing is left (``no_leaks``)."""
    from labkit.launch.warm import CUT_WAIT, ERROR_GRACE, INTERRUPT_WAIT, Session

    code = FAULT_CODE.format(fault=FAULT_CELLS[fault])
    timeout = HANG_TIMEOUT[mode] if fault == "hang" else 60
    session = Session(nproc=2, backend="gloo", display="none", pg_timeout=30) if mode == "warm" else None
    t0 = time.time()
    with pytest.raises(RunTimeout if fault == "hang" else RankError) as info:
        if session is None:
            run(code, timeout=timeout)
        else:
            session.run(code, timeout=timeout)
    elapsed = time.time() - t0
    err, text = info.value, str(info.value)
    if fault == "raise":
        assert err.rank == 1 and "rank 1 failed at step 2 (cell line 6): ValueError: boom" in text
        assert 'File "<cell' in err.traceback and "raise ValueError('boom')" in err.traceback
    elif fault == "kill":
        assert err.rank == 1 and err.signal == "SIGKILL" and err.exit_code == -9, text
        assert "rank 1 was killed by SIGKILL" in text and "out of memory" in text
    else:
        assert set(err.alive) == {0, 1} and "before the collective" in text
        assert "cell line 6: time.sleep(1000)" in text, "where the hung rank is"
    assert err.run.ranks[0].status != "done"
    # cold: torchrun's stop and our grace; warm: the error grace, the interrupt and the cut
    budget = 5 + 3 + (ERROR_GRACE + INTERRUPT_WAIT + CUT_WAIT if mode == "warm" else 0)
    budget += HANG_TIMEOUT[mode] if fault == "hang" else 0
    assert elapsed < budget + 10, f"{elapsed:.1f} s"  # + 10: a launch on a loaded 2-core machine
    if session is not None:
        if fault == "kill":  # a dead rank ends the session
            assert "session has ended" in text and not session.alive
        else:  # the others were interrupted: the session lives on, marked unsafe
            assert "restart" in text and session.alive and session.unsafe
            assert session.run("rank.report(after=rank.rank())").values == {0: {"after": 0}, 1: {"after": 1}}
        session.stop()


# -- bad options: an error before anything is spawned ---------------------------


@pytest.mark.parametrize("nproc", [0, -1, "two", 10_000])
def test_bad_nproc(nproc):  # F23
    with pytest.raises(OptionError):
        run(ALLREDUCE, nproc=nproc)


def test_unknown_backend_suggests():
    with pytest.raises(OptionError, match="did you mean 'gloo'"):
        run(ALLREDUCE, backend="glo")


def test_nccl_without_gpus():  # F24
    with pytest.raises(OptionError, match="gloo"):
        run(ALLREDUCE, backend="nccl")


def test_syntax_error_before_spawn():  # F26
    with pytest.raises(SyntaxError) as info:
        run("x = 1\nif x == 1\n    pass")
    assert info.value.lineno == 2


def test_unpicklable_var_named():  # F27
    with pytest.raises(OptionError, match="'lock'"):
        run("pass", vars={"lock": threading.Lock()})


# -- the kernel side: interrupt, death of the kernel or agent, concurrency ------------

KERNEL_STAND_IN = """
import sys, labkit
labkit.torchrun({code!r}, nproc=2, backend="gloo", display="none")
"""
SLEEPER = "import time\nfrom labkit import rank\nprint('up', flush=True)\ntime.sleep(1000)"


def start_stand_in(tmp_path, code=SLEEPER):
    """A 'kernel': a process in its own session that launches a run, like jupyter_client does."""
    script = tmp_path / "kernel.py"
    script.write_text(KERNEL_STAND_IN.format(code=code))
    proc = subprocess.Popen(
        [sys.executable, str(script)], start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    deadline = time.time() + 60

    while time.time() < deadline and len(our_rank_processes()) < 3:  # agent + 2 ranks
        time.sleep(0.2)
    time.sleep(1.0)  # the ranks are connected and sleeping
    return proc


@pytest.mark.slow
def test_interrupt_stops_every_rank_quickly(tmp_path):  # F11, F12
    proc = start_stand_in(tmp_path)
    t0 = time.time()
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)  # a second Ctrl-C must not abandon the cleanup
    out, _ = proc.communicate(timeout=20)

    assert leftover_ranks(5.0 - (time.time() - t0) + 1) == []
    assert b"interrupted" in out or b"KeyboardInterrupt" in out


@pytest.mark.slow
@pytest.mark.parametrize("how", ["restart", "kill"])
def test_kernel_death_takes_the_ranks_along(tmp_path, how):  # F13
    proc = start_stand_in(tmp_path)
    if how == "restart":  # jupyter_client: SIGTERM, then SIGKILL after a wait
        os.killpg(proc.pid, signal.SIGTERM)
        time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)

    assert leftover_ranks(10.0) == []


@pytest.mark.slow
def test_agent_killed_directly():  # F14
    def kill_agent_soon():
        time.sleep(4)
        for pid in our_rank_processes():  # the agent is the one we started; the ranks are its children
            with open(f"/proc/{pid}/stat", "rb") as f:
                if int(f.read().rsplit(b")", 1)[1].split()[1]) == os.getpid():
                    os.kill(pid, signal.SIGKILL)

    threading.Thread(target=kill_agent_soon, daemon=True).start()
    with pytest.raises(labkit.RunError):
        run(SLEEPER, timeout=60)


@pytest.mark.slow
def test_two_runs_at_once_do_not_mix():  # F19
    results = {}

    def go(tag):
        results[tag] = run(f"from labkit import rank\nrank.report(tag={tag!r})")

    threads = [threading.Thread(target=go, args=(tag,)) for tag in ("a", "b")]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert results["a"].values[0] == {"tag": "a"} and results["b"].values[1] == {"tag": "b"}  # F42 too
    assert results["a"].run_dir != results["b"].run_dir


@pytest.mark.slow
def test_foreign_clients_are_rejected_and_token_not_on_argv():  # F20, F21
    found = {}

    def intrude():
        deadline = time.time() + 30
        while time.time() < deadline and not found:
            for pid in our_rank_processes():
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = dict(x.split(b"=", 1) for x in f.read().split(b"\0") if b"=" in x)
                path = env.get(b"LABKIT_SOCKET")
                if path:
                    found["mode"] = oct(os.stat(os.path.dirname(path)).st_mode & 0o777)
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        found["argv"] = f.read()
                    for payload in (
                        b'{"t":"hello","token":"wrong","rank":0}\n',
                        b"\xff" * 100 + b"\n",
                        b"9" * 5_000_000,
                    ):
                        s = socket.socket(socket.AF_UNIX)
                        s.connect(path.decode())
                        try:
                            s.sendall(payload)
                        except OSError:
                            pass
                        s.close()
                    return
            time.sleep(0.1)

    th = threading.Thread(target=intrude)
    th.start()
    r = run("import time\nfrom labkit import rank\ntime.sleep(3)\nrank.report(ok=1)")
    th.join()
    assert r.ok and r.values[0] == {"ok": 1} and r.values[1] == {"ok": 1}
    assert found["mode"] == "0o700"
    assert len(r.rejected_clients) == 3
    assert b"LABKIT_TOKEN" not in found["argv"]


@pytest.mark.slow
def test_leak_soak_sequential_runs():  # F41 (short)
    fds = len(os.listdir("/proc/self/fd"))
    threads = threading.active_count()
    for i in range(4):
        if i % 2:
            with pytest.raises(RankError):
                run("raise RuntimeError('x')")
        else:
            run(ALLREDUCE)
    assert len(os.listdir("/proc/self/fd")) <= fds + 1
    assert threading.active_count() <= threads


@pytest.mark.slow
def test_rank_that_ignores_sigterm_is_killed():  # F15
    t0 = time.time()
    with pytest.raises(RankError) as info:
        run(
            """
            import signal, time
            from labkit import rank
            if rank.rank() == 1:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                time.sleep(1000)
            time.sleep(1)
            raise RuntimeError("rank 0 fails first")
            """
        )
    assert info.value.rank == 0
    assert time.time() - t0 < 30


@pytest.mark.slow
def test_busy_default_port_and_long_temp_path(monkeypatch, tmp_path):  # F18, F22
    import tempfile

    long_dir = tmp_path / ("x" * 150)
    long_dir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long_dir))
    with socket.socket() as busy:
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            busy.bind(("127.0.0.1", 29500))
            busy.listen(1)
        except OSError:
            pass  # taken already: the point stands
        r = run(ALLREDUCE)
    assert r.ok and len(r.run_dir) < 80


@pytest.mark.slow
def test_tensors_are_read_between_steps_only_while_the_cell_churns_them():
    # reading a tensor's storage from the sampler's thread while the main thread swapped it
    # crashed ranks with SIGSEGV (FSDP does this every step); now the thread reads counters only
    code = """
    import torch
    from labkit import rank
    m = torch.nn.Linear(128, 128)
    for i in rank.steps(3):
        for _ in range(3000):
            m.weight.grad = torch.ones_like(m.weight)
            m.weight.grad = None
            m.weight.data = torch.empty(128, 128)
    """
    r = run(code, sample_interval=0.002)
    assert r.ok, r.error
    for i in range(2):
        with_tensors = [s for s in r.memory[i] if "tensor_bytes" in s]
        assert len(with_tensors) == 4, "one after each of the 3 steps, one at the end"
        assert len(r.memory[i]) > len(with_tensors), "RSS sampled in between"
        assert r.memory_now(i) == with_tensors[-1]["tensor_bytes"]


ERROR_FILES_PROBE = r"""
import sys, tempfile
tempfile.tempdir = sys.argv[1]
from torch.multiprocessing import start_processes
from labkit.launch.agent import leave_no_error_files

def fail(i):
    raise ValueError(f"rank {i}'s traceback")

leave_no_error_files()
try:
    start_processes(fail, nprocs=2, start_method="fork")  # joins until a rank's error is raised
except Exception as exc:
    print("raised", type(exc).__name__, "rank 0's traceback" in str(exc) or "rank 1's traceback" in str(exc))
"""


def test_a_raising_rank_leaves_no_traceback_file_behind(tmp_path):
    """torch pickles each raising rank's traceback into the temporary folder and never removes it."""
    proc = subprocess.run(
        [sys.executable, "-c", ERROR_FILES_PROBE, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert "raised ProcessRaisedException True" in proc.stdout, proc.stderr
    assert list(tmp_path.iterdir()) == []


STOPPED_PROBE = r"""
import os, signal, sys, tempfile, time
tempfile.tempdir = sys.argv[1]
from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, start_processes
from torch.distributed.elastic.multiprocessing.api import _terminate_process_handler
from labkit.launch.agent import leave_no_error_files

def sleeper():
    time.sleep(60)

leave_no_error_files()
signal.signal(signal.SIGTERM, _terminate_process_handler)  # torchrun's agent's handler; its ranks inherit it
logs = DefaultLogsSpecs(log_dir=os.path.join(sys.argv[1], "logs"))
ctx = start_processes(name="probe", entrypoint=sleeper, args={0: (), 1: ()}, envs={0: {}, 1: {}},
                      logs_specs=logs, start_method="fork")
time.sleep(2)
ctx.close()  # as the agent stops its ranks: each raises in the handler and pickles its traceback
print("left:", sorted(f for f in os.listdir(sys.argv[1]) if f != "logs"))
"""


def test_ranks_the_agent_stops_leave_no_traceback_file_behind(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", STOPPED_PROBE, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert "left: []" in proc.stdout, proc.stdout + proc.stderr
