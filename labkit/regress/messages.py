"""The messages of ``labkit sweep``, ``labkit regress`` and ``labkit doctor``, in English and Romanian."""

MESSAGES: dict[str, dict[str, str]] = {
    # labkit sweep
    "regress.sweep.help": {
        "en": "run notebooks with papermill over a grid of parameters and keep each run's record",
        "ro": "rulează notebook-uri cu papermill pe o grilă de parametri și păstrează înregistrarea fiecărei rulări",
    },
    "regress.sweep.help.notebooks": {
        "en": "notebooks, folders of notebooks or globs",
        "ro": "notebook-uri, dosare cu notebook-uri sau tipare glob",
    },
    "regress.sweep.help.p": {
        "en": "a parameter and its values, comma-separated (repeatable): -p nproc 2,4",
        "ro": "un parametru și valorile lui, separate prin virgulă (se poate repeta): -p nproc 2,4",
    },
    "regress.sweep.help.out": {
        "en": "folder for the executed notebooks, their records and the summary",
        "ro": "dosarul pentru notebook-urile executate, înregistrările lor și rezumat",
    },
    "regress.sweep.help.jobs": {
        "en": "notebooks run at once (each in its own kernel)",
        "ro": "câte notebook-uri rulează deodată (fiecare în kernelul său)",
    },
    "regress.sweep.help.timeout": {
        "en": "seconds for one whole notebook",
        "ro": "secunde pentru un notebook întreg",
    },
    "regress.sweep.bad_name": {
        "en": "-p {name}: a parameter name must be a Python identifier",
        "ro": "-p {name}: numele unui parametru trebuie să fie un identificator Python",
    },
    "regress.sweep.no_notebook": {"en": "no notebook at {path}", "ro": "nu există niciun notebook la {path}"},
    "regress.sweep.start": {
        "en": "sweep: {jobs:@run|runs} ({notebooks:@notebook|notebooks} × {points:@parameter set|parameter "
        "sets}), {workers} at a time",
        "ro": "sweep: {jobs:@rulare|rulări} ({notebooks:@notebook|notebook-uri} × {points:@set de "
        "parametri|seturi de parametri}), câte {workers} deodată",
    },
    "regress.sweep.progress": {
        "en": "[{n}/{total}] {name} {point}: {status} in {seconds} s, {runs:@run|runs}, checks {checks}",
        "ro": "[{n}/{total}] {name} {point}: {status} în {seconds} s, {runs:@rulare|rulări}, verificări {checks}",
    },
    "regress.sweep.title": {"en": "Sweep summary", "ro": "Rezumatul rulărilor"},
    "regress.sweep.cell_errors": {"en": "cell errors", "ro": "erori în celule"},
    "regress.sweep.col.notebook": {"en": "notebook", "ro": "notebook"},
    "regress.sweep.col.parameters": {"en": "parameters", "ro": "parametri"},
    "regress.sweep.col.status": {"en": "status", "ro": "stare"},
    "regress.sweep.col.seconds": {"en": "seconds", "ro": "secunde"},
    "regress.sweep.col.runs": {"en": "runs ok", "ro": "rulări reușite"},
    "regress.sweep.col.checks": {"en": "checks passed", "ro": "verificări trecute"},
    # labkit regress baseline
    "regress.baseline.help": {
        "en": "copy a sweep's records into a baseline folder (to commit)",
        "ro": "copiază înregistrările unei rulări într-un dosar de referință (de salvat în git)",
    },
    "regress.baseline.help.run": {"en": "the sweep folder", "ro": "dosarul rulării"},
    "regress.baseline.help.out": {
        "en": "the baseline folder, e.g. baselines/cpu",
        "ro": "dosarul de referință, de exemplu baselines/cpu",
    },
    "regress.baseline.done": {
        "en": "{n:@record|records} copied to {out}",
        "ro": "{n:@înregistrare copiată|înregistrări copiate} în {out}",
    },
    # labkit regress compare
    "regress.help": {
        "en": "compare regression runs with a baseline",
        "ro": "compară rulările de regresie cu o referință",
    },
    "regress.compare.help": {
        "en": "compare sweep B with sweep or baseline A; exit 1 on a regression",
        "ro": "compară rularea B cu rularea sau referința A; iese cu 1 la o regresie",
    },
    "regress.compare.help.a": {
        "en": "the reference: a sweep folder, a baseline folder or a .record.json",
        "ro": "referința: un dosar de rulări, un dosar de referință sau un .record.json",
    },
    "regress.compare.help.b": {
        "en": "what to check against it (same kinds)",
        "ro": "ce se verifică față de ea (aceleași tipuri)",
    },
    "regress.compare.help.markdown": {"en": "write a Markdown report here", "ro": "scrie aici un raport Markdown"},
    "regress.compare.help.junit": {"en": "write a JUnit XML report here", "ro": "scrie aici un raport JUnit XML"},
    "regress.compare.help.memory_tol": {
        "en": "relative tolerance for memory (default 0.01: 1%%)",
        "ro": "toleranța relativă pentru memorie (implicit 0.01: 1%%)",
    },
    "regress.compare.help.memory_floor": {
        "en": "memory changes up to this many bytes are never a regression (default 4096)",
        "ro": "schimbările de memorie de cel mult atâția octeți nu sunt niciodată o regresie (implicit 4096)",
    },
    "regress.compare.help.only_b": {
        "en": "compare only the notebooks and parameters B has (A: a larger baseline)",
        "ro": "compară doar notebook-urile și parametrii pe care îi are B (A: o referință mai mare)",
    },
    "regress.compare.help.value_tol": {
        "en": "relative tolerance for the decimal values ranks report, e.g. losses (default 0.01)",
        "ro": "toleranța relativă pentru valorile zecimale raportate de ranguri, de exemplu pierderi (implicit 0.01)",
    },
    "regress.compare.help.time_tol": {
        "en": "a step may be this much slower, relatively, before it is a regression (default 3.0: 4x)",
        "ro": "cu cât poate fi mai lent un pas, relativ, până să fie o regresie (implicit 3.0: de 4 ori)",
    },
    "regress.compare.help.time_floor": {
        "en": "plus this many seconds (default 0.05)",
        "ro": "plus atâtea secunde (implicit 0.05)",
    },
    "regress.compare.no_such": {
        "en": "no such file or folder: {path}",
        "ro": "nu există fișierul sau dosarul: {path}",
    },
    "regress.compare.no_records": {
        "en": "no *.record.json under {path}: run labkit sweep --out there first",
        "ro": "nu există niciun *.record.json în {path}: rulați mai întâi labkit sweep --out acolo",
    },
    "regress.compare.unreadable": {
        "en": "cannot compare: {error}",
        "ro": "comparația nu se poate face: {error}",
    },
    "regress.compare.title": {"en": "Regression report", "ro": "Raport de regresie"},
    "regress.compare.verdict_ok": {
        "en": "No regression: B matches A within the tolerances.",
        "ro": "Nicio regresie: B se potrivește cu A în limitele toleranțelor.",
    },
    "regress.compare.verdict_bad": {
        "en": "{n:@regression|regressions}: B differs from A beyond the tolerances.",
        "ro": "{n:@regresie|regresii}: B diferă de A peste limitele toleranțelor.",
    },
    "regress.compare.within": {
        "en": "{n:@other change|other changes} within the tolerances or for information (see the Markdown report)",
        "ro": "încă {n:@schimbare|schimbări} în limitele toleranțelor sau informative (vedeți raportul Markdown)",
    },
    "regress.compare.regressions": {"en": "Regressions", "ro": "Regresii"},
    "regress.compare.changes": {
        "en": "Other changes (within tolerance, new, or for information)",
        "ro": "Alte schimbări (în toleranță, noi sau informative)",
    },
    "regress.compare.col.lesson": {"en": "lesson", "ro": "lecția"},
    "regress.compare.col.parameters": {"en": "parameters", "ro": "parametri"},
    "regress.compare.col.where": {"en": "cell", "ro": "celula"},
    "regress.compare.col.metric": {"en": "metric [rule]", "ro": "măsura [regula]"},
    "regress.compare.col.rank": {"en": "rank", "ro": "rangul"},
    "regress.compare.col.a": {"en": "A", "ro": "A"},
    "regress.compare.col.b": {"en": "B", "ro": "B"},
    "regress.compare.col.change": {"en": "change", "ro": "schimbarea"},
    "regress.compare.verdict.regression": {"en": "changed", "ro": "schimbat"},
    "regress.compare.verdict.changed": {"en": "changed", "ro": "schimbat"},
    "regress.compare.verdict.missing": {"en": "missing in B", "ro": "lipsește în B"},
    "regress.compare.verdict.new": {"en": "new in B", "ro": "nou în B"},
    "regress.compare.notebook_level": {"en": "(whole notebook)", "ro": "(tot notebook-ul)"},
    "regress.compare.cell": {"en": "cell {cell} `{source}` {run}", "ro": "celula {cell} `{source}` {run}"},
    "regress.compare.run_n": {"en": "(run {n})", "ro": "(rularea {n})"},
    "regress.compare.rank": {"en": "rank {rank}: ", "ro": "rangul {rank}: "},
    "regress.compare.per_step": {
        "en": "{n} per step over {steps:@step|steps}",
        "ro": "{n} pe pas, în {steps:@pas|pași}",
    },
    "regress.compare.line": {
        "en": "REGRESSION {metric}: lesson {lesson} ({notebook}, {point}), {where}: {rank}{a} -> {b} ({change})",
        "ro": "REGRESIE {metric}: lecția {lesson} ({notebook}, {point}), {where}: {rank}{a} -> {b} ({change})",
    },
    # labkit doctor
    "regress.doctor.help": {
        "en": "check this environment end to end (torch, the private APIs labkit reads, a real run)",
        "ro": "verifică acest mediu de la un capăt la altul (torch, API-urile private citite de labkit, o rulare reală)",
    },
    "regress.doctor.help.backend": {
        "en": "backend of the 2-rank run (auto, gloo, nccl)",
        "ro": "biblioteca de comunicare a rulării pe 2 ranguri (auto, gloo, nccl)",
    },
    "regress.doctor.help.skip": {
        "en": "checks to leave out, comma-separated ({names})",
        "ro": "verificări omise, separate prin virgulă ({names})",
    },
    "regress.doctor.help.json": {"en": "print the results as JSON", "ro": "afișează rezultatele ca JSON"},
    "regress.doctor.status.pass": {"en": "PASS", "ro": "OK"},
    "regress.doctor.status.warn": {"en": "WARN", "ro": "AVERT"},
    "regress.doctor.status.fail": {"en": "FAIL", "ro": "EȘEC"},
    "regress.doctor.status.skip": {"en": "SKIP", "ro": "OMIS"},
    "regress.doctor.todo": {"en": "what to do: {fix}", "ro": "ce e de făcut: {fix}"},
    "regress.doctor.summary": {
        "en": "{pass} passed, {warn:@warning|warnings}, {fail} failed, {skip} skipped in {seconds} s",
        "ro": "{pass:@verificare trecută|verificări trecute}, {warn:@avertisment|avertismente}, "
        "{fail:@verificare eșuată|verificări eșuate}, {skip:@verificare omisă|verificări omise} în {seconds} s",
    },
    "regress.doctor.torch.ok": {
        "en": "in the supported range ({spec}) and tested",
        "ro": "în intervalul suportat ({spec}) și testat",
    },
    "regress.doctor.torch.untested": {
        "en": "in the supported range ({spec}) but not tested (tested: {tested})",
        "ro": "în intervalul suportat ({spec}), dar netestat (testate: {tested})",
    },
    "regress.doctor.torch.out": {
        "en": "outside the supported range {spec}",
        "ro": "în afara intervalului suportat {spec}",
    },
    "regress.doctor.fix.install_torch": {
        "en": "install a torch in {spec}, e.g. pip install 'torch{spec}' (the CPU wheel needs "
        "--index-url https://download.pytorch.org/whl/cpu)",
        "ro": "instalați un torch din {spec}, de exemplu pip install 'torch{spec}' (roata pentru CPU cere "
        "--index-url https://download.pytorch.org/whl/cpu)",
    },
    "regress.doctor.fix.untested": {
        "en": "the checks below say whether labkit works on it; a baseline sweep (docs/regression.md) says "
        "whether the lessons' numbers changed",
        "ro": "verificările de mai jos spun dacă labkit funcționează pe el; o rulare față de referință "
        "(docs/regression.md) spune dacă s-au schimbat numerele lecțiilor",
    },
    "regress.doctor.hook": {"en": "private API {api}", "ro": "API privat {api}"},
    "regress.doctor.hook.ok": {"en": "present (used by {users})", "ro": "prezent (folosit de {users})"},
    "regress.doctor.fix.hook": {
        "en": "use a tested torch, or adapt {users} to this torch and add it to TESTED in labkit/ranks/torch_hooks.py",
        "ro": "folosiți un torch testat sau adaptați {users} la acest torch și adăugați-l la TESTED în "
        "labkit/ranks/torch_hooks.py",
    },
    "regress.doctor.run": {
        "en": "a 2-rank FSDP1 + FSDP2 run ({backend})",
        "ro": "o rulare FSDP1 + FSDP2 pe 2 ranguri ({backend})",
    },
    "regress.doctor.fix.run": {
        "en": "run labkit run on a small script to see the whole error; labkit cleanup ends leftover ranks",
        "ro": "rulați labkit run pe un script mic ca să vedeți toată eroarea; labkit cleanup oprește rangurile rămase",
    },
    "regress.doctor.timeline": {
        "en": "{flavor} timeline (units, collectives named after them)",
        "ro": "cronologia {flavor} (unitățile, colectivele numite după ele)",
    },
    "regress.doctor.timeline.found": {
        "en": "{units:@unit|units}, {named} of {collectives:@collective|collectives} named, {held:@held span|held spans}",
        "ro": "{units:@unitate|unități}, {named} din {collectives:@colectivă|colective} numite, "
        "{held:@interval de deținere|intervale de deținere}",
    },
    "regress.doctor.nothing": {"en": "rank 0 reported nothing", "ro": "rangul 0 nu a raportat nimic"},
    "regress.doctor.memtrack": {"en": "{flavor} memtrack categories", "ro": "categoriile memtrack {flavor}"},
    "regress.doctor.memtrack.zero": {
        "en": "nothing counted as {cats}",
        "ro": "nimic socotit ca {cats}",
    },
    "regress.doctor.fix.behaviour": {
        "en": "this torch's FSDP internals moved: see the private API lines above, use a tested torch, "
        "or adapt labkit/ranks/fsdp_units.py, timeline.py and memtrack.py",
        "ro": "structurile interne FSDP ale acestui torch s-au mutat: vedeți liniile API privat de mai sus, "
        "folosiți un torch testat sau adaptați labkit/ranks/fsdp_units.py, timeline.py și memtrack.py",
    },
    "regress.doctor.agent": {
        "en": "torchrun's agent names every failed rank (ProcessContext.join)",
        "ro": "agentul torchrun numește fiecare rang eșuat (ProcessContext.join)",
    },
    "regress.doctor.agent.ok": {
        "en": "2 of 2 failed processes named",
        "ro": "2 din 2 procese eșuate numite",
    },
    "regress.doctor.agent.bad": {
        "en": "{n} of 2 failed processes named ({tail})",
        "ro": "{n} din 2 procese eșuate numite ({tail})",
    },
    "regress.doctor.agent.timeout": {
        "en": "the probe did not end in 60 s",
        "ro": "proba nu s-a încheiat în 60 s",
    },
    "regress.doctor.estimate": {
        "en": "fake-tensor estimator (labkit estimate)",
        "ro": "estimatorul cu tensori fictivi (labkit estimate)",
    },
    "regress.doctor.estimate.ok": {
        "en": "tiny model on 2 fake ranks: peak {peak} in {seconds} s",
        "ro": "modelul tiny pe 2 ranguri false: vârf {peak} în {seconds} s",
    },
    "regress.doctor.fix.estimate": {
        "en": "labkit estimate --model tiny --nproc 2 shows the whole error; it needs "
        "torch.testing._internal.distributed.fake_pg",
        "ro": "labkit estimate --model tiny --nproc 2 arată toată eroarea; are nevoie de "
        "torch.testing._internal.distributed.fake_pg",
    },
    "regress.doctor.gpus": {"en": "GPUs", "ro": "GPU-uri"},
    "regress.doctor.gpus.none": {"en": "none here; {reason}", "ro": "niciunul aici; {reason}"},
    "regress.doctor.gpus.found": {
        "en": "{n:@GPU|GPUs} visible ({names}), CUDA {cuda}",
        "ro": "{n:@GPU vizibil|GPU-uri vizibile} ({names}), CUDA {cuda}",
    },
    "regress.doctor.fix.cuda": {
        "en": "install a CUDA build of torch that matches the driver (nvidia-smi shows its CUDA version)",
        "ro": "instalați o versiune CUDA a torch potrivită driverului (nvidia-smi arată versiunea CUDA a lui)",
    },
    "regress.doctor.nccl.missing": {
        "en": "this torch has no NCCL",
        "ro": "acest torch nu are NCCL",
    },
    "regress.doctor.auto": {"en": "--backend auto", "ro": "--backend auto"},
    "regress.doctor.fix.auto": {
        "en": "give the kernel one GPU per rank (CUDA_VISIBLE_DEVICES), or pass -n with the GPU count",
        "ro": "dați kernelului câte un GPU pentru fiecare rang (CUDA_VISIBLE_DEVICES) sau dați -n cu numărul de GPU-uri",
    },
    "regress.doctor.userns": {
        "en": "user namespaces (emulated slow links)",
        "ro": "spații de nume ale utilizatorului (legături lente emulate)",
    },
    "regress.doctor.userns.ok": {"en": "unshare -rn works", "ro": "unshare -rn funcționează"},
    "regress.doctor.userns.bad": {"en": "unshare -rn failed: {why}", "ro": "unshare -rn a eșuat: {why}"},
    "regress.doctor.userns.no_tool": {"en": "no unshare command", "ro": "nu există comanda unshare"},
    "regress.doctor.fix.userns": {
        "en": "emulated links need them: as root, sysctl -w kernel.unprivileged_userns_clone=1 and "
        "user.max_user_namespaces=15000 (or a container started with them allowed)",
        "ro": "legăturile emulate au nevoie de ele: ca root, sysctl -w kernel.unprivileged_userns_clone=1 și "
        "user.max_user_namespaces=15000 (sau un container pornit cu ele permise)",
    },
    "regress.doctor.fix.shm": {
        "en": "gloo and NCCL exchange data through /dev/shm: give it 1 GiB or more (docker --shm-size=1g)",
        "ro": "gloo și NCCL schimbă date prin /dev/shm: dați-i cel puțin 1 GiB (docker --shm-size=1g)",
    },
}
