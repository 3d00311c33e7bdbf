"""The tests' environment variables: the markers by which a test finds the processes it started, and the
browser tests' switches. Their registry, one of ``labkit.wire.env.REGISTRIES``.
"""

from __future__ import annotations

import sys

from labkit.wire import env as envvars
from labkit.wire.env import USER, Var

TITLE = "The tests"
ABOUT = (
    "`labkit/testing/env.py`: what the tests set on the processes they start, to find them again, and their switches."
)

VARS: tuple[Var, ...] = (
    Var(
        "LABKIT_TEST_SESSION",
        None,
        "labkit.testing.processes (mark_session)",
        ("labkit.testing.processes",),
        "Marks the processes of one test session, so its leak checks see only its own.",
    ),
    Var(
        "LABKIT_HUB_TEST",
        None,
        "labkit.testing.hub, for launch/hub.sh and all it starts",
        ("labkit.testing.hub",),
        "Marks the processes of a test's class hub (its servers, kernels and ranks kept it through LABKIT_HUB_ENV_KEEP), so the test finds any left.",
    ),
    Var(
        "LABKIT_SLURM_CLUSTER",
        None,
        "labkit.testing.slurm, for the test cluster's daemons",
        ("labkit.testing.slurm",),
        "Marks the processes of a test Slurm cluster, so they can be found and ended.",
    ),
    Var(
        "LABKIT_BROWSER_TEST",
        None,
        "tests/browser/jupyterlab_driver.py, for its JupyterLab",
        ("tests/browser/jupyterlab_driver.py",),
        "Marks the processes of a browser test's JupyterLab, so they can be found and ended.",
    ),
    Var(
        "LABKIT_UPDATE_SCREENSHOTS",
        None,
        USER,
        ("tests/browser/test_dashboard_browser.py",),
        "1: the browser tests rewrite docs/screenshots/.",
    ),
)


def section() -> str:
    """This registry's section of docs/environment.md."""
    return envvars.render(sys.modules[__name__])
