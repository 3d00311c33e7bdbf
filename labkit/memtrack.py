"""Memory measured inside a rank, by category (parameters, gradients, optimizer state, activations):
``labkit.ranks.memtrack``, under the name a notebook types.

    from labkit import memtrack
    tracker = memtrack.track(model, optimizer)     # sends each step's "memcat" to the notebook
    memtrack.split_by_role(model, [optimizer])     # bytes held now, by role
"""

from __future__ import annotations

from labkit.ranks.memtrack import CATEGORIES, Tracker, roles, split_by_role, track

__all__ = ["CATEGORIES", "Tracker", "roles", "split_by_role", "track"]
