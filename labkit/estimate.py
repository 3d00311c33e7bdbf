"""A step's peak memory, estimated by tracing a few blocks of the model on the meta device and
extrapolating: ``labkit.memory.estimate``, under the name a notebook types.

    from labkit import estimate
    estimate.estimate_peak("llama-70b", world_size=64, strategy="FULL_SHARD")

Importing it imports no torch (the trace runs in a subprocess).
"""

from __future__ import annotations

from labkit.memory.estimate import DEPTHS, Estimate, analytical, combine, estimate_many, estimate_peak

__all__ = ["DEPTHS", "Estimate", "analytical", "combine", "estimate_many", "estimate_peak"]
