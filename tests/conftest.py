"""Shared test fixtures: every test that launches ranks is checked for leftovers."""

from __future__ import annotations

import os

import pytest

from labkit.testing.processes import check_leftovers, listening_sockets, mark_session

mark_session()


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
