"""What runs inside a rank: the bootstrap (the program torchrun starts), the rank API a cell calls
(``labkit.rank``), the memory sampler, and the in-rank trackers (memory by category, collectives, the
per-unit timeline, FSDP unit discovery).

Never imports the kernel side (``labkit.launch``) or the views: a rank does not plot.
"""
