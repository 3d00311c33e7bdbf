"""Lesson 3: wrap policies. No auto_wrap_policy (one giant unit) measured; size-based wrapping
and the choice of min_num_params against transformer_auto_wrap_policy; peak memory per unit."""

from labkit.course.cells import Lesson, check, code, md, parameters, setup
from labkit.course.rank_exercises import LESSON3 as RANK_EXERCISE

LESSON = Lesson(
    id="lesson3",
    file="03_wrap_policies",
    title={"en": "Lesson 3: wrap policies", "ro": "Lecția 3: politici de împachetare"},
    terms=("fsdp_unit", "wrap_policy", "peak_memory", "embedding"),
    cells=[
        md(
            en="""
            # Lesson 3: wrap policies

            Lesson 2 measured what FSDP keeps *between* steps: 1/N of everything. What a GPU must
            survive is the *peak* during the step, and there the answer depends on how the model was
            cut into units.

            **In this lesson you will**

            - learn what an FSDP unit is and why the peak holds whole units;
            - measure the common mistake, no `auto_wrap_policy`, and see what it loses at the peak: every
              parameter is whole there, as under DDP, while the gradient and optimizer shards stay 1/N;
            - compare `size_based_auto_wrap_policy`, and choose its `min_num_params`, with
              `transformer_auto_wrap_policy` on the `TransformerBlock`;
            - predict the peak's gathered parameters from the size of the units.
            """,
            ro="""
            # Lecția 3: politici de împachetare

            Lecția 2 a măsurat ce păstrează FSDP *între* pași: 1/N din tot. Ce trebuie să suporte un GPU
            este însă *vârful* din timpul pasului, iar acolo răspunsul depinde de felul în care modelul a
            fost tăiat în unități.

            **În această lecție veți**

            - afla ce este o unitate FSDP și de ce vârful conține unități întregi;
            - măsura greșeala obișnuită, lipsa unui `auto_wrap_policy`, și vedea ce pierde la vârf: acolo
              fiecare parametru este întreg, ca la DDP, în timp ce fragmentele gradienților și ale
              optimizatorului rămân 1/N;
            - compara `size_based_auto_wrap_policy`, alegându-i `min_num_params`, cu
              `transformer_auto_wrap_policy` pe `TransformerBlock`;
            - prezice parametrii colectați la vârf din dimensiunea unităților.
            """,
        ),
        parameters(nproc=2, backend="auto", model_size="small", steps=2, batch_size=2),
        setup("from labkit import memory_model as mm", "from labkit.course import show"),
        md(
            en="""
            ## 1. Units, and why the peak holds them whole

            An **FSDP unit** is a group of parameters that FSDP flattens into one flat parameter and
            gathers and frees together. Every `FullyShardedDataParallel` wrapper makes one unit, out of
            the parameters of its module that no inner wrapper has taken. The **wrap policy**
            (`auto_wrap_policy=`) decides which submodules get a wrapper of their own.

            To compute a unit, every rank must hold all of its parameters; in backward, all of its
            gradients too, until the reduce-scatter. So at the **peak memory** of a step a rank holds:

            - its shards of everything (what lesson 2 measured);
            - the unit(s) gathered at that moment: with backward prefetching, the one computing and the
              next one;
            - the activations of the batch.

            With no policy at all the whole model is *one* unit, gathered for the whole forward and
            backward: at the peak each rank holds every parameter whole, exactly like DDP, plus its
            shard, and in backward the whole model's unsharded gradients until the one reduce-scatter.
            What it does not lose is the rest: the gradient shards and the optimizer state stay 1/N, so
            the step still holds less than DDP's, just not by as much as it could. With one unit per `TransformerBlock` (what lesson 2 used), a unit is a layer. Here are
            the units of this lesson's model both ways (`labkit.memory_model` counts them from the
            configuration), and what a rank keeps sharded:
            """,
            ro="""
            ## 1. Unitățile și de ce vârful le conține întregi

            O **unitate FSDP (FSDP unit)** este un grup de parametri pe care FSDP îi aplatizează într-un
            singur parametru aplatizat și pe care îi colectează și îi eliberează împreună. Fiecare înveliș
            `FullyShardedDataParallel` face o unitate, din parametrii modulului său pe care nu i-a luat
            niciun înveliș interior. **Politica de împachetare (wrap policy)**, `auto_wrap_policy=`, decide
            care submodule primesc un înveliș propriu.

            Ca să calculeze o unitate, fiecare rang trebuie să-i țină toți parametrii; în trecerea inversă,
            și toți gradienții, până la reducerea cu distribuire. Așa că la **vârful de memorie (peak memory)**
            al unui pas, un rang ține:

            - fragmentele sale din toate (ce a măsurat lecția 2);
            - unitatea sau unitățile colectate în acel moment: cu preîncărcarea din trecerea inversă, cea care
              calculează și următoarea;
            - activările lotului.

            Fără nicio politică, întregul model este *o singură* unitate, colectată pe toată trecerea directă
            și cea inversă: la vârf fiecare rang ține toți parametrii întregi, exact ca DDP, plus fragmentul
            său, iar în trecerea inversă gradienții nefragmentați ai întregului model, până la singura
            reducere cu distribuire. Ce nu pierde este restul: fragmentele gradienților și stările
            optimizatorului rămân 1/N, așa că pasul ține tot mai puțin decât la DDP, doar nu atât de puțin
            cât ar putea. Cu câte o unitate pentru fiecare `TransformerBlock` (ce a folosit lecția 2), o unitate este
            un strat. Iată unitățile modelului lecției în ambele feluri (`labkit.memory_model` le numără din
            configurație) și ce păstrează fragmentat un rang:
            """,
        ),
        code(
            """
            from labkit.models import get_config

            cfg = get_config(model_size)
            n_params = cfg.num_params()
            rows = []
            for wrap in ("none", "block"):
                units = mm.unit_sizes(cfg, wrap)  # "block": the root first, then one unit per TransformerBlock
                sharded = mm.model_states(n_params, "FULL_SHARD", nproc, precision="fp32")
                rows.append({"policy": wrap, "units": len(units), "largest_unit": max(units), "params": sharded.params})
            show.say("n_params", model=model_size, n=n_params)
            show.table(rows, units={"params": "MiB"})
            """,
            pure=True,
        ),
        md(
            en="""
            ## 2. Two policies

            - `size_based_auto_wrap_policy(min_num_params=M)` walks the model from the root. It goes
              into a module only if the module holds at least `M` parameters not yet wrapped, wraps its
              children first, and then wraps the module itself if what is left in it still reaches `M`.
              (It never wraps a `ModuleList`, but it does go inside one.)
            - `transformer_auto_wrap_policy(transformer_layer_cls={TransformerBlock})` wraps every
              instance of the named classes, whatever their size: one unit per transformer layer, and
              the embeddings, final norm and output head in the root unit.

            The starting example (lesson 0) used `min_num_params=1e6`, a value meant for large models.
            To choose `M` for this model, look at how its parameters are distributed, on the meta device
            (shapes, no memory):
            """,
            ro="""
            ## 2. Două politici

            - `size_based_auto_wrap_policy(min_num_params=M)` parcurge modelul de la rădăcină. Intră într-un
              modul doar dacă acesta are cel puțin `M` parametri încă neîmpachetați, își împachetează întâi
              copiii și apoi împachetează modulul însuși dacă ce a rămas în el ajunge încă la `M`. (Nu
              împachetează niciodată un `ModuleList`, dar intră în el.)
            - `transformer_auto_wrap_policy(transformer_layer_cls={TransformerBlock})` împachetează fiecare
              instanță a claselor numite, oricât de mare ar fi: o unitate pentru fiecare strat transformer,
              iar încorporările (embedding), normalizarea finală și capul de ieșire în unitatea rădăcină.

            Exemplul de pornire (lecția 0) folosea `min_num_params=1e6`, o valoare gândită pentru modele
            mari. Ca să alegeți `M` pentru acest model, priviți cum îi sunt distribuiți parametrii, pe
            dispozitivul meta (doar forme, fără memorie):
            """,
        ),
        code(
            """
            import torch

            from labkit.models import TransformerLM

            with torch.device("meta"):
                meta_model = TransformerLM(cfg)
            block = meta_model.layers[0]
            sizes = {
                "model": meta_model,
                "layers[0]": block,
                "layers[0].attn": block.attn,
                "layers[0].ffn": block.ffn,
                "layers[0].ffn.w1": block.ffn.w1,
                "tok_embeddings": meta_model.tok_embeddings,
                "output": meta_model.output,
            }
            show.table([{"model": name, "n_params": sum(p.numel() for p in m.parameters())} for name, m in sizes.items()],
                       headers={"model": show.label("unit")})
            """,
            pure=True,
        ),
        md(
            en="""
            **Exercise 1.** Choose `min_num_params` so that `size_based_auto_wrap_policy` makes exactly
            the units of `transformer_auto_wrap_policy`: each `TransformerBlock` one unit, nothing
            inside a block wrapped on its own, the rest in the root. The run below wraps the model with
            your value, and the check compares the units FSDP made.
            """,
            ro="""
            **Exercițiul 1.** Alegeți `min_num_params` astfel încât `size_based_auto_wrap_policy` să facă
            exact unitățile lui `transformer_auto_wrap_policy`: fiecare `TransformerBlock` o unitate, nimic
            din interiorul unui bloc împachetat separat, restul în rădăcină. Rularea de mai jos împachetează
            modelul cu valoarea voastră, iar verificarea compară unitățile făcute de FSDP.
            """,
        ),
        code(
            """
            def choose_min_num_params(model):  # for any TransformerLM: the value that wraps exactly its blocks
                ### BEGIN SOLUTION
                block = model.layers[0]
                return max(sum(p.numel() for p in part.parameters()) for part in block.children()) + 1
                ### END SOLUTION


            my_min_num_params = choose_min_num_params(meta_model)
            """,
            pure=True,
        ),
        md(
            en="""
            ## 3. Measured: four ways to wrap the same model

            The cell wraps the model with several `min_num_params` values first, without training, to
            show how the choice changes the units. Then it trains `steps` steps (at least 2) under
            `FULL_SHARD` with four policies (none; the starting example's `1e6`; your value; the
            transformer policy). The first step runs under labkit's timeline, which notes when each unit
            is gathered and freed: from it, the most bytes of whole parameters held at any one moment.
            The last step runs under `labkit.memtrack`, which sorts every byte a rank holds into
            parameters (its shards), whole parameters (gathered units), gradients, optimizer state,
            activations and the rest, at the moment of the step's peak.
            """,
            ro="""
            ## 3. Măsurat: patru feluri de a împacheta același model

            Celula împachetează întâi modelul cu mai multe valori `min_num_params`, fără antrenare, ca să
            arate cum schimbă alegerea unitățile. Apoi antrenează `steps` pași (cel puțin 2) cu `FULL_SHARD`
            și patru politici (niciuna; valoarea `1e6` din exemplul de pornire; valoarea voastră; politica
            pentru transformer). Primul pas rulează sub cronologia labkit, care notează când este colectată și
            când este eliberată fiecare unitate: din ea, cei mai mulți octeți de parametri întregi ținuți în
            același moment. Ultimul pas rulează sub `labkit.memtrack`, care împarte fiecare octet ținut de un
            rang în parametri (fragmentele sale), parametri întregi (unități colectate), gradienți, stări ale
            optimizatorului, activări și restul, în momentul vârfului pasului.
            """,
        ),
        code(
            """
            %%torchrun -n $nproc --backend $backend --vars model_size,steps,batch_size,my_min_num_params
            import functools

            import torch
            from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
            from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy, transformer_auto_wrap_policy

            from labkit import comm, memtrack, rank, timeline
            from labkit.course.measure import peak_gathered
            from labkit.models import TransformerBlock, TransformerLM, get_config, synthetic_batch

            cfg = get_config(model_size)


            def wrapped(policy):
                torch.manual_seed(0)
                return FullyShardedDataParallel(TransformerLM(cfg), auto_wrap_policy=policy,
                                                sharding_strategy=ShardingStrategy.FULL_SHARD, device_id=rank.device())


            def size_based(m):
                return functools.partial(size_based_auto_wrap_policy, min_num_params=int(m))


            # how min_num_params changes the units (wrapping only)
            for m in (10_000, 50_000, 100_000, my_min_num_params, 1_000_000):
                rank.report(**{f"units_{int(m)}": comm.padded_units(wrapped(size_based(m)))})

            policies = {
                "none": None,
                "size_1e6": size_based(1e6),
                "size_yours": size_based(my_min_num_params),
                "transformer": functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={TransformerBlock}),
            }
            for name, policy in policies.items():
                model = wrapped(policy)
                optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                recorder = timeline.Recorder(model, optimizer)
                tracker = memtrack.track(model, optimizer, steps=[steps - 1], send=False)
                for step in rank.steps(steps):
                    inputs, targets = synthetic_batch(cfg, batch_size, step, rank.rank(), rank.device())
                    measured = recorder.step(step, send=False) if step == 0 else tracker.step(step)
                    with measured:
                        model(inputs, targets).backward()
                        optimizer.step()
                        optimizer.zero_grad()
                most = peak_gathered(recorder.spans, recorder.describe()["unit_bytes"])
                peak = next(m for m in tracker.results if m["phase"] == "peak")
                rank.report(**{name: {"units": comm.padded_units(model), "most_gathered": most, "peak": peak["categories"]}})
            rank.report(my_min_num_params=int(my_min_num_params))
            """
        ),
        code(
            """
            wrap_run = labkit.last_run
            v0 = wrap_run.values[0]
            show.table([{"min_num_params": int(key.split("_")[1]), "units": len(units), "largest_unit": max(units.values())}
                        for key, units in v0.items() if key.startswith("units_")])
            """
        ),
        md(
            en="""
            A small `min_num_params` cuts the model into many small units (each `Linear` on its own):
            many small collectives, each paying the link's latency. A large one leaves few, big units,
            and the biggest is what the peak has to hold. On the default model (`small`), `1e6` wraps
            nothing at all, the same as no policy; from `medium` up, its blocks are large enough to be
            wrapped.
            """,
            ro="""
            Un `min_num_params` mic taie modelul în multe unități mici (fiecare `Linear` separat): multe
            operații colective mici, fiecare plătind latența legăturii. Unul mare lasă puține unități, mari,
            iar cea mai mare este ce trebuie să țină vârful. Pe modelul implicit (`small`), `1e6` nu
            împachetează nimic, la fel ca lipsa unei politici; de la `medium` în sus, blocurile sunt destul
            de mari ca să fie împachetate.
            """,
        ),
        check('labkit.check("lesson3.min_num_params", choose_min_num_params, run=wrap_run)'),
        md(
            en="""
            Now each policy on rank 0: the most whole-parameter bytes held at one moment (timeline), then
            the step's peak by category (memtrack):
            """,
            ro="""
            Acum fiecare politică pe rangul 0: cei mai mulți octeți de parametri întregi ținuți în același
            moment (cronologia), apoi vârful pasului pe categorii (memtrack):
            """,
        ),
        code(
            """
            policies = ("none", "size_1e6", "size_yours", "transformer")
            categories = ("params", "params_unsharded", "grads", "optimizer", "activations", "other")
            rows = []
            for name in policies:
                v = v0[name]
                rows.append({"policy": name, "units": len(v["units"]), "peak_unsharded": v["most_gathered"],
                             **{c: v["peak"][c] for c in categories}, "peak": sum(v["peak"].values())})
            show.table(rows, units={c: "MiB" for c in ("peak_unsharded", *categories, "peak")},
                       headers={c: show.label(f"mm_{c}") for c in categories})
            """
        ),
        code(
            """
            import matplotlib.pyplot as plt

            fig, (ax_units, ax_peak) = plt.subplots(1, 2, figsize=(11, 3.8), constrained_layout=True)
            for i, name in enumerate(policies):
                sizes = list(v0[name]["units"].values())
                ax_units.bar([i + k / (len(sizes) + 1) for k in range(len(sizes))], [4 * s / 2**20 for s in sizes],
                             width=0.8 / (len(sizes) + 1), color="#aec7e8", edgecolor="#1f77b4")
                bottom = 0.0
                for c, color in zip(categories, ("#1f77b4", "#aec7e8", "#ff7f0e", "#2ca02c", "#d62728", "#7f7f7f")):
                    value = v0[name]["peak"][c] / 2**20
                    ax_peak.bar(i, value, bottom=bottom, color=color, label=show.label(f"mm_{c}") if i == 0 else None)
                    bottom += value
            for ax in (ax_units, ax_peak):
                ax.set_xticks(range(len(policies)), policies)
                ax.set_ylabel("MiB")
            ax_units.set_title(show.text("fig.unit_bytes"))
            ax_peak.set_title(show.text("fig.peak_by_category", rank=0))
            ax_peak.legend(fontsize="small")
            plt.show()
            """
        ),
        md(
            en="""
            Read the `peak gathered` column first. With no policy, and with `1e6`, it is the whole model
            in fp32, as under DDP, and the shards come on top of it: at the peak, sharding the parameters
            saved nothing. Sharding the optimizer state still did: the `optimizer` column is the same
            1/N in every row. With one unit per block it is three units, whatever the depth: FSDP keeps the
            root unit gathered from the end of forward until its gradients are reduced, and in backward,
            besides the block computing its gradients, it has already gathered the next one
            (`BackwardPrefetch.BACKWARD_PRE`, the default). The memtrack columns show where the peak
            lands: `whole params` is what was gathered at that moment, and the shards, optimizer state
            and the rest stay as they are, whatever the policy. At this batch size the peak is a good
            part parameters; with long sequences activations take over, and lesson 5 turns to them.

            **Exercise 2.** With no policy, how many bytes of whole parameters does a rank hold at most?
            Write it from `n_params` (fp32); the check compares it with the `none` run.
            """,
            ro="""
            Citiți întâi coloana `vârf colectat`. Fără politică, și cu `1e6`, ea este întregul model în fp32, ca
            la DDP, iar fragmentele vin pe deasupra: la vârf, fragmentarea parametrilor nu a economisit nimic.
            Fragmentarea stărilor optimizatorului a economisit în continuare: coloana `optimizator` este
            același 1/N pe fiecare rând.
            Cu câte o unitate pentru fiecare bloc sunt trei unități, oricât de adânc ar fi modelul: FSDP
            păstrează unitatea rădăcină colectată de la sfârșitul trecerii directe până îi sunt reduși
            gradienții, iar în trecerea inversă, pe lângă blocul care își calculează gradienții, l-a colectat
            deja pe următorul (`BackwardPrefetch.BACKWARD_PRE`, implicit). Coloanele memtrack arată unde cade
            vârful: `parametri întregi` este ce era colectat în acel moment, iar fragmentele, stările
            optimizatorului și restul rămân la fel, oricare ar fi politica. La acest lot vârful este în bună
            parte parametri; cu secvențe lungi activările trec în față, iar lecția 5 se ocupă de ele.

            **Exercițiul 2.** Fără politică, câți octeți de parametri întregi ține un rang cel mult? Scrieți-i
            din `n_params` (fp32); verificarea îi compară cu rularea `none`.
            """,
        ),
        code(
            """
            def none_gathered(n_params):
                ### BEGIN SOLUTION
                return 4 * n_params
                ### END SOLUTION
            """
        ),
        check('labkit.check("lesson3.none_gathered", none_gathered, run=wrap_run)'),
        md(
            en="""
            **Exercise 3.** With one unit per `TransformerBlock`, write the most whole-parameter bytes a
            rank holds at once, as a formula of the units the run made (`root` and `blocks` below, in
            elements; fp32). Which units are whole at that moment? The paragraph above says. The check
            compares your formula with the measurement.
            """,
            ro="""
            **Exercițiul 3.** Cu câte o unitate pentru fiecare `TransformerBlock`, scrieți cei mai mulți octeți
            de parametri întregi pe care îi ține un rang deodată, ca formulă a unităților făcute de rulare
            (`root` și `blocks` de mai jos, în elemente; fp32). Ce unități sunt întregi în acel moment?
            Paragraful de mai sus o spune. Verificarea compară formula voastră cu măsurătoarea.
            """,
        ),
        code(
            """
            def block_gathered(root_params, block_params):  # elements of the root and of one block
                ### BEGIN SOLUTION
                return 4 * (root_params + block_params + block_params)
                ### END SOLUTION
            """
        ),
        check('labkit.check("lesson3.block_gathered", block_gathered, run=wrap_run)'),
        *RANK_EXERCISE,
        md(
            en="""
            ## Recap

            - The wrap policy cuts the model into FSDP units; each unit is gathered whole to compute.
            - The peak holds the shards, the unit(s) gathered at that moment, and the activations.
            - No `auto_wrap_policy` makes one giant unit: at the peak every parameter is whole on every
              rank, as under DDP (the gradient and optimizer shards still stay 1/N). So does a
              `min_num_params` larger than the model's layers.
            - `transformer_auto_wrap_policy` on the `TransformerBlock` (or a `min_num_params` just above
              a layer's inner parts) gives one unit per layer, and the transient term becomes a few
              layers (the root and two blocks), whatever the depth of the model.

            Next, lesson 4: when FSDP issues each all-gather, and what prefetching costs and buys.
            """,
            ro="""
            ## Recapitulare

            - Politica de împachetare taie modelul în unități FSDP; fiecare unitate este colectată întreagă
              pentru calcul.
            - Vârful conține fragmentele, unitatea sau unitățile colectate în acel moment și activările.
            - Lipsa unui `auto_wrap_policy` face o singură unitate uriașă: la vârf fiecare parametru este
              întreg pe fiecare rang, ca la DDP (fragmentele gradienților și ale optimizatorului rămân totuși
              1/N). La fel face un `min_num_params` mai mare decât straturile modelului.
            - `transformer_auto_wrap_policy` pe `TransformerBlock` (sau un `min_num_params` puțin peste
              părțile interioare ale unui strat) dă câte o unitate pentru fiecare strat, iar termenul
              tranzitoriu devine câteva straturi (rădăcina și două blocuri), oricât de adânc ar fi modelul.

            Urmează lecția 4: când lansează FSDP fiecare colectare completă și ce costă și ce aduce
            preîncărcarea.
            """,
        ),
    ],
)
