"""The messages of labkit.export: the ``labkit export`` command and what it reads in a notebook.

Data only, in English and Romanian; every key starts with ``export.``. ``labkit.i18n.t`` imports
this module the first time one of its keys is asked for.
"""

MESSAGES: dict[str, dict[str, str]] = {
    # the exported script's docstring (labkit.export.header), in the exporting kernel's language
    "export.header.title": {
        "en": "{file}, exported by `labkit export`: {which} {cells}.",
        "ro": "{file}, exportat de `labkit export`: {which} {cells}.",
    },
    "export.header.cell": {"en": "cell", "ro": "celula"},
    "export.header.cells": {"en": "cells", "ro": "celulele"},
    "export.header.in_notebook": {"en": "In the notebook:", "ro": "În notebook:"},
    "export.header.cell_line": {"en": "cell {index}:", "ro": "celula {index}:"},
    "export.header.body": {
        "en": "Each cell runs as labkit ran it: in a process group of its own (timeout LABKIT_PG_TIMEOUT)\n"
        "unless the cell makes one, destroyed at the cell's end. After the last cell the rank ends\n"
        "with os._exit, as labkit's ranks end, skipping the interpreter's teardown.\n"
        "LABKIT_BACKEND=gloo|nccl overrides the cells' backend. rank.report() values are printed by\n"
        "rank 0 and, with LABKIT_REPORT_DIR set, written there as JSON lines (rank{{R}}.jsonl).",
        "ro": "Fiecare celulă rulează cum a rulat-o labkit: într-un grup de procese propriu (limita de timp\n"
        "LABKIT_PG_TIMEOUT), dacă celula nu își face unul, distrus la sfârșitul celulei. După ultima\n"
        "celulă rangul se încheie cu os._exit, cum se încheie rangurile labkit, fără curățenia\n"
        "interpretorului. LABKIT_BACKEND=gloo|nccl înlocuiește biblioteca de comunicare a celulelor.\n"
        "Valorile rank.report() sunt tipărite de rangul 0 și, cu LABKIT_REPORT_DIR setat, scrise acolo\n"
        "ca linii JSON (rank{{R}}.jsonl).",
    },
    "export.header.timeout": {
        "en": "The cells' --timeout limits the run in the notebook only; use the scheduler's time limit here.",
        "ro": "--timeout al celulelor limitează doar rularea din notebook; aici folosiți limita de timp a planificatorului.",
    },
    # labkit.export
    "export.help": {
        "en": "turn a lesson's %%torchrun cells into a script for plain torchrun",
        "ro": "transformă celulele %%torchrun ale unei lecții într-un script pentru torchrun simplu",
    },
    "export.help.notebook": {"en": "the notebook (.ipynb)", "ro": "notebook-ul (.ipynb)"},
    "export.help.cell": {
        "en": "index of a %%torchrun cell in the notebook, from 0 (repeatable; default: all of them)",
        "ro": "indexul unei celule %%torchrun în notebook, de la 0 (repetabil; implicit: toate)",
    },
    "export.help.output": {
        "en": "where to write the script (default: standard output)",
        "ro": "unde se scrie scriptul (implicit: ieșirea standard)",
    },
    "export.help.list": {
        "en": "list the %%torchrun cells and stop",
        "ro": "listează celulele %%torchrun și se oprește",
    },
    "export.no_cells": {"en": "{path} has no %%torchrun cell", "ro": "{path} nu are nicio celulă %%torchrun"},
    "export.not_torchrun": {
        "en": "cell {index} is not a %%torchrun cell; the %%torchrun cells are: {cells}",
        "ro": "celula {index} nu este o celulă %%torchrun; celulele %%torchrun sunt: {cells}",
    },
    "export.syntax": {
        "en": "cell {index} does not compile: {error} (cell line {line})",
        "ro": "celula {index} nu se compilează: {error} (linia {line} a celulei)",
    },
    "export.nproc_differ": {
        "en": "the cells ask for different numbers of ranks ({detail}), and one script runs in one world; "
        "export them separately with --cell",
        "ro": "celulele cer numere diferite de ranguri ({detail}), iar un script rulează într-o singură lume; "
        "exportați-le separat cu --cell",
    },
    "export.env_differ": {
        "en": "cells {a} and {b} set {name} to different values; export them separately with --cell",
        "ro": "celulele {a} și {b} dau lui {name} valori diferite; exportați-le separat cu --cell",
    },
    "export.wrote": {
        "en": "wrote {path} (cells {cells}); run it with: {command}",
        "ro": "am scris {path} (celulele {cells}); rulați-l cu: {command}",
    },
    "export.rt.world": {
        "en": "labkit export: the number of ranks was {nproc} in the notebook and is {world} here: values that "
        "depend on it will differ",
        "ro": "labkit export: numărul de ranguri era {nproc} în notebook și este {world} aici: valorile care "
        "depind de el vor fi altele",
    },
    "export.rt.reported": {
        "en": "cell {index}, rank 0 reported: {values}",
        "ro": "celula {index}, rangul 0 a raportat: {values}",
    },
    # labkit.export.cells
    "export.read": {"en": "cannot read {path}: {error}", "ro": "nu pot citi {path}: {error}"},
    "export.var_missing": {
        "en": "cell {index} sends {name!r} with --vars, but no code cell before it assigns {name!r}; "
        "assign it in the parameters cell (e.g. {name} = ...)",
        "ro": "celula {index} trimite {name!r} cu --vars, dar nicio celulă de cod dinaintea ei nu îi dă o valoare "
        "lui {name!r}; atribuiți-o în celula parameters (de ex. {name} = ...)",
    },
    "export.var_opaque": {
        "en": "cell {index} sends {name!r} with --vars, but cell {where} changes it inside a block "
        "(`{code}`), so its value cannot be known without running the notebook; "
        "assign it with a plain `{name} = ...` in the parameters cell",
        "ro": "celula {index} trimite {name!r} cu --vars, dar celula {where} o modifică într-un bloc "
        "(`{code}`), deci valoarea ei nu se poate ști fără a rula notebook-ul; "
        "atribuiți-o simplu, `{name} = ...`, în celula parameters",
    },
    "export.dep_missing": {
        "en": "cell {index} sends {var!r} with --vars, which is computed from {dep!r} (cell {where}: `{code}`), "
        "but no code cell before it assigns {dep!r}",
        "ro": "celula {index} trimite {var!r} cu --vars, care se calculează din {dep!r} (celula {where}: `{code}`), "
        "dar nicio celulă de cod dinaintea ei nu îi dă o valoare lui {dep!r}",
    },
    "export.dep_opaque": {
        "en": "cell {index} sends {var!r} with --vars, which is computed from {dep!r}, but cell {where} sets "
        "{dep!r} inside a block (`{code}`), so its value cannot be known without running the notebook; "
        "compute {var!r} in the cell itself, or give it a plain value in the parameters cell",
        "ro": "celula {index} trimite {var!r} cu --vars, care se calculează din {dep!r}, dar celula {where} "
        "îi dă lui {dep!r} o valoare într-un bloc (`{code}`), deci valoarea ei nu se poate ști fără a rula "
        "notebook-ul; calculați {var!r} în celula însăși sau dați-i o valoare simplă în celula parameters",
    },
    "export.line_var": {
        "en": "cell {index} uses ${name} on its %%torchrun line, but the notebook does not give {name!r} "
        "a plain value the export can read; write e.g. `{name} = 2` in the parameters cell",
        "ro": "celula {index} folosește ${name} pe linia %%torchrun, dar notebook-ul nu îi dă lui {name!r} "
        "o valoare simplă pe care exportul s-o poată citi; scrieți de ex. `{name} = 2` în celula parameters",
    },
}
