"""What the tests and the benchmarks share: launching the test jobs, and the leftover checks.

``jobs`` runs one of the torchrun scripts here (``comm_job.py``, ``mem_job.py``) and reads what
its ranks reported; ``comm_launch`` and ``mem_launch`` cache each distinct job per session;
``processes`` finds the processes and sockets a test left behind.
"""
