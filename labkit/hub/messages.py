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
}
