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


# Files that share something machine-wide (the Slurm test cluster, the class hub's users and their
# PAM passwords): under xdist they run on one worker, one after the other.
MACHINE_WIDE = (
    "tests/test_slurm_live.py",
    "tests/test_grading_slurm.py",
    "tests/test_hub_live.py",
    "tests/test_hub_login_live.py",
    "tests/browser/test_hub_browser.py",
    "tests/browser/test_class_cycle.py",
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under ``-n``, a file's tests run on one worker, in order (module fixtures such as a sandbox, a
    gradebook or a Slurm cluster are set up once), the machine-wide files together, and each lesson
    notebook test on its own (they are long, and independent).

    (xdist's ``--dist loadgroup`` would say this with marks, but it groups by rewriting node ids,
    which pytest 9 no longer reads.)
    """
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if path in MACHINE_WIDE:
                return "machine"
            return nodeid if path == "tests/test_notebooks.py" else path

    return ByFile(config, log)


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
