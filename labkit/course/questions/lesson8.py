"""Lesson 8's questions: DDP's overlap, gradient buckets and ZeRO-1, written by hand on the ranks.

The three exercises on the ranks are judged in the notebook from what labkit observed their ranks do
(``labkit.grading.rerun_lesson8``), and by the grader on ranks of its own, with a model and batches the
notebook never shows. The prediction is asked before the cell that measures it.
"""

from __future__ import annotations

from labkit.grading import rerun_lesson8
from labkit.grading.registry import Asks, question

question(
    "lesson8.overlap_hooks",
    asks=Asks.MECHANISM,
    points=2,
    takes="run",
    observe=rerun_lesson8.overlap_hooks,
    hint={
        "en": "Autograd can tell you the moment a parameter's gradient is complete. Start that gradient's all-reduce "
        "there, without waiting for it, and keep what the call gives back: backward goes on computing while the "
        "network works.",
        "ro": "Autograd vă poate spune momentul în care gradientul unui parametru este complet. Porniți acolo "
        "reducerea globală a acelui gradient, fără să o așteptați, și păstrați ce vă întoarce apelul: trecerea "
        "inversă continuă să calculeze cât timp lucrează rețeaua.",
    },
    hints=[
        {
            "en": "Register, on every parameter, a hook that runs after its gradient has been accumulated; in it, an "
            "asynchronous all-reduce of that gradient, in place, whose handle you append to a list. finish waits "
            "on every handle, scales each gradient to a mean, and empties the list for the next step.",
            "ro": "Înregistrați pe fiecare parametru un cârlig care rulează după ce gradientul lui a fost acumulat; "
            "în el, o reducere globală asincronă a acelui gradient, pe loc, al cărei obiect de urmărire îl adăugați "
            "într-o listă. finish așteaptă fiecare obiect, scalează fiecare gradient la o medie și golește lista "
            "pentru pasul următor.",
        },
        {
            "en": "The check counts, on every rank, the bytes all-reduced before the cell's barrier (while backward "
            "ran): they must be every gradient's, none of them blocking, and none left for finish. The gradients "
            "after finish must equal DDP's, step after step.",
            "ro": "Verificarea numără, pe fiecare rang, octeții reduși global înainte de bariera celulei (cât a rulat "
            "trecerea inversă): trebuie să fie ai tuturor gradienților, niciunul blocant, și niciunul lăsat pentru "
            "finish. Gradienții de după finish trebuie să fie egali cu ai DDP, pas după pas.",
        },
    ],
)

question(
    "lesson8.bucketed",
    asks=Asks.MECHANISM,
    points=2,
    takes="run",
    observe=rerun_lesson8.overlap_buckets,
    hint={
        "en": "A bucket is sent when its last gradient is ready, as one flat tensor: count, per bucket, how many of "
        "its gradients autograd has handed you.",
        "ro": "Un compartiment pleacă atunci când ultimul lui gradient este gata, ca un singur tensor plat: numărați, "
        "pentru fiecare compartiment, câți dintre gradienții lui vi i-a dat autograd.",
    },
    hints=[
        {
            "en": "Each parameter's hook adds one to its bucket's count; when the count reaches the bucket's size, "
            "concatenate the bucket's gradients into one tensor and start its asynchronous all-reduce. finish "
            "waits, divides, copies each slice back into its gradient, and resets the counts.",
            "ro": "Cârligul fiecărui parametru crește cu unu numărătoarea compartimentului său; când numărătoarea ajunge "
            "la dimensiunea compartimentului, concatenați gradienții compartimentului într-un singur tensor și porniți reducerea "
            "lui globală asincronă. finish așteaptă, împarte, copiază fiecare felie înapoi în gradientul ei și "
            "readuce numărătorile la zero.",
        },
        {
            "en": "The check wants fewer all-reduces than gradients (at least two here), all of them issued while "
            "backward ran, the last bucket too, and the gradients equal to DDP's.",
            "ro": "Verificarea cere mai puține reduceri globale decât gradienți (aici cel puțin două), toate pornite "
            "cât a rulat trecerea inversă, inclusiv ultimul compartiment, și gradienți egali cu ai DDP.",
        },
    ],
)

question(
    "lesson8.zero1_traffic",
    asks=Asks.PREDICTION,
    answer="b",
    sealed=True,
    hint={
        "en": "Write DDP's all-reduce as the two ring collectives it is made of, then write ZeRO-1's step as the "
        "collectives it issues, and compare the bytes each rank sends.",
        "ro": "Scrieți reducerea globală a DDP ca cele două operații colective în inel din care este făcută, apoi "
        "pasul ZeRO-1 ca operațiile colective pe care le pornește, și comparați octeții pe care îi trimite fiecare "
        "rang.",
    },
    mistakes={
        "a": {
            "en": "Each rank updates only its shard, but every rank still needs the whole gradient reduced and the "
            "whole updated model back.",
            "ro": "Fiecare rang actualizează doar fragmentul lui, dar fiecare rang tot are nevoie de tot gradientul "
            "redus și de tot modelul actualizat înapoi.",
        },
        "c": {
            "en": "The all-gather sends back parameters, not gradients, but a ring all-reduce already contains an "
            "all-gather: count what each collective sends.",
            "ro": "Colectarea trimite înapoi parametri, nu gradienți, dar o reducere globală în inel conține deja o "
            "colectare: numărați ce trimite fiecare operație colectivă.",
        },
    },
)

question(
    "lesson8.zero1_by_hand",
    asks=Asks.MECHANISM,
    points=2,
    takes="run",
    observe=rerun_lesson8.zero1_by_hand,
    hint={
        "en": "A rank's optimizer knows only its own slice of the flat parameters. Before it steps, that slice needs "
        "the mean gradient over the ranks; after it, every rank needs every other rank's updated slice.",
        "ro": "Optimizatorul unui rang cunoaște doar felia lui din parametrii plați. Înainte de pas, felia are "
        "nevoie de gradientul mediu pe ranguri; după pas, fiecare rang are nevoie de felia actualizată a "
        "fiecărui alt rang.",
    },
    hints=[
        {
            "en": "Flatten the gradients as flat_shard flattens the parameters (padded the same way); a "
            "reduce-scatter gives each rank the sum of its slice: divide it and make it the shard's gradient. "
            "After the optimizer's step, an all-gather of the shards rebuilds the flat parameters: copy them back "
            "into the model.",
            "ro": "Aplatizați gradienții așa cum flat_shard aplatizează parametrii (completați la fel); o reducere "
            "cu distribuire îi dă fiecărui rang suma feliei lui: împărțiți-o și faceți-o gradientul fragmentului. "
            "După pasul optimizatorului, o colectare a fragmentelor reface parametrii plați: copiați-i înapoi în "
            "model.",
        },
        {
            "en": "The check wants an all-gather issued from zero1_step on every rank, and after the steps the "
            "flat parameters equal to those ZeroRedundancyOptimizer trained on the same batches.",
            "ro": "Verificarea cere o colectare pornită din zero1_step pe fiecare rang și, după pași, parametri "
            "plați egali cu cei antrenați de ZeroRedundancyOptimizer pe aceleași loturi.",
        },
    ],
)
