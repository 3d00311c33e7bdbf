"""The Romanian-English glossary of the course, one entry per term.

Both editions use it: each lesson lists the terms it introduces (``Lesson.terms``)
and the build appends a short table of them, English beside Romanian, to the
lesson in each language; ``docs/glossary.md`` is written from the same entries.
A test checks that the Romanian text of a lesson introduces each of its terms once
in the form ``fragmentare (sharding)``: the Romanian word, the English one beside it.

``forms`` are the inflected Romanian forms that may carry that introduction
("fragmentarea (sharding)").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    en: str
    ro: str
    ro_note: str  # one line, in Romanian, of what it is
    en_note: str
    forms: tuple[str, ...] = ()


GLOSSARY: dict[str, Term] = {
    "rank": Term(
        "rank",
        "rang",
        "un proces dintre cele N care rulează aceeași celulă; are un număr de la 0 la N-1",
        "one of the N processes that run the same cell, numbered 0 to N-1",
        ("rangul", "ranguri", "rangurile"),
    ),
    "world_size": Term(
        "world size",
        "numărul de ranguri",
        "câte procese participă la antrenare",
        "how many processes take part in training",
        ("numărul total de ranguri",),
    ),
    "process_group": Term(
        "process group",
        "grup de procese",
        "rangurile care comunică între ele prin operații colective",
        "the ranks that talk to each other through collectives",
        ("grupul de procese",),
    ),
    "backend": Term(
        "backend",
        "bibliotecă de comunicare",
        "gloo pe CPU, NCCL pe GPU-uri NVIDIA",
        "gloo on CPUs, NCCL on NVIDIA GPUs",
        ("biblioteca de comunicare",),
    ),
    "collective": Term(
        "collective",
        "operație colectivă",
        "o operație la care participă toate rangurile unui grup",
        "an operation that every rank of a group takes part in",
        ("operații colective", "operația colectivă"),
    ),
    "dashboard": Term(
        "dashboard",
        "panou",
        "tabelul și graficul care se actualizează în timp ce rulează rangurile",
        "the table and plot that update while the ranks run",
        ("panoul",),
    ),
    "forward": Term(
        "forward pass",
        "trecerea directă",
        "calculul ieșirii și al pierderii, de la intrare spre ieșire",
        "computing the output and the loss, from input to output",
        ("trecere directă",),
    ),
    "backward": Term(
        "backward pass",
        "trecerea inversă",
        "calculul gradienților, de la pierdere înapoi spre intrare",
        "computing the gradients, from the loss back to the input",
        ("trecere inversă",),
    ),
    "loss": Term(
        "loss",
        "pierdere",
        "numărul pe care antrenarea îl micșorează",
        "the number training makes smaller",
        ("pierderea",),
    ),
    "step": Term(
        "training step",
        "pas de antrenare",
        "o trecere directă, o trecere inversă și o actualizare a ponderilor",
        "one forward pass, one backward pass and one update of the weights",
        ("pasul de antrenare",),
    ),
    "weights": Term(
        "weights",
        "ponderi",
        "valorile parametrilor modelului",
        "the values of the model's parameters",
        ("ponderile",),
    ),
    "gradients": Term(
        "gradients",
        "gradienți",
        "derivatele pierderii după fiecare parametru",
        "the derivatives of the loss with respect to each parameter",
        ("gradienții",),
    ),
    "optimizer_state": Term(
        "optimizer state",
        "stările optimizatorului",
        "ce păstrează optimizatorul între pași (la Adam: m și v)",
        "what the optimizer keeps between steps (for Adam: m and v)",
        ("starea optimizatorului",),
    ),
    "mixed_precision": Term(
        "mixed precision",
        "precizie mixtă",
        "calcul în bf16 sau fp16, cu o copie fp32 a ponderilor pentru actualizare",
        "compute in bf16 or fp16, with an fp32 copy of the weights for the update",
        ("precizia mixtă",),
    ),
    "master_weights": Term(
        "master weights",
        "copia master a ponderilor",
        "copia fp32 a ponderilor, pe care o actualizează optimizatorul",
        "the fp32 copy of the weights that the optimizer updates",
        (),
    ),
    "data_parallel": Term(
        "data parallelism",
        "paralelism de date",
        "fiecare rang primește alte date și ține aceeași copie a modelului",
        "each rank gets other data and keeps the same copy of the model",
        ("paralelismul de date",),
    ),
    "replica": Term(
        "replica",
        "replică",
        "o copie completă a modelului pe un rang",
        "a full copy of the model on one rank",
        ("replici", "replica"),
    ),
    "sharding": Term(
        "sharding",
        "fragmentare",
        "împărțirea unui tensor în N bucăți, câte una pe fiecare rang",
        "splitting a tensor into N pieces, one on each rank",
        ("fragmentarea", "fragmenta"),
    ),
    "shard": Term(
        "shard",
        "fragment",
        "bucata unui tensor pe care o ține un rang",
        "the piece of a tensor that one rank keeps",
        ("fragmentul", "fragmente"),
    ),
    "all_gather": Term(
        "all-gather",
        "colectare completă",
        "fiecare rang primește toate fragmentele, lipite la un loc",
        "every rank receives all the shards, put together",
        ("colectarea completă",),
    ),
    "reduce_scatter": Term(
        "reduce-scatter",
        "reducere cu distribuire",
        "se însumează tensorii tuturor rangurilor, iar fiecare rang păstrează un fragment din sumă",
        "the ranks' tensors are summed and each rank keeps one shard of the sum",
        ("reducerea cu distribuire",),
    ),
    "all_reduce": Term(
        "all-reduce",
        "reducere globală",
        "se însumează tensorii tuturor rangurilor și fiecare rang primește suma întreagă",
        "the ranks' tensors are summed and every rank receives the whole sum",
        ("reducerea globală",),
    ),
    "flat_parameter": Term(
        "flat parameter",
        "parametru aplatizat",
        "toți parametrii unei unități FSDP, lipiți într-un singur tensor 1D",
        "all the parameters of one FSDP unit, joined into one 1-D tensor",
        ("parametrul aplatizat",),
    ),
    "padding": Term(
        "padding",
        "umplere",
        "elementele adăugate ca un tensor să se împartă exact la N",
        "the elements added so that a tensor splits evenly into N",
        ("umplerea",),
    ),
    "fsdp_unit": Term(
        "FSDP unit",
        "unitate FSDP",
        "un grup de parametri colectați și eliberați împreună",
        "a group of parameters gathered and freed together",
        ("unitatea FSDP", "unități FSDP"),
    ),
    "wrap_policy": Term(
        "wrap policy",
        "politică de împachetare",
        "regula care decide ce submodule devin unități FSDP",
        "the rule that decides which submodules become FSDP units",
        ("politica de împachetare", "politici de împachetare"),
    ),
    "peak_memory": Term(
        "peak memory",
        "vârf de memorie",
        "cea mai mare memorie folosită în timpul unui pas",
        "the most memory in use at any moment of a step",
        ("vârful de memorie",),
    ),
    "embedding": Term(
        "embedding",
        "încorporare",
        "tabelul care transformă fiecare token într-un vector; primul strat al modelului",
        "the table that turns each token into a vector; the model's first layer",
        ("încorporarea", "încorporările"),
    ),
    "token": Term(
        "token",
        "token",
        "o unitate de text pe care o citește modelul (un cuvânt sau o bucată de cuvânt); plural: tokeni",
        "a unit of text the model reads (a word or a piece of one)",
        ("tokenul", "tokeni", "tokenii"),
    ),
    "broadcast": Term(
        "broadcast",
        "difuzare",
        "o operație colectivă prin care un rang trimite același tensor tuturor celorlalte",
        "a collective in which one rank sends the same tensor to all the others",
        ("difuzarea", "difuzări"),
    ),
    "kernel": Term(
        "kernel",
        "kernel",
        "o funcție care face o operație pe dispozitiv (un produs de matrice, o atenție fuzionată); tot "
        "kernel se numesc procesul Python al notebook-ului și kernelul Linux; nucleele (cores) sunt ale CPU-ului",
        "a function that runs one operation on the device (a matrix product, a fused attention); also "
        "the notebook's Python process and the Linux kernel; cores are the CPU's",
        ("kernelul", "kerneluri", "kernelurile"),
    ),
    "payload": Term(
        "payload",
        "volum util",
        "octeții de date pe care îi mută o operație colectivă, fără factorul algoritmului (inel, arbore)",
        "the bytes of data a collective moves, before the algorithm's factor (ring, tree)",
        ("volumul util",),
    ),
    "activations": Term(
        "activations",
        "activări",
        "ieșirile intermediare păstrate pentru trecerea inversă",
        "the intermediate outputs kept for the backward pass",
        ("activările",),
    ),
    "traffic": Term(
        "communication volume",
        "volum de comunicare",
        "câți octeți trimite fiecare rang într-un pas",
        "how many bytes each rank sends in a step",
        ("volumul de comunicare",),
    ),
    "device_mesh": Term(
        "device mesh",
        "grilă de dispozitive",
        "rangurile așezate într-un tablou cu nume pe fiecare dimensiune (nu o rețea: legăturile sunt altceva)",
        "the ranks arranged in an array with a name for each dimension",
        ("grila de dispozitive", "grile de dispozitive"),
    ),
    # for the later lessons (prefetch, offload, FSDP2)
    "prefetch": Term(
        "prefetch",
        "preîncărcare",
        "colectarea parametrilor unității următoare înainte să fie nevoie de ei",
        "gathering the next unit's parameters before they are needed",
        ("preîncărcarea",),
    ),
    "overlap": Term(
        "overlap",
        "suprapunere",
        "comunicare care rulează în timp ce se calculează altceva",
        "communication that runs while something else is computed",
        ("suprapunerea",),
    ),
    "offload": Term(
        "offload",
        "mutare pe CPU",
        "parametri, gradienți sau stări ale optimizatorului mutate în memoria gazdei, nu ținute pe GPU",
        "CPU offload: parameters, gradients or optimizer states moved to host memory instead of kept on the GPU",
        ("mutarea pe CPU", "mutarea lor pe CPU"),
    ),
    "activation_checkpointing": Term(
        "activation checkpointing",
        "recalcularea activărilor",
        "activările nu se păstrează, ci se calculează din nou în trecerea inversă",
        "activations are not kept but computed again in the backward pass",
        (),
    ),
    "gradient_accumulation": Term(
        "gradient accumulation",
        "acumularea gradienților",
        "gradienții mai multor micro-loturi se însumează înainte de un singur pas al optimizatorului",
        "the gradients of several micro-batches are summed before one optimizer step",
        (),
    ),
    "meta_device": Term(
        "meta device",
        "dispozitivul meta",
        "tensori cu formă și tip, dar fără memorie",
        "tensors with a shape and a dtype but no memory",
        (),
    ),
    "sharded_checkpoint": Term(
        "sharded checkpoint",
        "punct de control fragmentat",
        "fiecare rang își scrie propriile fragmente pe disc",
        "each rank writes its own shards to disk",
        ("punctul de control fragmentat", "puncte de control fragmentate"),
    ),
    # lessons 4 to 6
    "interconnect": Term(
        "interconnect",
        "interconectare",
        "legătura prin care comunică GPU-urile: NVLink, PCIe sau rețeaua dintre noduri",
        "the link the GPUs talk over: NVLink, PCIe or the network between nodes",
        ("interconectarea",),
    ),
    "host_memory": Term(
        "host memory",
        "memoria gazdei",
        "memoria RAM a calculatorului, în afara GPU-urilor",
        "the computer's RAM, outside the GPUs",
        (),
    ),
    "pinned_memory": Term(
        "pinned memory",
        "memorie fixată",
        "memorie a gazdei pe care sistemul nu o mută, din care GPU-ul copiază direct",
        "host memory the system does not move, which the GPU copies from directly",
        ("memoria fixată",),
    ),
    "local_rank": Term(
        "local rank",
        "rang local",
        "numărul rangului în nodul lui, de la 0; alege GPU-ul nodului",
        "the rank's number within its node, from 0; it picks the node's GPU",
        ("rangul local",),
    ),
    "dtensor": Term(
        "DTensor",
        "tensor distribuit",
        "un tensor al cărui conținut este împărțit între ranguri după o grilă de dispozitive",
        "a tensor whose contents are split over the ranks along a device mesh",
        ("tensorul distribuit", "tensori distribuiți"),
    ),
    "fake_tensor": Term(
        "fake tensor",
        "tensor fictiv",
        "tensor cu formă, tip și dispozitiv, dar fără date, pe care operațiile rulează fără să calculeze",
        "a tensor with a shape, dtype and device but no data, which operations run on without computing",
        ("tensori fictivi", "tensorii fictivi"),
    ),
    # the words of the runtime (labkit's messages, the timeline, the simulator) that the lessons use too
    "batch": Term(
        "batch",
        "lot",
        "exemplele prelucrate într-un pas de antrenare",
        "the examples a training step processes",
        ("lotul", "loturi", "loturile"),
    ),
    "micro_batch": Term(
        "micro-batch",
        "micro-lot",
        "lotul unui rang într-o trecere directă; câteva micro-loturi acumulate fac un lot",
        "one rank's batch in one forward pass; several accumulated micro-batches make a batch",
        ("micro-lotul", "micro-loturi", "micro-loturile"),
    ),
    "hook": Term(
        "hook",
        "cârlig",
        "o funcție pe care torch o cheamă la un anumit moment (înainte sau după trecerea unui modul)",
        "a function torch calls at a given moment (before or after a module runs)",
        ("cârligul", "cârlige", "cârligele"),
    ),
    "stream": Term(
        "stream",
        "flux",
        "o coadă de operații pe GPU care rulează în ordine; două fluxuri pot rula în același timp",
        "a queue of GPU operations that run in order; two streams can run at the same time",
        ("fluxul", "fluxuri", "fluxurile", "flux CUDA"),
    ),
    "buffer": Term(
        "buffer",
        "tampon",
        "memorie alocată pentru a primi sau a trimite date, de exemplu ieșirea unui all-gather",
        "memory set aside to receive or send data, such as an all-gather's output",
        ("tamponul", "tampoane", "tampoanele"),
    ),
    "bucket": Term(
        "bucket",
        "compartiment",
        "un grup de gradienți reduși împreună, într-o singură operație colectivă",
        "a group of gradients reduced together, in one collective",
        ("compartimentul", "compartimente", "compartimentele"),
    ),
    "stage": Term(
        "stage",
        "etapă",
        "nivelul ZeRO: 1 fragmentează stările optimizatorului, 2 și gradienții, 3 și parametrii",
        "the ZeRO level: 1 shards the optimizer states, 2 the gradients too, 3 the parameters too",
        ("etapa", "etape", "etapele"),
    ),
    "seed": Term(
        "seed",
        "sămânță",
        "numărul de la care pornește generatorul de numere aleatoare (torch.manual_seed)",
        "the number the random number generator starts from (torch.manual_seed)",
        ("sămânța", "semințe"),
    ),
    "ring": Term(
        "ring",
        "inel",
        "algoritmul în care fiecare rang trimite vecinului său: (N-1)/N din date pe rang",
        "the algorithm where each rank sends to its neighbour: (N-1)/N of the data per rank",
        ("inelul", "în inel"),
    ),
    "bandwidth": Term(
        "bandwidth",
        "lățime de bandă",
        "câți octeți pe secundă trece o legătură",
        "how many bytes per second a link carries",
        ("lățimea de bandă",),
    ),
    "latency": Term(
        "latency",
        "latență",
        "timpul fix pe care îl plătește fiecare mesaj, oricât de mic",
        "the fixed time every message pays, however small",
        ("latența",),
    ),
    "timeline": Term(
        "timeline",
        "cronologie",
        "calculul și operațiile colective ale unui pas, pe rânduri, în timp",
        "a step's compute and collectives, in lanes, over time",
        ("cronologia", "cronologii", "cronologiile"),
    ),
}


def terms_table(keys: tuple[str, ...] | list[str], lang: str) -> str:
    """The markdown table of ``keys`` that ends a lesson in ``lang``."""
    if lang == "ro":
        lines = ["## Termeni din această lecție", "", "| română | English | pe scurt |", "|---|---|---|"]
        lines += [f"| {GLOSSARY[k].ro} | {GLOSSARY[k].en} | {GLOSSARY[k].ro_note} |" for k in keys]
        lines += ["", "Toți termenii cursului: `docs/glossary.md`."]
    else:
        lines = ["## Terms in this lesson", "", "| English | Romanian | in short |", "|---|---|---|"]
        lines += [f"| {GLOSSARY[k].en} | {GLOSSARY[k].ro} | {GLOSSARY[k].en_note} |" for k in keys]
        lines += ["", "Every term of the course, in both languages: `docs/glossary.md`."]
    return "\n".join(lines)


def glossary_markdown() -> str:
    """``docs/glossary.md``: every term, Romanian first, sorted as a Romanian reader looks them up."""
    head = [
        "# Glosar român–englez / Romanian–English glossary",
        "",
        "<!-- Generated by `python -m labkit.course.build` from labkit/course/glossary.py; do not edit by hand. -->",
        "",
        "Termenii cursului, așa cum apar în lecții: în ediția română, fiecare termen este explicat o dată,",
        "cu termenul englezesc alături. / The course's terms as the lessons use them: the Romanian edition",
        "introduces each one once with the English term beside it, and each lesson ends with its own list.",
        "",
        "| română | English | explicație | meaning |",
        "|---|---|---|---|",
    ]
    rows = sorted(GLOSSARY.values(), key=lambda term: _ro_sort_key(term.ro))
    body = [f"| {t.ro} | {t.en} | {t.ro_note} | {t.en_note} |" for t in rows]
    return "\n".join(head + body) + "\n"


# Romanian alphabetical order: a ă â b c d e f g h i î ... s ș t ț ...
_RO_ORDER = {ch: i for i, ch in enumerate("aăâbcdefghiîjklmnopqrsștțuvwxyz")}


def _ro_sort_key(word: str) -> list[int]:
    return [_RO_ORDER.get(ch, 100 + ord(ch)) for ch in word.lower()]
