"""The small matrix (issue 50): ``benchmarks/link_prediction.py --quick`` predicts 15 configurations
from one calibration and measures them, and its predictions from the calibration alone are within
a mean |error| of 8% and a max of 15%.

A timing assertion means something only on a machine that runs nothing else, so this is the suite's
third tier (``bash launch/test.sh --timing``, marked ``timing``): one test, no other worker beside
it; CI runs it after the two others. The matrix is "tiny" on links that set its steps (2 nodes x 1
over 140 Mbit/s, 2 nodes x 2 over 37 Mbit/s, one launch each), whose steps repeat from one launch
to the next within 1-2%, not the rows where ranks share cores with no link (one launch to the next
there moves them 10% and more, standard deviation, on this machine: two launches cannot hold 15%).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")

pytestmark = [pytest.mark.slow, pytest.mark.timing, pytest.mark.timeout(900)]


@pytest.mark.usefixtures("no_orphans")
def test_the_small_matrix_predicts_its_steps_within_its_bound():
    cmd = [sys.executable, "benchmarks/link_prediction.py", "--quick", "--check", "0.08,0.15"]
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-6000:]
    alone = re.search(r"calibration alone\s*: mean \|error\| ([\d.]+)%, max ([\d.]+)% over (\d+) predicted", out)
    assert alone, out[-6000:]
    mean, most, count = float(alone[1]), float(alone[2]), int(alone[3])
    assert count == 15 and mean <= 8.0 and most <= 15.0, out[-6000:]
    assert "within the bound" in out
