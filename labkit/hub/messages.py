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
    # labkit.hub.view
    "hub.view.no_python": {
        "en": "labkit hub: no python{version} that other users can run (looked at {places})",
        "ro": "labkit hub: niciun python{version} pe care alți utilizatori să-l poată rula (căutat în {places})",
    },
}
