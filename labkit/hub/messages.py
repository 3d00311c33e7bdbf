"""The messages of labkit.hub: what the class hub shows its students and its administrator.

Data only, in English and Romanian; every key starts with ``hub.``. ``labkit.i18n.t`` imports
this module the first time one of its keys is asked for.
"""

MESSAGES: dict[str, dict[str, str]] = {
    # labkit.hub.spawners: the spawn form (the student has not chosen a language yet: both are shown)
    "hub.form.lang": {"en": "Course language", "ro": "Limba cursului"},
    "hub.limits.none": {
        "en": "labkit: no cgroup for {user}: memory and CPU are not limited",
        "ro": "labkit: niciun cgroup pentru {user}: memoria și procesorul nu sunt limitate",
    },
    # labkit.hub.gpus: the GPU pool (a refusal shows on the student's spawn page)
    "hub.gpus.exhausted": {
        "en": "labkit hub: no GPUs left for {user}: {wanted:@GPU is|GPUs are} asked, {free} free. "
        "Held now: {holders}. Ask your instructor, or try again when a server stops.",
        "ro": "labkit hub: nu mai sunt GPU-uri pentru {user}: {wanted:@GPU cerut|GPU-uri cerute}, libere: {free}. "
        "Ocupate acum: {holders}. Întrebați instructorul sau încercați din nou după ce se oprește un server.",
    },
    "hub.gpus.exhausted_shared": {
        "en": "labkit hub: no shared GPU has room for {user} (at most {share:@student|students} on one), and no GPU is "
        "free. Held now: {holders}. Ask your instructor, or try again when a server stops.",
        "ro": "labkit hub: niciun GPU partajat nu mai are loc pentru {user} (cel mult {share:@student|studenți} pe unul), "
        "iar niciun GPU nu e liber. Ocupate acum: {holders}. Întrebați instructorul sau încercați din nou după "
        "ce se oprește un server.",
    },
    "hub.gpus.profile": {
        "en": "labkit hub: GPU profile {profile!r}: a number of GPUs (0, 1, 2, ...) or 'shared' (LABKIT_HUB_GPU_PROFILE; "
        "LABKIT_HUB_GPU_PROFILES as ana=2,ben=shared)",
        "ro": "labkit hub: profilul GPU {profile!r}: un număr de GPU-uri (0, 1, 2, ...) sau 'shared' "
        "(LABKIT_HUB_GPU_PROFILE; LABKIT_HUB_GPU_PROFILES ca ana=2,ben=shared)",
    },
    "hub.gpus.too_big": {
        "en": "labkit hub: GPU profile {profile!r} asks for more GPUs than the pool holds ({count}, LABKIT_HUB_GPUS)",
        "ro": "labkit hub: profilul GPU {profile!r} cere mai multe GPU-uri decât are rezerva ({count}, LABKIT_HUB_GPUS)",
    },
    "hub.gpus.mig": {
        "en": "labkit hub: GPU profile {profile!r} on a pool of MIG instances: CUDA shows a process one MIG "
        "instance only; use 1 or 'shared'",
        "ro": "labkit hub: profilul GPU {profile!r} pe o rezervă de instanțe MIG: CUDA arată unui proces o singură "
        "instanță MIG; folosiți 1 sau 'shared'",
    },
    "hub.gpus.repeated": {
        "en": "labkit hub: the GPU pool names a device twice: {devices} (LABKIT_HUB_GPUS)",
        "ro": "labkit hub: rezerva de GPU-uri numește un dispozitiv de două ori: {devices} (LABKIT_HUB_GPUS)",
    },
    "hub.gpus.share": {
        "en": "labkit hub: LABKIT_HUB_GPU_SHARE must be at least 1, got {share}",
        "ro": "labkit hub: LABKIT_HUB_GPU_SHARE trebuie să fie cel puțin 1, nu {share}",
    },
    # labkit.hub.view
    "hub.view.no_python": {
        "en": "labkit hub: no python{version} that other users can run (looked at {places})",
        "ro": "labkit hub: niciun python{version} pe care alți utilizatori să-l poată rula (căutat în {places})",
    },
    # labkit.hub.roster: hub.sh --roster FILE
    "hub.roster.unreadable": {
        "en": "labkit hub: cannot read the roster {path}: {error}",
        "ro": "labkit hub: nu pot citi lista clasei {path}: {error}",
    },
    "hub.roster.no_id": {
        "en": "labkit hub: the roster {path} has no id column on its first line (id,name,email,lang,role,sis_id)",
        "ro": "labkit hub: lista clasei {path} nu are coloana id pe primul rând (id,name,email,lang,role,sis_id)",
    },
    "hub.roster.column": {
        "en": "labkit hub: the roster {path} has columns the hub does not know: {columns} (id,name,email,lang,role,sis_id)",
        "ro": "labkit hub: lista clasei {path} are coloane pe care hub-ul nu le cunoaște: {columns} (id,name,email,lang,role,sis_id)",
    },
    "hub.roster.twice": {
        "en": "labkit hub: {path}, line {line}: {value} is already on line {first}",
        "ro": "labkit hub: {path}, rândul {line}: {value} apare deja pe rândul {first}",
    },
    "hub.roster.empty": {
        "en": "labkit hub: the roster {path} names nobody",
        "ro": "labkit hub: lista clasei {path} nu numește pe nimeni",
    },
    "hub.roster.bad_id": {
        "en": "labkit hub: {path}, line {line}: the id {id!r} is not an account name (lowercase letters, digits, "
        "_ . -; at most 32)",
        "ro": "labkit hub: {path}, rândul {line}: id-ul {id!r} nu este un nume de cont (litere mici, cifre, "
        "_ . -; cel mult 32)",
    },
    "hub.roster.role": {
        "en": "labkit hub: {path}, line {line}: the role {role!r} is neither student nor instructor",
        "ro": "labkit hub: {path}, rândul {line}: rolul {role!r} nu este nici student, nici instructor",
    },
    "hub.roster.lang": {
        "en": "labkit hub: {path}, line {line}: the language {code!r} is neither en nor ro",
        "ro": "labkit hub: {path}, rândul {line}: limba {code!r} nu este nici en, nici ro",
    },
    "hub.roster.email": {
        "en": "labkit hub: {path}, line {line}: {email!r} is not an e-mail address",
        "ro": "labkit hub: {path}, rândul {line}: {email!r} nu este o adresă de e-mail",
    },
    # labkit.hub.login: hub.sh --login
    "hub.login.unknown": {
        "en": "labkit hub: the login {login!r} is none of {logins} (LABKIT_HUB_LOGIN)",
        "ro": "labkit hub: autentificarea {login!r} nu este niciuna dintre {logins} (LABKIT_HUB_LOGIN)",
    },
    "hub.login.missing": {
        "en": "labkit hub: the {login} login needs {names}",
        "ro": "labkit hub: autentificarea {login} are nevoie de {names}",
    },
    "hub.login.discovery": {
        "en": "labkit hub: the sign-on's configuration could not be read from {url}: {error}",
        "ro": "labkit hub: configurația autentificării unice nu a putut fi citită de la {url}: {error}",
    },
    # labkit.hub.lti: grade passback
    "hub.lti.cli": {
        "en": "LTI 1.3 for the class hub: the tool's public key for the LMS (jwks); the graded reports posted to "
        "the LMS's gradebook (passback)",
        "ro": "LTI 1.3 pentru hub-ul clasei: cheia publică a instrumentului pentru LMS (jwks); rapoartele notate "
        "trimise în catalogul LMS-ului (passback)",
    },
    "hub.lti.cli.reports": {
        "en": "what labkit grade wrote (--out): gradebook.csv and each student's report.json",
        "ro": "ce a scris labkit grade (--out): gradebook.csv și report.json al fiecărui student",
    },
    "hub.lti.cli.hub_dir": {
        "en": "the hub's state (hub.sh --dir): the tool's key and the launches the hub remembered",
        "ro": "starea hub-ului (hub.sh --dir): cheia instrumentului și lansările reținute de hub",
    },
    "hub.lti.cli.needs": {
        "en": "labkit hub: passback needs the reports folder, LABKIT_HUB_LTI_CLIENT_ID and LABKIT_HUB_LTI_TOKEN_URL",
        "ro": "labkit hub: passback are nevoie de dosarul rapoartelor, LABKIT_HUB_LTI_CLIENT_ID și LABKIT_HUB_LTI_TOKEN_URL",
    },
    "hub.lti.refused": {
        "en": "labkit hub: the LMS refused the {what} request to {url} ({status}): {body}",
        "ro": "labkit hub: LMS-ul a refuzat cererea {what} către {url} ({status}): {body}",
    },
    "hub.lti.unreachable": {
        "en": "labkit hub: the {what} request to {url} failed: {error}",
        "ro": "labkit hub: cererea {what} către {url} a eșuat: {error}",
    },
    "hub.lti.no_token": {
        "en": "labkit hub: the LMS's token endpoint {url} gave no access_token",
        "ro": "labkit hub: punctul de token al LMS-ului {url} nu a dat niciun access_token",
    },
    "hub.lti.no_grade": {
        "en": "labkit hub: no grade of {user} for {what} in the reports: nothing posted",
        "ro": "labkit hub: nicio notă a lui {user} pentru {what} în rapoarte: nu s-a trimis nimic",
    },
    "hub.lti.posted": {
        "en": "posted {user} {what}: {given:g}/{maximum:g}",
        "ro": "trimis {user} {what}: {given:g}/{maximum:g}",
    },
}
