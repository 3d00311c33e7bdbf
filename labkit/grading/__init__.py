"""Grading: ``labkit.check()`` feedback, the student edition and install, and grading in a sandbox.

| module | role |
|---|---|
| `registry.py` | `Question`, `question()`: what a check compares against, and how |
| `labkit/course/questions/` | the course's questions, by lesson (loaded by name, see `labkit.QUESTION_SOURCES`) |
| `sources.py` | where the questions come from: the course's modules, LABKIT_QUESTIONS, or a student install's catalog |
| `compare.py`, `points.py` | comparing values; the unseen points formulas are checked at (and the grader's own) |
| `checks.py` | `check()` and `CheckResult`: the feedback box, and the report of what was handed in |
| `snapshot.py` | a student's function as source, and rebuilt from it |
| `exercises.py` | the verifiers of the exercises on the ranks, on what labkit observed (`labkit.ranks.observe`) |
| `hashed.py` | expected values as salted hashes of their tolerance buckets, for the student install |
| `student.py` | the student install: labkit without answers, its catalog, a wheel of it |
| `build.py`, `nbgrader.py` | the student edition: solutions out, outputs cleared, nbgrader's cell metadata |
| `sandbox.py` | bubblewrap around each submission |
| `runner.py`, `evaluate.py` | what runs in a sandbox: papermill on the notebook; the students' functions again |
| `sink.py` | where the ranks' observations reach the grader, from rank processes only |
| `judge.py` | the grader's verdict on each question, from what was handed in |
| `grade.py` | one submission: its sandbox, the sink, the judge, its score |
| `report.py` | grading a folder of submissions: per-student JSON and Markdown reports, the CSV gradebook |
| `cli.py` | `labkit grade` and `labkit build-student` |

Nothing heavy is imported here: ``labkit.check`` loads ``checks`` and the registry only.
"""
