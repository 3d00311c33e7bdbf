"""labkit.units: bytes, numbers and tables, in both languages (no launch)."""

from __future__ import annotations

import json

from labkit.fmt import fmt_bytes, fmt_count, fmt_number, markdown_to_html, render_table
from labkit.memory.states import GB, GiB
from labkit.wire.protocol import Msg


def test_numbers_in_each_language():
    assert fmt_number(1103.6, 1, "en") == "1,103.6"
    assert fmt_number(1103.6, 1, "ro") == "1.103,6"
    assert fmt_number(1234567, 0, "ro") == "1.234.567"


def test_bytes_auto_and_fixed_units():
    assert fmt_bytes(None) == ""
    assert fmt_bytes(512) == "512 B"
    assert fmt_bytes(3 * GiB) == "3.0 GiB"
    assert fmt_bytes(1103.6 * GB, "GB", lang="ro") == "1.103,60 GB"
    # a small figure steps down within its family instead of printing 0.00
    assert fmt_bytes(5e6, "GB", lang="en") == "5.0 MB"
    assert fmt_bytes(5e4, "GB", lang="en") == "50.0 kB"
    assert fmt_bytes(2**20, "GiB", lang="en") == "1.0 MiB"
    assert fmt_bytes(0, "GB", lang="en") == "0.00 GB"
    assert fmt_bytes(3 * GiB, "GiB", decimals=3, lang="en") == "3.000 GiB"


def test_counts():
    assert fmt_count(196_928) == "197K"
    assert fmt_count(7e10) == "70B"
    assert fmt_count(12) == "12"


def test_text_table_aligns_numbers_right():
    text = render_table([["op", "calls"], ["all_gather", "14"], ["reduce_scatter", "7"]])
    assert text.splitlines() == [
        "op              calls",
        "--------------  -----",
        "all_gather         14",
        "reduce_scatter      7",
    ]


def test_markdown_table_round_trips_to_html():
    md = render_table([["what", "bytes"], ["a|b", "1"]], fmt="markdown", title="Title", notes=["a note"])
    assert md.splitlines()[2:4] == ["| what | bytes |", "|---|---:|"]
    page = markdown_to_html(md)
    assert "<b>Title</b>" in page and "<td style='padding:2px 8px'>a|b</td>" in page and "• a note" in page


def test_message_types_are_plain_strings_on_the_wire():
    assert json.dumps({"t": Msg.HELLO}) == '{"t": "hello"}'
    assert json.loads('{"t": "cell_done"}')["t"] == Msg.CELL_DONE
    assert f"{Msg.STOP}" == "stop" and str(Msg.STOP) == "stop"
