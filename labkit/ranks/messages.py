"""The messages of labkit.ranks: what a rank's own recorders report.

Data only, in English and Romanian; every key starts with ``ranks.``. ``labkit.i18n.t`` imports
this module the first time one of its keys is asked for.
"""

MESSAGES: dict[str, dict[str, str]] = {
    # labkit.ranks.memtrack
    "ranks.memtrack.nested": {
        "en": "memtrack: a step is already being measured; steps do not nest",
        "ro": "memtrack: un pas este deja măsurat; pașii nu se pot imbrica",
    },
    # labkit.ranks.timeline
    "ranks.timeline.no_units": {
        "en": "no FSDP unit and no module of the given types found in the model",
        "ro": "nu s-a găsit nicio unitate FSDP și niciun modul de tipurile date în model",
    },
}
