"""The messages of labkit's top-level modules: the ``labkit`` command (``labkit.cli``).

Data only, in English and Romanian; every key starts with the module's name (``cli.``). ``labkit.i18n.t`` imports
this module the first time one of its keys is asked for.
"""

MESSAGES: dict[str, dict[str, str]] = {
    # labkit.cli
    "cli.description": {
        "en": "fsdp-labkit: run, grade and export FSDP labs.",
        "ro": "fsdp-labkit: rulați, notați și exportați laboratoare FSDP.",
    },
    "cli.run.help": {
        "en": "run a Python file on N torchrun ranks",
        "ro": "rulează un fișier Python pe N ranguri torchrun",
    },
    "cli.run.json": {"en": "print the values as JSON", "ro": "afișează valorile ca JSON"},
    "cli.cleanup.help": {
        "en": "kill labkit rank processes left alive by earlier runs",
        "ro": "oprește procesele de rang labkit rămase de la rulări anterioare",
    },
    "cli.cleanup.done": {"en": "killed {n:@process|processes}", "ro": "au fost oprite {n:@proces|procese}"},
    "cli.lang.help": {"en": "language of messages (en or ro)", "ro": "limba mesajelor (en sau ro)"},
    "cli.version.help": {"en": "print labkit's version and stop", "ro": "afișează versiunea labkit și se oprește"},
}
