"""The course: lesson sources, the build that turns them into notebooks, their questions.

| module | role |
|---|---|
| `lessons/NN_name.md` | one lesson, both languages, as a MyST notebook (jupytext `md:myst`) |
| `source.py` | what a lesson source holds and how it is read: tags, language pairs, solutions |
| `build.py` | `python -m labkit.course.build`: notebooks/en and notebooks/ro, docs/glossary.md |
| `lint.py` | ruff over the sources' code cells (the kernel's cells together, each `%%torchrun` body alone) |
| `questions/lessonN.py` | the answers and hints behind lesson N's `labkit.check` calls |
| `glossary.py` | the Romanian-English glossary both editions use |
| `show.py` | the text tables the lessons print, with column names in the edition's language |
"""
