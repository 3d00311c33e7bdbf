"""What the notebook shows: the live dashboard, a run as text and figure, memory and timeline plots.

Views read a ``labkit.wire.records.RunRecord``; they never start or stop ranks.
"""
