"""The messages of labkit.classroom: the course file's errors, the exchange, submit, collect, feedback, exports.

Data only, in English and Romanian; every key starts with ``classroom.``.
"""

MESSAGES: dict[str, dict[str, str]] = {
    # labkit.classroom.course: the course file
    "classroom.course.at": {"en": "{where}: {path}: {why}", "ro": "{where}: {path}: {why}"},
    "classroom.course.toml": {
        "en": "{source}: not a valid TOML file: {error}",
        "ro": "{source}: nu este un fișier TOML valid: {error}",
    },
    "classroom.course.read": {
        "en": "the course file {source} cannot be read ({error})",
        "ro": "fișierul cursului {source} nu poate fi citit ({error})",
    },
    "classroom.course.table": {"en": "expected a table", "ro": "se aștepta un tabel"},
    "classroom.course.unknown": {
        "en": "unknown key (did you mean {near}? known: {known})",
        "ro": "cheie necunoscută (poate {near}? cunoscute: {known})",
    },
    "classroom.course.missing": {"en": "{name} is missing", "ro": "lipsește {name}"},
    "classroom.course.type": {
        "en": "expected {want}, got {got}",
        "ro": "se aștepta {want}, s-a primit {got}",
    },
    "classroom.course.date": {
        "en": "{value!r} is not a date and time (ISO 8601, such as 2026-10-12T23:59:00+03:00)",
        "ro": "{value!r} nu este o dată cu oră (ISO 8601, de exemplu 2026-10-12T23:59:00+03:00)",
    },
    "classroom.course.timezone": {
        "en": "{value} has no time zone: write it with one (such as +03:00 or Z), or every deadline moves with "
        "the server's clock",
        "ro": "{value} nu are fus orar: scrieți-l cu unul (de exemplu +03:00 sau Z), altfel fiecare termen se mută "
        "după ceasul serverului",
    },
    "classroom.course.id": {
        "en": "{value!r} is not an id: letters, digits and . _ @ + -, starting with a letter or digit",
        "ro": "{value!r} nu este un identificator: litere, cifre și . _ @ + -, începând cu o literă sau o cifră",
    },
    "classroom.course.twice": {"en": "{value!r} is given twice", "ro": "{value!r} apare de două ori"},
    "classroom.course.language": {
        "en": "{value!r} is not one of the course's languages ({langs})",
        "ro": "{value!r} nu este una dintre limbile cursului ({langs})",
    },
    "classroom.course.email": {"en": "{value!r} is not an email address", "ro": "{value!r} nu este o adresă de e-mail"},
    "classroom.course.negative": {"en": "{value} is negative", "ro": "{value} este negativ"},
    "classroom.course.per_day": {
        "en": "{value} is not a share between 0 and 1 (0.1: a tenth of the points per day late)",
        "ro": "{value} nu este o fracție între 0 și 1 (0.1: o zecime din puncte pentru fiecare zi de întârziere)",
    },
    "classroom.course.prefer": {
        "en": "{value!r}: on_time (the latest on-time submission) or latest (the latest accepted)",
        "ro": "{value!r}: on_time (ultima predare la timp) sau latest (ultima acceptată)",
    },
    "classroom.course.gpu": {
        "en": "{value!r} is not a GPU profile: a number of GPUs (0, 1, 2, ...) or shared",
        "ro": "{value!r} nu este un profil GPU: un număr de GPU-uri (0, 1, 2, ...) sau shared",
    },
    "classroom.course.moodle_id": {
        "en": "{value!r}: Moodle matches students on email, idnumber or username",
        "ro": "{value!r}: Moodle recunoaște studenții după email, idnumber sau username",
    },
    # labkit.classroom.exchange: a submission refused
    "classroom.exchange.student": {
        "en": "{student!r} is not a student name the exchange takes",
        "ro": "{student!r} nu este un nume de student pe care schimbul îl acceptă",
    },
    "classroom.exchange.large": {
        "en": "the notebook is larger than {mib} MiB",
        "ro": "notebook-ul are mai mult de {mib} MiB",
    },
    "classroom.exchange.not_notebook": {"en": "this is not a notebook", "ro": "acesta nu este un notebook"},
    "classroom.exchange.no_lesson": {
        "en": "which lesson is this? It has no labkit check and no lesson in its metadata: give the lesson",
        "ro": "ce lecție este aceasta? Nu are nicio verificare labkit și nicio lecție în metadate: precizați lecția",
    },
    "classroom.exchange.not_enrolled": {
        "en": "{student} is not on the course's roster",
        "ro": "{student} nu este pe lista cursului",
    },
    "classroom.exchange.unknown_lesson": {
        "en": "the course has no lesson {lesson}",
        "ro": "cursul nu are lecția {lesson}",
    },
    "classroom.exchange.not_file": {"en": "{file} is not a regular file", "ro": "{file} nu este un fișier obișnuit"},
    "classroom.exchange.changed": {
        "en": "{file} no longer matches its receipt: it was changed after it was received",
        "ro": "{file} nu mai corespunde chitanței: a fost modificat după primire",
    },
    # labkit.classroom.client: labkit submit, labkit.submit()
    "classroom.submit.on_time": {
        "en": "Submitted {lesson}: received {when} (server time), on time. Fingerprint {sha}.",
        "ro": "Predat {lesson}: primit {when} (ora serverului), la timp. Amprenta {sha}.",
    },
    "classroom.submit.late": {
        "en": "Submitted {lesson}: received {when} (server time), {days:@day|days} late. Fingerprint {sha}.",
        "ro": "Predat {lesson}: primit {when} (ora serverului), cu {days:@zi|zile} întârziere. Amprenta {sha}.",
    },
    "classroom.submit.grading": {
        "en": "Not handed in again: this notebook is being graded.",
        "ro": "Nu este predat din nou: acest notebook este în curs de notare.",
    },
    "classroom.submit.which": {
        "en": "which notebook? Give its path: labkit.submit('lesson1.ipynb')",
        "ro": "care notebook? Dați calea lui: labkit.submit('lesson1.ipynb')",
    },
    "classroom.submit.read": {
        "en": "{path} cannot be read ({why})",
        "ro": "{path} nu poate fi citit ({why})",
    },
    "classroom.submit.no_token": {
        "en": "no JupyterHub token here (JUPYTERHUB_API_TOKEN): submit from your JupyterLab on the hub",
        "ro": "niciun token JupyterHub aici (JUPYTERHUB_API_TOKEN): predați din JupyterLab-ul dumneavoastră de pe hub",
    },
    "classroom.submit.nowhere": {
        "en": "no exchange is set: LABKIT_EXCHANGE_URL (a hub's exchange service) or LABKIT_EXCHANGE (a folder)",
        "ro": "niciun schimb nu este setat: LABKIT_EXCHANGE_URL (serviciul de schimb al hub-ului) sau LABKIT_EXCHANGE "
        "(un dosar)",
    },
    "classroom.submit.refused": {
        "en": "the exchange refused it ({code}): {why}",
        "ro": "schimbul a refuzat-o ({code}): {why}",
    },
    "classroom.submit.unreachable": {
        "en": "the exchange at {url} cannot be reached ({why})",
        "ro": "schimbul de la {url} nu poate fi contactat ({why})",
    },
    # labkit.classroom.service
    "classroom.service.help": {
        "en": "the submission exchange, as a JupyterHub service",
        "ro": "schimbul de predări, ca serviciu JupyterHub",
    },
    "classroom.service.port": {
        "en": "the port to listen on (JUPYTERHUB_SERVICE_URL's, when the hub starts it)",
        "ro": "portul pe care ascultă (cel din JUPYTERHUB_SERVICE_URL, când îl pornește hub-ul)",
    },
    "classroom.service.listening": {
        "en": "labkit exchange: listening on {url}",
        "ro": "labkit exchange: ascult la {url}",
    },
    "classroom.service.forbidden": {
        "en": "not a JupyterHub token of this hub's users",
        "ro": "nu este un token JupyterHub al unui utilizator al acestui hub",
    },
    # labkit collect
    "classroom.collect.took": {
        "en": "{student} {lesson}: received {when}, on time",
        "ro": "{student} {lesson}: primit {when}, la timp",
    },
    "classroom.collect.late": {
        "en": "{student} {lesson}: received {when}, {days:@day|days} late",
        "ro": "{student} {lesson}: primit {when}, cu {days:@zi|zile} întârziere",
    },
    "classroom.collect.cutoff": {
        "en": "{n:@submission|submissions}, all after the late policy's cutoff",
        "ro": "{n:@predare|predări}, toate după limita politicii de întârziere",
    },
    "classroom.collect.refused": {"en": "{what}: not collected: {why}", "ro": "{what}: necolectat: {why}"},
    "classroom.collect.done": {
        "en": "{n:@submission|submissions} collected in {out}: grade them with labkit grade {out} --out reports/",
        "ro": "{n:@predare colectată|predări colectate} în {out}: notați-le cu labkit grade {out} --out reports/",
    },
    "classroom.feedback.done": {
        "en": "feedback released to {n:@student|students}",
        "ro": "feedback publicat pentru {n:@student|studenți}",
    },
    # labkit export --moodle / --canvas / --csv
    "classroom.export.no_gradebook": {
        "en": "{path} holds no gradebook.csv: give labkit grade's --out folder",
        "ro": "{path} nu conține gradebook.csv: dați dosarul --out al lui labkit grade",
    },
    "classroom.export.wrote": {"en": "{kind}: wrote {path}", "ro": "{kind}: am scris {path}"},
    "classroom.export.late": {"en": "late {days:@day|days}", "ro": "întârziere {days:@zi|zile}"},
    "classroom.export.missing": {"en": "not submitted", "ro": "nepredat"},
    "classroom.export.col.student": {"en": "student", "ro": "student"},
    "classroom.export.col.name": {"en": "name", "ro": "nume"},
    "classroom.export.col.email": {"en": "email", "ro": "e-mail"},
    "classroom.export.col.sis_id": {"en": "SIS id", "ro": "număr matricol"},
    "classroom.export.col.late": {"en": "{lesson} late", "ro": "{lesson} întârziere"},
    "classroom.export.col.total": {"en": "total", "ro": "total"},
    "classroom.export.col.max": {"en": "maximum", "ro": "maxim"},
    # the command's options
    "classroom.cli.course": {
        "en": "the course file (course.toml; default: LABKIT_COURSE)",
        "ro": "fișierul cursului (course.toml; implicit: LABKIT_COURSE)",
    },
    "classroom.cli.exchange": {
        "en": "the exchange folder (default: LABKIT_EXCHANGE)",
        "ro": "dosarul de schimb (implicit: LABKIT_EXCHANGE)",
    },
    "classroom.cli.student": {
        "en": "only this student (repeat for more)",
        "ro": "doar acest student (repetați pentru mai mulți)",
    },
    "classroom.cli.lesson": {
        "en": "only this lesson (repeat for more)",
        "ro": "doar această lecție (repetați pentru mai multe)",
    },
    "classroom.cli.no_cache": {
        "en": "grade every notebook again, keeping no score (by default an unchanged submission is not run again)",
        "ro": "notează din nou fiecare notebook, fără a păstra scoruri (implicit o predare neschimbată nu mai rulează)",
    },
    "classroom.cli.grade_feedback": {
        "en": "then release each student's report to this exchange folder (labkit feedback)",
        "ro": "apoi publică raportul fiecărui student în acest dosar de schimb (labkit feedback)",
    },
    "classroom.cli.needs_course": {
        "en": "this needs the course file: --course course.toml (or LABKIT_COURSE)",
        "ro": "este nevoie de fișierul cursului: --course course.toml (sau LABKIT_COURSE)",
    },
    "classroom.cli.needs_exchange": {
        "en": "this needs the exchange folder: --exchange DIR (or LABKIT_EXCHANGE)",
        "ro": "este nevoie de dosarul de schimb: --exchange DIR (sau LABKIT_EXCHANGE)",
    },
    "classroom.cli.submit.help": {
        "en": "hand a notebook in to the course's exchange (stamped with the server's time)",
        "ro": "predă un notebook în schimbul cursului (marcat cu ora serverului)",
    },
    "classroom.cli.submit.notebook": {"en": "the notebook to hand in", "ro": "notebook-ul de predat"},
    "classroom.cli.submit.lesson": {
        "en": "its lesson (default: the notebook's own)",
        "ro": "lecția lui (implicit: cea a notebook-ului)",
    },
    "classroom.cli.collect.help": {
        "en": "gather per student and lesson the submission the late policy chooses, for labkit grade",
        "ro": "adună pentru fiecare student și lecție predarea aleasă de politica de întârziere, pentru labkit grade",
    },
    "classroom.cli.collect.out": {
        "en": "where to write them (one folder per student)",
        "ro": "unde să le scrie (câte un dosar pentru fiecare student)",
    },
    "classroom.cli.feedback.help": {
        "en": "release each student's report, in their language, to the exchange (~/feedback in their JupyterLab)",
        "ro": "publică raportul fiecărui student, în limba lui, în schimb (~/feedback în JupyterLab-ul lui)",
    },
    "classroom.cli.feedback.reports": {
        "en": "labkit grade's --out folder",
        "ro": "dosarul --out al lui labkit grade",
    },
    "classroom.cli.export.moodle": {
        "en": "write Moodle's grade import CSV here (grades; NOTEBOOK is labkit grade's --out folder)",
        "ro": "scrie aici CSV-ul de import al notelor în Moodle (note; NOTEBOOK este dosarul --out al lui labkit grade)",
    },
    "classroom.cli.export.canvas": {
        "en": "write Canvas' gradebook import CSV here",
        "ro": "scrie aici CSV-ul de import în catalogul Canvas",
    },
    "classroom.cli.export.csv": {
        "en": "write the gradebook with the roster's ids here, in the locale's separator and decimal mark",
        "ro": "scrie aici catalogul cu identificatorii din listă, cu separatorul și virgula zecimală ale localizării",
    },
    "classroom.cli.export.locale": {
        "en": "the locale of --csv (default: the course file's)",
        "ro": "localizarea pentru --csv (implicit: cea din fișierul cursului)",
    },
}
