"""The messages of labkit.wire: the GPUs and the backend a run may use.

Data only, in English and Romanian; every key starts with ``wire.``. ``labkit.i18n.t`` imports
this module the first time one of its keys is asked for.
"""

MESSAGES: dict[str, dict[str, str]] = {
    # labkit.wire.devices
    "wire.gpus.none": {
        "en": "NCCL needs GPUs, and this kernel has none ({where}). Use backend='gloo' to run the ranks on the CPU.",
        "ro": "NCCL are nevoie de GPU-uri, iar acest kernel nu are niciunul ({where}). Folosiți backend='gloo' pentru a rula rangurile pe CPU.",
    },
    "wire.gpus.too_many": {
        "en": "{nproc:@NCCL rank needs|NCCL ranks need} {nproc:@GPU|GPUs}, but only {count} are yours: {names} "
        "({where}). Use nproc={count} or fewer, or backend='gloo' to run {nproc:@rank|ranks} on the CPU.",
        "ro": "{nproc:@rang NCCL are|ranguri NCCL au} nevoie de {nproc:@GPU|GPU-uri}, dar doar {count} sunt "
        "ale dumneavoastră: {names} ({where}). Folosiți nproc={count} sau mai puțin, ori backend='gloo' pentru "
        "a rula {nproc:@rang|ranguri} pe CPU.",
    },
    "wire.gpus.where.env": {"en": "CUDA_VISIBLE_DEVICES={value!r}", "ro": "CUDA_VISIBLE_DEVICES={value!r}"},
    "wire.gpus.where.torch": {
        "en": "torch sees {count:@CUDA device|CUDA devices}",
        "ro": "torch vede {count:@dispozitiv CUDA|dispozitive CUDA}",
    },
    "wire.gpus.auto.nccl": {
        "en": "backend auto: nccl, one GPU per rank ({names})",
        "ro": "backend auto: nccl, câte un GPU pentru fiecare rang ({names})",
    },
    "wire.gpus.auto.no_gpu": {
        "en": "backend auto: gloo, because this kernel has no GPU ({where})",
        "ro": "backend auto: gloo, pentru că acest kernel nu are niciun GPU ({where})",
    },
    "wire.gpus.auto.too_few": {
        "en": "backend auto: gloo on the CPU, because {nproc:@rank needs|ranks need} {nproc:@GPU|GPUs} for "
        "NCCL and only {count} are yours ({names}); use -n {count} to run on the GPUs",
        "ro": "backend auto: gloo pe CPU, pentru că {nproc:@rang are|ranguri au} nevoie de "
        "{nproc:@GPU|GPU-uri} pentru NCCL și doar {count} sunt ale dumneavoastră ({names}); folosiți -n "
        "{count} pentru a rula pe GPU-uri",
    },
    "wire.gpus.auto.mig": {
        "en": "backend auto: gloo on the CPU, because the GPUs given to this kernel are MIG slices ({names}), "
        "on which NCCL is reported not to run",
        "ro": "backend auto: gloo pe CPU, pentru că GPU-urile date acestui kernel sunt partiții MIG ({names}), "
        "pe care NCCL nu rulează, după cum s-a raportat",
    },
    "wire.gpus.asked": {"en": "backend {backend}, as asked", "ro": "backend {backend}, cum s-a cerut"},
    "wire.gpus.bad_fork": {
        "en": "rank {rank}: CUDA was initialised in torchrun's agent before this rank was forked from it, "
        "so CUDA cannot start here. Something in the agent touched CUDA ({calls}); "
        "LABKIT_START_METHOD=spawn starts each rank as a fresh interpreter instead.",
        "ro": "rangul {rank}: CUDA a fost inițializat în agentul torchrun înainte ca acest rang să fie creat "
        "prin fork din el, așa că CUDA nu poate porni aici. Ceva din agent a atins CUDA ({calls}); "
        "LABKIT_START_METHOD=spawn pornește în schimb fiecare rang ca un interpretor nou.",
    },
}
