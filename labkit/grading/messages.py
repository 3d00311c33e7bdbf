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
    "grading.check.line.deferred": {
        "en": "✎ {qid}: answer recorded; checked when you hand in",
        "ro": "✎ {qid}: răspuns înregistrat; se verifică la predare",
    },
    # labkit.grading.cli
    "grading.cli.grade.help": {
        "en": "grade a folder of submitted notebooks",
        "ro": "notează un dosar de notebook-uri predate",
    },
    "grading.cli.grade.description": {
        "en": "Run every notebook in SUBMISSIONS in a sandbox of its own (bubblewrap), judge what its labkit.check calls handed in, and write a report per student (JSON and Markdown) and a CSV gradebook. SUBMISSIONS holds one folder per student, or files named <student>_<anything>.ipynb.",
        "ro": "Rulează fiecare notebook din SUBMISSIONS într-un sandbox propriu (bubblewrap), judecă ce au predat apelurile labkit.check și scrie un raport pentru fiecare student (JSON și Markdown) și un catalog CSV. SUBMISSIONS conține câte un dosar pentru fiecare student, sau fișiere numite <student>_<orice>.ipynb.",
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
    "grading.cli.grade.seed": {
        "en": "the seed of the inputs the exercises on the ranks are re-run with (default: a new one; each report records its own, to grade again the same way)",
        "ro": "sămânța datelor de intrare cu care se rulează din nou exercițiile pe ranguri (implicit: una nouă; fiecare raport o înregistrează pe a sa, ca să notați din nou la fel)",
    },
    "grading.cli.grade.no_sandbox": {
        "en": "run the submissions as plain processes of yours, without a sandbox (only for notebooks you trust)",
        "ro": "rulează predările ca procese obișnuite ale voastre, fără sandbox (doar pentru notebook-uri în care aveți încredere)",
    },
    "grading.cli.build.install": {
        "en": "the student's install (labkit without answers): {folder}, and to pip install: {wheel}",
        "ro": "instalarea pentru studenți (labkit fără răspunsuri): {folder}, iar pentru pip install: {wheel}",
    },
    "grading.cli.build.nbgrader_source": {
        "en": "also write the solution notebooks with nbgrader's cell metadata here, for nbgrader's source/ folder (they hold the solutions: keep them away from students)",
        "ro": "scrie aici și notebook-urile cu soluții, cu metadatele de celulă nbgrader, pentru dosarul source/ al nbgrader (conțin soluțiile: țineți-le departe de studenți)",
    },
    "grading.cli.build.no_install": {
        "en": "write the student notebooks only, not the student's install of labkit",
        "ro": "scrie doar notebook-urile pentru studenți, fără instalarea labkit pentru studenți",
    },
    "grading.cli.grade.install": {
        "en": "submissions run with the student's install of labkit in {folder}",
        "ro": "predările rulează cu instalarea labkit pentru studenți din {folder}",
    },
    # labkit.grading.slurm: labkit grade --slurm
    "grading.cli.grade.slurm": {
        "en": "grade on the Slurm cluster: one array job, one task a submission (each in its own sandbox, on a node); "
        "the submissions and --out must be on a filesystem the nodes share",
        "ro": "notează pe clusterul Slurm: un singur job array, o sarcină pentru fiecare predare (fiecare în sandbox-ul ei, "
        "pe un nod); predările și --out trebuie să fie pe un sistem de fișiere comun nodurilor",
    },
    "grading.cli.grade.slurm_args": {
        "en": 'more sbatch options for the array, as one string ("-p class --qos grading"); they come last and win',
        "ro": 'alte opțiuni sbatch pentru array, ca un singur șir ("-p class --qos grading"); vin ultimele și au prioritate',
    },
    "grading.slurm.no_sbatch": {
        "en": "labkit grade --slurm: sbatch is not here (run it where the cluster's commands are)",
        "ro": "labkit grade --slurm: sbatch nu există aici (rulați-l unde sunt comenzile clusterului)",
    },
    "grading.slurm.refused": {
        "en": "labkit grade --slurm: sbatch refused the array: {why}",
        "ro": "labkit grade --slurm: sbatch a refuzat array-ul: {why}",
    },
    "grading.slurm.submitted": {
        "en": "labkit grade: Slurm job {job}, {n:@task|tasks} (one a submission); their logs in {folder}",
        "ro": "labkit grade: jobul Slurm {job}, {n:@sarcină|sarcini} (una pentru fiecare predare); jurnalele lor în {folder}",
    },
    "grading.slurm.no_squeue": {
        "en": "labkit grade: squeue has not answered about job {job} for minutes; grading what the tasks wrote",
        "ro": "labkit grade: squeue nu a mai răspuns despre jobul {job} de câteva minute; notez ce au scris sarcinile",
    },
    "grading.slurm.no_result": {
        "en": "Slurm task {i} left no result: {state}; its log: {log}",
        "ro": "sarcina Slurm {i} nu a lăsat niciun rezultat: {state}; jurnalul ei: {log}",
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
    "grading.check.deferred": {
        "en": "this answer is checked when the notebook is graded",
        "ro": "acest răspuns este verificat la notarea notebook-ului",
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
    "grading.report.attempts_first": {
        "en": "{n:@attempt|attempts}, the first one counts",
        "ro": "{n:@încercare|încercări}, contează prima",
    },
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
    "grading.grade.run.refused": {
        "en": "was not graded: {message} (hand in the notebook file itself)",
        "ro": "nu a fost notat: {message} (predați chiar fișierul notebook-ului)",
    },
    "grading.grade.run.grader_error": {
        "en": "could not be scored ({message}); tell your instructor",
        "ro": "nu a putut fi punctat ({message}); anunțați-vă profesorul",
    },
    "grading.grade.run.unreadable": {
        "en": "is not a readable notebook ({message})",
        "ro": "nu este un notebook care poate fi citit ({message})",
    },
    # labkit.grading.exercises
    "grading.exercise.no_observation": {
        "en": "labkit saw no run of this cell on rank {rank}: pass the Run of the exercise cell itself",
        "ro": "labkit nu a văzut nicio rulare a acestei celule pe rangul {rank}: dați rularea (Run) chiar a celulei exercițiului",
    },
    "grading.exercise.cell_failed": {
        "en": "the cell raised an error on rank {rank}: make it run to the end first",
        "ro": "celula a ridicat o eroare pe rangul {rank}: faceți-o întâi să ruleze până la capăt",
    },
    "grading.exercise.missing": {
        "en": "after the cell, rank {rank} has no {what} named {name}",
        "ro": "după celulă, rangul {rank} nu are niciun {what} numit {name}",
    },
    "grading.exercise.calls": {
        "en": "rank {rank}: {where} issued {got}; the exercise needs {want}",
        "ro": "rangul {rank}: {where} a pornit {got}; exercițiul cere {want}",
    },
    "grading.exercise.where.module": {"en": "your code", "ro": "codul vostru"},
    "grading.exercise.where.function": {"en": "your function {fn}", "ro": "funcția voastră {fn}"},
    "grading.exercise.nothing": {"en": "no collective", "ro": "nicio operație colectivă"},
    "grading.exercise.wrong_input": {
        "en": "rank {rank}: the {op} was given a tensor that is not {what}",
        "ro": "rangul {rank}: {op} a primit un tensor care nu este {what}",
    },
    "grading.exercise.wrong_size": {
        "en": "rank {rank}: the {op} took {got_in:@element|elements} and returned {got_out}; it should take {want_in} and return {want_out}",
        "ro": "rangul {rank}: {op} a primit {got_in:@element|elemente} și a întors {got_out}; ar trebui să primească {want_in} și să întoarcă {want_out}",
    },
    "grading.exercise.not_mean": {
        "en": "rank {rank}: {name} holds the sum over the ranks, not their mean",
        "ro": "rangul {rank}: {name} conține suma pe ranguri, nu media lor",
    },
    "grading.exercise.wrong_values": {
        "en": "rank {rank}: {name} does not hold what the collective computed",
        "ro": "rangul {rank}: {name} nu conține ce a calculat operația colectivă",
    },
    "grading.exercise.not_in_place": {
        "en": "rank {rank}: {model} has {total:@gradient|gradients}, and {missing:@# was|# were} not reduced in place",
        "ro": "rangul {rank}: {model} are {total:@gradient|gradienți}, iar {missing:@# nu a fost redus|# nu au fost reduși|# nu au fost reduși} pe loc",
    },
    "grading.exercise.grads_differ": {
        "en": "rank {rank}: the gradient of {param} differs from DDP's",
        "ro": "rangul {rank}: gradientul lui {param} diferă de cel al DDP",
    },
    "grading.exercise.units": {
        "en": "rank {rank}: {api} made the units {got}; the exercise wants the root and one unit per block",
        "ro": "rangul {rank}: {api} a făcut unitățile {got}; exercițiul cere rădăcina și câte o unitate pe bloc",
    },
    "grading.exercise.not_sharded": {
        "en": "rank {rank}: {api} holds {got:@byte|bytes} of parameters; a rank should hold 1/{n} of the units",
        "ro": "rangul {rank}: {api} ține {got:@octet|octeți} de parametri; un rang ar trebui să țină 1/{n} din unități",
    },
    "grading.exercise.prefetch_config": {
        "en": "rank {rank}: FSDP2 was told to prefetch {got} in forward",
        "ro": "rangul {rank}: FSDP2 a primit indicația să preîncarce {got} în trecerea directă",
    },
    "grading.exercise.prefetch_order": {
        "en": "rank {rank}: the all-gathers issued by the time each block started computing: {got}",
        "ro": "rangul {rank}: colectările pornite până când fiecare bloc a început să calculeze: {got}",
    },
    "grading.exercise.steps": {
        "en": "rank {rank}: labkit saw {got:@model|models} run forward; the cell runs {want}",
        "ro": "rangul {rank}: labkit a văzut {got:@model|modele} rulând trecerea directă; celula rulează {want}",
    },
    "grading.exercise.dtype": {
        "en": "rank {rank}: with your policy the {op} moved {dtype}; {want}",
        "ro": "rangul {rank}: cu politica voastră {op} a mutat {dtype}; {want}",
    },
    "grading.exercise.dtype.half": {
        "en": "it should move half the bytes of fp32",
        "ro": "ar trebui să mute jumătate din octeții fp32",
    },
    "grading.exercise.dtype.fp32": {"en": "the gradients must stay fp32", "ro": "gradienții trebuie să rămână fp32"},
    "grading.exercise.no_recompute": {
        "en": "rank {rank}: in your step each block computed {got:@once|# times}; blocks whose activations were dropped compute again in backward",
        "ro": "rangul {rank}: în pasul vostru fiecare bloc a calculat {got:@o dată|de # ori}; blocurile ale căror activări nu au fost păstrate se calculează din nou în trecerea inversă",
    },
    "grading.exercise.micro_batches": {
        "en": "rank {rank}: your step ran {got:@forward|forwards} before the optimizer step; the reference runs one per micro-batch, {want}",
        "ro": "rangul {rank}: pasul vostru a rulat {got:@trecere directă|treceri directe} înainte de pasul optimizatorului; referința rulează câte una pe micro-lot, {want}",
    },
    "grading.exercise.accumulate_sync": {
        "en": "rank {rank}: your optimizer step reduce-scattered {got:@once|# times}; accumulating without syncing reduce-scatters each unit once per optimizer step ({want} in all)",
        "ro": "rangul {rank}: pasul vostru al optimizatorului a redus cu distribuire {got:@o dată|de # ori}; acumularea fără sincronizare reduce fiecare unitate o singură dată pe pasul optimizatorului ({want} în total)",
    },
    "grading.exercise.accumulated_grads": {
        "en": "rank {rank}: after the optimizer step the loss is {yours}, where syncing every micro-batch gives {every}: the accumulated gradient is not the mean of the micro-batches' gradients",
        "ro": "rangul {rank}: după pasul optimizatorului pierderea este {yours}, iar cu sincronizare la fiecare micro-lot este {every}: gradientul acumulat nu este media gradienților micro-loturilor",
    },
    # lesson 9: parallelize(model, mesh), tensor parallelism over mesh['tp'] and FSDP2 over mesh['dp']
    "grading.exercise.compose.not_fsdp2": {
        "en": "rank {rank}: the model your function returned is not sharded by FSDP2 (fully_shard) over mesh['dp']",
        "ro": "rangul {rank}: modelul întors de funcția voastră nu este fragmentat de FSDP2 (fully_shard) pe mesh['dp']",
    },
    "grading.exercise.compose.tp_missing": {
        "en": "rank {rank} holds {got:@element|elements} of {name}, of {total}: tensor parallelism over mesh['tp'] "
        "should leave it {want}",
        "ro": "rangul {rank} ține {got:@element|elemente} din {name}, din {total}: paralelismul tensorial pe "
        "mesh['tp'] ar trebui să-i lase {want}",
    },
    "grading.exercise.compose.dp_missing": {
        "en": "rank {rank} holds {got:@element|elements} of {name}, of {total}: FSDP over mesh['dp'] should leave it "
        "{want}",
        "ro": "rangul {rank} ține {got:@element|elemente} din {name}, din {total}: FSDP pe mesh['dp'] ar trebui "
        "să-i lase {want}",
    },
    "grading.exercise.compose.no_tp": {
        "en": "rank {rank}: the composed model holds {got:@element|elements}, a 1/{dp} share of the plain model's "
        "{total}: nothing is split over mesh['tp'] on top of FSDP",
        "ro": "rangul {rank}: modelul compus ține {got:@element|elemente}, o parte de 1/{dp} din cele {total} ale "
        "modelului obișnuit: nimic nu este împărțit pe mesh['tp'] în plus față de FSDP",
    },
    "grading.exercise.compose.losses": {
        "en": "rank {rank}: labkit saw {got:@loss|losses} computed without gradients before training; the cell "
        "computes two, the plain model's and yours, on the same batch",
        "ro": "rangul {rank}: labkit a văzut {got:@pierdere calculată|pierderi calculate} fără gradienți înainte de "
        "antrenare; celula calculează două, a modelului obișnuit și a voastră, pe același lot",
    },
    "grading.exercise.compose.step": {
        "en": "rank {rank}: after one step, {name} differs from a plain model trained on every replica's batch "
        "(the gradients must be averaged over mesh['dp'] and complete over mesh['tp'])",
        "ro": "rangul {rank}: după un pas, {name} diferă de un model obișnuit antrenat pe loturile tuturor "
        "replicilor (gradienții trebuie mediați pe mesh['dp'] și compleți pe mesh['tp'])",
    },
    "grading.exercise.loss_changed": {
        "en": "rank {rank}: the loss changed from {plain} to {yours}: the step must stay the same step",
        "ro": "rangul {rank}: pierderea s-a schimbat de la {plain} la {yours}: pasul trebuie să rămână același",
    },
    "grading.exercise.reloaded": {
        "en": "the model's loss on the probe batch is {got}; the model the ranks saved gives {want}",
        "ro": "pierderea modelului pe lotul de probă este {got}; modelul salvat de ranguri dă {want}",
    },
    "grading.exercise.policy_units": {
        "en": "on a model of dim {dim} with {blocks:@block|blocks}, your value {value} makes the units {got}",
        "ro": "pe un model cu dim {dim} și {blocks:@bloc|blocuri}, valoarea voastră {value} face unitățile {got}",
    },
    # labkit.grading.rerun: the grader's own ranks, running the functions handed in
    "grading.exercise.over_budget": {
        "en": "rank {rank}: your step kept {got:@byte|bytes} of activations at its peak; the budget is {budget}",
        "ro": "rangul {rank}: pasul vostru a păstrat {got:@octet|octeți} de activări la vârf; bugetul este {budget}",
    },
    "grading.exercise.rerun.timeout": {
        "en": "the grader ran your functions on ranks of its own, and they were still running after {seconds} s",
        "ro": "evaluatorul a rulat funcțiile voastre pe ranguri proprii, iar ele încă rulau după {seconds} s",
    },
    "grading.exercise.rerun.crashed": {
        "en": "the grader ran your functions on ranks of its own, and rank {rank} raised: {error}",
        "ro": "evaluatorul a rulat funcțiile voastre pe ranguri proprii, iar rangul {rank} a ridicat: {error}",
    },
    "grading.exercise.rerun.no_output": {
        "en": "the grader ran your functions on ranks of its own, and rank {rank} returned nothing it could judge",
        "ro": "evaluatorul a rulat funcțiile voastre pe ranguri proprii, iar rangul {rank} nu a întors nimic de evaluat",
    },
    "grading.exercise.rerun.malformed": {
        "en": "the grader ran your functions on ranks of its own, and what they returned has the wrong shape ({error})",
        "ro": "evaluatorul a rulat funcțiile voastre pe ranguri proprii, iar ce au întors are o formă greșită ({error})",
    },
    "grading.exercise.rerun.no_functions": {
        "en": "no code cell of the notebook defines {names}, as the exercise cell does",
        "ro": "nicio celulă de cod a notebook-ului nu definește {names}, cum o face celula exercițiului",
    },
    # labkit.grading.judge
    "grading.judge.no_report": {
        "en": "this check's output holds nothing the grader can judge (was it printed by hand?)",
        "ro": "ieșirea acestei verificări nu conține nimic ce poate judeca profesorul (a fost afișată de mână?)",
    },
    "grading.judge.no_source": {
        "en": "the grader needs a function defined in the notebook (def ...), got {got}",
        "ro": "notarea are nevoie de o funcție definită în notebook (def ...), s-a primit {got}",
    },
    "grading.judge.no_run": {
        "en": "no measurement of this run reached the grader: pass the Run of the exercise's own %%torchrun cell",
        "ro": "nicio măsurătoare a acestei rulări nu a ajuns la notare: dați rularea (Run) chiar a celulei %%torchrun a exercițiului",
    },
    "grading.judge.no_model": {
        "en": "the model's weights did not reach the grader",
        "ro": "ponderile modelului nu au ajuns la notare",
    },
    "grading.judge.no_result": {
        "en": "the grader could not run your function ({error})",
        "ro": "notarea nu a putut rula funcția voastră ({error})",
    },
    "grading.judge.died": {
        "en": "the grader's process for this answer ended ({how}) before it checked it",
        "ro": "procesul de notare pentru acest răspuns s-a încheiat ({how}) înainte să-l verifice",
    },
    "grading.judge.timeout": {
        "en": "the grader's process for this answer ran past {seconds} s before it checked it",
        "ro": "procesul de notare pentru acest răspuns a depășit {seconds} s înainte să-l verifice",
    },
    "grading.judge.context": {
        "en": "this answer is checked for the lesson's own cases only ({names} as the lesson sets them)",
        "ro": "acest răspuns se verifică doar pentru cazurile lecției ({names} așa cum le stabilește lecția)",
    },
    "grading.judge.unreadable": {
        "en": "the grader could not read what this check handed in ({error})",
        "ro": "notarea nu a putut citi ce a predat această verificare ({error})",
    },
    "grading.judge.no_context": {
        "en": "the check was called without {names}, which its answer depends on: pass it as the lesson's cell does",
        "ro": "verificarea a fost apelată fără {names}, de care depinde răspunsul: dați-l așa cum face celula lecției",
    },
    # labkit.grading.sandbox
    "grading.sandbox.unavailable": {
        "en": "labkit grade runs every submission in a sandbox, and none can be made here: {why}. Install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) and allow user namespaces, or run labkit grade --no-sandbox to run the submissions as plain processes of yours (only for notebooks you trust)",
        "ro": "labkit grade rulează fiecare predare într-un sandbox, iar aici nu se poate face niciunul: {why}. Instalați bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) și permiteți spațiile de nume ale utilizatorilor, sau rulați labkit grade --no-sandbox ca să rulați predările ca procese obișnuite ale voastre (doar pentru notebook-uri în care aveți încredere)",
    },
    "grading.sandbox.no_bwrap": {"en": "bwrap is not on PATH", "ro": "bwrap nu este în PATH"},
    "grading.sandbox.failed": {"en": "bwrap could not start: {error}", "ro": "bwrap nu a putut porni: {error}"},
    # labkit.grading.selfstudy: the self-learner's workspace, progress and solutions
    "grading.selfstudy.created": {
        "en": "labkit: your workspace is {folder}: the student edition of the course, yours to change (an update never overwrites it)",
        "ro": "labkit: spațiul vostru de lucru este {folder}: ediția pentru studenți a cursului, a voastră de modificat (o actualizare nu o suprascrie niciodată)",
    },
    "grading.selfstudy.update": {
        "en": "labkit: a newer edition of the course is in {folder}, beside your work (which is left as it is)",
        "ro": "labkit: o ediție mai nouă a cursului este în {folder}, lângă lucrul vostru (care rămâne neschimbat)",
    },
    "grading.selfstudy.caption": {
        "en": "Your progress, from the checks you ran (save the notebook to keep them)",
        "ro": "Progresul vostru, din verificările pe care le-ați rulat (salvați notebook-ul ca să le păstrați)",
    },
    "grading.selfstudy.total": {"en": "course", "ro": "curs"},
    "grading.selfstudy.col.lesson": {"en": "lesson", "ro": "lecția"},
    "grading.selfstudy.col.correct": {"en": "correct", "ro": "corecte"},
    "grading.selfstudy.col.attempted": {"en": "attempted", "ro": "încercate"},
    "grading.selfstudy.col.not_yet": {"en": "not yet", "ro": "încă nu"},
    "grading.selfstudy.col.released": {"en": "released grade", "ro": "nota publicată"},
    "grading.selfstudy.col.points": {"en": "points", "ro": "puncte"},
    "grading.selfstudy.try_first": {
        "en": "Try {qid} first: run its check with your answer, then ask again for its solution",
        "ro": "Încercați întâi {qid}: rulați verificarea cu răspunsul vostru, apoi cereți din nou soluția",
    },
    "grading.selfstudy.no_solution": {
        "en": "no solution of {qid} here: this install is not a self-study build (launch/lab.sh makes one)",
        "ro": "nicio soluție pentru {qid} aici: această instalare nu este o construcție pentru studiu individual (launch/lab.sh face una)",
    },
    "grading.cli.grade.self": {
        "en": "grade your own workspace (LABKIT_WORKSPACE, else ~/fsdp-labkit-work): the notebook of each lesson you worked in most; the report goes to the workspace's .labkit/grade unless --out says otherwise",
        "ro": "notează propriul spațiu de lucru (LABKIT_WORKSPACE, altfel ~/fsdp-labkit-work): notebook-ul fiecărei lecții în care ați lucrat cel mai mult; raportul merge în .labkit/grade din spațiul de lucru, dacă --out nu spune altceva",
    },
    "grading.cli.grade.self_plain": {
        "en": "labkit: no sandbox here ({why}); your own notebooks run as plain processes of yours (--no-sandbox)",
        "ro": "labkit: niciun sandbox aici ({why}); notebook-urile voastre rulează ca procese obișnuite ale voastre (--no-sandbox)",
    },
    "grading.cli.grade.self_none": {
        "en": "labkit: no notebooks in {folder} (launch/lab.sh makes the workspace)",
        "ro": "labkit: niciun notebook în {folder} (launch/lab.sh face spațiul de lucru)",
    },
    "grading.cli.grade.needs": {
        "en": "labkit grade needs a submissions folder and --out, or --self",
        "ro": "labkit grade are nevoie de un dosar de predări și de --out, sau de --self",
    },
    "grading.cli.build.self_study": {
        "en": "the self-study build: also write solutions.json, each question's solution, which labkit.solution shows a learner after a try (never for a class: a class's install must hold no solutions)",
        "ro": "construcția pentru studiu individual: scrie și solutions.json, soluția fiecărei întrebări, pe care labkit.solution o arată după o încercare (niciodată pentru o clasă: instalarea unei clase nu trebuie să conțină soluții)",
    },
    # labkit.grading.rerun_lesson8: lesson 8's overlap, buckets and ZeRO-1, by hand
    "grading.exercise.overlap.none": {
        "en": "rank {rank}, step {step}: no all-reduce was launched while backward ran; each gradient's should start as soon as autograd has it",
        "ro": "rangul {rank}, pasul {step}: nicio reducere globală (all-reduce) nu a pornit cât a rulat trecerea inversă; a fiecărui gradient ar trebui să pornească imediat ce autograd îl are",
    },
    "grading.exercise.overlap.blocking": {
        "en": "rank {rank}, step {step}: an all-reduce issued during backward was blocking (async_op=False): backward waited for it instead of computing beside it",
        "ro": "rangul {rank}, pasul {step}: o reducere globală pornită în trecerea inversă a fost blocantă (async_op=False): trecerea inversă a așteptat-o în loc să calculeze alături de ea",
    },
    "grading.exercise.overlap.late": {
        "en": "rank {rank}, step {step}: {inside:@byte|bytes} of the {total:@byte|bytes} of gradients were all-reduced while backward ran; the rest waited until after it",
        "ro": "rangul {rank}, pasul {step}: {inside:@octet|octeți} din {total:@octet|octeți} de gradienți au fost reduși global cât a rulat trecerea inversă; restul au așteptat până după ea",
    },
    "grading.exercise.overlap.grads": {
        "en": "rank {rank}, step {step}: after finish(), the gradient of {param} is not the mean over the ranks",
        "ro": "rangul {rank}, pasul {step}: după finish(), gradientul lui {param} nu este media pe ranguri",
    },
    "grading.exercise.overlap.buckets": {
        "en": "rank {rank}: {got:@all-reduce|all-reduces} in backward for {n:@gradient|gradients} ({total:@byte|bytes}, bucket_bytes={bucket}); buckets make fewer all-reduces than gradients, at least two here, and about one per bucket_bytes",
        "ro": "rangul {rank}: {got:@reducere globală|reduceri globale} în trecerea inversă pentru {n:@gradient|gradienți} ({total:@octet|octeți}, bucket_bytes={bucket}); compartimentele fac mai puține reduceri decât gradienți, aici cel puțin două, și cam câte una la bucket_bytes",
    },
    "grading.exercise.overlap.buckets_seen": {
        "en": "rank {rank}: {got:@all-reduce|all-reduces} for {n:@gradient|gradients}; a bucket groups several gradients, and this model needs more than one bucket",
        "ro": "rangul {rank}: {got:@reducere globală|reduceri globale} pentru {n:@gradient|gradienți}; un compartiment grupează mai mulți gradienți, iar acest model are nevoie de mai mult de un compartiment",
    },
    "grading.exercise.overlap.no_mark": {
        "en": "rank {rank}: labkit saw no dist.barrier() of the cell after backward: keep the cell's own lines around your function",
        "ro": "rangul {rank}: labkit nu a văzut niciun dist.barrier() al celulei după trecerea inversă: păstrați liniile celulei din jurul funcției voastre",
    },
    "grading.exercise.zero1.state": {
        "en": "rank {rank}: the optimizer holds state for {got:@number|numbers}; ZeRO-1's shard of it holds at most {want}",
        "ro": "rangul {rank}: optimizatorul ține stări pentru {got:@număr|numere}; fragmentul ZeRO-1 ține cel mult {want}",
    },
    "grading.exercise.zero1.params": {
        "en": "rank {rank}: after {steps:@step|steps}, the parameter {param} differs from what the same optimizer gives on the whole model with the mean gradient",
        "ro": "rangul {rank}: după {steps:@pas|pași}, parametrul {param} diferă de ce dă același optimizator pe tot modelul, cu gradientul mediu",
    },
    "grading.exercise.zero1.flat": {
        "en": "rank {rank}: your model's parameters after the steps differ from those ZeroRedundancyOptimizer trained",
        "ro": "rangul {rank}: parametrii modelului vostru după pași diferă de cei antrenați de ZeroRedundancyOptimizer",
    },
}
