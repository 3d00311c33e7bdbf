"""Running a class around the grader: the course file, submit and collect, feedback, LMS exports, and
grading at class scale (docs/classroom.md).

- ``course``: ``course.toml``, read into dataclasses, every error naming its line;
- ``exchange``: the submission exchange (read-only snapshots stamped by the server), and ``collect``;
- ``service``: the exchange as a JupyterHub service (a student known by their hub token);
- ``client``: ``labkit.submit()`` and the feedback a student fetches;
- ``feedback``: each student's report released in their language;
- ``exports``: Moodle, Canvas and the locale's CSV;
- ``cache``: scores kept by submission content and grader version, and the ``--student``/``--lesson`` filters;
- ``cli``: the commands.

It runs in the instructor's commands, in the hub's service, and (``client``) in a student's kernel.
"""
