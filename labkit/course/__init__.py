"""The course: lesson sources, the build that turns them into notebooks, their questions.

| module | role |
|---|---|
| `cells.py` | what a lesson is made of: `md`, `code`, `parameters`, `setup`, `exercise`, `check` |
| `lessons/lessonN.py` | one lesson, both languages: its `LESSON` |
| `build.py` | `python -m labkit.course.build`: notebooks/en and notebooks/ro, docs/glossary.md |
| `questions/lessonN.py` | the answers and hints behind lesson N's `labkit.check` calls |
| `glossary.py` | the Romanian-English glossary both editions use |
| `show.py` | the text tables the lessons print, with column names in the edition's language |
"""
