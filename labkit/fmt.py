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
    >>> print(render_table([["op", "calls"], ["all_gather", "14"]]))
    op          calls
    ----------  -----
    all_gather     14
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40
kB, MB, GB, TB = 10**3, 10**6, 10**9, 10**12
UNITS = {"B": 1, "KiB": KiB, "MiB": MiB, "GiB": GiB, "TiB": TiB, "kB": kB, "MB": MB, "GB": GB, "TB": TB}


def fmt_number(x: float, decimals: int = 0, lang: str | None = None) -> str:
    """``x`` with thousands separators and ``decimals`` digits, in the language's own format."""
    return localize(f"{x:,.{decimals}f}", lang)


def localize(text: str, lang: str | None = None) -> str:
    """A number written the English way (``1,103.6``, ``+2.5%``), in the language's own format."""
    if _lang(lang) == "ro":
        # swap the separators through a placeholder: 1,103.6 -> 1.103,6
        text = text.replace(",", "\0").replace(".", ",").replace("\0", ".")
    return text


def fmt_spec(x: float, spec: str = "", lang: str | None = None) -> str:
    """``format(x, spec)`` in the language's own format: ``fmt_spec(2.5, "+.1f", "ro")`` is ``+2,5``."""
    return localize(format(x, spec), lang)


def plural(n: object, forms: Sequence[str], lang: str | None = None, spec: str = "") -> str:
    """``n`` and the noun in the form its number takes: ``forms`` is (singular, plural).

    English: "1 rank", "2 ranks". Romanian (one / few / other): "1 rang", "2 ranguri", "19 ranguri",
    "20 de ranguri", "101 ranguri", "1,5 ranguri"; "de" comes before the noun when the number is a
    whole one ending in 00 or 20..99 (not 0), or is written with a K/M/B suffix (mii, milioane,
    miliarde de ...). ``n`` is a number (formatted with ``spec``, else whole numbers grouped) or the
    text of one already formatted in the language (``fmt_count``'s "7,5B").
    """
    lang = _lang(lang)
    if isinstance(n, (int, float)) and not isinstance(n, bool):
        if spec:
            text = fmt_spec(n, spec, lang)
        elif float(n).is_integer():
            text = fmt_number(n, 0, lang)
        else:
            text = localize(format(n, ","), lang)
    else:
        text = str(n)
    one, many = forms[0], forms[-1]
    category = plural_category(text, lang)
    if category == "one":
        return f"{text} {one}"
    return f"{text} de {many}" if category == "other" and lang == "ro" else f"{text} {many}"


_NUMBER = re.compile(r"^[+-]?(\d[\d.,\u00a0 ]*)([KMB]?)$")


def plural_category(text: str, lang: str | None = None) -> str:
    """ "one", "few" or "other" (CLDR's categories) for a number written in ``lang``'s format.

    English has one and other; Romanian one (1), few (0, a fraction, or a whole number whose last two
    digits are 01..19) and other (the rest: 20, 100, 1.000, ...). Text that is no number reads as few.
    """
    lang = _lang(lang)
    match = _NUMBER.match(text.strip())
    if not match:
        return "few" if lang == "ro" else "other"
    digits, suffix = match.groups()
    point, group = (",", ".") if lang == "ro" else (".", ",")
    whole, _, fraction = digits.replace(group, "").replace("\u00a0", "").replace(" ", "").partition(point)
    if suffix:
        return "other"
    if not whole.isdigit() or (fraction and not fraction.isdigit()):
        return "few" if lang == "ro" else "other"
    n = int(whole)
    if n == 1 and not fraction:
        return "one"
    if lang != "ro":
        return "other"
    if fraction or n == 0 or 1 <= n % 100 <= 19:
        return "few"
    return "other"


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
    """A count of parameters or elements, short: 196928 -> 197K, 7.0e10 -> 70B (7,5B in Romanian)."""
    for suffix, div in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= div:
            return localize(f"{n / div:.3g}", lang) + suffix
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
