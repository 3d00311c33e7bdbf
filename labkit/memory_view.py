"""Memory, drawn: plots of the memory model and tables of what the ranks measured
(``labkit.views.memory``, under the name a notebook types). matplotlib loads on the first plot.

    from labkit import memory_view
    memory_view.plot_memory_vs_gpus("llama-13b", "H100-80GB")
"""

from __future__ import annotations

from labkit.views.memory import (
    MemoryTable,
    breakdown_html,
    category_label,
    latest,
    memory_table,
    plot_breakdown,
    plot_max_model_vs_gpus,
    plot_memory_vs_gpus,
)

__all__ = [
    "MemoryTable", "breakdown_html", "category_label", "latest", "memory_table", "plot_breakdown",
    "plot_max_model_vs_gpus", "plot_memory_vs_gpus",
]  # fmt: skip
