"""One module per lesson, ``lessonN.py``, each defining ``LESSON`` (a ``labkit.course.cells.Lesson``).

``labkit.course.build`` finds them by name: adding ``lesson4.py`` adds lesson 4 to the course,
and ``labkit/course/questions/lesson4.py`` holds the questions its ``labkit.check`` calls name.
Glossary terms a lesson lists in ``terms`` come from ``labkit/course/glossary.py``.
"""
