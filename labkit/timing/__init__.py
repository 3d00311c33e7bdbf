"""Time in theory: the spans of a timeline, the calibration from a measured run, links, the simulator, and
what the collectives should move. ``import labkit.timing`` imports no torch.
"""
