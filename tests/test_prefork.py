"""The pre-forked server (labkit.launch.prefork, labkit.launch.forkserver): cold cells fork their
torchrun agent from a process that imported torch already, and fall back to a new interpreter,
saying so once, when that process is gone or stale.

The fault tests of test_launcher, test_warm, test_magic_kernel and test_cuda_init run on the
prefork path by default and on the fallback path with ``LABKIT_PREFORK=0``; the tests here check
what is particular to the server, and a few faults on both paths.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import labkit
from labkit.launch import forkserver, prefork
from labkit.testing.processes import leftover_ranks, with_env
from labkit.wire.errors import RankError
from labkit.wire.prefork import ForkReady, ForkReply, ForkRequest, ImportedFile
from labkit.wire.record import RecordError

ROOT = Path(__file__).resolve().parents[1]
# the rank's parent is torchrun's agent: forked from the server, it still has the server's command line
WHO_STARTED = "import os\nfrom labkit import rank\nrank.report(agent=open(f'/proc/{os.getppid()}/cmdline').read())"


def agent_kind(run: labkit.Run) -> str:
    cmd = run.values[0]["agent"]
    return "forked" if "labkit.launch.forkserver" in cmd else "new" if "labkit.launch.agent" in cmd else cmd


def cold(code: str, **kw) -> labkit.Run:
    kw.setdefault("nproc", 2)
    return labkit.torchrun(textwrap.dedent(code), backend="gloo", display="none", **kw)


@pytest.fixture
def fresh_server(monkeypatch):
    """A server of this test's own, started now, and the notes said afresh."""
    monkeypatch.delenv(prefork.SWITCH, raising=False)
    prefork.stop()
    monkeypatch.setattr(prefork, "_said", set())
    monkeypatch.setattr(prefork, "_failed", False)
    server = prefork.start()
    assert server is not None and server.wait_ready(prefork.READY_WAIT), server and server.why_dead()
    yield server
    prefork.stop()


# -- no launch ---------------------------------------------------------------------------------


def test_the_switch(monkeypatch):
    monkeypatch.setenv(prefork.SWITCH, "0")
    assert not prefork.enabled() and prefork.start() is None
    monkeypatch.setenv(prefork.SWITCH, "1")
    assert prefork.enabled() == sys.platform.startswith("linux")


def test_variables_torch_reads_at_import_need_a_fresh_torchrun():
    cell = {"TORCH_CPP_LOG_LEVEL": "INFO", "LOGLEVEL": "INFO", "STEPS": "3", "OMP_NUM_THREADS": "1"}
    cell |= {"TORCH_DISTRIBUTED_DEBUG": "DETAIL", "NCCL_DEBUG": "INFO", "LABKIT_PG_TIMEOUT": "9"}
    assert sorted(prefork.import_time_names(cell)) == ["LOGLEVEL", "TORCH_CPP_LOG_LEVEL"]


def test_what_changed_names_the_difference(monkeypatch):
    before = prefork.fingerprint()
    monkeypatch.setenv("LABKIT_START_METHOD", "spawn")  # labkit's own: read per run, not at import
    assert prefork.what_changed(before, prefork.fingerprint()) is None
    monkeypatch.setenv("SOME_LIBRARY_FLAG", "1")
    assert prefork.what_changed(before, prefork.fingerprint()) == "the environment variable SOME_LIBRARY_FLAG"
    monkeypatch.delenv("SOME_LIBRARY_FLAG")
    monkeypatch.chdir("/")
    assert prefork.what_changed(before, prefork.fingerprint()) == "the working folder"


