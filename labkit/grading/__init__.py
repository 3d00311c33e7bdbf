"""Grading: ``labkit.check()`` feedback, the student edition, and grading of submissions.

| module | role |
|---|---|
| `registry.py` | `Question`, `question()`: what a check compares against, and how |
| `labkit/course/questions/` | the course's questions, by lesson (loaded by name, see `labkit.QUESTION_SOURCES`) |
| `checks.py` | `check()` and `CheckResult`: the feedback box and the record the grader reads |
| `build.py` | the student edition: nbgrader's solution markers replaced, outputs cleared |
| `grade.py` | running submissions with papermill and scoring their checks |
| `report.py` | grading a folder of submissions: per-student JSON and Markdown reports, the CSV gradebook |
| `cli.py` | `labkit grade` and `labkit build-student` |

Nothing heavy is imported here: ``labkit.check`` loads ``checks`` and the registry only.
"""
