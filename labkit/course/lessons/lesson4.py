"""Lesson 4: prefetch and overlap. When FSDP issues each all-gather (backward_prefetch,
forward_prefetch, limit_all_gathers), measured on the ranks' timeline; what prefetching costs
in memory; and, simulated and labelled so, what a slow interconnect does to the step."""

from labkit.course.cells import Lesson, check, code, exercise, md, parameters, setup
from labkit.course.rank_exercises import LESSON4 as RANK_EXERCISE

LESSON = Lesson(
    id="lesson4",
    file="04_prefetch_overlap",
    title={"en": "Lesson 4: prefetch and overlap", "ro": "Lecția 4: preîncărcare și suprapunere"},
    terms=("prefetch", "overlap", "interconnect"),
    cells=[
        md(
            en="""
            # Lesson 4: prefetch and overlap

            FULL_SHARD pays for its memory savings with communication: every unit's parameters are
            all-gathered before its forward and again before its backward, and its gradients are
            reduce-scattered after. Whether the step gets slower depends on *when* each collective is
            issued: early enough, and it runs while another unit computes.

            **In this lesson you will**

            - learn what `backward_prefetch` (`BACKWARD_PRE`, `BACKWARD_POST`, `None`),
              `forward_prefetch` and `limit_all_gathers` change;
            - run all five settings on your ranks and read each one's timeline: which collective is
              issued when, and how many units are gathered at once;
            - measure the memory that prefetching costs, and predict it with a formula;
            - replay your run on slower and faster links with a simulator, to see what a machine
              without NVLink does to the step (simulated, and labelled so).
            """,
            ro="""
            # Lecția 4: preîncărcare și suprapunere

            FULL_SHARD plătește memoria economisită cu comunicare: parametrii fiecărei unități sunt
            strânși printr-o colectare completă (all-gather) înainte de trecerea directă și din nou înainte de cea
            inversă, iar
            gradienții ei sunt reduși cu distribuire (reduce-scatter) după aceea. Dacă pasul devine mai
            lent depinde de *momentul* în care este lansată fiecare operație colectivă: destul de
            devreme, și ea rulează în timp ce o altă unitate calculează.

            **În această lecție veți**

            - afla ce schimbă `backward_prefetch` (`BACKWARD_PRE`, `BACKWARD_POST`, `None`),
              `forward_prefetch` și `limit_all_gathers`;
            - rula toate cele cinci setări pe rangurile voastre și citi cronologia fiecăreia: ce operație
              colectivă pornește și când, câte unități sunt colectate în același timp;
            - măsura memoria pe care o costă preîncărcarea și o veți prezice cu o formulă;
            - reda rularea voastră pe legături mai lente și mai rapide cu un simulator, ca să vedeți ce
              face unui pas o mașină fără NVLink (simulat, și marcat ca atare).
            """,
        ),
        parameters(nproc=2, backend="auto", model_size="tiny", steps=3),
        md(
            en="""
            The first code cell loads `%%torchrun`, sets the language of labkit's messages and imports
            the tools of this lesson: `timeline` (each unit's work, timed in the ranks) and `simulate`
            (the same step replayed on another link).
            """,
            ro="""
            Prima celulă de cod încarcă `%%torchrun`, alege limba mesajelor labkit și importă uneltele
            acestei lecții: `timeline` (munca fiecărei unități, cronometrată în ranguri) și `simulate`
            (același pas, redat pe o altă legătură).
            """,
        ),
        setup("from labkit import simulate, timeline", "from labkit.course import show"),
        md(
            en="""
            ## 1. When FSDP gathers

            In lesson 3 each `TransformerBlock` became one FSDP unit, and the root unit kept the rest
            (embedding, final norm, output head). In a FULL_SHARD step each unit goes through:

            1. forward: **all-gather** its parameters, compute, free the gathered copy;
            2. backward: all-gather again, compute the gradients, free, **reduce-scatter** the gradients.

            A collective takes time. If a unit's all-gather is issued only when the unit needs its
            parameters, the computation waits for it. On GPUs it need not wait: NCCL runs collectives
            on a CUDA stream of their own, so the all-gather of one unit can run while another unit
            computes. Communication that runs under computation is **overlap**, and to get
            it FSDP must issue the next unit's all-gather before that unit needs it: that is
            **prefetch**. FSDP1 has three options for it:

            | option | when the *next* unit's all-gather is issued | cost |
            |---|---|---|
            | `backward_prefetch=BACKWARD_PRE` (the default) | in the current unit's pre-backward hook, before its gradients are computed: it runs during the current backward | the next unit's parameters are in memory while the current unit's still are |
            | `backward_prefetch=BACKWARD_POST` | after the current unit's gradients are computed and its parameters freed, before its reduce-scatter | the next backward waits for the gather, but not behind the reduce-scatter |
            | `backward_prefetch=None` | only when the next unit's own backward starts, queued behind the current reduce-scatter | nothing overlaps |
            | `forward_prefetch=True` | in forward, in the current unit's pre-forward hook | one more unit in memory during forward |
            | `limit_all_gathers=True` (the default) | the CPU may not issue an all-gather while two earlier ones are not yet freed | bounds the memory when the CPU runs ahead of the GPU |

            FSDP2 (`fully_shard`, lesson 2) has fewer knobs. Backward prefetch is always on, one unit
            ahead in backward's order, as `BACKWARD_PRE` (there is no `BACKWARD_POST`);
            `block.set_modules_to_backward_prefetch([...])` chooses which units a block prefetches in
            backward, and how many ahead, and `block.set_modules_to_forward_prefetch([...])` does what
            `forward_prefetch=True` does. There is no `limit_all_gathers`: FSDP2 frees gathered memory
            without the CUDA-stream bookkeeping that made FSDP1 need a limiter. This lesson measures
            FSDP1's three settings, which FSDP2 can no longer show side by side.

            Prefetch changes *when* things happen, never *what* is computed: every setting must give
            the same loss.
            """,
            ro="""
            ## 1. Când colectează FSDP parametrii

            În lecția 3 fiecare `TransformerBlock` a devenit o unitate FSDP, iar unitatea rădăcină a
            păstrat restul (încorporarea, normalizarea finală, capul de ieșire). Într-un pas FULL_SHARD,
            fiecare unitate trece prin:

            1. trecerea directă: își colectează parametrii printr-o **colectare completă (all-gather)**,
               calculează, eliberează copia colectată;
            2. trecerea inversă: îi colectează din nou, calculează gradienții, eliberează, apoi **reduce cu
               distribuire (reduce-scatter)** gradienții.

            O operație colectivă durează. Dacă colectarea parametrilor unei unități pornește abia când
            unitatea are nevoie de ei, calculul o așteaptă. Pe GPU-uri nu e nevoie să aștepte: NCCL rulează
            operațiile colective pe un flux CUDA separat, așa că colectarea unei unități poate rula în timp
            ce o altă unitate calculează. Comunicarea care rulează sub calcul se numește **suprapunere
            (overlap)**, iar ca să o obțină, FSDP trebuie să lanseze colectarea unității următoare înainte
            ca ea să aibă nevoie de parametri: aceasta este **preîncărcarea (prefetch)**. FSDP1 are trei
            opțiuni pentru ea:

            | opțiune | când pornește colectarea parametrilor unității *următoare* | cost |
            |---|---|---|
            | `backward_prefetch=BACKWARD_PRE` (implicit) | în cârligul de dinaintea trecerii inverse a unității curente, înainte să i se calculeze gradienții: rulează în timpul trecerii inverse curente | parametrii unității următoare sunt în memorie cât timp sunt și ai celei curente |
            | `backward_prefetch=BACKWARD_POST` | după ce s-au calculat gradienții unității curente și i s-au eliberat parametrii, înainte de reducerea ei | următoarea trecere inversă așteaptă colectarea, dar nu în spatele reducerii |
            | `backward_prefetch=None` | abia când începe trecerea inversă a unității următoare, la coadă după reducerea curentă | nimic nu se suprapune |
            | `forward_prefetch=True` | în trecerea directă, în cârligul de dinaintea trecerii directe a unității curente | încă o unitate în memorie în trecerea directă |
            | `limit_all_gathers=True` (implicit) | procesorul nu poate lansa o colectare cât timp două colectări anterioare nu au fost încă eliberate | limitează memoria când procesorul o ia înaintea GPU-ului |

            FSDP2 (`fully_shard`, lecția 2) are mai puține reglaje. Preîncărcarea în trecerea inversă este
            mereu activă, cu o unitate înainte, în ordinea trecerii inverse, ca `BACKWARD_PRE` (nu există
            `BACKWARD_POST`); `block.set_modules_to_backward_prefetch([...])` alege ce unități preîncarcă un
            bloc în trecerea inversă și cu câte înainte, iar `block.set_modules_to_forward_prefetch([...])`
            face ce face `forward_prefetch=True`. Nu există `limit_all_gathers`: FSDP2 eliberează memoria
            colectată fără evidența pe fluxuri CUDA care îl obliga pe FSDP1 să aibă un limitator. Lecția
            aceasta măsoară cele trei setări ale FSDP1, pe care FSDP2 nu le mai poate arăta una lângă alta.

            Preîncărcarea schimbă *când* se întâmplă lucrurile, niciodată *ce* se calculează: toate
            setările trebuie să dea aceeași pierdere.
            """,
        ),
        md(
            en="""
            ## 2. Five settings, one run

            One `%%torchrun` cell trains the lesson's model under each of the five settings in turn,
            from the same initial weights, for `steps` steps each. `timeline.Recorder` times every
            unit's forward, backward and collectives inside the ranks, and notes when FSDP gathers and
            frees each unit's parameters; `config=name` labels each step's record with its setting.
            """,
            ro="""
            ## 2. Cinci setări, o singură rulare

            O singură celulă `%%torchrun` antrenează modelul lecției pe rând, cu fiecare dintre cele cinci
            setări, pornind de la aceleași ponderi inițiale, câte `steps` pași. `timeline.Recorder`
            cronometrează în ranguri trecerea directă, trecerea inversă și operațiile colective ale fiecărei
            unități și notează când colectează și când eliberează FSDP parametrii fiecărei unități;
            `config=name` etichetează înregistrarea fiecărui pas cu setarea lui.
            """,
        ),
        code(
            """
            %%torchrun -n $nproc --backend $backend --vars model_size,steps
            import torch
            from torch.distributed.fsdp import BackwardPrefetch, FullyShardedDataParallel, ShardingStrategy
            from torch.distributed.fsdp.wrap import ModuleWrapPolicy

            from labkit import rank, timeline
            from labkit.models import TransformerBlock, TransformerLM, get_config, synthetic_batch

            cfg = get_config(model_size)
            device = rank.device()  # the CPU under gloo, cuda:LOCAL_RANK under NCCL
            SETTINGS = {  # name: (backward_prefetch, forward_prefetch, limit_all_gathers)
                "BACKWARD_PRE": (BackwardPrefetch.BACKWARD_PRE, False, True),
                "BACKWARD_POST": (BackwardPrefetch.BACKWARD_POST, False, True),
                "None": (None, False, True),
                "forward_prefetch": (BackwardPrefetch.BACKWARD_PRE, True, True),
                "no limit_all_gathers": (BackwardPrefetch.BACKWARD_PRE, False, False),
            }
            for name, (backward, forward, limit) in SETTINGS.items():
                torch.manual_seed(0)  # the same initial weights for every setting
                model = FullyShardedDataParallel(
                    TransformerLM(cfg),
                    auto_wrap_policy=ModuleWrapPolicy({TransformerBlock}),
                    sharding_strategy=ShardingStrategy.FULL_SHARD,
                    backward_prefetch=backward,
                    forward_prefetch=forward,
                    limit_all_gathers=limit,
                    device_id=device,
                )
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                recorder = timeline.Recorder(model, optimizer)
                for step in range(steps):
                    inputs, targets = synthetic_batch(cfg, 8, step, rank.rank(), device)
                    with recorder.step(step, config=name):  # sends this step's spans, labelled
                        loss = model(inputs, targets)
                        loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()
                recorder.close()
                rank.report(**{name: loss.item()})
            """
        ),
        md(
            en="""
            Each rank sent one timeline per step and setting. The next cell sorts them by setting and,
            for the last step of each on rank 0, counts how many units were gathered at once and how
            many bytes that was (each unit's size, `unit_bytes`, is recorded with the timeline). Step
            times are gloo's on this machine's CPU: they do not resemble what NCCL does on GPUs.
            """,
            ro="""
            Fiecare rang a trimis câte o cronologie pentru fiecare pas și fiecare setare. Celula următoare
            le grupează pe setări și, pentru ultimul pas al fiecăreia pe rangul 0, numără câte unități au
            fost colectate în același timp și câți octeți au însemnat (dimensiunea fiecărei unități,
            `unit_bytes`, este înregistrată odată cu cronologia). Duratele pașilor sunt cele ale lui gloo,
            pe procesorul acestei mașini: nu seamănă cu ce face NCCL pe GPU-uri.
            """,
        ),
        code(
            """
            import statistics

            from labkit.course import measure

            prefetch = labkit.last_run
            settings = list(prefetch.values[0])
            by_setting = {  # setting -> {rank: that setting's messages}, as if each had been a run of its own
                name: {r: [m for m in events if m.get("config") == name] for r, events in prefetch.events.items()}
                for name in settings
            }


            def last_step(name, r=0):
                return timeline.spans_by_rank(by_setting[name])[r]


            def peak_gathered_bytes(msg):
                \"\"\"The most bytes of gathered parameters held at once: each "held" span adds its unit's bytes
                from its all-gather to its free; measure.peak_gathered adds them up in time order.\"\"\"
                return measure.peak_gathered(msg["spans"], msg["unit_bytes"])


            def step_ms(name, r=0):
                msgs = [m for m in by_setting[name][r] if m["t"] == "spans"][1:] or [last_step(name, r)]
                return statistics.median(m["end"] - m["start"] for m in msgs) * 1e3


            show.table([
                {"setting": name, "loss": prefetch.values[0][name], "step_ms": step_ms(name),
                 "units_held": timeline.peak_held(last_step(name)["spans"]),
                 "peak_unsharded": peak_gathered_bytes(last_step(name))}
                for name in settings
            ], units={"peak_unsharded": "KiB"})
            """
        ),
        md(
            en="""
            The losses are equal to the last digit: prefetching reorders the work and changes nothing
            else. The memory is not equal. With `BACKWARD_PRE` one more unit is gathered at the peak
            than with `BACKWARD_POST` or `None`: while a block computes its gradients, the block before
            it is already being gathered. That is the price of prefetching, measured.

            The timelines show where the difference comes from. One row per stream: compute
            (forward, backward, optimizer), collectives, and the number of units held; time runs to
            the right. Rank 0 only, the last step of each setting:
            """,
            ro="""
            Pierderile sunt egale până la ultima cifră: preîncărcarea reordonează munca și nu schimbă
            nimic altceva. Memoria nu este egală. Cu `BACKWARD_PRE`, la vârf este colectată o unitate în
            plus față de `BACKWARD_POST` sau `None`: în timp ce un bloc își calculează gradienții, blocul
            dinaintea lui este deja colectat. Acesta este prețul preîncărcării, măsurat.

            Cronologiile arată de unde vine diferența. Câte un rând pentru fiecare flux: calcul (trecerea
            directă, trecerea inversă, optimizatorul), operații colective și numărul de unități ținute în
            memorie; timpul curge spre dreapta. Doar rangul 0, ultimul pas al fiecărei setări:
            """,
        ),
        code(
            """
            rank0 = {name: {0: by_setting[name][0]} for name in ("BACKWARD_PRE", "BACKWARD_POST", "None")}
            timeline.plot_timelines(rank0)
            """
        ),
        md(
            en="""
            Read the collectives' row of each panel from the end of the forward pass on. The table
            below spells it out: `AG` is an all-gather, `RS` a reduce-scatter, `L1` the block
            `layers.1`. The root is not gathered again in backward: FSDP1 keeps it gathered from the
            end of its forward (lesson 3).
            """,
            ro="""
            Citiți rândul operațiilor colective din fiecare panou de la sfârșitul trecerii directe încolo.
            Tabelul de mai jos îl scrie explicit: `AG` este o colectare completă (all-gather), `RS` o reducere cu
            distribuire (reduce-scatter), `L1` este blocul `layers.1`. Rădăcina nu mai este colectată în
            trecerea inversă: FSDP1 o păstrează colectată de la sfârșitul trecerii ei directe (lecția 3).
            """,
        ),
        code(
            """
            SHORT = {"all_gather": "AG", "reduce_scatter": "RS", "forward": "F"}


            def order(msg, phase):
                \"\"\"What the step did, in order: backward's collectives, or forward's gathers and compute (F).\"\"\"
                end_of_forward = max(s["end"] for s in msg["spans"] if s["kind"] == "forward")
                kinds = ("all_gather", "forward") if phase == "forward" else ("all_gather", "reduce_scatter")
                chosen = [s for s in msg["spans"] if s["kind"] in kinds and (s["start"] < end_of_forward) == (phase == "forward")]
                names = [f"{SHORT[s['kind']]}·{s['unit'].replace('layers.', 'L')}" for s in sorted(chosen, key=lambda s: s["start"])]
                return " ".join(n for i, n in enumerate(names) if i == 0 or n != names[i - 1])  # a unit's compute once


            show.table([{"setting": name, "order": order(last_step(name), "backward")} for name in settings])
            """
        ),
        md(
            en="""
            - `BACKWARD_PRE` gathers the first block to run backward (`L1`) and, before `L1` computes,
              already the next one (`L0`): two blocks' parameters are in memory together.
            - `BACKWARD_POST` issues the same collectives in the same order, but `L0`'s gather only
              after `L1`'s backward has finished and `L1` has been freed: never two blocks at once.
            - `None` gathers `L0` only after `L1`'s reduce-scatter has been issued.

            On GPUs the order decides what overlaps. On this CPU it does not: look at the panels
            again, the compute row and the collectives' row never run at the same time. gloo runs
            each FSDP collective while the rank's one thread waits, so every collective adds its full
            time to the step whatever the setting, and the step times in the table above differ by
            noise, not by overlap.
            """,
            ro="""
            - `BACKWARD_PRE` colectează primul bloc care rulează înapoi (`L1`) și, înainte ca `L1` să calculeze,
              deja pe următorul (`L0`): parametrii a două blocuri sunt în memorie împreună.
            - `BACKWARD_POST` lansează aceleași operații colective, în aceeași ordine, dar colectarea lui
              `L0` abia după ce trecerea inversă a lui `L1` s-a terminat și `L1` a fost eliberat: niciodată
              două blocuri deodată.
            - `None` colectează `L0` abia după ce a fost lansată reducerea lui `L1`.

            Pe GPU-uri ordinea decide ce se suprapune. Pe acest procesor, nu: priviți din nou panourile,
            rândul de calcul și cel al operațiilor colective nu rulează niciodată în același timp. gloo
            execută fiecare operație colectivă FSDP în timp ce singurul fir de execuție al rangului
            așteaptă, așa că fiecare operație colectivă se adaugă în întregime la durata pasului, oricare
            ar fi setarea, iar duratele din tabelul de mai sus diferă prin zgomot, nu prin suprapunere.
            """,
        ),
        md(
            en="""
            **Exercise 1.** Why did the three `backward_prefetch` settings not change the step time on
            this CPU run? Set `answer` to the letter of the right reason.

            - **a.** On CPU, FSDP ignores `backward_prefetch`.
            - **b.** gloo runs each collective while the rank's thread waits, so no collective overlaps
              any computation, whatever order it was issued in.
            - **c.** The model is too small to have more than one unit.
            """,
            ro="""
            **Exercițiul 1.** De ce nu au schimbat cele trei setări `backward_prefetch` durata pasului în
            această rulare pe CPU? Dați lui `answer` litera motivului corect.

            - **a.** Pe CPU, FSDP ignoră `backward_prefetch`.
            - **b.** gloo execută fiecare operație colectivă în timp ce firul rangului așteaptă, așa că
              nicio operație colectivă nu se suprapune cu vreun calcul, în orice ordine ar fi lansată.
            - **c.** Modelul este prea mic ca să aibă mai mult de o unitate.
            """,
        ),
        exercise(solution='answer = "b"', pure=True),
        check('labkit.check("lesson4.why_no_overlap", answer)'),
        md(
            en="""
            **Exercise 2.** Predict the peak of gathered parameters with `BACKWARD_PRE`, in bytes, from
            the sizes of the units: `root_bytes` (the root unit, which FSDP1 keeps gathered through
            backward) and `block_bytes` (one block). The check compares your formula with the peak
            measured on rank 0. The formula holds for any number of blocks, not only this model's.
            """,
            ro="""
            **Exercițiul 2.** Preziceți vârful parametrilor colectați cu `BACKWARD_PRE`, în octeți, din
            dimensiunile unităților: `root_bytes` (unitatea rădăcină, pe care FSDP1 o ține colectată în
            trecerea inversă) și `block_bytes` (un bloc). Verificarea compară formula voastră cu vârful
            măsurat pe rangul 0. Formula este valabilă pentru orice număr de blocuri, nu doar pentru
            modelul acesta.
            """,
        ),
        code(
            """
            def peak_gathered_pre(root_params, block_params, precision):  # elements; precision: 'fp32', 'bf16' or 'fp16'
                ### BEGIN SOLUTION
                element = {"fp32": 4, "bf16": 2, "fp16": 2}[precision]
                return element * (root_params + 2 * block_params)
                ### END SOLUTION
            """
        ),
        check('labkit.check("lesson4.peak_gathered_pre", peak_gathered_pre, run=prefetch)'),
        *RANK_EXERCISE,
        md(
            en="""
            On a laptop one extra block is a few hundred KiB. At real sizes it is a lot more: the
            extra memory of `BACKWARD_PRE` is one block's parameters, in the dtype they are gathered
            in. For the Llama-like configurations of `labkit.models`, gathered in bf16:
            """,
            ro="""
            Pe un laptop, un bloc în plus înseamnă câteva sute de KiB. La dimensiuni reale înseamnă mult
            mai mult: memoria în plus a lui `BACKWARD_PRE` sunt parametrii unui bloc, în tipul în care
            sunt colectați. Pentru configurațiile de tip Llama din `labkit.models`, colectate în bf16:
            """,
        ),
        code(
            """
            import torch

            from labkit.models import PRESETS, TransformerBlock

            rows = []
            for name in ("llama-7b", "llama-13b", "llama-70b"):
                with torch.device("meta"):  # shapes only: nothing is allocated
                    block = TransformerBlock(PRESETS[name])
                block_params = sum(p.numel() for p in block.parameters())
                rows.append({"model": name, "block_params": block_params, "prefetch_extra": 2 * block_params})  # bf16: 2 bytes
            show.table(rows, units={"prefetch_extra": "GiB"})
            """,
            pure=True,
        ),
        md(
            en="""
            ## 3. `forward_prefetch` and `limit_all_gathers`

            `forward_prefetch=True` moves the same idea into forward: in each unit's pre-forward, FSDP
            issues the next unit's all-gather. Compare the order of forward's all-gathers (`AG`) and
            computations (`F`):
            """,
            ro="""
            ## 3. `forward_prefetch` și `limit_all_gathers`

            `forward_prefetch=True` mută aceeași idee în trecerea directă: în cârligul de dinaintea
            trecerii directe a fiecărei unități, FSDP lansează colectarea unității următoare. Comparați
            ordinea colectărilor (`AG`) și a calculelor (`F`) din trecerea directă:
            """,
        ),
        code(
            """
            show.table([{"setting": name, "forward_order": order(last_step(name), "forward")}
                        for name in ("BACKWARD_PRE", "forward_prefetch", "no limit_all_gathers")])
            """
        ),
        md(
            en="""
            With `forward_prefetch`, `L0` is gathered while the root is still computing its embedding,
            and `L1` before `L0`'s forward: one more unit is in memory during forward. FSDP's
            documentation recommends it only for CPU-bound runs. On a GPU the CPU normally runs ahead
            of the GPU anyway: it issues the all-gathers as fast as it reaches them, and the comm
            stream starts the next one as soon as the previous is done. Prefetching that is issued
            earlier by the CPU then starts no earlier on the GPU. It also assumes a static graph: FSDP1
            records the order in which the units ran forward in the first iteration and prefetches by
            that order in every later one. A model whose forward order changes from step to step (a
            layer skipped on some inputs, a branch chosen at run time) gathers the wrong unit ahead:
            memory spent, nothing hidden, and the needed unit gathered late.

            Running ahead has its own risk: a CPU far ahead of the GPU could issue the all-gathers of
            many units before any of them is freed, and all of them would be allocated at once.
            `limit_all_gathers=True` is FSDP1's rate limiter against that: the CPU waits before
            issuing an all-gather while two earlier ones are still held. In this CPU run the thread
            never runs ahead (it waits in every collective), so turning the limiter off changed
            nothing: same order, same peak. It matters on GPUs, where the CPU is ahead.
            """,
            ro="""
            Cu `forward_prefetch`, `L0` este colectat cât timp rădăcina încă își calculează încorporarea, iar
            `L1` înainte de trecerea directă a lui `L0`: în trecerea directă este în memorie încă o unitate.
            Documentația FSDP o recomandă doar pentru rulările limitate de procesor. Pe un GPU, procesorul
            o ia de obicei oricum înaintea GPU-ului: lansează colectările de îndată ce ajunge la ele, iar
            fluxul de comunicare o pornește pe următoarea imediat ce s-a terminat cea dinainte. O
            preîncărcare lansată mai devreme de procesor nu începe atunci mai devreme pe GPU. Ea presupune
            și un graf static: FSDP1 înregistrează ordinea în care unitățile au rulat trecerea directă la
            prima iterație și preîncarcă după această ordine la toate iterațiile următoare. Un model a
            cărui ordine în trecerea directă se schimbă de la un pas la altul (un strat sărit pentru unele
            intrări, o ramură aleasă la rulare) colectează în avans unitatea greșită: memorie cheltuită,
            nimic ascuns, iar unitatea necesară este colectată târziu.

            Avansul procesorului are și un risc: un procesor mult înaintea GPU-ului ar putea lansa colectările
            multor unități înainte ca vreuna să fie eliberată, iar toate ar fi alocate deodată.
            `limit_all_gathers=True` este limitatorul de ritm al FSDP1 împotriva acestui lucru: procesorul
            așteaptă înainte de a lansa o colectare cât timp două colectări anterioare sunt încă ținute în
            memorie. În această rulare pe CPU firul nu o ia niciodată înainte (așteaptă în fiecare operație
            colectivă), așa că oprirea limitatorului nu a schimbat nimic: aceeași ordine, același vârf.
            Contează pe GPU-uri, unde procesorul este înainte.
            """,
        ),
        md(
            en="""
            ## 4. A slow interconnect, simulated

            What would the same step do on GPUs, where collectives run on their own stream? And on a
            machine whose GPUs talk over PCIe or a network instead of NVLink? The link between the GPUs,
            the **interconnect**, sets how long each collective takes. This laptop has no such link, so the answer here is *simulated*: `labkit.simulate`
            takes your measured step (each unit's compute time and the bytes of each collective, from
            the timeline) and schedules it again the way FSDP issues it on a GPU, with the collectives
            on one stream and their time from the ring algorithm's cost on the chosen link,
            `(N-1) × latency + (N-1)/N × bytes / bandwidth` for an all-gather or a reduce-scatter (an
            all-reduce takes twice the steps): N-1 ring steps, each paying the link's latency, and each
            rank's share of the bytes at the link's bandwidth.

            First, a test of the simulator against your run: replayed the way the CPU ran it (every
            collective blocking the thread) on a link as fast as gloo's measured one, it should land on
            the measured step. It is calibrated on this very run: each unit's forward and backward
            compute, the optimizer step, and the step time that no span covers (the loss, FSDP's own
            copies, Python between the hooks), which it charges as host time, all come from your
            timeline. So this match checks the bookkeeping; it is not a prediction. What the sections
            below change is the link only, and they assume the compute stays what you measured.
            """,
            ro="""
            ## 4. O legătură lentă între GPU-uri, simulată

            Ce ar face același pas pe GPU-uri, unde operațiile colective rulează pe propriul flux? Și pe
            o mașină ale cărei GPU-uri comunică prin PCIe sau printr-o rețea în loc de NVLink? Legătura
            dintre GPU-uri, **interconectarea (interconnect)**, stabilește cât durează fiecare operație
            colectivă. Acest laptop nu are o asemenea legătură, așa că răspunsul este aici
            *simulat*: `labkit.simulate` ia pasul vostru măsurat (durata de calcul a fiecărei unități și
            octeții fiecărei operații colective, din cronologie) și îl programează din nou așa cum îl
            lansează FSDP pe un GPU, cu operațiile colective pe un singur flux și cu durata lor dată de
            costul algoritmului în inel pe legătura aleasă, `(N-1) × latență + (N-1)/N × octeți / lățime de
            bandă` pentru o colectare completă sau o reducere cu distribuire (o reducere globală are de două
            ori mai multe etape): N-1 etape ale inelului, fiecare plătind latența legăturii, și partea de
            octeți a fiecărui rang, la lățimea de bandă a legăturii.

            Mai întâi, o probă a simulatorului față de rularea voastră: redat așa cum l-a rulat
            procesorul (fiecare operație colectivă blocând firul), pe o legătură la fel de rapidă ca cea
            măsurată pentru gloo, pasul simulat ar trebui să cadă pe cel măsurat. Simulatorul este
            calibrat pe chiar această rulare: calculul înainte și înapoi al fiecărei unități, pasul
            optimizatorului și timpul din pas pe care nu îl acoperă niciun interval (pierderea, copiile
            proprii ale FSDP, Python între cârlige), socotit ca timp al gazdei, vin toate din cronologia
            voastră. Potrivirea verifică deci socoteala; nu este o predicție. Secțiunile de mai jos
            schimbă doar legătura și presupun că timpul de calcul rămâne cel măsurat.
            """,
        ),
        code(
            """
            prof = simulate.profile_from_run(prefetch, config="BACKWARD_PRE")  # rank 0, its typical steps
            replay = simulate.compare_to_measured(prof)
            for key in ("measured_step_s", "simulated_step_s", "unattributed_s", "host_s"):
                print(f"{key:18} {replay[key] * 1e3:8.2f} ms")
            """
        ),
        md(
            en="""
            Now the GPU-like schedule on three real links. The table's first line says it: these
            numbers are simulated.
            """,
            ro="""
            Acum programarea de tip GPU, pe trei legături reale. Prima linie a tabelului o spune: aceste
            numere sunt simulate.
            """,
        ),
        code(
            """
            print(simulate.table(simulate.sweep(prof, links=["nvlink4", "pcie4", "ib100"]), source=prof.source))
            """
        ),
        md(
            en="""
            From a CPU run, almost nothing is exposed on any of them: the simulated step is the compute
            time. That is not because these links are fast, but because a CPU is slow: a block's
            backward takes milliseconds on it, against microseconds to gather a block of this size
            even over a 100 Gb/s network. What decides whether prefetching matters is the ratio of the
            two: how long a block's all-gather takes compared with the block's own backward compute. A
            GPU computes far faster than a laptop's CPU, so on GPUs the ratio is much larger for the
            same link, and a slow link can bring it to 1 or more. (From a GPU run, this table is
            already the real question.)

            So the next cell chooses links by that ratio instead of by name: `link_at(ratio)` is the
            bandwidth at which one block's all-gather takes `ratio` times the block's measured backward
            time, with no latency unless you pass one (`link_at(ratio, latency)`, section 5). It then
            simulates the three `backward_prefetch` settings on each.
            """,
            ro="""
            Pornind de la o rulare pe CPU, pe niciuna nu rămâne aproape nimic expus: pasul simulat este chiar
            timpul de calcul. Nu pentru că aceste legături ar fi rapide, ci pentru că un procesor este lent:
            trecerea inversă a unui bloc durează pe el milisecunde, față de microsecundele în care se colectează un
            bloc de această dimensiune chiar și printr-o rețea de 100 Gb/s. Ce decide dacă preîncărcarea
            contează este raportul dintre cele două: cât durează colectarea unui bloc față de calculul propriei
            lui treceri inverse. Un GPU calculează mult mai repede decât procesorul unui laptop, așa că pe
            GPU-uri raportul este mult mai mare pentru aceeași legătură, iar o legătură lentă îl poate duce la
            1 sau mai mult. (Pornind de la o rulare pe GPU, tabelul acesta este deja întrebarea reală.)

            De aceea celula următoare alege legăturile după acest raport, nu după nume: `link_at(ratio)`
            este lățimea de bandă la care colectarea unui bloc durează de `ratio` ori cât trecerea inversă
            măsurată a blocului, fără latență dacă nu i-o dați (`link_at(ratio, latency)`, secțiunea 5).
            Apoi simulează pe fiecare cele trei setări `backward_prefetch`.
            """,
        ),
        code(
            """
            block_backward = dict(prof.backward)["layers.0"]  # seconds, measured
            block_wire = prof.param_bytes["layers.0"] * (prof.world_size - 1) / prof.world_size  # bytes each rank sends


            def link_at(ratio, latency=0.0):  # latency: seconds per ring step, paid (N-1) times per collective
                return simulate.link(block_wire / (ratio * block_backward), latency)


            ratios = [0.1, 0.3, 1, 3]
            sims = {(ratio, pf): simulate.simulate(prof, link_at(ratio), backward_prefetch=pf)
                    for ratio in ratios for pf in simulate.PREFETCH}
            print(simulate.table(list(sims.values()), source=prof.source))
            """
        ),
        md(
            en="""
            Part of what is exposed happens in forward, and it is the same in every row of a ratio: these
            settings change backward only, and the first unit's all-gather can never be hidden. The rest
            is backward's, and there the settings part ways as the link gets slower. `None` pays most:
            each backward waits for its own gather, queued behind the previous reduce-scatter.
            `BACKWARD_POST` waits for the gather but not behind the reduce-scatter; `BACKWARD_PRE` runs the
            gather under the current block's backward. Neither prefetch setting is ever slower than
            `None` (the simulator's tests check this over random profiles and links). As the ratio passes 1
            no setting hides much any more: the step's collectives take longer than its compute, and in
            backward each block also has a reduce-scatter of the same size on the same stream, so the link
            sets the step time.

            The same two settings at ratio 1, side by side (the titles say *simulated*):
            """,
            ro="""
            O parte din ce rămâne expus se petrece în trecerea directă și este aceeași pe fiecare rând al unui
            raport: aceste setări schimbă doar trecerea inversă, iar colectarea primei unități nu poate fi
            ascunsă niciodată. Restul aparține trecerii inverse, iar acolo setările se despart pe măsură ce
            legătura devine mai lentă. `None` plătește cel mai mult: fiecare trecere inversă își așteaptă
            propria colectare, la coadă după reducerea anterioară. `BACKWARD_POST` așteaptă colectarea, dar nu în
            spatele reducerii; `BACKWARD_PRE` rulează colectarea sub trecerea inversă a blocului curent. Nicio
            setare cu preîncărcare nu este vreodată mai lentă decât `None` (testele simulatorului verifică asta
            pe profiluri și legături aleatoare). Când raportul trece de 1, nicio setare nu mai ascunde mare
            lucru: operațiile colective ale pasului durează mai mult decât calculul lui, iar în trecerea
            inversă fiecare bloc mai are și o reducere de aceeași dimensiune, pe același flux, așa că
            legătura dictează durata pasului.

            Aceleași două setări la raportul 1, una lângă alta (titlurile spun *simulat*):
            """,
        ),
        code(
            """
            timeline.plot_timelines({"BACKWARD_PRE": sims[(1, "BACKWARD_PRE")], "None": sims[(1, None)]})
            """
        ),
        md(
            en="""
            **Exercise 3.** Use the simulator yourself. On the link `slow = link_at(2)`, simulate the
            step with `backward_prefetch="BACKWARD_PRE"` and with `backward_prefetch=None`
            (`simulate.simulate(prof, slow, backward_prefetch=...)`; a result's `step_time` is in
            seconds). How many milliseconds per step does `BACKWARD_PRE` save? The check runs the same
            simulation on your profile.
            """,
            ro="""
            **Exercițiul 3.** Folosiți chiar voi simulatorul. Pe legătura `slow = link_at(2)`, simulați
            pasul cu `backward_prefetch="BACKWARD_PRE"` și cu `backward_prefetch=None`
            (`simulate.simulate(prof, slow, backward_prefetch=...)`; câmpul `step_time` al unui rezultat
            este în secunde). Câte milisecunde pe pas economisește `BACKWARD_PRE`? Verificarea rulează
            aceeași simulare pe profilul vostru.
            """,
        ),
        exercise(
            "slow = link_at(2)",
            solution="""
            with_pre = simulate.simulate(prof, slow, backward_prefetch="BACKWARD_PRE")
            without = simulate.simulate(prof, slow, backward_prefetch=None)
            saved_ms = (without.step_time - with_pre.step_time) * 1e3
            """,
            after='print(f"BACKWARD_PRE saves {saved_ms:.2f} ms per step (simulated)")',
        ),
        check('labkit.check("lesson4.saved_ms", saved_ms, profile=prof, link=slow)'),
        md(
            en="""
            ## 5. What to do about a slow link (simulated)

            The usual mistake on a machine with a slow link is to keep `FULL_SHARD` over every GPU of every
            node and hope that prefetching hides the rest. Past a ratio of 1 it cannot: the collectives take
            longer than the compute they should hide under. The answers change *what* crosses the slow link,
            or give the compute more time to hide it. The next cell asks the simulator about each, on the
            same measured step, as a what-if: 2 nodes of 8 GPUs, each rank with the same work as yours
            (data parallelism keeps the micro-batch per rank), the NVLink preset within a node and, between
            nodes, the slow link `link_at(2)`. Every step time in it is simulated.

            - **Latency.** A ring collective over N ranks takes N-1 steps (twice that for an all-reduce),
              and each step pays the link's latency before any byte arrives. The simulator's cost of one
              all-gather or reduce-scatter is `(N-1) × latency + (N-1)/N × bytes / bandwidth`: the same
              bytes spread over more ranks pay more latencies, and small units (a small `min_num_params`)
              pay them often.
            - **`SHARD_GRAD_OP`** (FSDP2: `reshard_after_forward=False`) keeps each unit gathered from its
              forward to its backward: no all-gather in backward, a third less traffic, for the memory of
              the whole model's parameters at the peak (lesson 2).
            - **bf16 all-gathers** (`MixedPrecision(param_dtype=torch.bfloat16)`, FSDP2:
              `MixedPrecisionPolicy(param_dtype=torch.bfloat16)`) halve every all-gather's bytes (lesson 5).
              The simulator keeps the measured compute; on a GPU, bf16 compute is also faster, which leaves
              *less* compute to hide the rest under.
            - **A larger micro-batch** doubles the compute of a step and leaves its bytes alone (an
              assumption: compute in proportion to the batch, `compute_scale=0.5`), so the same traffic
              hides under twice the work: compare the time per micro-batch. It costs activation memory.
            - **`HYBRID_SHARD`**, or in FSDP2 a 2-D mesh `(replicate, shard)` (HSDP): shard within each
              node of 8, over NVLink, and keep one copy per node. The all-gathers and reduce-scatters never
              leave the node; what crosses the network is one all-reduce of each rank's gradient shard
              with its replica on the other node. The price is memory: states are divided by 8, not 16.
            - **`reshard_after_forward=8`** (FSDP2 only; ZeRO++'s hpZ): after forward each unit is
              resharded over the 8 ranks of its node instead of freed to a 1/16 shard, so backward's
              all-gather stays within the node. It crosses the network as `SHARD_GRAD_OP` does, and holds
              1/8 of each unit between forward and backward. `labkit.simulate` has no option for it, so
              its row has bytes (from `comm.theory_bytes`) and no simulated time.

            The last column is the bytes per rank and step of the collectives that cross the slow link, from
            `labkit.comm.theory_bytes`: a ring that spans both nodes runs at the pace of its slowest hop, so
            all of its collectives count.
            """,
            ro="""
            ## 5. Ce e de făcut cu o legătură lentă (simulat)

            Greșeala obișnuită pe o mașină cu o legătură lentă este să păstrați `FULL_SHARD` pe toate
            GPU-urile tuturor nodurilor, în speranța că preîncărcarea ascunde restul. Dincolo de raportul 1
            nu mai poate: operațiile colective durează mai mult decât calculul sub care ar trebui să se
            ascundă. Soluțiile schimbă *ce* trece peste legătura lentă sau dau calculului mai mult timp ca
            s-o ascundă. Celula următoare întreabă simulatorul despre fiecare, pe același pas măsurat, ca
            ipoteză: 2 noduri a câte 8 GPU-uri, fiecare rang cu aceeași muncă precum al vostru
            (paralelismul de date păstrează micro-lotul pe rang), profilul NVLink în interiorul unui nod și,
            între noduri, legătura lentă `link_at(2)`. Fiecare durată a pasului din ea este simulată.

            - **Latența.** O operație colectivă în inel pe N ranguri are N-1 etape (de două ori mai multe
              pentru o reducere globală), iar fiecare etapă plătește latența legăturii înainte să ajungă
              vreun octet. Costul simulat al unei colectări complete sau al unei reduceri cu distribuire
              este `(N-1) × latență + (N-1)/N × octeți / lățime de bandă`: aceiași octeți împărțiți pe mai
              multe ranguri plătesc mai multe latențe, iar unitățile mici (un `min_num_params` mic) le
              plătesc des.
            - **`SHARD_GRAD_OP`** (FSDP2: `reshard_after_forward=False`) păstrează fiecare unitate
              colectată de la trecerea directă până la cea inversă: nicio colectare în trecerea inversă, cu o
              treime mai puțin trafic, în schimbul memoriei tuturor parametrilor modelului la vârf (lecția 2).
            - **Colectările în bf16** (`MixedPrecision(param_dtype=torch.bfloat16)`, în FSDP2
              `MixedPrecisionPolicy(param_dtype=torch.bfloat16)`) înjumătățesc octeții fiecărei colectări
              (lecția 5). Simulatorul păstrează calculul măsurat; pe un GPU calculul în bf16 este și el mai
              rapid, ceea ce lasă *mai puțin* calcul sub care să se ascundă restul.
            - **Un micro-lot mai mare** dublează calculul unui pas și lasă octeții neschimbați (o ipoteză:
              calcul proporțional cu lotul, `compute_scale=0.5`), așa că același trafic se ascunde sub de
              două ori mai multă muncă: comparați timpul pe micro-lot. Costă memorie de activări.
            - **`HYBRID_SHARD`** sau, în FSDP2, o grilă 2D `(replicate, shard)` (HSDP): fragmentare în
              interiorul fiecărui nod de 8, prin NVLink, și câte o copie pe nod. Colectările și reducerile
              cu distribuire nu ies niciodată din nod; prin rețea trece doar o reducere globală a
              fragmentului de gradient al fiecărui rang cu replica lui de pe celălalt nod. Prețul este
              memoria: stările se împart la 8, nu la 16.
            - **`reshard_after_forward=8`** (doar FSDP2; hpZ din ZeRO++): după trecerea directă, fiecare
              unitate este refragmentată pe cele 8 ranguri ale nodului ei, în loc să fie eliberată până la un
              fragment de 1/16, așa că și colectarea din trecerea inversă rămâne în nod. Prin rețea trece
              cât la `SHARD_GRAD_OP` și ține 1/8 din fiecare unitate între trecerea directă și cea inversă.
              `labkit.simulate` nu are o opțiune pentru el, așa că rândul lui are octeți (din
              `comm.theory_bytes`) și nu are timp simulat.

            Ultima coloană este numărul de octeți pe rang și pe pas ai operațiilor colective care trec peste
            legătura lentă, din `labkit.comm.theory_bytes`: un inel care se întinde pe ambele noduri merge în
            ritmul celei mai lente etape, așa că toate operațiile lui colective contează.
            """,
        ),
        code(
            """
            import dataclasses

            from labkit import comm

            nodes, per_node = 2, 8  # a what-if: the same per-rank step on 2 nodes of 8 GPUs
            network, nvlink = link_at(2), simulate.link("nvlink4")  # between nodes, within a node
            wide = dataclasses.replace(prof, world_size=nodes * per_node)
            bf16_gathers = dataclasses.replace(wide, param_bytes={u: b / 2 for u, b in wide.param_bytes.items()})
            psi = sum(wide.param_bytes.values()) / 4  # fp32 elements, as the run gathered them
            root = wide.param_bytes[wide.root] / 4  # FSDP1 gathers the root once (lesson 2)
            n = wide.world_size


            def crossing(strategy, dtype_bytes=4, shard=None):
                rows = comm.theory_bytes(psi, strategy, n, dtype_bytes, reduce_dtype_bytes=4,
                                         unsharded_root_params=root if strategy == "FULL_SHARD" else 0, shard_size=shard)
                return rows["all_reduce"]["wire_bytes"] if shard else comm.total(rows)


            fixes = [  # (setting, simulated result or None, micro-batches per step, bytes over the network)
                ("FULL_SHARD", simulate.simulate(wide, network), 1, crossing("FULL_SHARD")),
                ("FULL_SHARD, 20 µs/step", simulate.simulate(wide, link_at(2, latency=20e-6)), 1,
                 crossing("FULL_SHARD")),
                ("SHARD_GRAD_OP", simulate.simulate(wide, network, strategy="SHARD_GRAD_OP"), 1, crossing("SHARD_GRAD_OP")),
                ("param_dtype=bf16", simulate.simulate(bf16_gathers, network), 1, crossing("FULL_SHARD", dtype_bytes=2)),
                ("micro-batch x2", simulate.simulate(wide, network, compute_scale=0.5), 2, crossing("FULL_SHARD")),
                ("HYBRID_SHARD 2x8", simulate.simulate(wide, nvlink, strategy="HYBRID_SHARD", shard_size=per_node,
                                                       inter_link=network), 1, crossing("HYBRID_SHARD", shard=per_node)),
                ("reshard_after_forward=8", None, 1, crossing("SHARD_GRAD_OP")),
            ]
            show.table([
                {"fix": name, "sim_step_ms": r.step_time * 1e3 if r else "-", "sim_exposed_ms": r.exposed_comm * 1e3 if r else "-",
                 "sim_ms_per_batch": r.step_time * 1e3 / batches if r else "-", "slow_bytes": crossed}
                for name, r, batches, crossed in fixes
            ], units={"slow_bytes": "KiB"})
            """
        ),
        md(
            en="""
            Read the table from the last column. `SHARD_GRAD_OP`, bf16 all-gathers and hpZ each take a
            share off what crosses the network, and the simulated step shrinks with it; a larger
            micro-batch leaves the bytes alone but spreads them over twice the work, so the time per
            micro-batch falls. Latency adds little at these unit sizes: it grows with the number of
            collectives and of ranks, not with the bytes. HSDP is the one that changes the picture: with
            only a gradient all-reduce between the nodes, the network carries a small fraction of the
            bytes, and the step comes close to its compute. That is why multi-node FSDP runs shard within
            the node and replicate across nodes, and add bf16 and hpZ when the network still shows.
            """,
            ro="""
            Citiți tabelul începând cu ultima coloană. `SHARD_GRAD_OP`, colectările în bf16 și hpZ scad
            fiecare o parte din ce trece prin rețea, iar pasul simulat se scurtează odată cu ea; un micro-lot
            mai mare lasă octeții neschimbați, dar îi împarte la de două ori mai multă muncă, așa că timpul pe
            micro-lot scade. Latența adaugă puțin la aceste dimensiuni ale unităților: crește cu numărul de
            operații colective și de ranguri, nu cu octeții. HSDP este cea care schimbă tabloul: cu doar o
            reducere globală a gradienților între noduri, rețeaua poartă o mică parte din octeți, iar pasul
            se apropie de calculul lui. De aceea rulările FSDP pe mai multe noduri fragmentează în interiorul
            nodului și replică între noduri, apoi adaugă bf16 și hpZ dacă rețeaua încă se simte.
            """,
        ),
        md(
            en="""
            Any timeline, measured or simulated, can also be written as a Chrome trace and opened at
            [ui.perfetto.dev](https://ui.perfetto.dev) or `chrome://tracing`, where you can zoom into
            each span and read its bytes:
            """,
            ro="""
            Orice cronologie, măsurată sau simulată, poate fi scrisă și ca fișier de urmărire Chrome (Chrome trace) și
            deschisă la [ui.perfetto.dev](https://ui.perfetto.dev) sau în `chrome://tracing`, unde puteți
            mări fiecare interval și îi puteți citi octeții:
            """,
        ),
        code(
            """
            import os
            import tempfile

            trace_path = os.path.join(tempfile.mkdtemp(prefix="lesson4-"), "backward_pre.json")
            trace = timeline.to_chrome_trace(by_setting["BACKWARD_PRE"], trace_path)
            print(f"{len(trace['traceEvents'])} events written to {trace_path}")
            """
        ),
        md(
            en="""
            ## Recap

            - FSDP1 issues each unit's all-gather at a point set by `backward_prefetch`: `BACKWARD_PRE`
              before the current unit's backward, `BACKWARD_POST` after it, `None` only when the next
              unit needs it. `forward_prefetch` does the same in forward; `limit_all_gathers` stops a
              CPU that runs ahead from gathering too many units at once.
            - Prefetching reorders the step and leaves the result alone: your five runs gave the same loss.
            - Its price is memory: with `BACKWARD_PRE` one more block is gathered at the peak, which you
              measured and predicted (the root plus two blocks), and which is 1.6 GiB per GPU for a
              Llama-70B-sized block in bf16.
            - On CPU with gloo nothing overlaps; on GPUs it does. Simulated on your own measured step,
              prefetching hides communication while a block's all-gather takes less than its backward,
              and past that the link sets the step time: that is what a machine without NVLink feels.
            - Each ring collective also pays (N-1) latencies. Against a slow link, change what crosses it:
              HSDP (`HYBRID_SHARD`, a 2-D mesh) keeps the gathers inside the node, `SHARD_GRAD_OP`,
              bf16 all-gathers and `reshard_after_forward=int` (hpZ) cut the bytes, and a larger
              micro-batch gives the traffic more compute to hide under (all simulated here).

            Next, lesson 5: trading time for memory on purpose, with CPU offload and mixed precision.
            """,
            ro="""
            ## Recapitulare

            - FSDP1 lansează colectarea parametrilor fiecărei unități într-un moment ales de
              `backward_prefetch`: `BACKWARD_PRE` înaintea trecerii inverse a unității curente,
              `BACKWARD_POST` după ea, `None` abia când unitatea următoare are nevoie de ei.
              `forward_prefetch` face același lucru în trecerea directă; `limit_all_gathers` împiedică un
              procesor care o ia înainte să colecteze prea multe unități deodată.
            - Preîncărcarea reordonează pasul și lasă rezultatul neatins: cele cinci rulări ale voastre au
              dat aceeași pierdere.
            - Prețul ei este memoria: cu `BACKWARD_PRE`, la vârf este colectat un bloc în plus, lucru pe care
              l-ați măsurat și prezis (rădăcina plus două blocuri) și care înseamnă 1,6 GiB pe GPU pentru
              un bloc de dimensiunea Llama-70B, în bf16.
            - Pe CPU cu gloo nimic nu se suprapune; pe GPU-uri, da. Simulată pe propriul vostru pas
              măsurat, preîncărcarea ascunde comunicarea cât timp colectarea unui bloc durează mai puțin
              decât trecerea lui inversă, iar dincolo de acest punct legătura dictează durata pasului:
              asta simte o mașină fără NVLink.
            - Fiecare operație colectivă în inel mai plătește și (N-1) latențe. Împotriva unei legături
              lente, schimbați ce trece peste ea: HSDP (`HYBRID_SHARD`, o grilă 2D) ține colectările în
              interiorul nodului, `SHARD_GRAD_OP`, colectările în bf16 și `reshard_after_forward=int` (hpZ)
              reduc octeții, iar un micro-lot mai mare dă traficului mai mult calcul sub care să se ascundă
              (toate simulate aici).

            Urmează lecția 5: timp dat pe memorie, în mod deliberat, cu descărcarea pe CPU și precizia mixtă.
            """,
        ),
    ],
)