def test_changed_files(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("x = 1\n")
    st = f.stat()
    files = [ImportedFile(str(f), st.st_size, st.st_mtime_ns)]
    assert not prefork.changed_files(files)
    f.write_text("x = 22\n")
    assert prefork.changed_files(files)
    assert prefork.changed_files([ImportedFile(str(tmp_path / "gone.py"), 1, 1)])


def test_the_server_and_the_kernel_speak_in_declared_records():
    """Each line between them is a record of its kind: read back equal, and a bad one answered with
    the field named (the kernel then waits for that id's answer, not for its timeout)."""
    ready = ForkReady(ready=True, pid=7, threads=1, files=[ImportedFile("/x.py", 3, 4)])
    assert ForkReady.from_json(ready.to_json()) == ready and ready.to_dict()["kind"] == "prefork_ready"
    request = ForkRequest(3, ["--nnodes=1"], {"PATH": "/bin"}, "/tmp", 0o22, "/tmp/agent.log")
    assert ForkRequest.from_json(request.to_json()) == request
    ours, theirs = socket.socketpair()
    with ours, theirs:
        bad = {**request.to_dict(), "argv": "--nnodes=1"}
        forkserver.serve(theirs, json.dumps(bad).encode())
        forkserver.serve(theirs, b"not json")
        answers = [ForkReply.from_json(line) for line in ours.recv(65536).splitlines()]
    assert answers[0].id == 3 and answers[0].pid is None
    assert "prefork_request.argv: expected a list, got str" in str(answers[0].error)
    assert answers[1].id is None and "not JSON" in str(answers[1].error)
    with pytest.raises(RecordError, match="prefork_reply.pid: expected int, got str"):
        ForkReply.from_json('{"id": 1, "pid": "12"}')


def test_the_run_environment_goes_where_proc_shows_it():
    """The forked agent's environment in /proc/PID/environ, where the leftover sweep looks:
    labkit's variables first, then what fits in whole entries; all of it in os.environ."""
    code = """
        import json, os
        from labkit.launch import forkserver
        env = {"PATH": os.environ["PATH"], "LABKIT_RUN_ID": "run-test-1", "LABKIT_SOCKET": "/s"}
        env |= {f"FILLER_{i}": "y" * 100 for i in range(40)}
        forkserver.set_environ(env)
        shown = [e.decode() for e in open("/proc/self/environ", "rb").read().split(b"\\0") if e]
        print(json.dumps({"shown": shown, "environ": dict(os.environ), "libc": os.popen("echo $FILLER_39").read()}))
    """
    room = {forkserver.ROOM_VAR: "x" * 2000}
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), **room}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["shown"][:2] == ["LABKIT_RUN_ID=run-test-1", "LABKIT_SOCKET=/s"]
    assert 10 < len(got["shown"]) < 43, "as many whole entries as fit, no more"
    assert all(e.split("=", 1)[0] in got["environ"] for e in got["shown"])
    assert len(got["environ"]) == 43 and got["libc"].strip() == "y" * 100  # libc's copy has them all


def test_an_adopted_child_is_waited_like_a_popen():
    pid = os.fork()
    if pid == 0:
        time.sleep(0.3)
        os._exit(3)
    agent = prefork.AgentProcess(pid)
    assert agent.adopted() and agent.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        agent.wait(0.05)
    assert agent.wait(5) == 3 and agent.returncode == 3
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    os.kill(pid, signal.SIGKILL)
    assert prefork.AgentProcess(pid).wait(5) == -signal.SIGKILL


class DeadOnArrival:
    """A server that ended before it was ready (torch would not import), or came up with threads."""

    def __init__(self, error: str | None, threads: int = 0) -> None:
        self.owner, self.ready, self.files, self.threads = os.getpid(), False, [], threads
        self.origin, self.error, self.closed = prefork.fingerprint(), error, False

    def wait_ready(self, seconds: float) -> bool:
        return False

    def alive(self) -> bool:
        return self.threads > 1

    def why_dead(self) -> str:
        return self.error or f"{self.threads} threads"

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("server", [DeadOnArrival("ImportError: no torch here"), DeadOnArrival(None, threads=3)])
def test_a_server_that_cannot_serve_is_given_up_once(server, monkeypatch, capsys):
    monkeypatch.delenv(prefork.SWITCH, raising=False)
    monkeypatch.setattr(prefork, "_said", set())
    monkeypatch.setattr(prefork, "_failed", False)
    monkeypatch.setattr(prefork, "_server", None)
    started = []
    monkeypatch.setattr(prefork, "_start_server", lambda: started.append(1) or server)
    for _ in range(3):
        assert prefork.spawn_agent(["--nnodes=1"], {}, "/dev/null", {}) is None
    assert started == [1] and server.closed, "tried once, not again for every cell"
    err = capsys.readouterr().err
    assert err.count("torch could not be imported ahead of time") == 1 and server.why_dead() in err
    assert prefork.start() is None


