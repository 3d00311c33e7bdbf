"""Numbers, bytes and tables as the course prints them: one place, both languages.

Every byte count and table that labkit shows goes through here, so a figure reads the
same in the dashboard, a lesson and the CLI. Romanian writes numbers as 1.103,6 (a dot
between thousands, a comma before decimals); English as 1,103.6.

    >>> fmt_bytes(3 * 2**30)
    '3.0 GiB'
    >>> fmt_bytes(1_103.6e9, "GB", lang="ro")
    '1.103,60 GB'
    >>> plural(20, ("rang", "ranguri"), lang="ro")
    '20 de ranguri'
    >>> fmt_count(7.5e9, lang="ro")
    '7,5 mld.'
    >>> print(render_table([["op", "calls"], ["all_gather", "14"]]))
    op          calls
    ----------  -----
    all_gather     14
"""

from __future__ import annotations

import html
from collections.abc import Sequence

# how a language writes numbers and counts is the language's (labkit.i18n); fmt writes with it
from labkit.i18n import localize as localize
from labkit.i18n import plural as plural
from labkit.i18n import plural_category as plural_category

KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40
kB, MB, GB, TB = 10**3, 10**6, 10**9, 10**12
UNITS = {"B": 1, "KiB": KiB, "MiB": MiB, "GiB": GiB, "TiB": TiB, "kB": kB, "MB": MB, "GB": GB, "TB": TB}


def fmt_number(x: float, decimals: int = 0, lang: str | None = None) -> str:
    """``x`` with thousands separators and ``decimals`` digits, in the language's own format."""
    return localize(f"{x:,.{decimals}f}", lang)


def fmt_spec(x: float, spec: str = "", lang: str | None = None) -> str:
    """``format(x, spec)`` in the language's own format: ``fmt_spec(2.5, "+.1f", "ro")`` is ``+2,5``."""
    return localize(format(x, spec), lang)


def fmt_bytes(n: float | None, unit: str = "auto", decimals: int | None = None, lang: str | None = None) -> str:
    """Bytes in ``unit`` ("GB", "GiB", "MiB", ...), or the largest binary unit that keeps it >= 1.

    With a fixed unit, a value that would print as 0.00 steps down to the next smaller unit of
    the same family (GB -> MB -> kB, GiB -> MiB -> KiB), so a small figure never reads as zero.
    """
    if n is None:
        return ""
    if unit == "auto":
        unit = next((u for u in ("TiB", "GiB", "MiB", "KiB") if abs(n) >= UNITS[u]), "B")
        decimals = (0 if unit == "B" else 1) if decimals is None else decimals
    elif n and unit not in ("B", "KiB", "kB"):
        family = ("TB", "GB", "MB", "kB") if unit.endswith("B") and "i" not in unit else ("TiB", "GiB", "MiB", "KiB")
        fixed = decimals
        decimals = 2 if fixed is None else fixed
        while abs(n) / UNITS[unit] < 10**-decimals and unit != family[-1]:
            unit = family[family.index(unit) + 1]
            decimals = 1 if fixed is None else fixed  # the smaller units print one decimal
    decimals = 2 if decimals is None else decimals
    return f"{fmt_number(n / UNITS[unit], decimals, lang)} {unit}"


def fmt_count(n: float, lang: str | None = None) -> str:
    """A count of parameters or elements, short: 196928 -> 197K, 7.0e10 -> 70B in English; Romanian
    writes the words it abbreviates: 197 de mii, 7,5 mil., 70 mld. (never "B", which reads as bytes)."""
    lang = _lang(lang)
    for suffix, ro, div in (("B", "mld.", 1e9), ("M", "mil.", 1e6), ("K", "", 1e3)):
        if abs(n) >= div:
            short = localize(f"{n / div:.3g}", lang)
            if lang != "ro":
                return short + suffix
            return f"{short} {ro}" if ro else plural(short, ("mie", "mii"), lang)
    return f"{n:.0f}"


def render_table(
    rows: Sequence[Sequence[str]],
    fmt: str = "text",
    align: str | None = None,
    title: str = "",
    notes: Sequence[str] = (),
) -> str:
    """The first row is the header. ``align``: one letter per column, "l" or "r" (default: the
    first column left, the others right). ``fmt``: "text" (aligned columns) or "markdown"."""
    if not rows:
        return title
    ncols = len(rows[0])
    align = align or "l" + "r" * (ncols - 1)
    cells = [[str(c) for c in row] for row in rows]
    if fmt == "markdown":
        lines = ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in cells]
        lines.insert(1, "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|")
    else:
        widths = [max(len(row[i]) for row in cells) for i in range(ncols)]

        def line(row: list[str]) -> str:
            return "  ".join(c.rjust(w) if a == "r" else c.ljust(w) for c, w, a in zip(row, widths, align)).rstrip()

        lines = [line(row) for row in cells]
        lines.insert(1, "  ".join("-" * w for w in widths))
    out = ([title, ""] if title else []) + lines
    if notes:
        out += [""] + [f"- {n}" for n in notes]
    return "\n".join(out)


def markdown_to_html(md: str) -> str:
    """Enough markdown for ``render_table(fmt="markdown")``: a title, a pipe table, a bullet list."""
    out, in_table = [], False
    for line in md.splitlines():
        if line.startswith("|"):
            cells = [c.strip().replace("\\|", "|") for c in line.strip("|").split(" | ")]
            if all(set(c) <= set("-:|") for c in cells):
                continue
            tag = "th" if not in_table else "td"
            if not in_table:
                out.append("<table style='border-collapse:collapse'>")
                in_table = True
            out.append(
                "<tr>" + "".join(f"<{tag} style='padding:2px 8px'>{html.escape(c)}</{tag}>" for c in cells) + "</tr>"
            )
            continue
        if in_table:
            out.append("</table>")
            in_table = False
        if line.startswith("- "):
            out.append(f"<div style='color:#555;font-size:90%'>• {html.escape(line[2:])}</div>")
        elif line:
            out.append(f"<b>{html.escape(line)}</b>")
    if in_table:
        out.append("</table>")
    return "\n".join(out)


def _md_cell(text: str) -> str:
    return text.replace("\n", " ").replace("|", "\\|")


def _lang(lang: str | None) -> str:
    if lang:
        return lang
    from labkit.i18n import get_lang  # the course's language, when none is asked for

    return get_lang()
