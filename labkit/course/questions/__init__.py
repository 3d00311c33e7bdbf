"""The course's questions: ``questions/lessonN.py`` registers lesson N's, one ``question(...)``
per ``labkit.check("lessonN.name", ...)`` in that lesson.

The registry (``labkit.grading.registry``) imports this package for every check and for the
grader, so a new lesson's questions need nothing but their file. Answers that depend on the
student's own run are computed from the ``run=`` (or other context) the check is given, never
from numbers written here; hints say where to look, never what the answer is.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
    if re.fullmatch(r"lesson\d+", _info.name):
        importlib.import_module(f"{__name__}.{_info.name}")
