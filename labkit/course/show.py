"""Small text tables for the lessons, with column names in the edition's language.

Text, not HTML, so the same table reads well in JupyterLab, in papermill's executed
notebook and in nbval's comparison, and a deterministic one can be checked by nbval.

    from labkit.course import show
    show.table([{"rank": 0, "params": 1024}], units={"params": "MiB"})
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from labkit.fmt import fmt_number
from labkit.i18n import t
from labkit.wire.setting import Backend

UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "GB": 10**9, "TB": 10**12}


def label(key: str, **fields: Any) -> str:
    """The column name for ``key`` in the current language (the key itself if it has none)."""
    try:
        return t(f"course.col.{key}", **fields)
    except KeyError:
        return key


def text(key: str, **fields: Any) -> str:
    """A sentence or figure label of the lessons (``course.say.*``, ``course.fig.*``) in the current language."""
    return t(f"course.{key}", **fields)


def say(key: str, **fields: Any) -> None:
    """Print the sentence ``course.say.<key>``, its numbers in the edition's format (1.103,6 in Romanian)."""
    print(text(f"say.{key}", **{name: fmt(value) for name, value in fields.items()}))


def yes_no(value: bool) -> str:
    return t("course.yes") if value else t("course.no")


def fmt(value: Any, unit: str | None = None) -> str:
    """One table cell or sentence field: numbers in the edition's format (1,103.6 or 1.103,6)."""
    if isinstance(value, bool):
        return yes_no(value)
    if unit is not None and isinstance(value, (int, float)):
        scaled = value / UNITS[unit]
        return f"{fmt_number(scaled, 3 if abs(scaled) < 10 else 1)} {unit}"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return fmt_number(value, 0)
        text = f"{value:.4g}"  # four significant digits; swap the decimal point for Romanian
        return text.replace(".", ",") if fmt_number(0.5, 1) == "0,5" else text
    if isinstance(value, int):
        return fmt_number(value, 0)
    return str(value)


def table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str] | None = None,
    units: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Print ``rows`` as an aligned table: numbers right-aligned, bytes in ``units``."""
    columns = list(columns or (rows[0].keys() if rows else []))
    units, headers = dict(units or {}), dict(headers or {})
    head = [headers.get(c, label(c)) for c in columns]
    body = [[fmt(row.get(c, ""), units.get(c)) for c in columns] for row in rows]
    numeric = [
        all(isinstance(row.get(c), (int, float)) and not isinstance(row.get(c), bool) for row in rows) for c in columns
    ]
    widths = [max([len(h)] + [len(line[i]) for line in body]) for i, h in enumerate(head)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)).rstrip()

    print("\n".join([line(head), "  ".join("-" * w for w in widths)] + [line(b) for b in body]))


def machine(backend: str = Backend.AUTO) -> dict[str, Any]:
    """What this kernel's machine has for the lessons; printed, and returned as a dict."""
    import torch
    import torch.distributed as dist

    from labkit.launch.options import max_cpu_ranks
    from labkit.wire import devices as gpus

    visible = gpus.visible_gpus()
    chosen = backend if backend != Backend.AUTO else (Backend.NCCL if visible else Backend.GLOO)
    facts = {
        "torch": torch.__version__,
        "cores": os.cpu_count(),
        "gpus": len(visible),
        "gloo": dist.is_gloo_available(),
        "nccl": dist.is_nccl_available(),
        "backend": chosen,
        "ranks": len(visible) if chosen == Backend.NCCL else max_cpu_ranks(),
    }
    width = max(len(t(f"course.machine.{k}")) for k in facts)
    for key, value in facts.items():
        print(f"{t(f'course.machine.{key}').ljust(width)}  {fmt(value)}")
    return facts
