"""The messages of labkit.ranks: what a rank's own recorders report.

Data only, in English and Romanian; every key starts with ``ranks.``. ``labkit.i18n.t`` imports
this module the first time one of its keys is asked for.
"""

MESSAGES: dict[str, dict[str, str]] = {
    # labkit.ranks.rank
    "ranks.report.unsendable": {
        "en": "rank.report: {name!r} is a {type}, which cannot be sent to the notebook; report numbers, strings, "
        "tensors, lists or dicts of them (str(value) sends its text)",
        "ro": "rank.report: {name!r} este un {type}, care nu poate fi trimis notebook-ului; raportați numere, "
        "șiruri, tensori, liste sau dicționare ale lor (str(valoare) trimite textul)",
    },
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
    # labkit.ranks.torch_hooks
    "ranks.hooks.missing": {
        "en": "torch {torch} has no {api} (a private torch API that labkit {version_note}reads): {lost}. "
        "`labkit doctor` checks them all.",
        "ro": "torch {torch} nu are {api} (un API privat torch pe care labkit {version_note}îl citește): {lost}. "
        "`labkit doctor` le verifică pe toate.",
    },
    "ranks.hooks.tested_on": {"en": "(tested on torch {tested}) ", "ro": "(testat pe torch {tested}) "},
    "ranks.hooks.lost.fsdp1": {
        "en": "FSDP1 units are not sized, their collectives are not named after them in the timeline, and "
        "memtrack counts their gathered parameters as other memory",
        "ro": "unitățile FSDP1 nu sunt măsurate, colectivele lor nu poartă numele lor în cronologie, iar "
        "memtrack le socotește parametrii colectați ca altă memorie",
    },
    "ranks.hooks.lost.fsdp2": {
        "en": "FSDP2 units are not sized, their collectives are not named after them in the timeline, and "
        "memtrack counts their shards and gathered parameters as other memory",
        "ro": "unitățile FSDP2 nu sunt măsurate, colectivele lor nu poartă numele lor în cronologie, iar "
        "memtrack le socotește fragmentele și parametrii colectați ca altă memorie",
    },
    "ranks.hooks.lost.agent": {
        "en": "when several ranks fail, only the first is named",
        "ro": "când eșuează mai multe ranguri, doar primul este numit",
    },
    "ranks.hooks.lost.estimate": {
        "en": "the fake-tensor estimator (labkit estimate, lesson 7's 70B plan) cannot run",
        "ro": "estimatorul cu tensori fictivi (labkit estimate, planul pentru 70 mld. de parametri din lecția 7) nu poate rula",
    },
    "ranks.hooks.lost.comm": {
        "en": "labkit.comm cannot count collectives (comm counts, the timeline, the run records)",
        "ro": "labkit.comm nu poate număra colectivele (numărătorile, cronologia, înregistrările rulărilor)",
    },
    "ranks.hooks.lost.memtrack": {
        "en": "labkit.memtrack cannot follow tensor storages (memory by category)",
        "ro": "labkit.memtrack nu poate urmări stocările tensorilor (memoria pe categorii)",
    },
}
