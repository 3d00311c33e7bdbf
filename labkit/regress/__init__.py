"""Regression runs for instructors: what each run measured, kept; sweeps; comparisons; the doctor.

- ``record``: a run's record (memory per rank and category, collectives, step times) and a
  notebook's (its runs, its checks' statuses, where it ran: ``fingerprint``);
- ``sweep``: ``labkit sweep``, papermill over a grid of parameters;
- ``compare``: ``labkit regress compare A B``, per-metric tolerances, Markdown and JUnit reports;
- ``doctor``: ``labkit doctor``, the environment checked end to end.

It sits on top of the launcher; the launcher only calls ``labkit.launch.finished`` hooks.
"""