# -- with ranks -----------------------------------------------------------------------------


@pytest.mark.slow
def test_the_agent_is_forked_from_the_server_and_is_the_kernels_child(fresh_server, no_leaks):
    assert fresh_server.threads == 1, "nothing in the server started a thread"
    run = cold(WHO_STARTED)
    assert agent_kind(run) == "forked"
    run = cold(
        WHO_STARTED
        + "\nrank.report(ppid_of_agent=int(open(f'/proc/{os.getppid()}/stat').read().rsplit(')', 1)[1].split()[1]))"
    )
    assert run.values[0]["ppid_of_agent"] == os.getpid(), "adopted by the kernel, as a Popen child is"


@pytest.mark.slow
def test_a_light_server_forks_ranks_without_fsdp_which_a_rank_can_still_import(monkeypatch, no_leaks):
    """The grader's re-runs of exercises without FSDP: a server that imported no FSDP or dynamo (a
    second of its start), whose ranks import FSDP themselves where they use it."""
    monkeypatch.delenv(prefork.SWITCH, raising=False)
    monkeypatch.setattr(prefork, "light", True)
    prefork.stop()
    try:
        code = WHO_STARTED + textwrap.dedent("""
            import sys
            inherited = "torch.distributed.fsdp" in sys.modules
            from torch.distributed.fsdp import FullyShardedDataParallel
            rank.report(inherited=inherited, torch="torch" in sys.modules)
        """)
        run = cold(code)
        assert agent_kind(run) == "forked" and "light" in run.values[0]["agent"]
        assert [run.values[r]["inherited"] for r in (0, 1)] == [False, False] and run.values[0]["torch"]
    finally:
        prefork.stop()


@pytest.mark.slow
def test_a_gloo_launch_imports_no_torch_where_it_is_launched(no_leaks):
    """A kernel (or the grader's judge) that starts gloo ranks imports no torch itself: neither to count
    GPUs it does not use nor to find the ranks' entry file (1.3 s of CPU a launch, on the judge's path)."""
    code = "import sys, labkit\nlabkit.torchrun('x = 1', nproc=2, backend='gloo', display='none')\nprint('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.slow
def test_without_the_switch_torchrun_starts_as_a_new_interpreter(monkeypatch, no_leaks):
    monkeypatch.setenv(prefork.SWITCH, "0")
    assert agent_kind(cold(WHO_STARTED)) == "new"


@pytest.mark.slow
def test_a_changed_environment_falls_back_once_then_a_fresh_server_serves(fresh_server, monkeypatch, capfd, no_leaks):
    monkeypatch.setenv("SOME_LIBRARY_FLAG", "1")
    assert agent_kind(cold(WHO_STARTED)) == "new"
    err = capfd.readouterr().err
    assert "SOME_LIBRARY_FLAG changed since torch was imported ahead of time" in err
    assert not fresh_server.alive() or fresh_server.proc.wait(5) is not None, "the stale server was ended"
    assert agent_kind(cold(WHO_STARTED)) == "forked", "the next cell forks from the fresh server"
    monkeypatch.setenv("SOME_LIBRARY_FLAG", "2")
    assert agent_kind(cold(WHO_STARTED)) == "new"
    assert "changed since" not in capfd.readouterr().err, "said once"


@pytest.mark.slow
def test_a_dead_server_falls_back_once_then_a_fresh_server_serves(fresh_server, capfd, no_leaks):
    assert agent_kind(cold(WHO_STARTED)) == "forked"
    fresh_server.proc.kill()
    fresh_server.proc.wait(5)
    assert agent_kind(cold(WHO_STARTED)) == "new"
    assert "the process with torch imported ahead of time ended (exit code -9)" in capfd.readouterr().err
    assert agent_kind(cold(WHO_STARTED)) == "forked"


