"""A class JupyterHub on one server, or on Slurm: labkit's side of it.

``launch/hub.sh`` starts JupyterHub with ``launch/hub/jupyterhub_config.py``, which calls
``labkit.hub.config.configure``. The pieces, each a module of one idea:

- ``settings``: what the hub is told (users, limits, spawner, folders), from ``LABKIT_HUB_*``;
- ``homes``: a student's first login: the student edition in their language, a ``submit`` folder;
- ``limits``: per-user memory, CPU and process limits (cgroups), and the most ranks a cell may ask;
- ``spawners``: the language form, and the two spawners (local processes under each uid; Slurm jobs).

This package runs in the hub's process (as root), never in a kernel or a rank.
"""
