"""The messages of labkit.grading: checks, the grader's commands, student notebooks and reports.

Data only, in English and Romanian; every key starts with ``grading.``. ``labkit.i18n.t`` imports
this module the first time one of its keys is asked for.
"""

MESSAGES: dict[str, dict[str, str]] = {
    # labkit.grading.build
    "grading.build.stub.code": {"en": "# YOUR CODE HERE", "ro": "# SCRIEȚI CODUL AICI"},
    "grading.build.stub.text": {"en": "YOUR ANSWER HERE", "ro": "SCRIEȚI RĂSPUNSUL AICI"},
    "grading.build.where": {
        "en": "{nb}, cell {cell}, line {line}",
        "ro": "{nb}, celula {cell}, linia {line}",
    },
    "grading.build.unclosed": {
        "en": "{where}: '{marker}' is never closed",
        "ro": "{where}: '{marker}' nu este închis niciodată",
    },
    "grading.build.stray_end": {
        "en": "{where}: '{marker}' without a matching BEGIN before it",
        "ro": "{where}: '{marker}' fără un BEGIN corespunzător înainte",
    },
    "grading.build.nested": {
        "en": "{where}: '{marker}' inside a region that is still open (opened on line {opened})",
        "ro": "{where}: '{marker}' într-o regiune încă deschisă (deschisă la linia {opened})",
    },
    "grading.build.mismatched": {
        "en": "{where}: '{marker}' closes a region opened by '{opener}'",
        "ro": "{where}: '{marker}' închide o regiune deschisă de '{opener}'",
    },
    "grading.build.not_alone": {
        "en": "{where}: a solution or hidden-tests marker must be a comment line of its own",
        "ro": "{where}: un marcaj de soluție sau de teste ascunse trebuie să fie singur pe linie, ca și comentariu",
    },
    "grading.build.one_line": {
        "en": "{where}: '# SOLUTION' at the end of a line works only on an assignment (name = value)",
        "ro": "{where}: '# SOLUTION' la sfârșitul unei linii merge doar pe o atribuire (nume = valoare)",
    },
    "grading.build.lost_check": {
        "en": "{nb}: the check {qid!r} is inside a solution region, so students would never run it",
        "ro": "{nb}: verificarea {qid!r} este într-o regiune de soluție, deci studenții nu ar rula-o niciodată",
    },
    "grading.build.failed": {
        "en": "the student edition was not written; fix these first:\n{errors}",
        "ro": "ediția pentru studenți nu a fost scrisă; corectați întâi:\n{errors}",
    },
    "grading.build.unreadable": {
        "en": "{path}: not a readable notebook ({error})",
        "ro": "{path}: nu este un notebook care poate fi citit ({error})",
    },
    "grading.build.no_notebooks": {
        "en": "no notebooks found in {paths}",
        "ro": "nu s-a găsit niciun notebook în {paths}",
    },
    # labkit.grading.checks
    "grading.check.line.correct": {"en": "✓ {qid}: correct ({score})", "ro": "✓ {qid}: corect ({score})"},
    "grading.check.line.wrong": {"en": "✗ {qid}: not yet ({score})", "ro": "✗ {qid}: încă nu ({score})"},
    "grading.check.line.unanswered": {
        "en": "… {qid}: not answered yet ({score})",
        "ro": "… {qid}: încă fără răspuns ({score})",
    },
    "grading.check.line.recorded": {
        "en": "✎ {qid}: answer recorded; graded when you hand in, on the first answer given",
        "ro": "✎ {qid}: răspuns înregistrat; se notează la predare, după primul răspuns dat",
    },
    "grading.check.hint": {"en": "Hint", "ro": "Indiciu"},
    "grading.check.unanswered": {
        "en": "replace the ... with your answer, then run the cell again",
        "ro": "înlocuiți ... cu răspunsul vostru, apoi rulați din nou celula",
    },
    "grading.check.crashed": {
        "en": "this value could not be checked ({error})",
        "ro": "această valoare nu a putut fi verificată ({error})",
    },
    # labkit.grading.cli
    "grading.cli.grade.help": {
        "en": "grade a folder of submitted notebooks",
        "ro": "notează un dosar de notebook-uri predate",
    },
    "grading.cli.grade.description": {
        "en": "Run every notebook in SUBMISSIONS in a fresh kernel, collect its labkit.check results and "
        "write a report per student (JSON and Markdown) and a CSV gradebook. SUBMISSIONS holds one "
        "folder per student, or files named <student>_<anything>.ipynb.",
        "ro": "Rulează fiecare notebook din SUBMISSIONS într-un kernel nou, colectează rezultatele "
        "labkit.check și scrie un raport pentru fiecare student (JSON și Markdown) și un catalog CSV. "
        "SUBMISSIONS conține câte un dosar pentru fiecare student, sau fișiere numite <student>_<orice>.ipynb.",
    },
    "grading.cli.grade.submissions": {"en": "the folder of submissions", "ro": "dosarul cu predări"},
    "grading.cli.grade.out": {"en": "where to write the reports", "ro": "unde se scriu rapoartele"},
    "grading.cli.grade.timeout": {
        "en": "seconds each notebook may run, all its cells together (default: %(default)s)",
        "ro": "câte secunde poate rula fiecare notebook, toate celulele la un loc (implicit: %(default)s)",
    },
    "grading.cli.grade.lang": {
        "en": "the language of every report (default: each student's own)",
        "ro": "limba tuturor rapoartelor (implicit: limba fiecărui student)",
    },
    "grading.cli.grade.questions": {
        "en": "a module or .py file of extra questions (repeatable; added to LABKIT_QUESTIONS)",
        "ro": "un modul sau fișier .py cu întrebări în plus (se poate repeta; adăugat la LABKIT_QUESTIONS)",
    },
    "grading.cli.grade.progress": {"en": "graded {file}: {score} ({status})", "ro": "notat {file}: {score} ({status})"},
    "grading.cli.grade.jobs": {
        "en": "how many notebooks to run at once, each in its own kernel (default: %(default)s)",
        "ro": "câte notebook-uri rulează deodată, fiecare în kernelul lui (implicit: %(default)s)",
    },
    "grading.cli.grade.done": {
        "en": "{n:@student|students} graded; reports in {out}, gradebook in {csv}",
        "ro": "{n:@student notat|studenți notați}; rapoartele în {out}, catalogul în {csv}",
    },
    "grading.cli.grade.no_folder": {"en": "no such folder: {path}", "ro": "dosarul nu există: {path}"},
    "grading.cli.build.help": {
        "en": "build the student edition of solution notebooks",
        "ro": "construiește ediția pentru studenți a notebook-urilor cu soluții",
    },
    "grading.cli.build.description": {
        "en": "Replace the code between '### BEGIN SOLUTION' and '### END SOLUTION' with "
        "'raise NotImplementedError()', remove hidden tests, clear outputs. Folders keep their layout.",
        "ro": "Înlocuiește codul dintre '### BEGIN SOLUTION' și '### END SOLUTION' cu "
        "'raise NotImplementedError()', elimină testele ascunse, golește ieșirile. Dosarele își păstrează structura.",
    },
    "grading.cli.build.paths": {
        "en": "notebooks or folders of notebooks",
        "ro": "notebook-uri sau dosare cu notebook-uri",
    },
    "grading.cli.build.out": {"en": "where to write the student edition", "ro": "unde se scrie ediția pentru studenți"},
    "grading.cli.build.lang": {
        "en": "the language of the stubs (default: the notebook's metadata.labkit.lang)",
        "ro": "limba textelor înlocuitoare (implicit: metadata.labkit.lang a notebook-ului)",
    },
    "grading.cli.build.done": {
        "en": "{n:@notebook|notebooks} written to {out}",
        "ro": "{n:@notebook scris|notebook-uri scrise} în {out}",
    },
    # labkit.grading.registry
    "grading.check.type.number": {
        "en": "expected a number, got {got}",
        "ro": "se aștepta un număr, s-a primit {got}",
    },
    "grading.check.type.bool": {
        "en": "expected True or False, got {got}",
        "ro": "se aștepta True sau False, s-a primit {got}",
    },
    "grading.check.type.text": {
        "en": "expected a string, got {got}",
        "ro": "se aștepta un șir de caractere, s-a primit {got}",
    },
    "grading.check.type.sequence": {
        "en": "expected a list of {n:@item|items}, got {got}",
        "ro": "se aștepta o listă de {n:@element|elemente}, s-a primit {got}",
    },
    "grading.check.type.mapping": {
        "en": "expected a dict with the keys {keys}, got {got}",
        "ro": "se aștepta un dict cu cheile {keys}, s-a primit {got}",
    },
    "grading.check.unknown": {
        "en": "no question is registered with the id {qid!r} (see labkit/course/questions/)",
        "ro": "nicio întrebare nu este înregistrată cu id-ul {qid!r} (vezi labkit/course/questions/)",
    },
    "grading.check.needs": {
        "en": "the check {qid} needs {names}=...: call labkit.check({qid!r}, value, {names}=...)",
        "ro": "verificarea {qid} are nevoie de {names}=...: apelați labkit.check({qid!r}, valoare, {names}=...)",
    },
    "grading.check.type.function": {
        "en": "expected a function (def ...), got {got}",
        "ro": "se aștepta o funcție (def ...), s-a primit {got}",
    },
    "grading.check.type.run": {
        "en": "expected the Run of your %%torchrun cell (labkit.last_run), got {got}",
        "ro": "se aștepta rularea (Run) celulei voastre %%torchrun (labkit.last_run), s-a primit {got}",
    },
    "grading.check.type.model": {
        "en": "expected a model (a torch.nn.Module), got {got}",
        "ro": "se aștepta un model (un torch.nn.Module), s-a primit {got}",
    },
    "grading.check.formula.args": {
        "en": "your function must take the arguments ({names})",
        "ro": "funcția voastră trebuie să primească argumentele ({names})",
    },
    "grading.check.questions_module": {
        "en": "cannot load the questions module {name!r} named in LABKIT_QUESTIONS: {error}",
        "ro": "modulul de întrebări {name!r} din LABKIT_QUESTIONS nu poate fi încărcat: {error}",
    },
    # labkit.grading.report
    "grading.report.title": {"en": "Score report: {student}", "ro": "Raport de punctaj: {student}"},
    "grading.report.total": {"en": "Total: {score} ({percent})", "ro": "Total: {score} ({percent})"},
    "grading.report.lesson": {"en": "Lesson {lesson}", "ro": "Lecția {lesson}"},
    "grading.report.file": {"en": "file {file}: {status}, {seconds} s", "ro": "fișierul {file}: {status}, {seconds} s"},
    "grading.report.not_counted": {
        "en": "not counted: another submission of this lesson scored higher",
        "ro": "nu se punctează: altă predare a acestei lecții are mai multe puncte",
    },
    "grading.report.col.question": {"en": "question", "ro": "întrebare"},
    "grading.report.col.result": {"en": "result", "ro": "rezultat"},
    "grading.report.col.points": {"en": "points", "ro": "puncte"},
    "grading.report.col.feedback": {"en": "feedback", "ro": "observații"},
    "grading.report.col.student": {"en": "student", "ro": "student"},
    "grading.report.col.total": {"en": "total", "ro": "total"},
    "grading.report.errors": {"en": "Cells that raised an error:", "ro": "Celule care au ridicat o eroare:"},
    "grading.report.cell": {"en": "cell {cell}", "ro": "celula {cell}"},
    "grading.report.attempts": {
        "en": "{n:@attempt|attempts}, the last one counts",
        "ro": "{n:@încercare|încercări}, contează ultima",
    },
    "grading.report.no_submissions": {"en": "no notebooks", "ro": "niciun notebook"},
    "grading.grade.status.correct": {"en": "✓ correct", "ro": "✓ corect"},
    "grading.grade.status.wrong": {"en": "✗ wrong", "ro": "✗ greșit"},
    "grading.grade.status.unanswered": {"en": "… not answered", "ro": "… fără răspuns"},
    "grading.grade.status.missing": {"en": "— did not run", "ro": "— nu a rulat"},
    "grading.grade.status.extra": {"en": "not graded", "ro": "nu se notează"},
    "grading.grade.feedback.missing": {
        "en": "this check never ran: did an earlier cell fail, or was the check cell deleted?",
        "ro": "această verificare nu a rulat: a eșuat o celulă anterioară sau celula a fost ștearsă?",
    },
    "grading.grade.feedback.extra": {
        "en": "not a question of this lesson",
        "ro": "nu este o întrebare a acestei lecții",
    },
    "grading.grade.run.ok": {"en": "ran cleanly", "ro": "a rulat fără erori"},
    "grading.grade.run.errors": {"en": "some cells raised errors", "ro": "unele celule au ridicat erori"},
    "grading.grade.run.timeout": {
        "en": "stopped at the time limit ({message}); the checks before it count",
        "ro": "oprit la limita de timp ({message}); verificările de dinainte se punctează",
    },
    "grading.grade.run.died": {
        "en": "the kernel died ({message}); the checks before it count",
        "ro": "kernelul a murit ({message}); verificările de dinainte se punctează",
    },
    "grading.grade.run.failed": {"en": "could not be run ({message})", "ro": "nu a putut fi rulat ({message})"},
    "grading.grade.run.unreadable": {
        "en": "is not a readable notebook ({message})",
        "ro": "nu este un notebook care poate fi citit ({message})",
    },
}
