"""The launchers without launching: each implements the one interface and names its process, the group
picks one from the config, and the group's start and teardown call it the same way whichever it is."""

from __future__ import annotations

import inspect
import os
import signal
import sys

import pytest

from labkit.launch import launchers, prefork
from labkit.launch.group import Job, RankGroup
from labkit.launch.launchers import (
    EmulatedLauncher,
    Launcher,
    LocalLauncher,
    PreforkLauncher,
    SlurmLauncher,
    SshLauncher,
)
from labkit.launch.options import RunConfig, resolve


@pytest.fixture
def fake_srun(tmp_path, monkeypatch):
    """An ``srun`` and an ``ssh`` on PATH (never run here)."""
    for name in ("srun", "ssh"):
        (tmp_path / name).write_text("#!/bin/sh\nexit 1\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


def concrete() -> list[type[Launcher]]:
    """Every launcher class the module defines that can start a process."""
    found = [c for _, c in inspect.getmembers(launchers, inspect.isclass) if issubclass(c, Launcher)]
    return [c for c in found if not inspect.isabstract(c) and c.ENTRY]


def test_every_launcher_implements_the_interface_and_names_its_process():
    assert set(concrete()) == {PreforkLauncher, LocalLauncher, EmulatedLauncher, SlurmLauncher, SshLauncher}
    assert inspect.isabstract(Launcher), "a launcher must say how it starts its process"
    interface = [n for n, f in vars(Launcher).items() if callable(f) and not n.startswith("_")]
    assert {"start", "poll", "running", "wait", "signal", "cleanup", "close", "channel", "env", "command"} <= set(
        interface
    )
    for cls in concrete():
        assert "start" not in getattr(cls, "__abstractmethods__", ()), cls
        assert "labkit.launch.agent" in cls.ENTRY, f"{cls.__name__}.ENTRY names the agent it starts"
        assert cls.__doc__, cls


# one config per way of starting; the extra env is what picks prefork or not
CASES = [
    ({}, {}, PreforkLauncher, "python -m labkit.launch.agent"),
    ({}, {"LABKIT_PREFORK": "0"}, LocalLauncher, "python -m labkit.launch.agent"),
    ({"nnodes": 2, "slurm": True}, {}, SlurmLauncher, "srun"),
    ({"hosts": "a,b"}, {}, SshLauncher, "python -m labkit.launch.nodes fanout"),
]


@pytest.mark.parametrize("options, env, kind, head", CASES, ids=lambda c: getattr(c, "__name__", None))
def test_the_group_picks_the_launcher_from_the_config(fake_srun, monkeypatch, options, env, kind, head):
    if kind is PreforkLauncher and not prefork.enabled():
        pytest.skip("the prefork server needs Linux")
    monkeypatch.delenv("LABKIT_PREFORK", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    group = RankGroup(resolve(RunConfig(nproc=2, backend="gloo", **options)), Job.serve())
    assert type(group.launcher) is kind and group.nodes is group.launcher.nodes
    agent = group.command()
    assert agent[:3] == [sys.executable, "-m", "labkit.launch.agent"]
    command = " ".join(group.launcher.command(agent)).replace(sys.executable, "python")
    assert command.startswith(head)
    # what it starts is what ENTRY says (prefork: its command is the fallback's, a new interpreter)
    assert kind.ENTRY.startswith(head) or (kind is PreforkLauncher and "labkit.launch.forkserver" in kind.ENTRY)
    one_node = kind in (PreforkLauncher, LocalLauncher)
    assert ("--rdzv-endpoint=127.0.0.1:0" in agent) == one_node  # several nodes: each agent adds where to meet
    assert (group.nodes is None) == one_node and group.launcher.remote == (not one_node)
    assert group.launcher.prunes_first == (kind is not PreforkLauncher)  # else the server prunes


def test_emulated_nodes_get_the_netem_supervisor():
    # RunConfig as resolve() leaves it for --nodes 2 (resolve would probe for namespaces)
    group = RankGroup(RunConfig(nproc=2, backend="gloo", nodes=2, nnodes=2, link="100mbit"), Job.serve())
    launcher = group.launcher
    assert type(launcher) is EmulatedLauncher and group.nodes.local and not launcher.remote
    command = launcher.command(group.command())
    assert command[1:3] == ["-m", "labkit.launch.netem_run"] and command[command.index("--") + 1] == sys.executable
    env = launcher.env({"LABKIT_TOKEN": "t"}, "/run/ch.sock")
    assert env["LABKIT_NODES"] == "emulated" and env["LABKIT_SOCKET"] == "/run/ch.sock"
    assert launcher.agent_output("0: hello\n1: there\n") == "hello\nthere\n"  # the labels off, as srun's


def test_start_and_teardown_do_not_ask_which_launcher_it_is():
    for method in (RankGroup.start, RankGroup.end, RankGroup._teardown, RankGroup.supervise, RankGroup.here):
        source = inspect.getsource(method)
        for word in ("isinstance", "self.nodes", "prefork", "Popen", "Launcher"):
            assert word not in source, f"{method.__name__} mentions {word}"


class FakeAgent:
    """A process handle that runs until a signal it does not ignore ends it."""

    def __init__(self, ignores: set[int]) -> None:
        self.pid, self.returncode, self.ignores = -1, None, ignores

    def poll(self):
        return self.returncode


class FakeLauncher(LocalLauncher):
    """Records what the group asks of it; starts no process."""

    def __init__(self, cfg: RunConfig, run_id: str, ignores: set[int]) -> None:
        super().__init__(cfg, run_id)
        self.calls: list[tuple] = []
        self.ignores = ignores

    def runs_root(self) -> str:
        self.root = os.environ["FAKE_ROOT"]
        return self.root

    def start(self, command, env, log):
        self.calls.append(("start", command[:3] == [sys.executable, "-m", "labkit.launch.agent"], env["LABKIT_SOCKET"]))
        self.proc = FakeAgent(self.ignores)
        return self.proc

    def wait(self, seconds: float) -> None:
        self.calls.append(("wait", seconds))

    def signal(self, sig: int) -> None:
        self.calls.append(("signal", sig))
        if sig not in self.proc.ignores:
            self.proc.returncode = -sig

    def cleanup(self) -> None:
        self.calls.append(("cleanup",))

    def close(self) -> None:
        self.calls.append(("close",))


@pytest.mark.parametrize("stubborn", [False, True])
def test_the_teardown_order_is_the_launchers_whichever_it_is(tmp_path, monkeypatch, stubborn):
    """SIGTERM, a short wait, the grace period, SIGKILL only if it still runs, then cleanup, then the log closed."""
    monkeypatch.setenv("FAKE_ROOT", str(tmp_path))
    cfg = RunConfig(nproc=2, backend="gloo", grace=3.0)
    group = RankGroup(cfg, Job.serve())
    fake = group.launcher = FakeLauncher(cfg, group.run_id, {signal.SIGTERM} if stubborn else set())
    run = group.start()
    assert fake.calls == [("start", True, os.path.join(group.run_dir, "ch.sock"))]
    assert group.agent_running() and group.proc is fake.proc
    group.end(run)
    kill = [("signal", signal.SIGKILL), ("wait", 2.0)] if stubborn else []
    term = [("signal", signal.SIGTERM), ("wait", 1.0), ("wait", 3.0)]
    assert fake.calls[1:] == [*term, *kill, ("cleanup",), ("close",)]
    assert run.agent_exit_code == (-signal.SIGKILL if stubborn else -signal.SIGTERM) and group.stopped_by_us
    group.end(run)  # twice: nothing more
    assert fake.calls[-1] == ("close",) and len(fake.calls) == len(term) + len(kill) + 3
