"""Shared test fixtures: every test that launches ranks is checked for leftovers."""

from __future__ import annotations

import os
import time

import pytest

from labkit.testing.processes import MARK_VAR, check_leftovers, listening_sockets, mark_session

if os.environ.get("PYTEST_XDIST_WORKER"):
    # An xdist worker inherits the controller's marker: give it its own, so that one worker's
    # leftover checks never see the ranks the other worker is running right now.
    os.environ[MARK_VAR] = f"{os.environ['PYTEST_XDIST_WORKER']}-{os.getpid()}-{time.time_ns()}"
mark_session()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup``, a file's tests run on one worker, in order, unless the file names a group.

    Module fixtures (a sandbox, a gradebook, a Slurm cluster) are then set up once; files that share
    something machine-wide (the Slurm test cluster, the class hub's users) name one group between them.
    """
    for item in items:
        if not any(item.iter_markers("xdist_group")):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


@pytest.fixture
def no_orphans():
    """After the test: no process of any labkit run alive, no new listening socket."""
    before_listen = listening_sockets()
    yield
    check_leftovers(before_listen)


@pytest.fixture
def no_leaks():
    """``no_orphans``, and no file descriptors leaked by this process (the launcher ran in it)."""
    before_listen = listening_sockets()
    before_fds = len(os.listdir("/proc/self/fd"))
    yield
    check_leftovers(before_listen)
    assert len(os.listdir("/proc/self/fd")) <= before_fds + 2, "file descriptors leaked"
