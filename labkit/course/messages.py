"""The messages of labkit.course: the course's build command and what the lessons print.

Data only, in English and Romanian; every key starts with ``course.``. ``labkit.i18n.t`` imports
this module the first time one of its keys is asked for.
"""

MESSAGES: dict[str, dict[str, str]] = {
    # lesson 9: composing parallelisms (its tables' columns and its sentences)
    "course.col.dp_index": {"en": "dp index", "ro": "indice dp"},
    "course.col.tp_index": {"en": "tp index", "ro": "indice tp"},
    "course.col.tp_group": {"en": "tp group (same batch)", "ro": "grup tp (același lot)"},
    "course.col.dp_group": {"en": "dp group (FSDP)", "ro": "grup dp (FSDP)"},
    "course.col.group": {"en": "group", "ro": "grup"},
    "course.col.composed": {"en": "composed (tp × dp)", "ro": "compus (tp × dp)"},
    "course.col.eager": {"en": "not compiled", "ro": "necompilat"},
    "course.col.compiled": {"en": "block 0 compiled", "ro": "blocul 0 compilat"},
    "course.col.first_ms": {"en": "first step (ms)", "ro": "primul pas (ms)"},
    "course.col.second_ms": {"en": "second step (ms)", "ro": "al doilea pas (ms)"},
    "course.col.tokens": {"en": "tokens per step", "ro": "tokeni pe pas"},
    "course.col.tokens_per_s": {"en": "tokens/s", "ro": "tokeni/s"},
    "course.col.dp": {"en": "dp", "ro": "dp"},
    "course.col.tp": {"en": "tp", "ro": "tp"},
    "course.col.entries": {"en": "entries", "ro": "intrări"},
    "course.col.whole": {"en": "whole tensors", "ro": "tensori întregi"},
    "course.col.returned_s": {"en": "async_save returned (s)", "ro": "async_save s-a întors (s)"},
    "course.col.finished_s": {"en": "files written (s)", "ro": "fișiere scrise (s)"},
    "course.col.same_as_saved": {"en": "files hold the saved values", "ro": "fișierele țin valorile salvate"},
    "course.col.line": {"en": "cell line", "ro": "linia din celulă"},
    "course.col.param": {"en": "parameter", "ro": "parametru"},
    "course.col.shape": {"en": "shape", "ro": "formă"},
    "course.col.placements": {"en": "placements", "ro": "plasări"},
    "course.col.mesh_dims": {"en": "mesh dimensions", "ro": "dimensiunile grilei"},
    "course.col.local": {"en": "this rank's shape", "ro": "forma pe acest rang"},
    "course.say.attention_error": {
        "en": "attention split by heads, on this machine: NotImplementedError, DTensor has no sharding strategy "
        "for {op}",
        "ro": "atenția împărțită pe capete, pe această mașină: NotImplementedError, DTensor nu are nicio strategie "
        "de fragmentare pentru {op}",
    },
    "course.say.attention_ok": {
        "en": "attention split by heads, on this machine: it ran",
        "ro": "atenția împărțită pe capete, pe această mașină: a rulat",
    },
    "course.col.code": {"en": "code", "ro": "cod"},
    "course.say.gathered_after_no_grad": {
        "en": "parameters that were not DTensors after the forward under torch.no_grad(): {n}",
        "ro": "parametri care nu erau DTensor-i după trecerea directă sub torch.no_grad(): {n}",
    },
    "course.say.odd_nproc": {
        "en": "this lesson needs an even number of ranks (rows of 2 tensor-parallel ranks); nproc = {n}",
        "ro": "această lecție are nevoie de un număr par de ranguri (rânduri de câte 2 ranguri paralele "
        "tensorial); nproc = {n}",
    },
    "course.say.degenerate_mesh": {
        "en": "{n:@rank|ranks}: a 1 × {n} mesh. FSDP's group has one rank, so it shards nothing; run with "
        "nproc = 4 to see both parallelisms",
        "ro": "{n:@rang|ranguri}: o grilă 1 × {n}. Grupul FSDP are un singur rang, deci nu fragmentează nimic; "
        "rulați cu nproc = 4 ca să vedeți ambele paralelisme",
    },
    "course.say.compile_skipped": {
        "en": "compile = False: no block was compiled (set compile = True in the parameters cell to measure it)",
        "ro": "compile = False: niciun bloc nu a fost compilat (setați compile = True în celula de parametri ca "
        "să-l măsurați)",
    },
    # labkit.course.build
    "course.help": {
        "en": "build the course notebooks (English and Romanian) from labkit/course/lessons",
        "ro": "construiește notebook-urile cursului (engleză și română) din labkit/course/lessons",
    },
    "course.help.check": {
        "en": "write nothing; exit 1 if a committed notebook differs from a fresh build",
        "ro": "nu scrie nimic; ieșire cu 1 dacă un notebook salvat diferă de unul construit acum",
    },
    "course.help.root": {
        "en": "the repository folder that holds notebooks/ and docs/ (default: this checkout)",
        "ro": "folderul depozitului care conține notebooks/ și docs/ (implicit: acest depozit)",
    },
    "course.help.lesson": {
        "en": "only the notebooks of this lesson (e.g. lesson2); repeatable",
        "ro": "doar notebook-urile acestei lecții (de ex. lesson2); se poate repeta",
    },
    "course.wrote": {"en": "wrote {n:@file|files} under {root}", "ro": "{n:@fișier scris|fișiere scrise} în {root}"},
    "course.fresh": {"en": "{n:@file is|files are} up to date", "ro": "{n:@fișier este|fișiere sunt} la zi"},
    "course.stale": {
        "en": "these files differ from a fresh build (run: python -m labkit.course.build):\n{files}",
        "ro": "aceste fișiere diferă de o construire nouă (rulați: python -m labkit.course.build):\n{files}",
    },
    "course.lint": {
        "en": "the lessons' code cells do not pass ruff (fix them in the lesson's source):\n{problems}",
        "ro": "celulele de cod ale lecțiilor nu trec de ruff (corectați-le în sursa lecției):\n{problems}",
    },
    "course.lint_missing": {
        "en": "ruff is not installed (pip install -e '.[test]'): the lessons' code cells were not linted",
        "ro": "ruff nu este instalat (pip install -e '.[test]'): celulele de cod ale lecțiilor nu au fost verificate",
    },
    "course.pure_failed": {
        "en": "{lesson} ({edition}), cell {cell}: a pure cell failed while building: {error}",
        "ro": "{lesson} ({edition}), celula {cell}: o celulă pură a eșuat la construire: {error}",
    },
    "course.pure_stderr": {
        "en": "{lesson} ({edition}), cell {cell}: a pure cell wrote to stderr, which nbval cannot compare: {text}",
        "ro": "{lesson} ({edition}), celula {cell}: o celulă pură a scris în stderr, ceea ce nbval nu poate compara: {text}",
    },
    "course.pure_expr": {
        "en": "{lesson}, cell {cell}: a pure cell must print its result, not end in an expression that has a value",
        "ro": "{lesson}, celula {cell}: o celulă pură trebuie să-și afișeze rezultatul cu print, nu să se încheie cu o expresie care are o valoare",
    },
    "course.no_check": {
        "en": "{lesson}, cell {cell}: a check cell without labkit.check(...)",
        "ro": "{lesson}, celula {cell}: o celulă de verificare fără labkit.check(...)",
    },
    # labkit.course.show
    "course.col.rank": {"en": "rank", "ro": "rang"},
    "course.col.ranks": {"en": "ranks", "ro": "ranguri"},
    "course.col.world_size": {"en": "world size", "ro": "ranguri"},
    "course.col.backend": {"en": "backend", "ro": "bibliotecă de comunicare"},
    "course.col.device": {"en": "device", "ro": "dispozitiv"},
    "course.col.pid": {"en": "process id", "ro": "id proces"},
    "course.col.total": {"en": "all-reduce result", "ro": "rezultat all-reduce"},
    "course.col.loss": {"en": "loss", "ro": "pierdere"},
    "course.col.peak": {"en": "peak", "ro": "vârf"},
    "course.col.strategy": {"en": "strategy", "ro": "strategie"},
    "course.col.policy": {"en": "wrap policy", "ro": "politică"},
    "course.col.units": {"en": "units", "ro": "unități"},
    "course.col.unit": {"en": "unit", "ro": "unitate"},
    "course.col.params": {"en": "parameters", "ro": "parametri"},
    "course.col.grads": {"en": "gradients", "ro": "gradienți"},
    "course.col.optim": {"en": "optimizer", "ro": "optimizator"},
    "course.col.state": {"en": "params+grads+optim", "ro": "param.+grad.+optim."},
    "course.col.formula": {"en": "formula", "ro": "formulă"},
    "course.col.measured": {"en": "measured", "ro": "măsurat"},
    "course.col.ratio": {"en": "measured / formula", "ro": "măsurat / formulă"},
    "course.col.model": {"en": "model", "ro": "model"},
    "course.col.n_params": {"en": "parameters", "ro": "parametri"},
    "course.col.per_gpu": {"en": "per GPU", "ro": "pe GPU"},
    "course.col.fits": {"en": "fits in {gpu}", "ro": "încape în {gpu}"},
    "course.col.bytes_per_param": {"en": "bytes/param", "ro": "octeți/param."},
    "course.col.what": {"en": "what", "ro": "ce"},
    "course.col.dtype": {"en": "dtype", "ro": "tip"},
    "course.col.stage": {"en": "ZeRO stage", "ro": "etapa ZeRO"},
    "course.col.fsdp": {"en": "FSDP", "ro": "FSDP"},
    "course.col.collective": {"en": "collective", "ro": "colectivă"},
    "course.col.calls": {"en": "calls", "ro": "apeluri"},
    "course.col.sent": {"en": "sent per rank", "ro": "trimis per rang"},
    "course.col.theory": {"en": "theory", "ro": "teorie"},
    "course.col.before": {"en": "before", "ro": "înainte"},
    "course.col.after": {"en": "after", "ro": "după"},
    "course.col.peak_unsharded": {"en": "peak gathered", "ro": "vârf colectat"},
    "course.col.largest_unit": {"en": "largest unit", "ro": "cea mai mare unitate"},
    "course.col.min_num_params": {"en": "min_num_params", "ro": "min_num_params"},
    "course.col.weights": {"en": "weights", "ro": "ponderi"},
    "course.col.gradients": {"en": "gradients", "ro": "gradienți"},
    "course.col.master": {"en": "fp32 master weights", "ro": "copia master fp32"},
    "course.col.adam_m": {"en": "Adam m", "ro": "Adam m"},
    "course.col.adam_v": {"en": "Adam v", "ro": "Adam v"},
    "course.col.fp32_bytes": {"en": "fp32 (bytes)", "ro": "fp32 (octeți)"},
    "course.col.mixed_bytes": {"en": "mixed precision (bytes)", "ro": "precizie mixtă (octeți)"},
    "course.col.shard": {"en": "shard", "ro": "fragment"},
    "course.col.gathered": {"en": "after all_gather", "ro": "după all_gather"},
    "course.col.full": {"en": "full-size tensor", "ro": "tensor complet"},
    "course.col.mine": {"en": "after reduce_scatter", "ro": "după reduce_scatter"},
    "course.col.mm_params": {"en": "shards", "ro": "fragmente"},
    "course.col.mm_params_unsharded": {"en": "whole params", "ro": "parametri întregi"},
    "course.col.mm_grads": {"en": "gradients", "ro": "gradienți"},
    "course.col.mm_optimizer": {"en": "optimizer", "ro": "optimizator"},
    "course.col.mm_activations": {"en": "activations", "ro": "activări"},
    "course.col.mm_other": {"en": "other", "ro": "altele"},
    "course.col.formula_unsharded": {"en": "formula (whole params)", "ro": "formulă (parametri întregi)"},
    "course.yes": {"en": "yes", "ro": "da"},
    "course.no": {"en": "no", "ro": "nu"},
    "course.machine.torch": {"en": "torch", "ro": "torch"},
    "course.machine.cores": {"en": "CPU cores", "ro": "nuclee CPU"},
    "course.machine.gpus": {"en": "GPUs visible to this kernel", "ro": "GPU-uri vizibile acestui kernel"},
    "course.machine.gloo": {"en": "gloo available", "ro": "gloo disponibil"},
    "course.machine.nccl": {"en": "NCCL available", "ro": "NCCL disponibil"},
    "course.machine.backend": {
        "en": "backend for these lessons",
        "ro": "biblioteca de comunicare pentru aceste lecții",
    },
    "course.machine.ranks": {"en": "most ranks this machine allows", "ro": "cele mai multe ranguri permise aici"},
    "course.say.ddp_head": {
        "en": "model {model}: {n:@parameter|parameters}, {nproc:@DDP rank|DDP ranks}",
        "ro": "modelul {model}: {n:@parametru|parametri}, {nproc:@rang DDP|ranguri DDP}",
    },
    "course.say.parameters_kept": {
        "en": "nn.Parameter objects still those from before fully_shard: {kept} of {total}",
        "ro": "obiecte nn.Parameter care sunt încă cele de dinainte de fully_shard: {kept} din {total}",
    },
    "course.say.probe_losses": {
        "en": "loss on the probe batch: saved model {saved}, resumed model {resumed}",
        "ro": "pierderea pe lotul de probă: modelul salvat {saved}, modelul reluat {resumed}",
    },
    "course.say.next_step_losses": {
        "en": "after one more step:     saved model {saved}, resumed model {resumed}",
        "ro": "după încă un pas:        modelul salvat {saved}, modelul reluat {resumed}",
    },
    "course.say.reloaded_loss": {
        "en": "loss of the reloaded model: {loss}",
        "ro": "pierderea modelului reîncărcat: {loss}",
    },
    "course.say.prefetch_saves": {
        "en": "BACKWARD_PRE saves {ms} ms per step (simulated)",
        "ro": "BACKWARD_PRE economisește {ms} ms pe pas (simulat)",
    },
    "course.say.predicted_measured": {
        "en": "predicted {predicted}, measured {measured}",
        "ro": "prezis {predicted}, măsurat {measured}",
    },
    "course.say.holding": {"en": "step {step}: holding {mib} MiB", "ro": "pasul {step}: ține {mib} MiB"},
    "course.say.finished_step": {
        "en": "rank {rank} finished step {step}",
        "ro": "rangul {rank} a terminat pasul {step}",
    },
    "course.say.ran": {"en": "{nproc:@rank|ranks}: {seconds} s", "ro": "{nproc:@rang|ranguri}: {seconds} s"},
    "course.say.n_params": {
        "en": "model {model}: {n:@parameter|parameters}",
        "ro": "modelul {model}: {n:@parametru|parametri}",
    },
    "course.say.convention": {
        "en": "convention {name}: {b:@byte|bytes} per parameter, at most {n:@parameter|parameters} on one GPU "
        "under DDP",
        "ro": "convenția {name}: {b:@octet|octeți} pe parametru, cel mult {n:@parametru|parametri} pe un GPU sub DDP",
    },
    "course.say.weights_wall": {
        "en": "bf16 weights and gradients only: {b:@byte|bytes} per parameter, at most "
        "{n:@parameter|parameters} on one GPU",
        "ro": "doar ponderi și gradienți bf16: {b:@octet|octeți} pe parametru, cel mult "
        "{n:@parametru|parametri} pe un GPU",
    },
    "course.say.checksums": {"en": "weight checksums: {values}", "ro": "sume de control ale ponderilor: {values}"},
    "course.fig.unit_bytes": {
        "en": "each FSDP unit, gathered (fp32)",
        "ro": "fiecare unitate FSDP, colectată (fp32)",
    },
    "course.fig.peak_by_category": {
        "en": "peak of rank {rank}, by category",
        "ro": "vârful rangului {rank}, pe categorii",
    },
    "course.fig.params_b": {"en": "parameters (billions)", "ro": "parametri (miliarde)"},
    "course.fig.gb_per_gpu": {"en": "GB per GPU", "ro": "GB pe GPU"},
    "course.fig.ddp_full": {
        "en": "DDP, mixed-precision AdamW ({b} B/param)",
        "ro": "DDP, AdamW în precizie mixtă ({b} B/param.)",
    },
    "course.fig.weights_grads": {
        "en": "bf16 weights and gradients only ({b} B/param)",
        "ro": "doar ponderi și gradienți bf16 ({b} B/param.)",
    },
    # lessons 4 to 6
    "course.col.setting": {"en": "setting", "ro": "setare"},
    "course.col.step_ms": {"en": "step (ms)", "ro": "pas (ms)"},
    "course.col.units_held": {"en": "peak units held", "ro": "maxim unități ținute"},
    "course.col.order": {"en": "collectives, in the order issued", "ro": "operații colective, în ordinea lansării"},
    "course.col.forward_order": {
        "en": "forward: gathers (AG) and compute (F), in order",
        "ro": "trecerea directă: colectări (AG) și calcul (F), în ordine",
    },
    "course.col.block_params": {"en": "parameters per block", "ro": "parametri pe bloc"},
    "course.col.configuration": {"en": "configuration", "ro": "configurație"},
    "course.col.predicted_ms": {"en": "predicted (ms)", "ro": "prezis (ms)"},
    "course.col.measured_ms": {"en": "measured (ms)", "ro": "măsurat (ms)"},
    "course.col.range_ms": {"en": "range (ms)", "ro": "interval (ms)"},
    "course.col.error": {"en": "error", "ro": "eroare"},
    "course.col.comm_ms": {"en": "collectives (ms)", "ro": "operații colective (ms)"},
    "course.col.hidden_ms": {"en": "under compute (ms)", "ro": "sub calcul (ms)"},
    # lesson 8: overlap by hand
    "course.col.all_reduces": {"en": "all-reduces", "ro": "reduceri globale"},
    "course.col.backward_ms": {"en": "backward (ms)", "ro": "trecerea inversă (ms)"},
    "course.col.wait_ms": {"en": "wait (ms)", "ro": "așteptare (ms)"},
    "course.col.payload": {"en": "payload", "ro": "volum util"},
    "course.col.ms": {"en": "ms", "ro": "ms"},
    "course.col.latency_us": {"en": "latency (µs)", "ro": "latență (µs)"},
    "course.col.bandwidth_mb_s": {"en": "bandwidth (MB/s)", "ro": "lățime de bandă (MB/s)"},
    "course.col.kit_alpha_us": {"en": "labkit: alpha per step (µs)", "ro": "labkit: alpha pe pas (µs)"},
    "course.col.kit_worst_error": {"en": "labkit: worst error", "ro": "labkit: cea mai mare eroare"},
    "course.col.state_mine": {"en": "state, yours", "ro": "stări, ale voastre"},
    "course.col.state_zero": {"en": "state, ZeroRedundancyOptimizer", "ro": "stări, ZeroRedundancyOptimizer"},
    "course.col.state_plain": {"en": "state, plain AdamW", "ro": "stări, AdamW obișnuit"},
    "course.col.sent_mine": {"en": "sent per step, yours", "ro": "trimis pe pas, al vostru"},
    "course.col.sent_zero": {
        "en": "sent per step, DDP + ZeroRedundancyOptimizer",
        "ro": "trimis pe pas, DDP + ZeroRedundancyOptimizer",
    },
    "course.say.taken": {
        "en": "reported by the ranks of exercise 2 ({names}): {found}",
        "ro": "raportate de rangurile exercițiului 2 ({names}): {found}",
    },
    "course.say.setting_after": {"en": "after backward (lesson 1)", "ro": "după trecerea inversă (lecția 1)"},
    "course.say.setting_each": {"en": "one per gradient", "ro": "câte una pe gradient"},
    "course.say.setting_whole": {"en": "one bucket, the whole model", "ro": "un compartiment, tot modelul"},
    "course.say.sweep_head": {
        "en": "model {model}, {nproc:@rank|ranks}, {params} parameter tensors; the median of the steps after the first, rank 0, measured",
        "ro": "modelul {model}, {nproc:@rang|ranguri}, {params} tensori de parametri; mediana pașilor de după primul, rangul 0, măsurată",
    },
    "course.say.link_rate": {
        "en": "the link's rate: {rate} MB/s each direction; the predicted column is labkit's model, from the loopback fit above and this rate",
        "ro": "rata legăturii: {rate} MB/s în fiecare direcție; coloana prezisă este modelul labkit, din potrivirea pe loopback de mai sus și din această rată",
    },
    "course.say.l8_not_emulated": {
        "en": "emulated nodes: NO ({why}); the link half of this section is not run here",
        "ro": "noduri emulate: NU ({why}); jumătatea despre legătură a acestei secțiuni nu rulează aici",
    },
    "course.say.zero1_diff": {
        "en": "largest difference between your parameters and ZeroRedundancyOptimizer's, on any rank: {diff}",
        "ro": "cea mai mare diferență dintre parametrii voștri și cei ai ZeroRedundancyOptimizer, pe orice rang: {diff}",
    },
    "course.say.emulated": {
        "en": "emulated nodes: yes, 2 nodes joined by a {link} link in each direction",
        "ro": "noduri emulate: da, 2 noduri legate printr-o legătură de {link} în fiecare direcție",
    },
    "course.say.not_emulated": {
        "en": "emulated nodes: NO ({why}). Every step time below is SIMULATED (predicted), not measured.",
        "ro": "noduri emulate: NU ({why}). Fiecare durată a pasului de mai jos este SIMULATĂ (prezisă), nu măsurată.",
    },
    "course.say.calibrated": {
        "en": "simulator calibrated on {source}: FSDP1 FULL_SHARD, {ranks:@rank|ranks}, 1 node, no link, {ms} ms per step",
        "ro": "simulator calibrat pe {source}: FSDP1 FULL_SHARD, {ranks:@rang|ranguri}, 1 nod, fără legătură, {ms} ms pe pas",
    },
    "course.say.calibrated_on_section2": {"en": "your run of section 2", "ro": "rularea voastră din secțiunea 2"},
    "course.say.calibrated_on_cpu": {
        "en": "a short run on CPU ranks (section 2 ran on GPUs)",
        "ro": "o rulare scurtă pe ranguri CPU (secțiunea 2 a rulat pe GPU-uri)",
    },
    "course.say.predicted_order": {
        "en": "predicted order, fastest first: {order}",
        "ro": "ordinea prezisă, de la cel mai rapid: {order}",
    },
    "course.say.measured_order": {
        "en": "measured order, fastest first: {order}",
        "ro": "ordinea măsurată, de la cel mai rapid: {order}",
    },
    "course.say.not_measured": {
        "en": "not measured: this machine cannot emulate nodes; the predictions above are all there is (SIMULATED)",
        "ro": "nemăsurat: această mașină nu poate emula noduri; predicțiile de mai sus sunt tot ce există (SIMULAT)",
    },
    "course.say.trace_saved": {
        "en": "the FSDP2 run's timeline, to open at ui.perfetto.dev: {path}",
        "ro": "cronologia rulării FSDP2, de deschis la ui.perfetto.dev: {path}",
    },
    "course.say.checkpoint_written": {
        "en": "checkpoint written by {ranks:@rank|ranks}; the next cell reads it on {other:@rank|ranks}",
        "ro": "punct de control scris de {ranks:@rang|ranguri}; celula următoare îl citește pe {other:@rang|ranguri}",
    },
    "course.say.no_launcher": {
        "en": "{path} is not in this install (labkit without the fsdp-labkit checkout's launch/ folder): on a "
        "machine with the checkout, this cell prints the torchrun command each node runs",
        "ro": "{path} nu se află în această instalare (labkit fără folderul launch/ al copiei fsdp-labkit): pe o "
        "mașină cu copia locală, celula tipărește comanda torchrun pe care o rulează fiecare nod",
    },
    "course.say.script_written": {
        "en": "wrote {path}: {lines:@line|lines}; its head:\n",
        "ro": "am scris {path}: {lines:@linie|linii}; începutul lui:\n",
    },
    "course.say.timeline_saved": {
        "en": "the {setting} timeline, to open at ui.perfetto.dev: {path}",
        "ro": "cronologia {setting}, de deschis la ui.perfetto.dev: {path}",
    },
    "course.col.prefetch_extra": {"en": "one block in bf16", "ro": "un bloc în bf16"},
    "course.col.params_unsharded": {"en": "gathered", "ro": "colectați"},
    "course.col.optimizer": {"en": "optimizer", "ro": "optimizator"},
    "course.col.activations": {"en": "activations", "ro": "activări"},
    "course.col.other": {"en": "other", "ro": "altele"},
    "course.col.all_gather": {"en": "all-gather", "ro": "all-gather"},
    "course.col.reduce_scatter": {"en": "reduce-scatter", "ro": "reduce-scatter"},
    "course.col.device_mem": {"en": "GPU memory per GPU", "ro": "memorie GPU pe GPU"},
    "course.col.host_mem": {"en": "host memory per rank", "ro": "memoria gazdei pe rang"},
    "course.col.host_per_node": {"en": "host memory per node", "ro": "memoria gazdei pe nod"},
    "course.col.on_meta": {"en": "on the meta device", "ro": "pe dispozitivul meta"},
    "course.col.allocated": {"en": "after to_empty()", "ro": "după to_empty()"},
    "course.col.file": {"en": "file", "ro": "fișier"},
    "course.col.seq_len": {"en": "sequence length", "ro": "lungimea secvenței"},
    "course.col.micro_batch": {"en": "micro-batch", "ro": "micro-lot"},
    "course.col.gap": {"en": "measured - formula (B)", "ro": "măsurat - formulă (B)"},
    "course.col.checkpointed": {"en": "recomputed", "ro": "recalculat"},
    "course.col.stored": {"en": "activations after forward", "ro": "activări după trecerea directă"},
    "course.col.peak_activations": {"en": "activations at the peak", "ro": "activări la vârf"},
    "course.col.grads_held": {"en": "gradients held", "ro": "gradienți ținuți"},
    "course.col.grad_diff": {"en": "max |grad difference|", "ro": "max |diferența gradienților|"},
    "course.col.bytes": {"en": "size", "ro": "dimensiune"},
    "course.col.fix": {"en": "setting", "ro": "setare"},
    "course.col.sim_step_ms": {"en": "step ms (sim.)", "ro": "pas ms (sim.)"},
    "course.col.sim_exposed_ms": {"en": "exposed comm ms (sim.)", "ro": "comunicare expusă ms (sim.)"},
    "course.col.sim_ms_per_batch": {"en": "ms per micro-batch (sim.)", "ro": "ms pe micro-lot (sim.)"},
    "course.col.slow_bytes": {"en": "over the network, per rank", "ro": "prin rețea, pe rang"},
    "course.col.gpus_gb": {"en": "GPUs of 80 GB", "ro": "GPU-uri de 80 GB"},
    "course.col.gpus_usable": {"en": "GPUs by usable memory", "ro": "GPU-uri după memoria utilizabilă"},
    "course.col.nodes": {"en": "nodes of 8", "ro": "noduri de câte 8"},
    "course.col.deployable": {"en": "GPUs to deploy", "ro": "GPU-uri de alocat"},
    "course.col.init": {"en": "initialization", "ro": "inițializare"},
    "course.col.first_rows_equal_last": {
        "en": "first rank's rows = last rank's",
        "ro": "rândurile primului rang = ale ultimului",
    },
    "course.col.equal_to_plain": {"en": "= plain init", "ro": "= inițializarea obișnuită"},
    "course.col.reference": {"en": "reference", "ro": "referință"},
    "course.col.meta_reset": {"en": "meta + reset_parameters()", "ro": "meta + reset_parameters()"},
    "course.col.broadcast_rank0": {"en": "broadcast from rank 0", "ro": "transmis de la rangul 0"},
    "course.col.from_pretrained": {
        "en": "pretrained, broadcast from rank 0",
        "ro": "preantrenat, transmis de la rangul 0",
    },
    "course.col.resharded": {"en": "checkpoint, resharded", "ro": "punct de control, refragmentat"},
    "course.col.norm_type": {"en": "norm returned as", "ro": "norma întoarsă ca"},
    "course.col.sharded_norm": {"en": "norm, sharded", "ro": "norma, fragmentat"},
    "course.col.unsharded_norm": {"en": "norm, unsharded", "ro": "norma, nefragmentat"},
    "course.col.after_clipping": {"en": "norm after clipping", "ro": "norma după limitare"},
    "course.col.accounting": {"en": "accounting", "ro": "socoteala"},
    "course.col.acc_zero": {
        "en": "ZeRO paper (bf16 model, fp32 master)",
        "ro": "articolul ZeRO (model bf16, master fp32)",
    },
    "course.col.acc_torch": {
        "en": "torch MixedPrecision (fp32 params)",
        "ro": "MixedPrecision din torch (parametri fp32)",
    },
    "course.col.acc_fp32": {"en": "fp32 training", "ro": "antrenare fp32"},
    "course.col.bytes_total": {"en": "total", "ro": "total"},
    "course.col.optimizer_share": {"en": "optimizer's share", "ro": "partea optimizatorului"},
    "course.col.relative_error": {"en": "relative difference", "ro": "diferență relativă"},
    "course.col.err_compute": {
        "en": "bf16 compute, fp32 reduce, against fp32",
        "ro": "calcul bf16, reducere fp32, față de fp32",
    },
    "course.col.err_reduce": {
        "en": "bf16 reduce (reduce_dtype unset), against fp32 reduce",
        "ro": "reducere bf16 (reduce_dtype nesetat), față de reducerea fp32",
    },
    "course.say.fallback_min_num_params": {
        "en": "exercise 1 is not answered yet: the run below uses min_num_params = {value} in place of yours",
        "ro": "exercițiul 1 nu are încă răspuns: rularea de mai jos folosește min_num_params = {value} în locul valorii voastre",
    },
    "course.col.own_unit": {"en": "its own unit", "ro": "unitate proprie"},
    # labkit.course.source: reading a lesson's MyST source
    "course.src.where": {
        "en": "{file}, cell {cell} ({start!r})",
        "ro": "{file}, celula {cell} ({start!r})",
    },
    "course.src.name": {
        "en": "{path}: a lesson's source is named NN_name.md (e.g. 02_zero3_sharding.md)",
        "ro": "{path}: sursa unei lecții se numește NN_nume.md (de ex. 02_zero3_sharding.md)",
    },
    "course.src.lang_tag": {
        "en": "{where}: a markdown cell is tagged lang-en or lang-ro, once (its tags: {tags})",
        "ro": "{where}: o celulă markdown are eticheta lang-en sau lang-ro, o singură dată (etichetele ei: {tags})",
    },
    "course.src.twin": {
        "en": "{where}: each lang-en cell is followed by its lang-ro twin, and only by it",
        "ro": "{where}: fiecare celulă lang-en este urmată de perechea ei lang-ro, și numai de ea",
    },
    "course.src.no_twin": {
        "en": "{where}: a lang-en cell without its lang-ro twin after it",
        "ro": "{where}: o celulă lang-en fără perechea ei lang-ro după ea",
    },
    "course.src.cell_type": {
        "en": "{where}: a {kind} cell; a lesson has markdown and code cells only",
        "ro": "{where}: o celulă {kind}; o lecție are doar celule markdown și de cod",
    },
    "course.src.one_line": {
        "en": "{where}: the lessons mark a solution with '### BEGIN SOLUTION' / '### END SOLUTION' lines, not '# SOLUTION' at the end of a line",
        "ro": "{where}: lecțiile marchează o soluție cu liniile '### BEGIN SOLUTION' / '### END SOLUTION', nu cu '# SOLUTION' la sfârșitul unei linii",
    },
    "course.src.title": {
        "en": "{file}: the first markdown cells (English, Romanian) start with the lesson's '# title'",
        "ro": "{file}: primele celule markdown (engleză, română) încep cu '# titlul' lecției",
    },
    "course.src.terms": {
        "en": "{file}: not in the glossary (labkit/course/glossary.py): {terms}",
        "ro": "{file}: nu sunt în glosar (labkit/course/glossary.py): {terms}",
    },
    "course.src.comment_missing": {
        "en": "{where}: the comment {comment!r} has no Romanian translation ({n} in all): add it to the cell's comments_ro",
        "ro": "{where}: comentariul {comment!r} nu are traducere în română ({n} în total): adăugați-o în comments_ro al celulei",
    },
    "course.src.comment_unused": {
        "en": "{where}: comments_ro translates {comment!r}, which is not a comment of the cell",
        "ro": "{where}: comments_ro traduce {comment!r}, care nu este un comentariu al celulei",
    },
    "course.src.comment_line": {
        "en": "{where}: the translation of {comment!r} must be one line of text",
        "ro": "{where}: traducerea lui {comment!r} trebuie să fie un singur rând de text",
    },
    "course.src.comment_meta": {
        "en": "{where}: comments_ro belongs to a code cell, as a map of English comment to Romanian",
        "ro": "{where}: comments_ro aparține unei celule de cod, ca dicționar de la comentariul englez la cel românesc",
    },
}
