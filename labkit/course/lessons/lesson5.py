"""Lesson 5: CPU offload and mixed precision. FSDP1's MixedPrecision measured by category
(memory saved, bytes communicated, time lost on this machine); CPUOffload, which FSDP refuses
on a machine without a GPU, from the memory model and, on a GPU node, measured. Then activations:
a sequence-length and micro-batch sweep against the formula, full and selective recomputation
(FSDP1 and FSDP2), and gradient accumulation with and without syncing."""

from labkit.course.cells import Lesson, check, code, exercise, md, parameters, setup
from labkit.course.rank_exercises import LESSON5 as RANK_EXERCISE

LESSON = Lesson(
    id="lesson5",
    file="05_offload_mixed_precision",
    title={
        "en": "Lesson 5: CPU offload and mixed precision",
        "ro": "Lecția 5: descărcarea pe CPU și precizia mixtă",
    },
    terms=("offload", "host_memory", "pinned_memory", "gradient_accumulation"),
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
              memory it needs;
            - sweep the sequence length and the micro-batch and compare the activations with their formula,
              then measure full and selective recomputation and gradient accumulation without syncing.
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
              economisește și memoria gazdei de care are nevoie;
            - varia lungimea secvenței și micro-lotul și veți compara activările cu formula lor, apoi veți
              măsura recalcularea completă și pe cea selectivă și acumularea gradienților fără sincronizare.
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
            micro-batch 1 with activation checkpointing (section 4): without offload and with it, per GPU
            and per node.
            """,
            ro="""
            Pentru modelul unui laptop numerele sunt mici; pentru unul mare decid dacă antrenarea este
            posibilă. Un model de forma Llama-70B pe un nod cu 8 GPU-uri de 80 GB, FULL_SHARD, bf16,
            micro-lot 1, cu recalcularea activărilor (secțiunea 4): fără descărcare și cu ea, pe GPU și pe nod.
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
            """,
            ro="""
            Cât costă descărcarea în timp nu poate măsura acest laptop: nu are o legătură PCIe către un GPU,
            iar optimizatorul lui rulează deja pe procesor. Pe un nod cu GPU-uri, rulați acest notebook cu
            `backend = "nccl"`: rândurile `offload` din primul tabel arată atunci durata pasului lângă
            memoria GPU economisită. La fiecare pas, fragmentul de parametri al fiecărui rang trece de la
            gazdă pe GPU pentru colectările din trecerea directă și din nou pentru cele din trecerea inversă,
            fragmentul de gradienți se întoarce, iar pasul AdamW rulează pe procesor; de aceea descărcarea
            este ultima soluție, folosită când modelul nu încape altfel.
            """,
        ),
        md(
            en="""
            ## 4. Activations: what a step keeps for backward

            The states of section 2 are fixed by the model and the number of ranks. **Activations** are
            not: every tensor an operator saves for its backward lives from the forward until the backward
            reads it, and there is one per token of the micro-batch. Korthikanti et al. (2022) count them
            for a GPT layer with 16-bit activations: `s·b·h·(34 + 5·a·s/h)` bytes, for sequence length s,
            micro-batch b, hidden size h and a attention heads. The `34·s·b·h` are the inputs of the linear
            layers, the layer norms, GeLU and the dropout masks; the `5·a·s²·b` are the attention scores,
            their softmax and its dropout mask.

            `memory_model.activation_memory` applies the same count to this course's block (RMSNorm,
            attention through `scaled_dot_product_attention`, SwiGLU, no dropout), in the precision it
            computes in, with d the model's dimension, d_kv that of the keys and values, f the
            feed-forward's:

            - per block, (8·s·b·d + 2·s·b·d_kv + 4·s·b·f + 2·s·b) elements: the block's input and the
              attention residual, each norm's intermediate and output, q, k and v, the attention output,
              the SwiGLU gate, its SiLU, the up projection and their product, the norms' rsqrt; plus the
              attention's log-sum-exp, b·a·s in fp32;
            - outside the blocks, the final norm's tensors and the fp32 log-softmax of the logits,
              b·s·V·4 bytes for a vocabulary of V.

            There is no s² term: the fused attention kernel saves only its output and the log-sum-exp, and
            recomputes the scores in backward.
            """,
            ro="""
            ## 4. Activările: ce păstrează un pas pentru trecerea inversă

            Stările din secțiunea 2 sunt fixate de model și de numărul de ranguri. **Activările** nu: fiecare
            tensor pe care o operație îl salvează pentru trecerea ei inversă trăiește de la trecerea directă
            până când trecerea inversă îl citește, și există câte unul pentru fiecare token al micro-lotului.
            Korthikanti et al. (2022) le numără pentru un strat GPT cu activări de 16 biți:
            `s·b·h·(34 + 5·a·s/h)` octeți, pentru lungimea secvenței s, micro-lotul b, dimensiunea ascunsă h și
            a capete de atenție. Cei `34·s·b·h` sunt intrările straturilor liniare, normalizările, GeLU și
            măștile de dropout; cei `5·a·s²·b` sunt scorurile atenției, softmax-ul lor și masca lui de dropout.

            `memory_model.activation_memory` aplică aceeași numărătoare blocului acestui curs (RMSNorm, atenție
            prin `scaled_dot_product_attention`, SwiGLU, fără dropout), în precizia în care calculează, cu d
            dimensiunea modelului, d_kv cea a cheilor și valorilor, f cea a rețelei feed-forward:

            - pe bloc, (8·s·b·d + 2·s·b·d_kv + 4·s·b·f + 2·s·b) elemente: intrarea blocului și reziduul
              atenției, rezultatul intermediar și ieșirea fiecărei normalizări, q, k și v, ieșirea atenției,
              poarta SwiGLU, SiLU-ul ei, proiecția în sus și produsul lor, rsqrt-ul normalizărilor; plus
              log-sum-exp-ul atenției, b·a·s în fp32;
            - în afara blocurilor, tensorii normalizării finale și log-softmax-ul fp32 al logiților (logits),
              b·s·V·4 octeți pentru un vocabular de V.

            Nu există termen în s²: nucleul fuzionat al atenției salvează doar ieșirea și log-sum-exp-ul, iar
            scorurile le recalculează în trecerea inversă.
            """,
        ),
        md(
            en="""
            ### Three measurements, one launch

            The next cell measures three things, each in a function of its own, in one launch (starting
            ranks costs seconds; a measured step on them, a fraction of one).

            **1. `sweep()`**: the activations alive when the forward returns, measured with `memtrack` on
            one forward at each of three sequence lengths and two micro-batches, under FSDP2 with one unit
            per block.

            **2. `recomputation()`**: none, selective and full recomputation, with each API. **Full**
            recomputation checkpoints every block: each keeps its input, and backward reruns the whole
            block. **Selective** recomputation checkpoints only a part: here the feed-forward, whose SwiGLU
            tensors are the largest term of the block (4·s·b·f elements), while the attention keeps its
            activations. (Korthikanti's selective recomputation reruns only the attention scores, the s²
            term, which a fused kernel already does not store; torchtitan's "selective" by operator keeps
            the outputs of the matrix products and reruns the cheap element-wise operators, with
            `torch.utils.checkpoint.create_selective_checkpoint_contexts`.) The two APIs:

            - FSDP1: `apply_activation_checkpointing(model, check_fn=...)`, after wrapping, puts a
              checkpoint wrapper around every module `check_fn` accepts;
            - FSDP2: the module's forward runs inside `torch.utils.checkpoint.checkpoint(module, x,
              use_reentrant=False)`, set up before `fully_shard` (in the cell, a small `Recomputed` module).

            It measures each combination's activations on one step (when the forward returns, and at the
            step's peak), then times the steps after it, one step of each combination in turn, so that the
            machine's load falls on all of them alike, and keeps the fastest (the least disturbed by other
            work on the machine).

            **3. `accumulation()`**: **gradient accumulation**, with and without syncing. With K
            micro-batches per optimizer step, each backward adds its gradient to `.grad`, and the optimizer
            steps once, on the sum (each loss divided by K, so that it is the mean). FSDP then has a choice:
            reduce-scatter after every micro-batch and keep only the gradient shard, or skip the
            reduce-scatter and let each rank sum the whole unsharded gradient locally until the last
            micro-batch. FSDP1 skips with the context `model.no_sync()`; FSDP2 with the setting
            `model.set_requires_gradient_sync(False)`, set back to True for the last micro-batch. The
            function runs one optimizer step of 4 micro-batches both ways with each API, counts the bytes
            of each collective with `comm.count`, records the most gradient memory a rank held between
            micro-batches (`memtrack.split_by_role`: cheap, no tracking), and compares the accumulated
            gradients of the two ways.
            """,
            ro="""
            ### Trei măsurători, o singură lansare

            Celula următoare măsoară trei lucruri, fiecare într-o funcție a lui, într-o singură lansare
            (pornirea rangurilor costă secunde; un pas măsurat pe ele, o fracțiune de secundă).

            **1. `sweep()`**: activările care există când se întoarce trecerea directă, măsurate cu `memtrack`
            pe câte o trecere directă la trei lungimi de secvență și două micro-loturi, cu FSDP2 și o unitate
            pe bloc.

            **2. `recomputation()`**: fără recalculare, recalculare selectivă și completă, cu fiecare API.
            Recalcularea **completă** pune un punct de control pe fiecare bloc: fiecare își păstrează
            intrarea, iar trecerea inversă rulează din nou tot blocul. Recalcularea **selectivă** pune puncte
            de control doar pe o parte: aici rețeaua feed-forward, ai cărei tensori SwiGLU sunt cel mai mare
            termen al blocului (4·s·b·f elemente), în timp ce atenția își păstrează activările. (Recalcularea
            selectivă a lui Korthikanti rulează din nou doar scorurile atenției, termenul în s², pe care un
            nucleu fuzionat oricum nu le păstrează; varianta „selectivă” pe operații din torchtitan păstrează
            ieșirile produselor de matrice și rulează din nou operațiile ieftine, element cu element, cu
            `torch.utils.checkpoint.create_selective_checkpoint_contexts`.) Cele două API-uri:

            - FSDP1: `apply_activation_checkpointing(model, check_fn=...)`, după împachetare, pune un înveliș
              de recalculare în jurul fiecărui modul acceptat de `check_fn`;
            - FSDP2: trecerea directă a modulului rulează în `torch.utils.checkpoint.checkpoint(module, x,
              use_reentrant=False)`, pregătit înainte de `fully_shard` (în celulă, un mic modul `Recomputed`).

            Funcția măsoară activările fiecărei combinații pe un pas (când se întoarce trecerea directă și la
            vârful pasului), apoi cronometrează pașii următori, câte un pas din fiecare combinație pe rând, ca
            încărcarea mașinii să cadă la fel pe toate, și îl păstrează pe cel mai rapid (cel mai puțin
            deranjat de alte lucrări ale mașinii).

            **3. `accumulation()`**: **acumularea gradienților (gradient accumulation)**, cu și fără
            sincronizare. Cu K micro-loturi pe pasul optimizatorului, fiecare trecere inversă își adaugă
            gradientul în `.grad`, iar optimizatorul face un singur pas, pe sumă (fiecare pierdere împărțită la
            K, ca să fie media). FSDP are atunci de ales: reduce cu distribuire (reduce-scatter) după fiecare
            micro-lot și păstrează doar fragmentul gradientului, sau sare peste reducere și lasă fiecare rang
            să însumeze local gradientul întreg, nefragmentat, până la ultimul micro-lot. FSDP1 sare peste
            reducere cu contextul `model.no_sync()`; FSDP2 cu setarea `model.set_requires_gradient_sync(False)`,
            pusă înapoi pe True pentru ultimul micro-lot. Funcția rulează un pas al optimizatorului din 4
            micro-loturi în ambele feluri, cu fiecare API, numără octeții fiecărei operații colective cu
            `comm.count`, notează cea mai mare memorie de gradienți ținută de un rang între micro-loturi
            (`memtrack.split_by_role`: ieftin, fără urmărire) și compară gradienții acumulați în cele două
            feluri.
            """,
        ),
        code(
            """
            %%torchrun -n 2 --backend $backend --vars model_size
            import contextlib
            import time
            from dataclasses import replace

            import torch
            from torch import nn
            from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard
            from torch.distributed.fsdp.wrap import ModuleWrapPolicy
            from torch.distributed.tensor import DTensor
            from torch.utils.checkpoint import checkpoint

            from labkit import comm, memtrack, rank
            from labkit.models import FeedForward, TransformerBlock, TransformerLM, get_config, synthetic_batch

            cfg = get_config(model_size)
            device = rank.device()


            class Recomputed(nn.Module):  # FSDP2's way: run the module inside torch.utils.checkpoint.checkpoint
                def __init__(self, inner):
                    super().__init__()
                    self.inner = inner

                def forward(self, x):
                    return checkpoint(self.inner, x, use_reentrant=False)  # keeps x; reruns inner in backward


            def fsdp1(cfg, recompute=None):  # recompute: the module class to checkpoint, or None
                torch.manual_seed(0)
                model = FullyShardedDataParallel(TransformerLM(cfg), auto_wrap_policy=ModuleWrapPolicy({TransformerBlock}),
                                                 device_id=device)
                if recompute is not None:
                    apply_activation_checkpointing(model, check_fn=lambda module: isinstance(module, recompute))
                return model


            def fsdp2(cfg, recompute=None):
                torch.manual_seed(0)
                model = TransformerLM(cfg).to(device)
                mesh = init_device_mesh(device.type, (rank.world_size(),))
                for i, block in enumerate(model.layers):
                    if recompute is TransformerBlock:
                        model.layers[i] = block = Recomputed(block)  # before fully_shard
                    elif recompute is FeedForward:
                        block.ffn = Recomputed(block.ffn)
                    fully_shard(block, mesh=mesh)
                fully_shard(model, mesh=mesh, reshard_after_forward=False)
                return model


            def sweep():  # 1. the activations alive when the forward returns, at 3 x 2 sizes
                model, points = fsdp2(cfg), []
                for i, (seq_len, micro_batch) in enumerate([(s, b) for s in (32, 64, 128) for b in (2, 4)]):
                    tracker = memtrack.track(model, send=False)  # one tracker per point, each measuring its step
                    inputs, targets = synthetic_batch(replace(cfg, seq_len=seq_len), micro_batch, i, rank.rank(), device)
                    with tracker.step(0):
                        model(inputs, targets)  # a forward is all this needs; its graph is freed after it
                    forward = next(m for m in tracker.results if m["phase"] == "forward")
                    points.append({"seq_len": seq_len, "micro_batch": micro_batch,
                                   "measured": forward["categories"]["activations"]})
                return points


            def recomputation(steps=6):  # 2. none, selective, full: activations on step 0, time on the others
                long = replace(cfg, seq_len=128)  # long enough for the compute to show in the time
                kinds = {"-": None, "FeedForward": FeedForward, "TransformerBlock": TransformerBlock}
                runs = {(api, name): make(long, kind) for api, make in (("FSDP1", fsdp1), ("FSDP2", fsdp2))
                        for name, kind in kinds.items()}
                optimizers = {key: torch.optim.AdamW(model.parameters(), lr=1e-3) for key, model in runs.items()}
                trackers = {key: memtrack.track(model, steps=[0], send=False) for key, model in runs.items()}
                times = {key: [] for key in runs}
                for step in range(steps):
                    inputs, targets = synthetic_batch(long, 4, step, rank.rank(), device)
                    for key, model in runs.items():  # one step of each in turn: the machine's load falls on all alike
                        start = time.perf_counter()
                        with trackers[key].step(step):  # step 0 measured by category, and not timed
                            loss = model(inputs, targets)
                            loss.backward()
                            optimizers[key].step()
                            optimizers[key].zero_grad()
                        if device.type == "cuda":
                            torch.cuda.synchronize()
                        if step > 0:
                            times[key].append(time.perf_counter() - start)
                rows = []
                for (api, name), tracker in trackers.items():
                    by_phase = {m["phase"]: m["categories"]["activations"] for m in tracker.results}
                    rows.append({"fsdp": api, "checkpointed": name, "loss": loss.item(), "stored": by_phase["forward"],
                                 "peak_activations": by_phase["peak"],
                                 "step_ms": min(times[(api, name)]) * 1e3})  # the fastest: the least disturbed
                return rows


            def skipping_sync(model, skip):  # this micro-batch: sum the gradient locally, no reduce-scatter
                if isinstance(model, FullyShardedDataParallel):
                    return model.no_sync() if skip else contextlib.nullcontext()
                model.set_requires_gradient_sync(not skip)  # FSDP2: a setting that stays until changed
                return contextlib.nullcontext()


            def accumulate(model, sync_every, micro_batches=4):
                sent, held = {"all_gather": 0, "reduce_scatter": 0}, 0
                for i in range(micro_batches):
                    skip = not sync_every and i < micro_batches - 1  # the last micro-batch always syncs
                    inputs, targets = synthetic_batch(cfg, 4, i, rank.rank(), device)
                    with skipping_sync(model, skip), comm.count(send=False) as counted:
                        (model(inputs, targets) / micro_batches).backward()
                    for op in sent:
                        sent[op] += counted.totals().get(op, {}).get("bytes", 0)
                    held = max(held, memtrack.split_by_role(model)["grads"])  # kept until the next micro-batch
                local = [p.grad.to_local() if isinstance(p.grad, DTensor) else p.grad for p in model.parameters()]
                return {**sent, "grads_held": held}, torch.cat([g.flatten() for g in local])


            def accumulation():  # 3. one optimizer step of 4 micro-batches, syncing each or only the last
                rows = []
                for api, make, skip in (("FSDP1", fsdp1, "no_sync()"), ("FSDP2", fsdp2, "set_requires_gradient_sync(False)")):
                    synced, reference = accumulate(make(cfg), sync_every=True)
                    skipped, grads = accumulate(make(cfg), sync_every=False)
                    rows.append({"fsdp": api, "setting": "-", **synced, "grad_diff": 0.0})
                    rows.append({"fsdp": api, "setting": skip, **skipped, "grad_diff": (grads - reference).abs().max().item()})
                return rows


            rank.report(sweep=sweep(), checkpointing=recomputation(), accumulation=accumulation())
            """
        ),
        md(
            en="""
            **The sweep, measured.** Rank 0's activations when the forward returned, against the formula
            (fp32, this model):
            """,
            ro="""
            **Variația, măsurată.** Activările rangului 0 la întoarcerea trecerii directe, față de formulă (fp32,
            acest model):
            """,
        ),
        code(
            """
            from labkit.models import get_config
            from labkit.units import fmt_number

            activations = labkit.last_run.values[0]
            rows = []
            for point in activations["sweep"]:
                formula = memory_model.activation_memory(get_config(model_size), point["micro_batch"], point["seq_len"],
                                                         precision="fp32").stored
                rows.append({**point, "formula": formula, "ratio": fmt_number(point["measured"] / formula, 4),
                             "gap": point["measured"] - formula})
            show.table(rows, columns=["seq_len", "micro_batch", "measured", "formula", "ratio", "gap"],
                       units={"measured": "KiB", "formula": "KiB"})
            """
        ),
        md(
            en="""
            The formula follows every point, and the last column says what it leaves out. That
            difference is 8 bytes per token plus 8: the loss keeps the int64 targets for its backward (a
            copy, 8·b·s bytes) and two 4-byte scalars (its value and its total weight). A test
            (`tests/test_activation_formula.py`) checks the formula against such measurements to the byte,
            in fp32 and bf16, with and without checkpointing.

            Read the rows in pairs: doubling the sequence length costs what doubling the micro-batch
            costs, because with a fused attention every term is proportional to the tokens, b·s. With an
            attention that materializes the scores (the "math" path, or attention dropout) the s² term
            of Korthikanti's count comes back, and a long sequence costs more than a large batch.

            What the formula does not count, on purpose: what backward makes (the gradients of the
            activations, in "other"), the temporaries an operator frees before it returns, the gathered
            parameters and the communication buffers. And its "per rank" is per rank only because data
            parallelism gives each rank its own micro-batch: sharding the parameters does not divide the
            activations at all. Two tools do: recomputation, and smaller micro-batches with gradient
            accumulation.

            **Exercise 4.** Activation checkpointing (recomputation) keeps only the input of a
            checkpointed module and reruns its forward during backward. Write
            `checkpointed_blocks(micro_batch, seq_len, dim, n_blocks, precision)`: the bytes that
            `n_blocks` checkpointed blocks keep for backward when the forward returns, computing in
            `precision` (`"fp32"`, `"bf16"` or `"fp16"`). The check calls it at sizes this notebook
            never uses.
            """,
            ro="""
            Formula urmează fiecare punct, iar ultima coloană spune ce lasă deoparte. Diferența este de 8
            octeți pe token plus 8: pierderea păstrează țintele int64 pentru trecerea ei inversă (o copie,
            8·b·s octeți) și doi scalari de 4 octeți (valoarea ei și ponderea ei totală). Un test
            (`tests/test_activation_formula.py`) verifică formula pe astfel de măsurători, la octet, în fp32 și
            bf16, cu și fără recalculare.

            Citiți rândurile în perechi: dublarea lungimii secvenței costă cât dublarea micro-lotului, pentru
            că, într-o atenție fuzionată, fiecare termen este proporțional cu tokenii, b·s. Cu o atenție care
            construiește scorurile (calea „math” sau dropout în atenție), termenul în s² din numărătoarea lui
            Korthikanti revine, iar o secvență lungă costă mai mult decât un lot mare.

            Ce nu numără formula, intenționat: ce produce trecerea inversă (gradienții activărilor, în
            „altele”), valorile temporare pe care o operație le eliberează înainte să se termine, parametrii
            colectați și tampoanele de comunicare. Iar „pe rang” este pe rang doar pentru că paralelismul de
            date dă fiecărui rang micro-lotul lui: fragmentarea parametrilor nu împarte deloc activările. Două
            unelte o fac: recalcularea și micro-loturile mai mici cu acumularea gradienților.

            **Exercițiul 4.** Recalcularea activărilor (activation checkpointing) păstrează doar intrarea unui
            modul recalculat și îi rulează din nou trecerea directă în timpul trecerii inverse. Scrieți
            `checkpointed_blocks(micro_batch, seq_len, dim, n_blocks, precision)`: octeții pe care `n_blocks`
            blocuri recalculate îi păstrează pentru trecerea inversă când se întoarce trecerea directă,
            calculând în `precision` (`"fp32"`, `"bf16"` sau `"fp16"`). Verificarea o apelează la dimensiuni pe
            care acest notebook nu le folosește niciodată.
            """,
        ),
        code(
            """
            def checkpointed_blocks(micro_batch, seq_len, dim, n_blocks, precision):
                ### BEGIN SOLUTION
                dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
                element = torch.empty(0, dtype=dtype).element_size()  # bytes per element
                return n_blocks * micro_batch * seq_len * dim * element  # each block keeps its input, (b, s, d)
                ### END SOLUTION
            """
        ),
        check('labkit.check("lesson5.checkpointed_blocks", checkpointed_blocks)'),
        md(
            en="""
            **Full and selective recomputation, measured.** Rank 0's six combinations: the activations
            when the forward returned and at the step's peak, in KiB, the fastest step time and the loss.
            """,
            ro="""
            **Recalcularea completă și cea selectivă, măsurate.** Cele șase combinații ale rangului 0:
            activările la întoarcerea trecerii directe și la vârful pasului, în KiB, durata celui mai rapid
            pas și pierderea.
            """,
        ),
        code(
            """
            show.table(activations["checkpointing"], units={"stored": "KiB", "peak_activations": "KiB"})
            """
        ),
        md(
            en="""
            Read it by column:

            - **after forward**: full recomputation leaves each block its input and nothing else; what
              remains is outside the blocks (the final norm and the fp32 log-softmax of the logits, the
              largest single tensor of this small model). Selective recomputation removes the feed-forward's
              share of every block.
            - **at the peak**: with recomputation, backward rebuilds one block's activations at a time, so
              the peak is above what the forward left, by up to one block.
            - **step**: the rerun forward is the price. Full recomputation adds one more forward of every
              block to each step; selective recomputation reruns only the feed-forward. On this CPU the
              times are gloo's and noisy: compare within a column, and rerun the cell if two rows disagree
              with that order.
            - **loss**: the same in every row: recomputation changes what is kept, not what is computed.

            FSDP1 and FSDP2 keep the same activations: the choice of API decides how you ask, not what
            is stored.
            """,
            ro="""
            Citiți-l pe coloane:

            - **după trecerea directă**: recalcularea completă lasă fiecărui bloc intrarea lui și nimic altceva; ce
              rămâne este în afara blocurilor (normalizarea finală și log-softmax-ul fp32 al logiților, cel
              mai mare tensor al acestui model mic). Recalcularea selectivă scoate partea rețelei feed-forward
              din fiecare bloc.
            - **la vârf**: cu recalculare, trecerea inversă reface activările câte unui bloc pe rând, așa că
              vârful este peste ce a lăsat trecerea directă, cu cel mult un bloc.
            - **pasul**: trecerea directă rulată din nou este prețul. Recalcularea completă adaugă fiecărui
              pas încă o trecere directă prin fiecare bloc; recalcularea selectivă rulează din nou doar rețeaua
              feed-forward. Pe acest procesor duratele sunt ale lui gloo și au zgomot: comparați în interiorul
              unei coloane și rulați celula din nou dacă două rânduri contrazic această ordine.
            - **pierderea**: aceeași pe fiecare rând: recalcularea schimbă ce se păstrează, nu ce se calculează.

            FSDP1 și FSDP2 păstrează aceleași activări: alegerea API-ului decide cum cereți, nu ce se păstrează.
            """,
        ),
        md(
            en="""
            **Gradient accumulation, measured.** Per optimizer step of 4 micro-batches, on rank 0: the
            bytes of each collective, the most gradient memory held between micro-batches, and the largest
            difference between the accumulated gradients and those of syncing every micro-batch.
            """,
            ro="""
            **Acumularea gradienților, măsurată.** Pe un pas al optimizatorului din 4 micro-loturi, pe rangul
            0: octeții fiecărei operații colective, cea mai mare memorie de gradienți ținută între micro-loturi
            și cea mai mare diferență dintre gradienții acumulați și cei obținuți cu sincronizare la fiecare
            micro-lot.
            """,
        ),
        code(
            """
            show.table(activations["accumulation"], units={"all_gather": "KiB", "reduce_scatter": "KiB", "grads_held": "KiB"})
            """
        ),
        md(
            en="""
            Skipping the sync divides the reduce-scatter bytes of an optimizer step by the number of
            micro-batches: one round of reduce-scatters instead of four, each of the same size. The
            gradients come out the same up to rounding (the sum is taken in another order). The price is the gradient memory:
            between micro-batches each rank holds the whole unsharded gradient, N times its shard, as DDP
            would. For a model whose gradient shard fits only because it is 1/N, that is not an option.
            The all-gathers do not change: each micro-batch still gathers every unit for its forward and
            its backward (FSDP2's `set_reshard_after_backward(False)` would keep them gathered between
            micro-batches, at the memory of the whole parameters).

            So the two tools for activations trade differently: recomputation pays in compute, and
            gradient accumulation with smaller micro-batches pays in steps; skipping the sync then saves
            communication and pays in gradient memory.
            """,
            ro="""
            Sărind peste sincronizare, octeții reducerii dintr-un pas al optimizatorului se împart la numărul
            de micro-loturi: o rundă de reduceri în loc de patru, fiecare de aceeași dimensiune. Gradienții ies
            la fel, până la rotunjire (suma se face în altă ordine). Prețul este memoria gradienților: între micro-loturi,
            fiecare rang ține gradientul întreg, nefragmentat, de N ori fragmentul lui, ca DDP. Pentru un model
            al cărui fragment de gradient încape doar pentru că este 1/N, aceasta nu este o opțiune. Colectările
            (all-gather) nu se schimbă: fiecare micro-lot colectează în continuare fiecare unitate pentru
            trecerea lui directă și pentru cea inversă (`set_reshard_after_backward(False)` din FSDP2 le-ar
            păstra colectate între micro-loturi, cu prețul memoriei parametrilor întregi).

            Așadar, cele două unelte pentru activări plătesc diferit: recalcularea plătește în calcul, iar
            acumularea gradienților cu micro-loturi mai mici plătește în pași; săritul peste sincronizare
            economisește apoi comunicare și plătește în memoria gradienților.
            """,
        ),
        md(
            en="""
            ## Recap

            - `MixedPrecision(param_dtype=bf16)` halved what your run gathered, all-gathered and kept as
              activations; `reduce_dtype=bf16` also halved the reduce-scatter. The fp32 shards, their
              gradients and Adam's state did not change.
            - On a CPU, bf16 usually costs time; on GPUs it saves time. Measure on the machine you train on.
            - `CPUOffload(offload_params=True)` needs a GPU to offload from: FSDP refused it here. The
              memory model shows what it buys: a 70B model that does not fit 8 × 80 GB fits once its
              states move to the host, which then needs over a terabyte per node.
            - Activations grow with the tokens of the micro-batch, b·s, and sharding does not divide them;
              the formula of `memory_model` followed your sweep, and left out only the loss's targets.
            - Recomputation keeps a checkpointed module's input and reruns its forward in backward: full
              (every block) keeps the least and reruns the most, selective (the feed-forward here) sits
              between. FSDP1 asks with `apply_activation_checkpointing`, FSDP2 with `checkpoint` before
              `fully_shard`.
            - Gradient accumulation with `no_sync()` (FSDP1) or `set_requires_gradient_sync(False)` (FSDP2)
              reduce-scatters once per optimizer step instead of once per micro-batch, and holds the whole
              gradient on every rank in between.

            Next, lesson 6: FSDP2, and what it takes to start a 70B model at all.
            """,
            ro="""
            ## Recapitulare

            - `MixedPrecision(param_dtype=bf16)` a înjumătățit ce a colectat rularea voastră, ce a transmis prin
              all-gather și ce a păstrat ca activări; `reduce_dtype=bf16` a înjumătățit și reducerea.
              Fragmentele fp32, gradienții lor și starea Adam nu s-au schimbat.
            - Pe un procesor, bf16 costă de obicei timp; pe GPU-uri economisește timp. Măsurați pe mașina pe care
              antrenați.
            - `CPUOffload(offload_params=True)` are nevoie de un GPU de pe care să descarce: aici FSDP a refuzat.
              Modelul de memorie arată ce obțineți cu ea: un model de 70B care nu încape în 8 × 80 GB încape
              odată ce stările lui se mută pe gazdă, care are atunci nevoie de peste un terabyte pe nod.
            - Activările cresc cu tokenii micro-lotului, b·s, iar fragmentarea nu le împarte; formula din
              `memory_model` a urmat măsurătorile voastre și a lăsat deoparte doar țintele pierderii.
            - Recalcularea păstrează intrarea unui modul recalculat și îi rulează din nou trecerea directă în
              trecerea inversă: cea completă (fiecare bloc) păstrează cel mai puțin și recalculează cel mai mult,
              cea selectivă (aici rețeaua feed-forward) este între ele. FSDP1 o cere cu
              `apply_activation_checkpointing`, FSDP2 cu `checkpoint` înainte de `fully_shard`.
            - Acumularea gradienților cu `no_sync()` (FSDP1) sau `set_requires_gradient_sync(False)` (FSDP2)
              reduce cu distribuire o dată pe pasul optimizatorului în loc de o dată pe micro-lot și ține între
              timp gradientul întreg pe fiecare rang.

            Urmează lecția 6: FSDP2 și ce trebuie ca un model de 70B să poată măcar porni.
            """,
        ),
    ],
)
