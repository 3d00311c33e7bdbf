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
    "cli.run.json": {
        "en": "print the values as JSON (alone on stdout; the run's output goes to stderr)",
        "ro": "afișează valorile ca JSON (singure pe stdout; ieșirea rulării merge pe stderr)",
    },
    "cli.run.file": {"en": "the Python file the ranks run", "ro": "fișierul Python pe care îl rulează rangurile"},
    "cli.extra.missing": {
        "en": "labkit {command} needs {module}, which is not installed here: pip install 'fsdp-labkit[{extra}]'",
        "ro": "labkit {command} are nevoie de {module}, care nu este instalat aici: pip install 'fsdp-labkit[{extra}]'",
    },
    "cli.lang.unknown": {
        "en": "labkit: unknown language {value!r}; choose one of {langs}",
        "ro": "labkit: limbă necunoscută {value!r}; alegeți una dintre {langs}",
    },
    "cli.cleanup.help": {
        "en": "kill labkit rank processes left alive by earlier runs",
        "ro": "oprește procesele de rang labkit rămase de la rulări anterioare",
    },
    "cli.cleanup.done": {"en": "killed {n:@process|processes}", "ro": "{n:@proces oprit|procese oprite}"},
    "cli.lang.help": {"en": "language of messages (en or ro)", "ro": "limba mesajelor (en sau ro)"},
    "cli.version.help": {"en": "print labkit's version and stop", "ro": "afișează versiunea labkit și se oprește"},
}
