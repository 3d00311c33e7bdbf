"""The messages of labkit.memory: the memory model, the peak's terms and the estimate.

Data only, in English and Romanian; every key starts with ``memory.``. ``labkit.i18n.t`` imports
this module the first time one of its keys is asked for.
"""

MESSAGES: dict[str, dict[str, str]] = {
    # labkit.memory.estimate
    "memory.est.help": {
        "en": "estimate peak memory per rank with fake tensors (no GPU, no memory)",
        "ro": "estimează memoria de vârf per rang cu tensori fictivi (fără GPU, fără memorie)",
    },
    "memory.est.help.model": {"en": "model preset, e.g. llama-7b", "ro": "presetul modelului, de ex. llama-7b"},
    "memory.est.help.nproc": {"en": "number of ranks (world size)", "ro": "numărul de ranguri (world size)"},
    "memory.est.help.precision": {"en": "fp32, bf16 or fp16", "ro": "fp32, bf16 sau fp16"},
    "memory.est.help.ac": {
        "en": "activation checkpointing on every block",
        "ro": "recalcularea activărilor pe fiecare bloc",
    },
    "memory.est.help.strategy": {
        "en": "FULL_SHARD, SHARD_GRAD_OP or HYBRID_SHARD",
        "ro": "FULL_SHARD, SHARD_GRAD_OP sau HYBRID_SHARD",
    },
    "memory.est.help.group": {
        "en": "HYBRID_SHARD: ranks per shard group (default 8)",
        "ro": "HYBRID_SHARD: ranguri per grup de fragmentare (implicit 8)",
    },
    "memory.est.help.micro_batch": {"en": "sequences per rank per step", "ro": "secvențe per rang per pas"},
    "memory.est.help.seq_len": {
        "en": "sequence length (default: the preset's)",
        "ro": "lungimea secvenței (implicit: a presetului)",
    },
    "memory.est.help.timeout": {"en": "seconds before giving up", "ro": "secunde până la renunțare"},
    "memory.est.help.json": {"en": "print the result as JSON", "ro": "afișează rezultatul ca JSON"},
    "memory.est.failed": {
        "en": "the fake-tensor estimate failed (exit {code}):\n{tail}",
        "ro": "estimarea cu tensori fictivi a eșuat (cod {code}):\n{tail}",
    },
    "memory.est.timeout": {
        "en": "the fake-tensor estimate took longer than {timeout:.0f} s and was stopped",
        "ro": "estimarea cu tensori fictivi a durat mai mult de {timeout:.0f} s și a fost oprită",
    },
    "memory.est.strategy": {
        "en": "estimates run FSDP2; choose FULL_SHARD, SHARD_GRAD_OP or HYBRID_SHARD, not {name!r}",
        "ro": "estimările rulează FSDP2; alegeți FULL_SHARD, SHARD_GRAD_OP sau HYBRID_SHARD, nu {name!r}",
    },
    "memory.est.title": {
        "en": "{model} on {world:@rank|ranks}, {precision}{ac}, micro-batch {b} x {s:@token|tokens}: rank 0 (GB)",
        "ro": "{model} pe {world:@rang|ranguri}, {precision}{ac}, micro-lot {b} x {s:@token|tokeni}: rangul 0 (GB)",
    },
    "memory.est.ac": {"en": ", activation checkpointing", "ro": ", cu recalcularea activărilor"},
    "memory.est.stage.forward": {"en": "forward", "ro": "trecerea directă"},
    "memory.est.stage.backward": {"en": "backward", "ro": "trecerea inversă"},
    "memory.est.stage.optimizer": {"en": "the optimizer step", "ro": "pasul optimizatorului"},
    "memory.est.col.category": {"en": "category", "ro": "categorie"},
    "memory.est.col.fake": {"en": "fake-tensor run", "ro": "rulare cu tensori fictivi"},
    "memory.est.col.model": {"en": "analytical model", "ro": "modelul analitic"},
    "memory.est.col.diff": {"en": "difference", "ro": "diferență"},
    "memory.est.footer": {
        "en": "peak reached in {stage}; the run took {seconds:.0f} s",
        "ro": "vârful a fost atins în {stage}; rularea a durat {seconds:.0f} s",
    },
    "memory.est.footer.extrapolated": {
        "en": "peak reached in {stage}; extrapolated to {layers:@layer|layers} from fake runs at the depths "
        "{depths} (every block is the same: each category grows by the same bytes per block), {seconds:.0f} s",
        "ro": "vârful a fost atins în {stage}; extrapolat la {layers:@strat|straturi} din rulări cu tensori "
        "fictivi la adâncimile {depths} (toate blocurile sunt la fel: fiecare categorie crește cu aceiași "
        "octeți pe bloc), {seconds:.0f} s",
    },
    "memory.est.help.full": {
        "en": "trace every layer instead of extrapolating from 4, 5 and 6 (slower, the same result)",
        "ro": "urmărește toate straturile în loc de extrapolarea din 4, 5 și 6 (mai lent, același rezultat)",
    },
    "memory.est.why.params": {
        "en": "parameters: FSDP2 pads each parameter's rows to a multiple of {n}: {pad} more than Ψ/N",
        "ro": "parametri: FSDP2 completează rândurile fiecărui parametru la un multiplu de {n}: cu {pad} peste Ψ/N",
    },
    "memory.est.why.params_exact": {
        "en": "parameters: 4 bytes × Ψ/N, the fp32 shard (no padding needed at {n:@rank|ranks})",
        "ro": "parametri: 4 octeți × Ψ/N, fragmentul fp32 (nu e nevoie de completare la {n:@rang|ranguri})",
    },
    "memory.est.why.optimizer": {
        "en": "optimizer: two fp32 moments of the rows this rank owns, plus a 4-byte step counter per tensor ({steps})",
        "ro": "optimizator: două momente fp32 pentru rândurile acestui rang, plus un contor de 4 octeți per tensor ({steps})",
    },
    "memory.est.why.grads": {
        "en": "gradients at the peak: {measured}, the shards of the units already reduced and the unsharded "
        "gradients still held ({full} of shards after backward); the model, at its peak moment, counts {unit}",
        "ro": "gradienți la vârf: {measured}, fragmentele unităților deja reduse și gradienții nefragmentați "
        "încă ținuți ({full} de fragmente după trecerea inversă); modelul, în momentul vârfului său, numără "
        "{unit}",
    },
    "memory.est.why.unsharded": {
        "en": "unsharded parameters at the peak: {measured} gathered; the model counts the units gathered "
        "at its peak moment, in {dtype} ({model})",
        "ro": "parametri nefragmentați la vârf: {measured} colectați; modelul numără unitățile colectate în "
        "momentul vârfului său, în {dtype} ({model})",
    },
    "memory.est.why.activations": {
        "en": "activations: {stored} stored at the end of forward ({formula} formula: {predicted}); {at_peak} "
        "alive at the peak; the model counts {model} ({how})",
        "ro": "activări: {stored} stocate la sfârșitul trecerii directe ({formula}: {predicted}); {at_peak} în "
        "viață la vârf; modelul numără {model} ({how})",
    },
    "memory.est.why.act_ac": {
        "en": "every layer's input, plus one layer rebuilt at a time in backward",
        "ro": "intrarea fiecărui strat, plus câte un strat reconstruit în trecerea inversă",
    },
    "memory.est.why.act_all": {
        "en": "all of them, though backward frees them as it goes",
        "ro": "pe toate, deși trecerea inversă le eliberează pe parcurs",
    },
    "memory.est.why.other": {
        "en": "other: backward temporaries (activation gradients, the logits' fp32 gradient of "
        "b·s·v·4 = {logits}, all-gather and reduce-scatter buffers); the model counts them term by term "
        "(memory_model.peak_memory(...).explain())",
        "ro": "altele: temporare din trecerea inversă (gradienții activărilor, gradientul fp32 al logiturilor "
        "de b·s·v·4 = {logits}, tampoanele all-gather și reduce-scatter); modelul le numără termen cu termen "
        "(memory_model.peak_memory(...).explain())",
    },
    # labkit.memory.model
    "memory.what.wrap": {"en": "wrap", "ro": "împachetare"},
    "memory.what.formula": {"en": "formula", "ro": "formulă"},
    "memory.what.flavor": {"en": "flavor", "ro": "variantă"},
    "memory.fits.yes": {
        "en": "fits: {need} of {have} per GPU ({free} free)",
        "ro": "încape: {need} din {have} per GPU ({free} liberi)",
    },
    "memory.fits.no": {
        "en": "does not fit: {need} needed, {have} per GPU ({over} too much)",
        "ro": "nu încape: necesari {need}, {have} per GPU ({over} în plus)",
    },
    "memory.note.one_unit": {
        "en": "one FSDP unit (no auto_wrap_policy): the whole model is gathered, so the peak holds DDP's "
        "parameter and gradient bytes; only the optimizer state is sharded",
        "ro": "o singură unitate FSDP (fără auto_wrap_policy): tot modelul e colectat, deci vârful conține "
        "octeții de parametri și gradienți ai DDP; doar stările optimizatorului sunt fragmentate",
    },
    "memory.note.grad_op": {
        "en": "SHARD_GRAD_OP keeps every unit gathered from its forward to its backward",
        "ro": "SHARD_GRAD_OP păstrează fiecare unitate colectată de la trecerea directă până la cea inversă",
    },
    "memory.note.compute_copy": {
        "en": "compute-precision copies of the parameters exist while they are used",
        "ro": "copiile în precizia de calcul ale parametrilor există cât timp sunt folosite",
    },
    "memory.note.activations": {
        "en": "activations: {formula}, micro-batch {b}, sequence {s}{ac}",
        "ro": "activări: {formula}, micro-lot {b}, secvență {s}{ac}",
    },
    "memory.note.ac": {"en": ", activation checkpointing", "ro": ", cu recalcularea activărilor"},
    "memory.strategy_table": {
        "en": "{n:@parameter|parameters} on {world:@rank|ranks}, per rank ({unit})",
        "ro": "{n:@parametru|parametri} pe {world:@rang|ranguri}, per rang ({unit})",
    },
    # labkit.memory.peak
    "memory.peak.phase.forward": {"en": "forward (at the loss)", "ro": "trecerea directă (la funcția de pierdere)"},
    "memory.peak.phase.loss": {"en": "backward of the loss", "ro": "trecerea inversă prin funcția de pierdere"},
    "memory.peak.phase.block": {"en": "backward of block {k}", "ro": "trecerea inversă a blocului {k}"},
    "memory.peak.phase.reduce": {
        "en": "reduce-scatter of block {k}",
        "ro": "reduce-scatter-ul blocului {k}",
    },
    "memory.peak.phase.flatten": {
        "en": "end of block {k}'s backward (flat gradient)",
        "ro": "finalul trecerii inverse a blocului {k} (gradientul plat)",
    },
    "memory.peak.phase.reduce_root": {
        "en": "reduce-scatter of the root unit",
        "ro": "reduce-scatter-ul unității rădăcină",
    },
    "memory.peak.phase.end": {
        "en": "end of backward (root gradients)",
        "ro": "finalul trecerii inverse (gradienții rădăcinii)",
    },
    "memory.peak.phase.optimizer": {"en": "optimizer step", "ro": "pasul optimizatorului"},
    "memory.peak.unit.root": {"en": "root", "ro": "rădăcina"},
    "memory.peak.unit.current": {"en": "current block", "ro": "blocul curent"},
    "memory.peak.unit.next": {"en": "next block", "ro": "blocul următor"},
    "memory.peak.unit.previous": {"en": "previous block", "ro": "blocul anterior"},
    "memory.peak.unit.all": {"en": "all units", "ro": "toate unitățile"},
    "memory.peak.unit.rest": {"en": "blocks not yet differentiated", "ro": "blocurile încă nederivate"},
    "memory.peak.term.params": {"en": "parameters (persistent)", "ro": "parametri (persistenți)"},
    "memory.peak.term.grads": {"en": "gradients (persistent)", "ro": "gradienți (persistenți)"},
    "memory.peak.term.optimizer": {"en": "optimizer state", "ro": "stările optimizatorului"},
    "memory.peak.term.grads_done": {
        "en": "sharded gradients of the blocks done",
        "ro": "gradienții fragmentați ai blocurilor terminate",
    },
    "memory.peak.term.gathered": {"en": "gathered units: {units}", "ro": "unități colectate: {units}"},
    "memory.peak.term.ag_buffer": {
        "en": "all-gather output kept (one block)",
        "ro": "ieșirea all-gather păstrată (un bloc)",
    },
    "memory.peak.term.rs_buffer": {
        "en": "reduce-scatter input kept (one block's unsharded gradient)",
        "ro": "intrarea reduce-scatter păstrată (gradientul nefragmentat al unui bloc)",
    },
    "memory.peak.term.late_grad": {
        "en": "previous block's unsharded gradient (post-backward late)",
        "ro": "gradientul nefragmentat al blocului anterior (post_backward întârziat)",
    },
    "memory.peak.term.optimizer_temps": {
        "en": "optimizer update temporaries (largest tensor)",
        "ro": "temporarele actualizării optimizatorului (cel mai mare tensor)",
    },
    "memory.peak.term.grad_in": {
        "en": "gradient entering the block (s·b·d)",
        "ro": "gradientul care intră în bloc (s·b·d)",
    },
    "memory.peak.term.block_grads": {
        "en": "the block's unsharded gradients",
        "ro": "gradienții nefragmentați ai blocului",
    },
    "memory.peak.term.block_grads_cast": {
        "en": "the same, cast to the reduce dtype",
        "ro": "aceiași, convertiți în tipul reducerii",
    },
    "memory.peak.term.flat_grads": {
        "en": "the block's gradients, twice (per parameter and flattened)",
        "ro": "gradienții blocului, de două ori (per parametru și aplatizați)",
    },
    "memory.peak.term.flat_grad_clone": {
        "en": "the unit's flat gradient, twice (autograd's and AccumulateGrad's clone)",
        "ro": "gradientul plat al unității, de două ori (al autograd și clona din AccumulateGrad)",
    },
    "memory.peak.term.rs_output": {
        "en": "reduce-scatter output (one shard)",
        "ro": "ieșirea reduce-scatter (un fragment)",
    },
    "memory.peak.term.rs_input": {"en": "reduce-scatter input", "ro": "intrarea reduce-scatter"},
    "memory.peak.term.root_grads": {
        "en": "root unit's gradients, twice (per parameter and flattened)",
        "ro": "gradienții unității rădăcină, de două ori (per parametru și aplatizați)",
    },
    "memory.peak.term.buckets": {"en": "DDP gradient buckets", "ro": "compartimentele de gradienți DDP"},
    "memory.peak.term.activations": {"en": "stored activations", "ro": "activări stocate"},
    "memory.peak.term.activations_left": {
        "en": "activations of the blocks not yet differentiated",
        "ro": "activările blocurilor încă nederivate",
    },
    "memory.peak.term.recomputed": {
        "en": "one block recomputed (checkpointing)",
        "ro": "un bloc recalculat (recalcularea activărilor)",
    },
    "memory.peak.term.logits": {"en": "logits (compute dtype)", "ro": "logiți (tipul de calcul)"},
    "memory.peak.term.loss_grads": {
        "en": "gradients of log-softmax and logits (2 × b·s·V fp32)",
        "ro": "gradienții log-softmax și ai logiților (2 × b·s·V fp32)",
    },
    "memory.peak.term.head_grads": {
        "en": "head gradients held in the root (V·d + d)",
        "ro": "gradienții capului ținuți în rădăcină (V·d + d)",
    },
    "memory.peak.term.block_temps": {
        "en": "block backward temporaries (s·b·d + d·f + 2·s·b·f)",
        "ro": "temporarele blocului în trecerea inversă (s·b·d + d·f + 2·s·b·f)",
    },
    # labkit.memory.states
    "memory.unknown": {
        "en": "unknown {what} {name!r}; choose one of {choices}{hint}",
        "ro": "{what} necunoscut(ă) {name!r}; alegeți una dintre {choices}{hint}",
    },
    "memory.did_you_mean": {"en": " (did you mean {guess!r}?)", "ro": " (ați vrut să scrieți {guess!r}?)"},
    "memory.what.strategy": {"en": "strategy", "ro": "strategie"},
    "memory.what.precision": {"en": "precision", "ro": "precizie"},
    "memory.what.optimizer": {"en": "optimizer", "ro": "optimizator"},
    "memory.what.convention": {"en": "convention", "ro": "convenție"},
    "memory.what.offload": {"en": "offload", "ro": "mutare pe CPU (offload)"},
    "memory.what.gpu": {"en": "GPU", "ro": "GPU"},
    "memory.bad_world": {
        "en": "world_size must be a positive integer, got {n!r}",
        "ro": "world_size trebuie să fie un întreg pozitiv, primit {n!r}",
    },
    "memory.bad_group": {
        "en": "HYBRID_SHARD needs shard_group_size dividing world_size ({world}); got {group}",
        "ro": "HYBRID_SHARD are nevoie de un shard_group_size care să dividă world_size ({world}); primit {group}",
    },
    "memory.col.category": {"en": "category", "ro": "categorie"},
    "memory.col.device": {"en": "device ({unit})", "ro": "dispozitiv ({unit})"},
    "memory.col.host": {"en": "host ({unit})", "ro": "gazdă ({unit})"},
    "memory.col.share": {"en": "share", "ro": "pondere"},
    "memory.col.bytes": {"en": "bytes", "ro": "octeți"},
    "memory.col.term": {"en": "term", "ro": "termen"},
    "memory.col.phase": {"en": "phase", "ro": "fază"},
    "memory.explain": {
        "en": "{flavor}: the peak is set by the {phase}",
        "ro": "{flavor}: vârful e atins în {phase}",
    },
    "memory.cat.params": {"en": "parameters", "ro": "parametri"},
    "memory.cat.params_unsharded": {"en": "unsharded parameters", "ro": "parametri nefragmentați"},
    "memory.cat.grads": {"en": "gradients", "ro": "gradienți"},
    "memory.cat.optimizer": {"en": "optimizer state", "ro": "stările optimizatorului"},
    "memory.cat.activations": {"en": "activations", "ro": "activări"},
    "memory.cat.other": {"en": "other / temporary", "ro": "altele / temporare"},
    "memory.total": {"en": "total", "ro": "total"},
    "memory.title": {
        "en": "{strategy}, {world:@rank|ranks}, {precision}, {optimizer}: per rank",
        "ro": "{strategy}, {world:@rang|ranguri}, {precision}, {optimizer}: per rang",
    },
    "memory.note.offload": {
        "en": "offloaded to host memory: {what}",
        "ro": "mutate în memoria gazdei: {what}",
    },
}
