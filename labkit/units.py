"""Numbers and bytes as the course prints them, in the reader's language (``labkit.fmt``, under the
name lesson 6 imports: ``from labkit.units import fmt_number``)."""

from __future__ import annotations

from labkit.fmt import UNITS, fmt_bytes, fmt_count, fmt_number, fmt_spec, render_table

__all__ = ["UNITS", "fmt_bytes", "fmt_count", "fmt_number", "fmt_spec", "render_table"]
