"""Lesson 5: CPU offload and mixed precision. FSDP1's MixedPrecision measured by category
(memory saved, bytes communicated, time lost on this machine); CPUOffload, which FSDP refuses
on a machine without a GPU, from the memory model and, on a GPU node, measured."""

from labkit.course.cells import Lesson, check, code, exercise, md, parameters, setup
from labkit.course.rank_exercises import LESSON5 as RANK_EXERCISE

LESSON = Lesson(
    id="lesson5",
    file="05_offload_mixed_precision",
    title={
        "en": "Lesson 5: CPU offload and mixed precision",
        "ro": "Lecția 5: descărcarea pe CPU și precizia mixtă",
    },
    terms=("offload", "host_memory", "pinned_memory"),
    cells=[
        md(
            en="""
            # Lesson 5: CPU offload and mixed precision

            Sharding divides the model states by the number of ranks. Two more options of FSDP trade
            something else for memory: **mixed precision** computes and communicates in 2-byte
            numbers instead of 4, and **CPU offload** keeps the sharded states in the computer's own
            memory instead of the GPU's. Neither is free. This lesson measures what each saves and
            what it costs.

            **In this lesson you will**

            - set `MixedPrecision(param_dtype, reduce_dtype, buffer_dtype)` and measure, by category,
              which memory it halves and which it leaves alone;
            - count the bytes each collective moves with and without it;
            - time the step, and see what bf16 costs or saves in time on this machine;
            - see why `CPUOffload(offload_params=True)` cannot run without a GPU, and plan it with the
              memory model: for a 70B model on one node of 8 GPUs, the GPU memory it saves and the host
              memory it needs.
            """,
            ro="""
            # Lecția 5: descărcarea pe CPU și precizia mixtă

            Fragmentarea împarte stările modelului la numărul de ranguri. Alte două opțiuni ale FSDP dau
            altceva în schimbul memoriei: **precizia mixtă** calculează și comunică în numere de 2 octeți
            în loc de 4, iar **descărcarea pe CPU (CPU offload)** ține stările fragmentate în memoria calculatorului, nu
            în cea a GPU-ului. Niciuna nu este gratuită. Lecția aceasta măsoară ce economisește fiecare și
            cât costă.

            **În această lecție veți**

            - seta `MixedPrecision(param_dtype, reduce_dtype, buffer_dtype)` și veți măsura, pe categorii,
              ce memorie înjumătățește și ce memorie lasă neatinsă;
            - număra octeții pe care îi mută fiecare operație colectivă, cu și fără ea;
            - cronometra pasul și veți vedea cât timp costă sau economisește bf16 pe această mașină;
            - vedea de ce `CPUOffload(offload_params=True)` nu poate rula fără GPU și o veți planifica cu
              modelul de memorie: pentru un model de 70B pe un nod cu 8 GPU-uri, memoria GPU pe care o
              economisește și memoria gazdei de care are nevoie.
            """,
        ),
        parameters(nproc=2, backend="auto", model_size="tiny", steps=3),
        md(
            en="""
            The tools of this lesson: `memtrack` measures a step's memory by category inside the ranks,
            `comm` counts the bytes of each collective, and `memory_model` is the formula lessons 1 to 3
            checked against such measurements.
            """,
            ro="""
            Uneltele acestei lecții: `memtrack` măsoară în ranguri memoria unui pas, pe categorii, `comm`
            numără octeții fiecărei operații colective, iar `memory_model` este formula pe care lecțiile 1-3
            au verificat-o pe astfel de măsurători.
            """,
        ),
        setup("from labkit import memory_model", "from labkit.course import show"),
        md(
            en="""
            ## 1. What each option moves

            **Mixed precision in FSDP1.** Each rank keeps its shard of every parameter in fp32: that
            shard is the master copy the optimizer updates (the "torch" accounting of the memory model:
            4 bytes of parameter, 4 of gradient, 8 of Adam state per parameter, sharded). What
            `MixedPrecision` changes is everything around it:

            | field | what it sets | what it halves (bf16 instead of fp32) |
            |---|---|---|
            | `param_dtype=torch.bfloat16` | the dtype a unit is cast to and all-gathered in, and computes in | the all-gather's bytes, the gathered parameters, the activations |
            | `reduce_dtype` | the dtype gradients are reduce-scattered in | the reduce-scatter's bytes (if bf16) |
            | `buffer_dtype` | the dtype of the module's buffers | buffers (this model has none) |

            The sharded fp32 parameters, their fp32 gradients and the optimizer state stay as they are.
            In FSDP2 the same choice is `fully_shard(block, mp_policy=MixedPrecisionPolicy(param_dtype=...,
            reduce_dtype=...))` on every block and on the root: the same two fields, plus `output_dtype`
            for the module's outputs, and no `buffer_dtype` (FSDP2 does not shard buffers).

            **CPU offload.** `CPUOffload(offload_params=True)` moves each rank's sharded parameters and
            their gradients to **host memory**, the computer's RAM, and runs the optimizer
            step there, on the CPU. The GPU keeps only what it computes with: the gathered units and the
            activations. The price is paid every step: each all-gather first copies the shard from the
            host to the GPU, over PCIe, from **pinned memory** (host memory the system
            does not move, which the GPU can copy from directly), the gradients are copied back, and
            the optimizer works at the CPU's speed.

            This is not the offload of DeepSpeed's ZeRO-Offload (Ren et al., 2021), which the phrase
            "CPU offload" often means. ZeRO-Offload keeps the 2-byte parameters on the GPU and offloads
            only the gradients and the optimizer state, updated on the CPU by a vectorized CPU Adam while
            the GPU keeps computing; the updated parameters are copied back once per step. FSDP offloads
            the sharded parameters themselves (in FSDP1 with `offload_params=True`, the only choice it
            offers; in FSDP2 with `CPUOffloadPolicy()`), so every all-gather starts with a copy from the
            host, and the optimizer is ordinary `torch.optim` running on CPU tensors.
            """,
            ro="""
            ## 1. Ce mută fiecare opțiune

            **Precizia mixtă în FSDP1.** Fiecare rang își păstrează fragmentul din fiecare parametru în fp32:
            acest fragment este copia master pe care o actualizează optimizatorul (socoteala „torch” a
            modelului de memorie: 4 octeți de parametru, 4 de gradient, 8 de stare Adam pe parametru,
            fragmentați). Ce schimbă `MixedPrecision` este tot ce se află în jurul lui:

            | câmp | ce stabilește | ce înjumătățește (bf16 în loc de fp32) |
            |---|---|---|
            | `param_dtype=torch.bfloat16` | tipul în care o unitate este convertită, colectată și în care calculează | octeții colectării (all-gather), parametrii colectați, activările |
            | `reduce_dtype` | tipul în care gradienții sunt reduși cu distribuire | octeții reducerii (reduce-scatter), dacă este bf16 |
            | `buffer_dtype` | tipul tampoanelor (buffers) modulului | tampoanele (modelul acesta nu are) |

            Parametrii fp32 fragmentați, gradienții lor fp32 și stările optimizatorului rămân neschimbați.
            În FSDP2 aceeași alegere este `fully_shard(block, mp_policy=MixedPrecisionPolicy(param_dtype=...,
            reduce_dtype=...))` pe fiecare bloc și pe rădăcină: aceleași două câmpuri, plus `output_dtype`
            pentru ieșirile modulului, și fără `buffer_dtype` (FSDP2 nu fragmentează tampoanele).

            **Descărcarea pe CPU.** `CPUOffload(offload_params=True)` mută parametrii fragmentați ai fiecărui
            rang și gradienții lor în **memoria gazdei (host memory)**, RAM-ul calculatorului, și rulează
            acolo pasul optimizatorului, pe procesor. GPU-ul păstrează doar ce folosește la calcul: unitățile
            colectate și activările. Prețul se plătește la fiecare pas: fiecare colectare copiază întâi
            fragmentul de la gazdă pe GPU, prin PCIe, din **memorie fixată (pinned memory)** (memorie a
            gazdei pe care sistemul nu o mută, din care GPU-ul poate copia direct), gradienții sunt copiați
            înapoi, iar optimizatorul lucrează în ritmul procesorului.

            Aceasta nu este descărcarea din ZeRO-Offload al DeepSpeed (Ren et al., 2021), la care se
            referă adesea expresia „descărcare pe CPU”. ZeRO-Offload ține parametrii de 2 octeți pe GPU și
            descarcă doar gradienții și stările optimizatorului, actualizate pe procesor de un Adam
            vectorizat pentru CPU în timp ce GPU-ul continuă să calculeze; parametrii actualizați sunt
            copiați înapoi o dată pe pas. FSDP descarcă înșiși parametrii fragmentați (în FSDP1 cu
            `offload_params=True`, singura variantă pe care o oferă; în FSDP2 cu `CPUOffloadPolicy()`), așa
            că fiecare colectare completă începe cu o copiere de la gazdă, iar optimizatorul este
            `torch.optim` obișnuit, rulând pe tensori CPU.
            """,
        ),
        md(
            en="""
            ## 2. Five settings, measured

            The next cell trains the lesson's model under five settings, one after another, from the same
            initial weights. For each it measures:

            - the memory of step 1 by category, with `memtrack` (a measured step runs 2 to 4 times slower,
              so it is not timed);
            - the bytes of every collective, with `comm.count`;
            - the time of the steps after it (step 0 is left out: FSDP initializes itself there).

            The two offload settings ask FSDP to move the states from the GPU to the host. Without a GPU
            there is nothing to move them from, and FSDP refuses with an error in the first forward, on
            every rank at the same point; the cell reports that error instead of numbers. On a GPU node
            (`backend = "nccl"`) the same two settings run and are measured like the others.
            """,
            ro="""
            ## 2. Cinci setări, măsurate

            Celula următoare antrenează modelul lecției cu cinci setări, una după alta, pornind de la aceleași
            ponderi inițiale. Pentru fiecare măsoară:

            - memoria pasului 1 pe categorii, cu `memtrack` (un pas măsurat rulează de 2-4 ori mai lent,
              așa că nu este cronometrat);
            - octeții fiecărei operații colective, cu `comm.count`;
            - durata pașilor de după el (pasul 0 este lăsat deoparte: acolo se inițializează FSDP).

            Cele două setări cu descărcare îi cer FSDP să mute stările de pe GPU pe gazdă. Fără GPU nu are de
            unde să le mute, iar FSDP refuză cu o eroare în prima trecere directă, pe fiecare rang în același
            punct; celula raportează această eroare în loc de numere. Pe un nod cu GPU-uri
            (`backend = "nccl"`) aceleași două setări rulează și sunt măsurate ca celelalte.
            """,
        ),
        code(
            """
            %%torchrun -n $nproc --backend $backend --vars model_size,steps
            import statistics
            import time

            import torch
            from torch.distributed.fsdp import CPUOffload, FullyShardedDataParallel, MixedPrecision, ShardingStrategy
            from torch.distributed.fsdp.wrap import ModuleWrapPolicy

            from labkit import comm, memtrack, rank
            from labkit.models import TransformerBlock, TransformerLM, get_config, synthetic_batch

            cfg = get_config(model_size)
            device = rank.device()  # the CPU under gloo, cuda:LOCAL_RANK under NCCL
            bf16, fp32 = torch.bfloat16, torch.float32
            BF16 = MixedPrecision(param_dtype=bf16, reduce_dtype=fp32, buffer_dtype=bf16)
            SETTINGS = {
                "fp32": {},
                "bf16": {"mixed_precision": BF16},
                "bf16, bf16 reduce": {"mixed_precision": MixedPrecision(param_dtype=bf16, reduce_dtype=bf16, buffer_dtype=bf16)},
                "offload": {"cpu_offload": CPUOffload(offload_params=True)},
                "offload, bf16": {"cpu_offload": CPUOffload(offload_params=True), "mixed_precision": BF16},
            }


            def train(options):
                torch.manual_seed(0)  # the same initial weights for every setting
                model = FullyShardedDataParallel(
                    TransformerLM(cfg),
                    auto_wrap_policy=ModuleWrapPolicy({TransformerBlock}),
                    sharding_strategy=ShardingStrategy.FULL_SHARD,
                    device_id=device,
                    **options,
                )
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                tracker = memtrack.track(model, optimizer, steps=[min(1, steps - 1)], send=False)  # step 1, by category
                times = {}
                for step in range(steps):
                    inputs, targets = synthetic_batch(cfg, 8, step, rank.rank(), device)
                    start = time.perf_counter()
                    with tracker.step(step), comm.count(step=step, send=False) as counted:
                        loss = model(inputs, targets)
                        loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()
                    if device.type == "cuda":
                        torch.cuda.synchronize()  # GPU work is asynchronous: wait for it before reading the clock
                    times[step] = time.perf_counter() - start
                peak = next(m for m in tracker.results if m["phase"] == "peak")
                timed = [s for i, s in times.items() if i >= 2] or [times[steps - 1]]
                return {
                    "loss": loss.item(),
                    "step_s": statistics.median(timed),
                    "memory": peak["categories"],  # on the rank's device
                    "host": peak["by_device"].get("cpu") if device.type == "cuda" else None,
                    "comm": {op: row["bytes"] for op, row in counted.totals().items()},
                }


            for name, options in SETTINGS.items():
                try:
                    result = train(options)
                except RuntimeError as error:
                    if "cpu_offload" not in options or device.type != "cpu":
                        raise
                    result = {"error": str(error)}  # no GPU to offload from: FSDP refuses, on every rank alike
                rank.report(**{name: result})
            """
        ),
        md(
            en="""
            Rank 0's results, one row per setting. Memory is the peak of step 1, by category, in KiB:
            the persistent sharded parameters, the gathered (unsharded) units, gradients, optimizer
            state, activations, and the rest (temporaries, communication buffers). Step times are gloo's
            on this CPU and do not resemble a GPU's.
            """,
            ro="""
            Rezultatele rangului 0, câte un rând pe setare. Memoria este vârful pasului 1, pe categorii, în
            KiB: parametrii fragmentați persistenți, unitățile colectate (nefragmentate), gradienții, stările
            optimizatorului, activările și restul (valori temporare, tampoane de comunicare). Duratele
            pașilor sunt cele ale lui gloo pe acest procesor și nu seamănă cu ale unui GPU.
            """,
        ),
        code(
            """
            precision = labkit.last_run
            results = precision.values[0]
            measured = {name: r for name, r in results.items() if "error" not in r}
            CATEGORIES = ("params", "params_unsharded", "grads", "optimizer", "activations", "other")
            rows = [{"setting": name, "loss": r["loss"], "step_ms": r["step_s"] * 1e3, **{c: r["memory"][c] for c in CATEGORIES}}
                    for name, r in measured.items()]
            if any(r["host"] for r in measured.values()):  # a GPU run: what stayed in host memory, per rank
                for row, r in zip(rows, measured.values()):
                    row["host_mem"] = sum((r["host"] or {}).values())
            show.table(rows, units=dict.fromkeys([*CATEGORIES, "host_mem"], "KiB"))
            for name, r in results.items():
                if "error" in r:
                    print(f"{name}: {r['error']}")
            """
        ),
        md(
            en="""
            Read the columns against the table of section 1:

            - **parameters** and **optimizer** are the same in every row: the fp32 shards and Adam's
              state do not change with `MixedPrecision`;
            - **gathered** parameters are halved by `param_dtype=bf16`: the unit is cast before it is
              all-gathered;
            - **activations** drop by nearly half: the blocks compute in bf16, but the loss is computed in
              fp32 (`.float()` before `cross_entropy`), so that part stays;
            - the **loss** agrees to about three decimal places: bf16 keeps 8 significant bits (fp32: 24), so each
              operation rounds more; the values differ, and training gives practically the same loss;
            - **gradients** are 0 at the peak: it comes at the start of the backward pass, when every
              activation is still alive and no parameter gradient has been computed yet.

            And the time. On a CPU without fast bf16 units, which is most laptops, the bf16 steps come out
            *slower*: the casts are added work and the matrix products are no faster (a server CPU with
            bf16 matrix units may show the opposite). On GPUs, bf16 matrix products run on tensor cores,
            several times faster than fp32, so there mixed precision saves time as well as memory. Whatever
            your table shows is a real cost, of this machine; on a GPU node the same cell measures the GPU's.

            The collectives tell the rest:
            """,
            ro="""
            Citiți coloanele alături de tabelul din secțiunea 1:

            - **parametrii** și **optimizatorul** sunt la fel pe fiecare rând: fragmentele fp32 și starea
              Adam nu se schimbă cu `MixedPrecision`;
            - parametrii **colectați** se înjumătățesc cu `param_dtype=bf16`: unitatea este convertită înainte
              de colectare;
            - **activările** scad aproape la jumătate: blocurile calculează în bf16, dar pierderea se
              calculează în fp32 (`.float()` înainte de `cross_entropy`), așa că acea parte rămâne;
            - **pierderea** se potrivește până la aproximativ a treia zecimală: bf16 păstrează 8 biți semnificativi (fp32: 24),
              deci fiecare operație rotunjește mai mult; valorile diferă, iar antrenarea dă practic aceeași
              pierdere;
            - **gradienții** sunt 0 la vârf: acesta vine la începutul trecerii inverse, când toate activările
              sunt încă în memorie și niciun gradient de parametru nu a fost încă calculat.

            Și timpul. Pe un procesor fără unități rapide pentru bf16, cum au majoritatea laptopurilor, pașii
            bf16 ies *mai lenți*: conversiile sunt muncă în plus, iar produsele de matrice nu sunt mai rapide
            (un procesor de server cu unități de calcul matriceal bf16 poate arăta contrariul). Pe GPU-uri,
            produsele de matrice bf16 rulează pe nucleele tensoriale (tensor cores), de câteva ori mai repede
            decât în fp32, așa că acolo precizia mixtă economisește și timp, nu doar memorie. Ce arată
            tabelul vostru este costul real pe această mașină; pe un nod cu GPU-uri, aceeași celulă măsoară
            costul pe GPU.

            Operațiile colective spun restul:
            """,
        ),
        code(
            """
            show.table(
                [{"setting": name, **r["comm"]} for name, r in measured.items()],
                columns=["setting", "all_gather", "reduce_scatter"],
                units={"all_gather": "KiB", "reduce_scatter": "KiB"},
            )
            """
        ),
        md(
            en="""
            **Exercise 1.** From the fp32 row only, predict the bytes of gathered parameters at the peak
            with `param_dtype=torch.bfloat16`. Use `fp32_gathered` and the sizes of the two dtypes,
            `torch.empty(0, dtype=...).element_size()`. The check compares your prediction with the
            `bf16` row.
            """,
            ro="""
            **Exercițiul 1.** Doar din rândul fp32, preziceți octeții parametrilor colectați la vârf cu
            `param_dtype=torch.bfloat16`. Folosiți `fp32_gathered` și dimensiunile celor două tipuri,
            `torch.empty(0, dtype=...).element_size()`. Verificarea compară predicția voastră cu rândul `bf16`.
            """,
        ),
        code(
            """
            import torch


            def bf16_gathered(fp32_gathered):  # the gathered bytes with param_dtype=bf16, from the fp32 ones
                ### BEGIN SOLUTION
                bf16_bytes = torch.empty(0, dtype=torch.bfloat16).element_size()
                fp32_bytes = torch.empty(0, dtype=torch.float32).element_size()
                return fp32_gathered * bf16_bytes / fp32_bytes
                ### END SOLUTION
            """
        ),
        check('labkit.check("lesson5.bf16_gathered", bf16_gathered, run=precision)'),
        md(
            en="""
            **Exercise 2.** With `MixedPrecision(param_dtype=bf16, reduce_dtype=fp32)` (the `bf16` row),
            which collectives moved fewer bytes than in fp32? Set `halved` to a set of names among
            `"all_gather"` and `"reduce_scatter"`. The check reads the answer from your run's counts.
            """,
            ro="""
            **Exercițiul 2.** Cu `MixedPrecision(param_dtype=bf16, reduce_dtype=fp32)` (rândul `bf16`), ce
            operații colective au mutat mai puțini octeți decât în fp32? Dați lui `halved` o mulțime de
            nume dintre `"all_gather"` și `"reduce_scatter"`. Verificarea citește răspunsul din numărătorile
            rulării voastre.
            """,
        ),
        exercise(solution='halved = {"all_gather"}'),
        check('labkit.check("lesson5.halved_collectives", halved, run=precision)'),
        md(
            en="""
            The memory model of lessons 1 to 3 knows these rules. With the torch accounting
            (`convention="torch"`) and the same model, batch and ranks, it predicts the two categories
            that mixed precision changes; the last column is measured over formula:
            """,
            ro="""
            Modelul de memorie din lecțiile 1-3 cunoaște aceste reguli. Cu socoteala torch
            (`convention="torch"`) și același model, lot și număr de ranguri, prezice cele două categorii pe
            care le schimbă precizia mixtă; ultima coloană este raportul dintre măsurat și formulă:
            """,
        ),
        code(
            """
            from labkit.models import get_config

            rows = []
            for name, dtype in (("fp32", "fp32"), ("bf16", "bf16")):
                formula = memory_model.peak_memory(get_config(model_size), "FULL_SHARD", precision.nproc, dtype,
                                                   convention="torch", micro_batch=8, flavor="fsdp1")
                for category in ("params_unsharded", "activations"):
                    got, want = measured[name]["memory"][category], getattr(formula, category)
                    rows.append({"setting": name, "what": show.label(category), "formula": want,
                                 "measured": got, "ratio": got / want if want else "-"})  # 1 rank: nothing gathered
            show.table(rows, units={"formula": "KiB", "measured": "KiB"})
            """
        ),
        md(
            en="""
            Both agree to a few bytes: the formula finds the same peak moment as the run (for this
            model and batch, the start of backward, where FSDP1 holds its root unit and has already
            prefetched the last block) and counts what is alive then (`formula.explain()` lists it).

            ## 3. CPU offload

            On this machine the offload settings reported FSDP's refusal above: `CPUOffload` pins the
            shards in host memory for copies to a GPU (`pin_memory()`), and with no GPU there is no
            device to pin for. On a GPU node the rows are in the tables above, measured. Either way, the
            memory model says what it moves. For this lesson's model, on your number of ranks, in bf16:
            """,
            ro="""
            Ambele se potrivesc la câțiva octeți: formula găsește același moment al vârfului ca rularea
            (pentru acest model și lot, începutul backward, când FSDP1 ține unitatea rădăcină și a
            preîncărcat deja ultimul bloc) și numără ce există atunci (`formula.explain()` le enumeră).

            ## 3. Descărcarea pe CPU

            Pe această mașină, setările cu descărcare au raportat mai sus refuzul FSDP: `CPUOffload` fixează
            fragmentele în memoria gazdei pentru copieri către un GPU (`pin_memory()`), iar fără GPU nu
            există dispozitiv pentru care să le fixeze. Pe un nod cu GPU-uri, rândurile sunt în tabelele de
            mai sus, măsurate. În ambele cazuri, modelul de memorie spune ce mută. Pentru modelul acestei
            lecții, pe numărul vostru de ranguri, în bf16:
            """,
        ),
        code(
            """
            rows = []
            for offload in (None, "params"):
                plan = memory_model.peak_memory(get_config(model_size), "FULL_SHARD", precision.nproc, "bf16",
                                                convention="torch", micro_batch=8, offload=offload)
                rows.append({"setting": offload or "-", **{c: plan.device[c] for c in CATEGORIES}, "host_mem": plan.host_total})
            show.table(rows, units=dict.fromkeys([*CATEGORIES, "host_mem"], "KiB"))
            """
        ),
        md(
            en="""
            On a laptop's model the numbers are small; on a large one they decide whether training is
            possible at all. A Llama-70B-shaped model on one node of 8 GPUs of 80 GB, FULL_SHARD, bf16,
            micro-batch 1 with activation checkpointing (lesson 6): without offload and with it, per GPU
            and per node.
            """,
            ro="""
            Pentru modelul unui laptop numerele sunt mici; pentru unul mare decid dacă antrenarea este
            posibilă. Un model de forma Llama-70B pe un nod cu 8 GPU-uri de 80 GB, FULL_SHARD, bf16,
            micro-lot 1, cu recalcularea activărilor (lecția 6): fără descărcare și cu ea, pe GPU și pe nod.
            """,
        ),
        code(
            """
            gpus_per_node, world_size = 8, 8
            rows = []
            for offload in (None, "params"):
                plan = memory_model.peak_memory("llama-70b", "FULL_SHARD", world_size, "bf16", convention="torch",
                                                micro_batch=1, checkpointing=True, offload=offload)
                rows.append({"setting": offload or "-", "device_mem": plan.total, "host_mem": plan.host_total,
                             "host_per_node": plan.host_total * gpus_per_node,
                             "fits": bool(memory_model.fits("llama-70b", "H100-80GB", "FULL_SHARD", world_size,
                                                            precision="bf16", convention="torch", micro_batch=1,
                                                            checkpointing=True, offload=offload))})
            show.table(rows, units={"device_mem": "GB", "host_mem": "GB", "host_per_node": "GB"},
                       headers={"fits": show.label("fits", gpu="H100 80 GB")})
            """,
            pure=True,
        ),
        md(
            en="""
            Without offload, each GPU would need about twice its memory. With it, the states leave the
            GPUs, and the node needs over a terabyte of host RAM to hold them, because every one of the 8
            ranks keeps its own shard of parameters, gradients and optimizer state there. A large GPU server can
            hold that, and it is most of what it has.

            **Exercise 3.** Write the host memory per node with offload as a formula of `n_params`,
            `world_size` and `gpus_per_node`, using the bytes per parameter of the torch accounting
            (4 for the fp32 parameter, 4 for its gradient, 8 for Adam's two moments). The check compares it
            with the memory model.
            """,
            ro="""
            Fără descărcare, fiecare GPU ar avea nevoie de aproximativ dublul memoriei sale. Cu ea, stările
            pleacă de pe GPU-uri, iar nodul are nevoie de peste un terabyte de RAM ca să le țină, pentru că
            fiecare dintre cele 8 ranguri își păstrează acolo propriul fragment de parametri, gradienți și
            stări ale optimizatorului. Un server mare cu GPU-uri poate ține
            atât, și este cea mai mare parte din memoria lui.

            **Exercițiul 3.** Scrieți memoria gazdei pe nod, cu descărcare, ca formulă de `n_params`,
            `world_size` și `gpus_per_node`, folosind octeții pe parametru din socoteala torch (4 pentru
            parametrul fp32, 4 pentru gradientul lui, 8 pentru cele două momente Adam). Verificarea o compară
            cu modelul de memorie.
            """,
        ),
        code(
            """
            from labkit.models import PRESETS

            n_params = PRESETS["llama-70b"].num_params()


            def host_per_node(n_params, world_size, gpus_per_node):
                ### BEGIN SOLUTION
                return (4 + 4 + 8) * n_params / world_size * gpus_per_node
                ### END SOLUTION


            print(f"{host_per_node(n_params, world_size, gpus_per_node) / 1e9:.1f} GB")
            """,
            pure=True,
        ),
        check('labkit.check("lesson5.host_per_node", host_per_node)'),
        *RANK_EXERCISE,
        md(
            en="""
            What offload costs in time is not something this laptop can measure: it has no PCIe link to a
            GPU, and its optimizer already runs on the CPU. On a GPU node, run this notebook with
            `backend = "nccl"`: the `offload` rows of the first table then show the step time next to the
            GPU memory saved. Every step moves each rank's parameter shard from host to GPU for the
            forward and again for the backward all-gathers, and its gradient shard back, and the AdamW
            step runs on the CPU; that is why offload is the last resort, used when the model does not
            fit otherwise.

            ## Recap

            - `MixedPrecision(param_dtype=bf16)` halved what your run gathered, all-gathered and kept as
              activations; `reduce_dtype=bf16` also halved the reduce-scatter. The fp32 shards, their
              gradients and Adam's state did not change.
            - On a CPU, bf16 usually costs time; on GPUs it saves time. Measure on the machine you train on.
            - `CPUOffload(offload_params=True)` needs a GPU to offload from: FSDP refused it here. The
              memory model shows what it buys: a 70B model that does not fit 8 × 80 GB fits once its
              states move to the host, which then needs over a terabyte per node.

            Next, lesson 6: FSDP2, and what it takes to start a 70B model at all.
            """,
            ro="""
            Cât costă descărcarea în timp nu poate măsura acest laptop: nu are o legătură PCIe către un GPU,
            iar optimizatorul lui rulează deja pe procesor. Pe un nod cu GPU-uri, rulați acest notebook cu
            `backend = "nccl"`: rândurile `offload` din primul tabel arată atunci durata pasului lângă
            memoria GPU economisită. La fiecare pas, fragmentul de parametri al fiecărui rang trece de la
            gazdă pe GPU pentru colectările din trecerea directă și din nou pentru cele din trecerea inversă,
            fragmentul de gradienți se întoarce, iar pasul AdamW rulează pe procesor; de aceea descărcarea
            este ultima soluție, folosită când modelul nu încape altfel.

            ## Recapitulare

            - `MixedPrecision(param_dtype=bf16)` a înjumătățit ce a colectat rularea voastră, ce a transmis prin
              all-gather și ce a păstrat ca activări; `reduce_dtype=bf16` a înjumătățit și reducerea.
              Fragmentele fp32, gradienții lor și starea Adam nu s-au schimbat.
            - Pe un procesor, bf16 costă de obicei timp; pe GPU-uri economisește timp. Măsurați pe mașina pe care
              antrenați.
            - `CPUOffload(offload_params=True)` are nevoie de un GPU de pe care să descarce: aici FSDP a refuzat.
              Modelul de memorie arată ce obțineți cu ea: un model de 70B care nu încape în 8 × 80 GB încape
              odată ce stările lui se mută pe gazdă, care are atunci nevoie de peste un terabyte pe nod.

            Urmează lecția 6: FSDP2 și ce trebuie ca un model de 70B să poată măcar porni.
            """,
        ),
    ],
)
