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
    "wire.gpus.rank_limit": {
        "en": "nproc={nproc} is more than you may start with NCCL: at most {limit:@rank|ranks} (LABKIT_MAX_RANKS), "
        "one on each GPU that is yours ({names}). Use nproc={allowed} or fewer.",
        "ro": "nproc={nproc} depășește cât puteți porni cu NCCL: cel mult {limit:@rang|ranguri} (LABKIT_MAX_RANKS), "
        "câte unul pe fiecare GPU al dumneavoastră ({names}). Folosiți nproc={allowed} sau mai puțin.",
    },
    "wire.gpus.too_many": {
        "en": "{nproc:@NCCL rank needs|NCCL ranks need} {nproc:@GPU|GPUs}, but only {count:@# is|# are} yours: {names} "
        "({where}). Use nproc={count} or fewer, or backend='gloo' to run {nproc:@rank|ranks} on the CPU.",
        "ro": "{nproc:@rang NCCL are|ranguri NCCL au} nevoie de {nproc:@GPU|GPU-uri}, dar doar "
        "{count:@# este al dumneavoastră|# sunt ale dumneavoastră|# sunt ale dumneavoastră}: {names} ({where}). "
        "Folosiți nproc={count} sau mai puțin, ori backend='gloo' pentru a rula {nproc:@rang|ranguri} pe CPU.",
    },
    "wire.gpus.where.env": {"en": "CUDA_VISIBLE_DEVICES={value!r}", "ro": "CUDA_VISIBLE_DEVICES={value!r}"},
    "wire.gpus.where.torch": {
        "en": "torch sees {count:@CUDA device|CUDA devices}",
        "ro": "torch vede {count:@dispozitiv CUDA|dispozitive CUDA}",
    },
    "wire.gpus.auto.nccl": {
        "en": "backend auto: nccl, one GPU per rank ({names})",
        "ro": "backend=auto: nccl, câte un GPU pentru fiecare rang ({names})",
    },
    "wire.gpus.auto.no_gpu": {
        "en": "backend auto: gloo, because this kernel has no GPU ({where})",
        "ro": "backend=auto: gloo, pentru că acest kernel nu are niciun GPU ({where})",
    },
    "wire.gpus.auto.too_few": {
        "en": "backend auto: gloo on the CPU, because {nproc:@rank needs|ranks need} {nproc:@GPU|GPUs} for "
        "NCCL and only {count:@# is|# are} yours ({names}); use -n {count} to run on the GPUs",
        "ro": "backend=auto: gloo pe CPU, pentru că {nproc:@rang are|ranguri au} nevoie de "
        "{nproc:@GPU|GPU-uri} pentru NCCL și doar "
        "{count:@# este al dumneavoastră|# sunt ale dumneavoastră|# sunt ale dumneavoastră} ({names}); folosiți -n "
        "{count} pentru a rula pe GPU-uri",
    },
    "wire.gpus.auto.mig": {
        "en": "backend auto: gloo on the CPU, because the GPUs given to this kernel are MIG slices ({names}), "
        "on which NCCL is reported not to run",
        "ro": "backend=auto: gloo pe CPU, pentru că GPU-urile date acestui kernel sunt partiții MIG ({names}), "
        "pe care NCCL nu rulează, după cum s-a raportat",
    },
    "wire.gpus.asked": {"en": "backend {backend}, as asked", "ro": "biblioteca de comunicare {backend}, cum s-a cerut"},
    "wire.gpus.bad_fork": {
        "en": "rank {rank}: CUDA was initialised in torchrun's agent before this rank was forked from it, "
        "so CUDA cannot start here. Something in the agent touched CUDA ({calls}); "
        "LABKIT_START_METHOD=spawn starts each rank as a fresh interpreter instead.",
        "ro": "rangul {rank}: CUDA a fost inițializat în agentul torchrun înainte ca acest rang să fie creat "
        "prin fork din el, așa că CUDA nu poate porni aici. Ceva din agent a atins CUDA ({calls}); "
        "LABKIT_START_METHOD=spawn pornește în schimb fiecare rang ca un interpretor nou.",
    },
    # labkit.wire.setting
    "wire.setting.didyoumean": {"en": " (did you mean {name!r}?)", "ro": " (poate {name!r}?)"},
    "wire.setting.flavor": {
        "en": "unknown flavor {word!r} in the setting {spec!r}{hint}; choose one of: {choices}",
        "ro": "variantă necunoscută {word!r} în configurația {spec!r}{hint}; alegeți una dintre: {choices}",
    },
    "wire.setting.strategy": {
        "en": "the setting {spec!r}: {word!r} is no FSDP1 strategy{hint}; choose one of: {choices}",
        "ro": "configurația {spec!r}: {word!r} nu este o strategie FSDP1{hint}; alegeți una dintre: {choices}",
    },
    "wire.setting.prefetch": {
        "en": "the setting {spec!r}: {word!r} is no backward prefetch{hint}; choose one of: {choices}",
        "ro": "configurația {spec!r}: {word!r} nu este un backward prefetch{hint}; alegeți unul dintre: {choices}",
    },
    "wire.setting.fsdp2": {
        "en": "the setting {spec!r}: fsdp2 needs one of {choices} after the colon, not {word!r}{hint}",
        "ro": "configurația {spec!r}: fsdp2 cere unul dintre {choices} după două puncte, nu {word!r}{hint}",
    },
    "wire.setting.option": {
        "en": "the setting {spec!r}: {word!r} is no option of {flavor}{hint}; its options: {choices}",
        "ro": "configurația {spec!r}: {word!r} nu este o opțiune a {flavor}{hint}; opțiunile sale: {choices}",
    },
    "wire.setting.twice": {
        "en": "the setting {spec!r} gives {word!r} twice",
        "ro": "configurația {spec!r} dă {word!r} de două ori",
    },
    "wire.setting.prefetch_twice": {
        "en": "the setting {spec!r} gives the backward prefetch twice: {first} and {second}",
        "ro": "configurația {spec!r} dă backward prefetch de două ori: {first} și {second}",
    },
    "wire.setting.model": {
        "en": "the setting {spec!r}: a model preset must follow the @",
        "ro": "configurația {spec!r}: după @ trebuie să urmeze un model predefinit",
    },
}
