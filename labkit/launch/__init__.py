"""The notebook kernel's side of a run: the options, the rank group (start, supervise, tear down), cold
cells, warm sessions, several nodes, torchrun's agent, the rank logs, ``Run`` and the diagnosis of a failure,
and the magics.
"""
