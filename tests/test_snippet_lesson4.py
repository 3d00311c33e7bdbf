"""Lesson 4's measured slow link (labkit/course/snippets/04_emulated_links.md), run cell by cell:
on 2 emulated nodes HSDP, SHARD_GRAD_OP and FULL_SHARD come out in the order the prose states,
FSDP2's explicit prefetch overlaps, and without namespaces the cells say they simulate."""

from __future__ import annotations

import contextlib
import io
import os
import re

import pytest

from labkit.launch import netem

SNIPPET = os.path.join(os.path.dirname(__file__), "..", "labkit", "course", "snippets", "04_emulated_links.md")


def cells() -> list[tuple[str, str]]:
    """(kind, text) in order: kind is "code", "lang-en" or "lang-ro"."""
    text = open(SNIPPET, encoding="utf-8").read()
    out = []
    for block in re.split(r"^\+\+\+ ", text, flags=re.M)[1:]:
        head, _, body = block.partition("\n")
        lang = "lang-en" if "lang-en" in head else "lang-ro"
        prose, *code = re.split(r"^```\{code-cell\} ipython3\n", body, flags=re.M)
        out.append((lang, prose.strip()))
        for c in code:
            source = c.split("\n```", 1)[0]
            out.append(("code", "\n".join(line for line in source.splitlines() if not line.startswith(":tags:"))))
    first = text.split("+++ ", 1)[0]
    assert "{code-cell}" not in first
    return out


def test_both_languages_and_no_cedilla():
    kinds = [k for k, _ in cells()]
    assert kinds.count("lang-en") == kinds.count("lang-ro") > 0
    text = open(SNIPPET, encoding="utf-8").read()
    assert not set("şţŞŢ") & set(text), "Romanian uses comma-below ș ț"
    for kind, source in cells():
        if kind == "code":
            compile(source, "<cell>", "exec")


@pytest.mark.slow
@pytest.mark.skipif(netem.probe().error is not None, reason="no network namespaces here")
@pytest.mark.usefixtures("no_orphans")
def test_the_snippet_runs_and_the_order_holds(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    code = [source for kind, source in cells() if kind == "code"]
    assert code[0].lstrip().startswith("MODEL =")
    # papermill's parameters: fewer steps, a smaller micro-batch (less compute, the same bytes)
    code[0] = 'MODEL, LINK, STEPS, BATCH, EMULATE = "small", "50mbit", 3, 2, None'
    ns: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for source in code:
            exec(compile(source, "<cell>", "exec"), ns)
    text = out.getvalue()
    measured = ns["measured"]
    assert measured["HSDP (HYBRID_SHARD)"] < measured["SHARD_GRAD_OP"] < measured["FULL_SHARD"], text
    assert "predicted order, fastest first: HSDP (HYBRID_SHARD) < " in text, text
    hidden = ns["hidden"]
    assert hidden["FSDP2, explicit async prefetch"] > hidden["FSDP2, implicit prefetch"], text
    assert (tmp_path / "labkit-traces" / "lesson4-fsdp2-explicit.json").exists()  # beside the notebook
    assert "SIMULATED" in text or "simulated" in text
    # where namespaces cannot be made: the measuring cells say so and measure nothing
    ns["CAN_EMULATE"] = False
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for source in code[3:5]:
            exec(compile(source, "<cell>", "exec"), ns)
    assert out.getvalue().count("not measured: this machine cannot emulate nodes") == 2
