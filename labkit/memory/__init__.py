"""Memory in theory: the per-parameter formulas, the peak of a step, activations, and the fake-tensor
estimates (which run torch in a subprocess). ``import labkit.memory`` imports no torch.
"""
