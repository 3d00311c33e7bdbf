"""Lesson 4's measured slow link (section 6), without ranks: where network namespaces cannot be made,
its cells predict, say that every number is simulated, and measure nothing. The measured path runs
in tests/test_notebooks.py (both editions, nbval and papermill)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from labkit.i18n import language
from labkit.timing import predict, simulate
from labkit.timing.gloo import GlooCosts

LESSON = Path(__file__).resolve().parents[1] / "labkit" / "course" / "lessons" / "04_prefetch_overlap.md"
MS = 1e-3


def section_cells() -> list[str]:
    """The code cells of section 6, in order (without their metadata)."""
    text = LESSON.read_text(encoding="utf-8")
    section = text[text.index("## 6. A slow link, measured") : text.index("Any timeline, measured or simulated")]
    cells = re.findall(r"^```\{code-cell\} ipython3\n(.*?)^```$", section, flags=re.M | re.S)
    return [re.sub(r"\A(---\n.*?\n---\n|:tags:.*\n)", "", c, flags=re.S) for c in cells]


def calibration() -> predict.Calibration:
    prof = simulate.Profile(
        forward=[("root", 2 * MS), ("layers.0", 1 * MS), ("layers.1", 1 * MS)],
        backward=[("layers.1", 2 * MS), ("layers.0", 2 * MS), ("root", 4 * MS)],
        param_bytes={"root": 0.26e6, "layers.0": 0.26e6, "layers.1": 0.26e6},
        grad_bytes={"root": 0.26e6, "layers.0": 0.26e6, "layers.1": 0.26e6},
        world_size=2,
        flavor="fsdp1",
    )
    costs = GlooCosts(alpha=50e-6, beta={k: 1e-9 for k in ("all_gather", "reduce_scatter", "all_reduce")}, ranks=2)
    return predict.Calibration({"fsdp1": prof}, costs, ranks=2, measured={"fsdp1:FULL_SHARD:BACKWARD_PRE": 0.02})


def test_without_namespaces_the_section_simulates_and_says_so(monkeypatch):
    from labkit.course import show
    from labkit.launch import netem

    cells = section_cells()
    # setup, predict, measure, overlap: exercise 4 (the order) is asked before section 5, which simulates it
    assert len(cells) == 4, [c.splitlines()[0] for c in cells]
    monkeypatch.setattr(netem, "probe", lambda: netem.Probe("user namespaces are not allowed here"))
    made = []

    def calibrate(*a, **k):  # the calibration, then each of its parts a little faster or slower
        cal = calibration()
        speed = (1.0, 0.95, 1.05)[len(made) % 3]
        cal.profiles["fsdp1"] = predict.slowed(cal.profiles["fsdp1"], speed)
        made.append(cal)
        return cal

    monkeypatch.setattr(predict, "calibrate", calibrate)

    class Section2:  # what the cell reads of section 2's run: its backend, its steps' messages
        backend = "gloo"
        events = {r: [{"step": i} for i in range(3)] for r in (0, 1)}
        values: dict = {}

    ns = {"show": show, "prefetch": Section2(), "model_size": "tiny", "steps": 3}
    out = io.StringIO()
    with language("en"), contextlib.redirect_stdout(out):
        for i in range(len(cells)):
            exec(compile(cells[i], f"<cell {i}>", "exec"), ns)
    text = out.getvalue()
    assert "emulated nodes: NO (user namespaces are not allowed here)" in text and "SIMULATED" in text, text
    assert text.count("not measured: this machine cannot emulate nodes") == 2, text
    assert ns["measured"] == {} and "links" not in ns
    predicted = ns["predicted"]  # the order the prose states, from the model alone
    assert predicted["HSDP (HYBRID_SHARD)"] < predicted["SHARD_GRAD_OP"] < predicted["FULL_SHARD"], predicted
    # each prediction with its range, from the calibration's spread (its parts: without a step each)
    assert len(made) == 3 and "range (ms)" in text, text
    for name, seconds in predicted.items():
        low, high = (float(x) for x in ns["span"](name).split("-"))
        assert low < seconds * 1e3 < high, (name, low, high)