@pytest.mark.slow
def test_an_import_time_variable_in_env_starts_torchrun_anew(fresh_server, capfd, no_leaks):
    run = cold(
        WHO_STARTED + "\nrank.report(level=os.environ['TORCH_CPP_LOG_LEVEL'])", env={"TORCH_CPP_LOG_LEVEL": "ERROR"}
    )
    assert agent_kind(run) == "new" and run.values[1]["level"] == "ERROR"
    assert "--env TORCH_CPP_LOG_LEVEL is read by torch when it is imported" in capfd.readouterr().err
    run = cold(WHO_STARTED + "\nimport torch\nrank.report(n=torch.get_num_threads())", env={"OMP_NUM_THREADS": "1"})
    assert agent_kind(run) == "forked" and run.values[0]["n"] == 1, "read again in the forked agent"


@pytest.mark.slow
@pytest.mark.parametrize("switch", ["1", "0"])
def test_a_failing_rank_is_diagnosed_the_same_on_both_paths(switch, monkeypatch, no_leaks):  # F1, F2
    monkeypatch.setenv(prefork.SWITCH, switch)
    with pytest.raises(RankError) as info:
        cold("import sys\nfrom labkit import rank\nif rank.rank() == 1: sys.exit(3)\nimport time; time.sleep(30)")
    assert info.value.rank == 1 and "rank 1 exited with code 3" in str(info.value)


STAND_IN = """
import sys, labkit
from labkit.launch import prefork
if {start!r}:
    prefork.start()                # as %load_ext labkit does
labkit.torchrun({code!r}, nproc=2, backend="gloo", display="none")
"""
SLEEPER = "import time\nfrom labkit import rank\nprint('up', flush=True)\ntime.sleep(1000)"


def stand_in(tmp_path, start: bool = True) -> subprocess.Popen:
    """A 'kernel' in its own session that runs a cell, as jupyter_client starts one."""
    script = tmp_path / "kernel.py"
    script.write_text(STAND_IN.format(code=SLEEPER, start=start))
    proc = subprocess.Popen([sys.executable, str(script)], start_new_session=True, stdout=subprocess.DEVNULL)
    deadline = time.time() + 90
    while time.time() < deadline and len(leftover_ranks(0)) < 3:  # the agent and 2 ranks
        time.sleep(0.2)
    assert len(leftover_ranks(0)) >= 3, "the cell's ranks started"
    return proc


@pytest.mark.slow
@pytest.mark.parametrize("how", ["restart", "kill -9 of the kernel alone"])
def test_the_server_dies_with_its_kernel(tmp_path, how, no_orphans):  # F13, the server's part
    proc = stand_in(tmp_path)
    servers = with_env(forkserver.OWNER_VAR, str(proc.pid))
    assert len(servers) == 1, "one server per kernel"
    if how == "restart":  # jupyter_client: SIGTERM to the group, then SIGKILL
        os.killpg(proc.pid, signal.SIGTERM)
        time.sleep(1.0)
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.time() + 10
    while with_env(forkserver.OWNER_VAR, str(proc.pid)) and time.time() < deadline:
        time.sleep(0.1)
    assert with_env(forkserver.OWNER_VAR, str(proc.pid)) == [], "the server outlived its kernel"
    assert leftover_ranks(10.0) == []


@pytest.mark.slow
@pytest.mark.parametrize("switch", ["1", "0"])
def test_an_interrupt_stops_every_rank_on_both_paths(tmp_path, switch, monkeypatch, no_orphans):  # F11
    monkeypatch.setenv(prefork.SWITCH, switch)
    proc = stand_in(tmp_path, start=False)
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=30)
    assert leftover_ranks(6.0) == []
    deadline = time.time() + 10  # the kernel's Ctrl-C is not the server's: it ends when its kernel does
    while with_env(forkserver.OWNER_VAR, str(proc.pid)) and time.time() < deadline:
        time.sleep(0.1)
    assert with_env(forkserver.OWNER_VAR, str(proc.pid)) == []
