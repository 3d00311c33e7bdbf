"""Lesson 2: ZeRO-3 sharding. ZeRO stages 1/2/3 and FSDP's ShardingStrategy side by side,
measured per rank at 1, 2 and 4 ranks against the formula; all-gather, reduce-scatter, and
the traffic they cost."""

from labkit.course.cells import Lesson, check, code, exercise, md, parameters, setup
from labkit.course.rank_exercises import LESSON2 as RANK_EXERCISE

LESSON = Lesson(
    id="lesson2",
    file="02_zero3_sharding",
    title={"en": "Lesson 2: ZeRO-3 sharding", "ro": "Lecția 2: fragmentarea ZeRO-3"},
    terms=("sharding", "shard", "all_gather", "reduce_scatter", "flat_parameter", "padding", "device_mesh", "traffic"),
    cells=[
        md(
            en="""
            # Lesson 2: ZeRO-3 sharding

            Lesson 1 ended at a wall: every DDP rank holds all 16 bytes of every parameter (mixed-precision
            AdamW, as the ZeRO paper counts them). ZeRO
            (Rajbhandari et al., 2020) removes the copies one kind at a time, and FSDP is PyTorch's
            implementation of its last stage.

            **In this lesson you will**

            - compute what ZeRO stages 1, 2 and 3 keep per GPU, and how FSDP's `ShardingStrategy`
              (FSDP1) and `fully_shard`'s `reshard_after_forward` (FSDP2) map onto them;
            - measure `NO_SHARD`, `SHARD_GRAD_OP`, `FULL_SHARD` and `HYBRID_SHARD`, and their FSDP2
              forms, on 1, 2 and 4 ranks and put the formula beside each measurement;
            - see what all-gather and reduce-scatter do to real tensors;
            - count the bytes each strategy sends per step, against the theory.
            """,
            ro="""
            # Lecția 2: fragmentarea ZeRO-3

            Lecția 1 s-a încheiat la un zid: fiecare rang DDP ține toți cei 16 octeți ai fiecărui
            parametru (AdamW în precizie mixtă, socotiți ca în articolul ZeRO). ZeRO (Rajbhandari et al., 2020) elimină copiile, câte un fel pe rând, iar FSDP este
            implementarea PyTorch a ultimei sale etape.

            **În această lecție veți**

            - calcula ce păstrează pe fiecare GPU etapele ZeRO 1, 2 și 3 și cum li se potrivesc
              `ShardingStrategy` (FSDP1) și `reshard_after_forward` din `fully_shard` (FSDP2);
            - măsura `NO_SHARD`, `SHARD_GRAD_OP`, `FULL_SHARD` și `HYBRID_SHARD`, împreună cu formele lor
              FSDP2, pe 1, 2 și 4 ranguri, cu formula alături de fiecare măsurătoare;
            - vedea ce fac all-gather și reduce-scatter cu tensori reali;
            - număra octeții pe care fiecare strategie îi trimite la fiecare pas, comparați cu teoria.
            """,
        ),
        parameters(nproc=2, backend="auto", model_size="small", steps=2),
        setup("from labkit import memory_model as mm", "from labkit.course import measure, show"),
        md(
            en="""
            ## 1. ZeRO: three things to shard

            **Sharding** a tensor over N ranks means splitting it into N equal pieces, **shards**, and
            giving each rank one. Data parallelism keeps three kinds of per-parameter state (lesson 1);
            ZeRO shards them in stages. With Ψ parameters, N ranks and mixed-precision AdamW (2 bytes
            of weights, 2 of gradients, K = 12 of optimizer state per parameter), one rank holds:

            | ZeRO stage | sharded | bytes per rank |
            |---|---|---|
            | 0 (DDP) | nothing | (2 + 2 + K) Ψ |
            | 1 | optimizer state | (2 + 2) Ψ + K Ψ / N |
            | 2 | optimizer state, gradients | 2 Ψ + (2 + K) Ψ / N |
            | 3 | optimizer state, gradients, parameters | (2 + 2 + K) Ψ / N |

            Only stage 3 divides everything by N. `labkit.memory_model` computes these formulas; here
            they are for the ZeRO paper's own example, 7.5 billion parameters on 64 GPUs (the paper's
            Figure 1 shows 120, 31.4, 16.6 and 1.9 GB).
            """,
            ro="""
            ## 1. ZeRO: trei lucruri de fragmentat

            A **fragmenta (sharding)** un tensor pe N ranguri înseamnă a-l împărți în N bucăți egale,
            **fragmente (shard)**, și a da fiecărui rang câte una. Paralelismul de date păstrează trei feluri
            de stări pentru fiecare parametru (lecția 1); ZeRO le fragmentează în etape. Cu Ψ parametri, N
            ranguri și AdamW în precizie mixtă (2 octeți de ponderi, 2 de gradienți și K = 12 de stări ale
            optimizatorului, pentru fiecare parametru), un rang ține:

            | etapa ZeRO | ce se fragmentează | octeți pe rang |
            |---|---|---|
            | 0 (DDP) | nimic | (2 + 2 + K) Ψ |
            | 1 | stările optimizatorului | (2 + 2) Ψ + K Ψ / N |
            | 2 | stările optimizatorului, gradienții | 2 Ψ + (2 + K) Ψ / N |
            | 3 | stările optimizatorului, gradienții, parametrii | (2 + 2 + K) Ψ / N |

            Doar etapa 3 împarte totul la N. `labkit.memory_model` calculează aceste formule; iată-le
            pentru exemplul din articolul ZeRO, 7,5 miliarde de parametri pe 64 de GPU-uri (Figura 1 din
            articol arată 120, 31,4, 16,6 și 1,9 GB).
            """,
        ),
        code(
            """
            paper_params, paper_gpus = 7.5e9, 64
            print(mm.strategy_table(paper_params, paper_gpus))
            """,
            pure=True,
        ),
        md(
            en="""
            **Exercise 1.** Write the ZeRO-1 formula yourself for `paper_params` parameters on
            `paper_gpus` GPUs (mixed-precision AdamW, K = 12), in bytes.
            """,
            ro="""
            **Exercițiul 1.** Scrieți chiar voi formula ZeRO-1 pentru `paper_params` parametri pe
            `paper_gpus` GPU-uri (AdamW în precizie mixtă, K = 12), în octeți.
            """,
        ),
        code(
            """
            def zero1_bytes(n_params, world_size):  # bytes per GPU, any model, any GPUs
                ### BEGIN SOLUTION
                return (2 + 2) * n_params + 12 * n_params / world_size
                ### END SOLUTION


            print(f"{zero1_bytes(paper_params, paper_gpus) / 1e9:.1f} GB")
            """,
            pure=True,
        ),
        check('labkit.check("lesson2.zero1_bytes", zero1_bytes)'),
        md(
            en="""
            **Exercise 2.** And ZeRO-3, for the same model and GPUs.
            """,
            ro="""
            **Exercițiul 2.** Și ZeRO-3, pentru același model și aceleași GPU-uri.
            """,
        ),
        code(
            """
            def zero3_bytes(n_params, world_size):
                ### BEGIN SOLUTION
                return (2 + 2 + 12) * n_params / world_size
                ### END SOLUTION


            print(f"{zero3_bytes(paper_params, paper_gpus) / 1e9:.1f} GB")
            """,
            pure=True,
        ),
        check('labkit.check("lesson2.zero3_bytes", zero3_bytes)'),
        md(
            en="""
            ## 2. FSDP's sharding strategies

            FSDP does not shard parameter by parameter. It groups the parameters of each *unit*
            (lesson 3) and flattens them into one 1-D tensor, a **flat parameter**, which it pads with
            a few zeros (**padding**) so that it splits into N equal shards. Each rank keeps its shard
            of the flat parameter, of its gradient and of the optimizer state built on it. To compute,
            a unit's shards are put back together for a moment; the `ShardingStrategy` says for how long.

            That is **FSDP1**, `FullyShardedDataParallel`, the API of the course's starting example.
            PyTorch now teaches **FSDP2**: `fully_shard(module, mesh=...)`, called on each block and then
            on the root. It flattens nothing (each parameter becomes a DTensor, sharded by rows, padded
            per parameter), and one argument, `reshard_after_forward`, takes the place of most
            strategies:

            | FSDP1 `ShardingStrategy` | FSDP2 `fully_shard(...)` | ZeRO | between steps | during the step |
            |---|---|---|---|---|
            | `NO_SHARD` (legacy, warns) | none: use DDP | 0 (DDP) | everything whole | everything whole |
            | `SHARD_GRAD_OP` | `reshard_after_forward=False` | 2 | shards | each unit stays gathered from its forward to its backward |
            | `FULL_SHARD` | `reshard_after_forward=True` | 3 | shards | each unit is gathered for its forward, freed, gathered again for its backward |
            | `HYBRID_SHARD` | a 2-D mesh `(replicate, shard)` | 3 within a group | shards of a group's copy | as `FULL_SHARD`, within the group |
            | none | `reshard_after_forward=k` (an int) | 3, ZeRO++ hpZ | shards | after forward, each unit keeps a shard of a group of k ranks; backward gathers it within that group |

            FSDP1 is legacy: the documentation calls it deprecated. The torch this course runs (2.13)
            builds it without a warning, but `NO_SHARD` warns: *"FutureWarning: The `NO_SHARD` sharding
            strategy is deprecated. If having issues, please use `DistributedDataParallel` instead."*
            For the root, the one unit whose backward starts right after its forward, the `fully_shard`
            documentation advises `reshard_after_forward=False`; the code below sets it so, and sets
            every other unit explicitly too, because the default changed between releases.

            `HYBRID_SHARD` shards inside a group of ranks (on GPUs, a node, whose links are fast) and
            keeps one copy per group. It needs a **device mesh**: the ranks arranged in a 2-D array,
            one dimension to replicate over and one to shard over. On the CPU it must be given
            explicitly. Without one, FSDP1 sizes the group from the GPUs it sees, none on a CPU, and
            falls back to `NO_SHARD`; it says so only in a warning that is easy to miss: *"UserWarning:
            FSDP is switching to use `NO_SHARD` instead of ShardingStrategy.HYBRID_SHARD since the world
            size is 1."* (with manual wrapping and no mesh it refuses with a `ValueError` instead).

            At rest, FSDP's `SHARD_GRAD_OP` keeps the same shards as `FULL_SHARD`; the difference is
            how long the gathered units live during the step. That is why the measurement below has
            two parts: the states between steps, and the most parameter bytes held whole at any moment
            of the step (from labkit's timeline, which records when each unit is gathered and freed).
            """,
            ro="""
            ## 2. Strategiile de fragmentare ale FSDP

            FSDP nu fragmentează parametru cu parametru. Grupează parametrii fiecărei *unități* (lecția 3)
            și îi aplatizează într-un singur tensor 1D, un **parametru aplatizat (flat parameter)**, pe care
            îl completează cu câteva zerouri, prin **umplere (padding)**, ca să se împartă în N fragmente
            egale. Fiecare rang își păstrează fragmentul din parametrul aplatizat, din gradientul lui și din
            stările optimizatorului construite pe el. Pentru calcul, fragmentele unei unități sunt puse la
            loc pentru o clipă; `ShardingStrategy` spune pentru cât timp.

            Aceasta este **FSDP1**, `FullyShardedDataParallel`, interfața exemplului de pornire al
            cursului. PyTorch predă acum **FSDP2**: `fully_shard(module, mesh=...)`, apelat pe fiecare bloc
            și apoi pe rădăcină. Nu aplatizează nimic (fiecare parametru devine un DTensor, fragmentat pe
            rânduri, completat pentru fiecare parametru în parte), iar un singur argument,
            `reshard_after_forward`, ține locul majorității strategiilor:

            | `ShardingStrategy` FSDP1 | `fully_shard(...)` FSDP2 | ZeRO | între pași | în timpul pasului |
            |---|---|---|---|---|
            | `NO_SHARD` (moștenit, avertizează) | niciuna: folosiți DDP | 0 (DDP) | totul întreg | totul întreg |
            | `SHARD_GRAD_OP` | `reshard_after_forward=False` | 2 | fragmente | fiecare unitate rămâne colectată de la trecerea directă până la cea inversă |
            | `FULL_SHARD` | `reshard_after_forward=True` | 3 | fragmente | fiecare unitate e colectată pentru trecerea directă, eliberată și colectată din nou pentru cea inversă |
            | `HYBRID_SHARD` | o grilă 2D `(replicate, shard)` | 3 într-un grup | fragmentele copiei grupului | ca `FULL_SHARD`, în interiorul grupului |
            | niciuna | `reshard_after_forward=k` (un întreg) | 3, hpZ din ZeRO++ | fragmente | după trecerea directă, fiecare unitate păstrează un fragment al unui grup de k ranguri; trecerea inversă o colectează în acel grup |

            FSDP1 este o interfață moștenită: documentația o declară învechită. Versiunea de torch a
            cursului (2.13) o construiește fără avertisment, dar `NO_SHARD` avertizează: *„FutureWarning:
            The `NO_SHARD` sharding strategy is deprecated. If having issues, please use
            `DistributedDataParallel` instead.”* Pentru rădăcină, singura unitate a cărei trecere inversă
            începe imediat după cea directă, documentația `fully_shard` recomandă
            `reshard_after_forward=False`; codul de mai jos o setează așa și setează explicit și celelalte
            unități, pentru că valoarea implicită s-a schimbat de la o versiune la alta.

            `HYBRID_SHARD` fragmentează în interiorul unui grup de ranguri (pe GPU-uri, un nod, cu legături
            rapide) și păstrează câte o copie pentru fiecare grup. Are nevoie de o **grilă de dispozitive
            (device mesh)**: rangurile așezate într-un tablou 2D, cu o dimensiune pe care se replică și una
            pe care se fragmentează. Pe CPU trebuie dată explicit. Fără ea, FSDP1 calculează mărimea
            grupului din GPU-urile pe care le vede, niciunul pe un CPU, și revine la `NO_SHARD`; o spune
            doar într-un avertisment ușor de ratat: *„UserWarning: FSDP is switching to use `NO_SHARD`
            instead of ShardingStrategy.HYBRID_SHARD since the world size is 1.”* (cu împachetare manuală
            și fără grilă refuză în schimb, cu un `ValueError`).

            Între pași, `SHARD_GRAD_OP` din FSDP păstrează aceleași fragmente ca `FULL_SHARD`; diferența
            este cât trăiesc unitățile colectate în timpul pasului. De aceea măsurătoarea de mai jos are două
            părți: stările dintre pași și cei mai mulți octeți de parametri ținuți întregi în orice moment al
            pasului (din cronologia labkit, care înregistrează când este colectată și când este eliberată
            fiecare unitate).
            """,
        ),
        md(
            en="""
            ## 3. Measured at 1, 2 and 4 ranks

            `sweep` runs on every rank. For each strategy it builds the model (the same seed on every
            rank), wraps it with one FSDP unit per `TransformerBlock` (FSDP1: `ModuleWrapPolicy`; FSDP2:
            `fully_shard` on each block, then on the root), trains `steps` steps with the timeline
            recording, and reports this rank's bytes of parameters, gradients and optimizer state
            (`numel() * element_size()` of the tensors, as in lesson 1; for FSDP2's DTensors, of this
            rank's local rows), the peak of whole parameters, and the sizes of FSDP's units.
            """,
            ro="""
            ## 3. Măsurat pe 1, 2 și 4 ranguri

            `sweep` rulează pe fiecare rang. Pentru fiecare strategie construiește modelul (aceeași sămânță
            pe toate rangurile), îl împachetează cu câte o unitate FSDP pentru fiecare `TransformerBlock`
            (FSDP1: `ModuleWrapPolicy`; FSDP2: `fully_shard` pe fiecare bloc, apoi pe rădăcină), antrenează
            `steps` pași înregistrând cronologia și raportează octeții de parametri, gradienți și stări ale
            optimizatorului ai acestui rang (însumează `numel() * element_size()` al tensorilor, ca în
            lecția 1; pentru DTensor-ii FSDP2, al rândurilor locale ale acestui rang), vârful de parametri
            întregi și dimensiunile unităților FSDP.
            """,
        ),
        code(
            """
            FSDP2_AS = {"fully_shard(True)": "FULL_SHARD", "fully_shard(False)": "SHARD_GRAD_OP", "fully_shard(2-D)": "HYBRID_SHARD"}


            def sweep(model_size, steps, strategies):
                import torch
                from torch.distributed.device_mesh import init_device_mesh
                from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy, fully_shard
                from torch.distributed.fsdp.wrap import ModuleWrapPolicy

                from labkit import comm, rank, timeline
                from labkit.course.measure import peak_gathered
                from labkit.models import TransformerBlock, TransformerLM, get_config, synthetic_batch

                def mesh_for(strategy):
                    n, device = rank.world_size(), rank.device().type
                    if strategy == "HYBRID_SHARD":  # shard within groups of 2 ranks, replicate across the groups
                        return init_device_mesh(device, (n // 2, 2), mesh_dim_names=("replicate", "shard"))
                    return init_device_mesh(device, (n,), mesh_dim_names=("shard",))

                def fsdp1(strategy):  # the seed's API: one wrapper per block, chosen by a policy
                    return FullyShardedDataParallel(
                        TransformerLM(cfg),
                        sharding_strategy=ShardingStrategy[strategy],
                        auto_wrap_policy=ModuleWrapPolicy({TransformerBlock}),
                        device_id=rank.device(),
                        device_mesh=mesh_for(strategy) if strategy == "HYBRID_SHARD" else None,
                    )

                def fsdp2(strategy):  # fully_shard on each block, then on the root
                    model, mesh = TransformerLM(cfg).to(rank.device()), mesh_for(strategy)
                    for block in model.layers:
                        fully_shard(block, mesh=mesh, reshard_after_forward=strategy != "SHARD_GRAD_OP")
                    return fully_shard(model, mesh=mesh, reshard_after_forward=False)  # the root: the docs advise False

                def local_bytes(tensors):  # a DTensor's numel() is the whole tensor's: count this rank's rows
                    return sum(t.to_local().numel() * t.element_size() if hasattr(t, "to_local") else t.numel() * t.element_size()
                               for t in tensors if t is not None)

                cfg = get_config(model_size)
                for name in strategies:
                    torch.manual_seed(0)
                    model = fsdp2(FSDP2_AS[name]) if name in FSDP2_AS else fsdp1(name)
                    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
                    recorder = timeline.Recorder(model, optimizer)
                    for step in range(steps):
                        inputs, targets = synthetic_batch(cfg, 8, step, rank.rank(), rank.device())
                        with recorder.step(step, config=name):  # also counts the step's collectives
                            model(inputs, targets).backward()
                            optimizer.step()
                        if step < steps - 1:
                            optimizer.zero_grad()  # the last step keeps its gradients, to be measured
                    peak = peak_gathered(recorder.spans, recorder.describe()["unit_bytes"])
                    params = list(model.parameters())
                    state = {"params": local_bytes(params), "grads": local_bytes(p.grad for p in params),
                             "optim": local_bytes(v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v))}
                    rank.report(**{name: {**state, "peak": peak, "units": comm.padded_units(model)}})
            """
        ),
        md(
            en="""
            One run per world size. At 1 rank there is nothing to shard (FSDP runs `NO_SHARD` and says
            so); `HYBRID_SHARD` needs at least two groups of two, so it joins at 4 ranks.
            """,
            ro="""
            O rulare pentru fiecare număr de ranguri. Pe un rang nu e nimic de fragmentat (FSDP rulează
            `NO_SHARD` și o spune); `HYBRID_SHARD` are nevoie de cel puțin două grupuri de câte două ranguri,
            așa că apare de la 4 ranguri.
            """,
        ),
        code(
            """
            world_sizes = sorted({1, 2, 4, nproc})


            def strategies_for(n):
                if n == 1:
                    return ["FULL_SHARD"]
                hybrid = n >= 4 and n % 2 == 0
                fsdp1 = ["NO_SHARD", "SHARD_GRAD_OP", "FULL_SHARD"] + (["HYBRID_SHARD"] if hybrid else [])
                fsdp2 = ["fully_shard(False)", "fully_shard(True)"] + (["fully_shard(2-D)"] if hybrid else [])
                return fsdp1 + fsdp2


            runs = {}
            for n in world_sizes:
                options = {"model_size": model_size, "steps": steps, "strategies": strategies_for(n)}
                runs[n] = labkit.torchrun(sweep, nproc=n, backend=backend, kwargs=options, quiet=True)
                show.say("ran", nproc=n, seconds=runs[n].wall_time)
            """
        ),
        md(
            en="""
            For each strategy and world size: rank 0's measured bytes, the formula
            (`mm.model_states`, fp32 AdamW as these runs train, in FSDP's layout) and their ratio,
            then the peak of parameters held whole during the step.
            """,
            ro="""
            Pentru fiecare strategie și număr de ranguri: octeții măsurați pe rangul 0, formula
            (`mm.model_states`, AdamW în fp32, cum antrenează aceste rulări, în organizarea FSDP) și
            raportul lor, apoi vârful de parametri ținuți întregi în timpul pasului.
            """,
        ),
        code(
            """
            from labkit.models import get_config

            n_params = get_config(model_size).num_params()
            rows = []
            for n, run in runs.items():
                for name, v in run.values[0].items():
                    state = v["params"] + v["grads"] + v["optim"]
                    strategy = FSDP2_AS.get(name, name)  # the FSDP1 strategy an FSDP2 setting stands for
                    group = 2 if strategy == "HYBRID_SHARD" else None
                    formula = mm.model_states(n_params, strategy, n, precision="fp32", convention="torch", shard_group_size=group)
                    rows.append({"strategy": name, "ranks": n, "params": v["params"], "grads": v["grads"], "optim": v["optim"],
                                 "state": state, "formula": formula.model_states, "ratio": state / formula.model_states,
                                 "peak_unsharded": v["peak"]})
            show.say("n_params", model=model_size, n=n_params)
            show.table(rows, units={c: "MiB" for c in ("params", "grads", "optim", "state", "formula", "peak_unsharded")})
            """
        ),
        md(
            en="""
            Read the table by columns. Under `NO_SHARD` a rank holds the whole state at any world size,
            as DDP does. Under `FULL_SHARD` the state per rank falls as 1/N, and the ratio stays at 1:
            the formula is what the ranks hold, up to FSDP's padding and AdamW's step counters (a
            4-byte number per flat parameter). One strategy rests exactly where `FULL_SHARD` does, yet
            holds the whole model at its peak: exercise 4 asks which.
            `HYBRID_SHARD` with groups of 2 divides by 2, not by N. The peak under `FULL_SHARD` is a few
            units, not the model: that is what lesson 3 is about. Each `fully_shard` row sits beside the
            FSDP1 strategy it stands for, and the same formula holds for it: FSDP2 pads each parameter
            instead of each flat parameter, and AdamW keeps a 4-byte step counter per parameter tensor
            instead of one per flat parameter, so its optimizer column differs from FSDP1's by those counters.

            **Exercise 3.** With the formula, write the bytes of model state one rank holds under
            `FULL_SHARD` on 4 ranks, for this model in fp32 AdamW (`n_params` parameters). The check
            compares it with what rank 0 of the 4-rank run measured.
            """,
            ro="""
            Citiți tabelul pe coloane. Cu `NO_SHARD` un rang ține toată starea, oricâte ranguri ar fi,
            exact ca DDP. Cu `FULL_SHARD` starea pe rang scade ca 1/N, iar raportul rămâne 1: formula
            este ce țin rangurile, până la umplerea FSDP și contoarele de pași ale AdamW (un număr de 4
            octeți pentru fiecare parametru aplatizat). O strategie ocupă între pași exact cât `FULL_SHARD`,
            dar la vârf ține întregul model: exercițiul 4 întreabă care. `HYBRID_SHARD` cu grupuri de câte 2
            împarte la 2, nu la N.
            Vârful cu `FULL_SHARD` înseamnă câteva unități, nu întregul model: despre asta este lecția 3.
            Fiecare rând `fully_shard` stă lângă strategia FSDP1 pe care o înlocuiește, iar aceeași formulă
            este valabilă și pentru el: FSDP2 completează fiecare parametru în loc de fiecare parametru
            aplatizat, iar AdamW ține un contor de pași de 4 octeți pentru fiecare tensor de parametri, nu
            pentru fiecare parametru aplatizat, așa că coloana optimizatorului diferă de cea FSDP1 prin aceste
            contoare.

            **Exercițiul 3.** Cu formula, scrieți câți octeți de stări ale modelului ține un rang cu
            `FULL_SHARD` pe 4 ranguri, pentru acest model cu AdamW în fp32 (`n_params` parametri).
            Verificarea îi compară cu ce a măsurat rangul 0 al rulării pe 4 ranguri.
            """,
        ),
        code(
            """
            def full_shard_bytes(n_params, world_size):  # fp32 AdamW under FULL_SHARD
                ### BEGIN SOLUTION
                return (4 + 4 + 8) * n_params / world_size
                ### END SOLUTION
            """
        ),
        check('labkit.check("lesson2.full_shard_rank_bytes", full_shard_bytes, run=runs[4])'),
        md(
            en="""
            **Exercise 4.** Which strategy holds, between steps, as little as `FULL_SHARD`, yet holds
            the whole model's parameters at the peak of its step? Give its name as a string.
            """,
            ro="""
            **Exercițiul 4.** Care strategie ține între pași la fel de puțin ca `FULL_SHARD`, dar ține
            parametrii întregului model la vârful pasului? Dați-i numele ca șir de caractere.
            """,
        ),
        exercise(solution='same_rest_full_peak = "SHARD_GRAD_OP"', pure=True),
        check('labkit.check("lesson2.same_rest_full_peak", same_rest_full_peak)'),
        md(
            en="""
            ## 4. All-gather and reduce-scatter

            FSDP moves data with two **collectives**:

            - **all-gather**: every rank gives its shard; every rank receives all of them, put together
              in rank order. FSDP gathers a unit's parameters this way before computing with them.
            - **reduce-scatter**: every rank gives a full-size tensor; the tensors are summed, and rank
              `r` receives only shard `r` of the sum. FSDP reduces a unit's gradients this way: each rank
              ends up with the summed gradient of exactly the shard it owns.

            An all-reduce (what DDP uses) is a reduce-scatter followed by an all-gather. The next cell
            does both on small tensors you can read.
            """,
            ro="""
            ## 4. All-gather și reduce-scatter

            FSDP mută datele cu două **operații colective**:

            - **colectarea completă (all-gather)**: fiecare rang își dă fragmentul; fiecare rang le primește
              pe toate, lipite în ordinea rangurilor. Așa colectează FSDP parametrii unei unități înainte de a
              calcula cu ei.
            - **reducerea cu distribuire (reduce-scatter)**: fiecare rang dă un tensor de dimensiune
              completă; tensorii sunt însumați, iar rangul `r` primește doar fragmentul `r` al sumei. Așa
              reduce FSDP gradienții unei unități: fiecare rang rămâne cu gradientul însumat exact al
              fragmentului pe care îl deține.

            O reducere globală (all-reduce, ce folosește DDP) este o reducere cu distribuire urmată de o
            colectare completă. Celula următoare le face pe amândouă, pe tensori mici pe care îi puteți citi.
            """,
        ),
        code(
            """
            %%torchrun -n $nproc --backend $backend --quiet
            import torch
            import torch.distributed as dist

            from labkit import rank

            r, n, device = rank.rank(), rank.world_size(), rank.device()

            shard = torch.tensor([10.0 * r, 10.0 * r + 1], device=device)  # rank r's shard: two numbers
            gathered = torch.empty(2 * n, device=device)
            dist.all_gather_into_tensor(gathered, shard)  # every rank: all the shards, in rank order

            full = torch.arange(2.0 * n, device=device) + r  # every rank: a full-size tensor, offset by its rank
            mine = torch.empty(2, device=device)
            dist.reduce_scatter_tensor(mine, full)  # the sum over ranks; rank r keeps elements 2r and 2r + 1

            rank.report(shard=shard.tolist(), gathered=gathered.tolist(), full=full.tolist(), mine=mine.tolist())
            """
        ),
        code(
            """
            demo = labkit.last_run
            show.table([{"rank": r, **demo.values[r]} for r in range(demo.nproc)])
            """
        ),
        md(
            en="""
            **Exercise 5.** Predict, as a formula of `world_size`, the two numbers rank 0 holds after the
            reduce-scatter (a list of two numbers). Rank `q` put `[q, 1 + q, 2 + q, ...]` in.
            """,
            ro="""
            **Exercițiul 5.** Preziceți, ca formulă de `world_size`, cele două numere pe care le ține
            rangul 0 după reducerea cu distribuire (o listă de două numere). Rangul `q` a pus
            `[q, 1 + q, 2 + q, ...]`.
            """,
        ),
        code(
            """
            def rank0_after(world_size):
                ### BEGIN SOLUTION
                return [0 * world_size + sum(range(world_size)), 1 * world_size + sum(range(world_size))]
                ### END SOLUTION


            print(rank0_after(demo.nproc), demo.values[0]["mine"])
            """
        ),
        check('labkit.check("lesson2.reduce_scatter_rank0", rank0_after)'),
        *RANK_EXERCISE,
        md(
            en="""
            ## 5. The traffic

            Sharding is paid for in **communication volume**. Per step, with Ψ parameter elements, N
            ranks and the ring algorithm NCCL and gloo use, a rank *sends*:

            - DDP / `NO_SHARD`: one all-reduce of the gradients: 2 (N-1)/N · Ψ elements;
            - `SHARD_GRAD_OP`: one all-gather (forward) and one reduce-scatter: 2 (N-1)/N · Ψ;
            - `FULL_SHARD`: all-gathers in forward *and* in backward, and a reduce-scatter: 3 (N-1)/N · Ψ.

            FSDP keeps the root unit gathered from the end of forward into backward (FSDP1 always; FSDP2
            when the root has `reshard_after_forward=False`, as here), so it gathers the root once
            instead of twice; `labkit.comm.theory_bytes` takes that into account. The runs above counted
            every collective of every step (`labkit.comm`, inside the ranks); here is the last step at
            the largest world size, beside the theory.

            Read the `sent per rank` column for what it is: not bytes measured on a wire. labkit counts
            the payload of each collective the ranks issued, exactly, and multiplies it by the ring
            algorithm's factor, (N-1)/N for an all-gather or a reduce-scatter and 2 (N-1)/N for an
            all-reduce: what a ring implementation sends per rank. gloo and NCCL may pick other
            algorithms (trees, direct exchanges), which put other amounts on the wire.
            """,
            ro="""
            ## 5. Traficul

            Fragmentarea se plătește în **volum de comunicare (communication volume)**. La fiecare pas, cu Ψ
            elemente de parametri, N ranguri și algoritmul în inel folosit de NCCL și gloo, un rang *trimite*:

            - DDP / `NO_SHARD`: o reducere globală a gradienților: 2 (N-1)/N · Ψ elemente;
            - `SHARD_GRAD_OP`: o colectare completă (în trecerea directă) și o reducere cu distribuire:
              2 (N-1)/N · Ψ;
            - `FULL_SHARD`: colectări complete în trecerea directă *și* în cea inversă, plus o reducere cu
              distribuire: 3 (N-1)/N · Ψ.

            FSDP păstrează unitatea rădăcină colectată de la sfârșitul trecerii directe până în cea inversă
            (FSDP1 mereu; FSDP2 când rădăcina are `reshard_after_forward=False`, ca aici), așa că o
            colectează o dată în loc de două ori; `labkit.comm.theory_bytes` ține cont de asta. Rulările de
            mai sus au numărat fiecare operație colectivă a fiecărui pas (`labkit.comm`, în interiorul
            rangurilor); iată ultimul pas, la cel mai mare număr de ranguri, alături de teorie.

            Citiți coloana `trimis per rang` drept ceea ce este: nu octeți măsurați pe un fir. labkit
            numără exact volumul util al fiecărei operații colective lansate de ranguri și îl înmulțește cu
            factorul algoritmului în inel, (N-1)/N pentru o colectare completă sau o reducere cu
            distribuire și 2 (N-1)/N pentru o reducere globală: cât trimite pe rang o implementare în inel.
            gloo și NCCL pot alege alți algoritmi (arbori, schimburi directe), care pun pe fir alte cantități.
            """,
        ),
        code(
            """
            from labkit import comm

            n = max(runs)
            big = runs[n]
            traffic = {}
            rows = []
            for name, v in big.values[0].items():
                counts = measure.last_message(big, "comm", rank=0, config=name, step=steps - 1)["counts"]
                psi = sum(v["units"].values())  # parameter elements as FSDP communicates them, padding included
                strategy = FSDP2_AS.get(name, name)
                root = v["units"]["root"] if strategy in ("FULL_SHARD", "HYBRID_SHARD") else 0  # gathered once, kept to backward
                theory = comm.theory_bytes(psi, strategy, n, unsharded_root_params=root,
                                           shard_size=2 if strategy == "HYBRID_SHARD" else None)
                traffic[name] = comm.total(counts)
                rows.append({"strategy": name, "ranks": n, "calls": sum(int(c["calls"]) for c in counts.values()),
                             "sent": comm.total(counts), "theory": comm.total(theory)})
            show.table(rows, units={"sent": "MiB", "theory": "MiB"})
            """
        ),
        md(
            en="""
            **Exercise 6.** Write, as a function, the elements one rank sends per step under
            `FULL_SHARD`, for `n_params` parameters of which `root_params` are in the root unit, on
            `world_size` ranks: the theory with the root counted as FSDP runs it. Compare its ratio to DDP's
            with `traffic["FULL_SHARD"] / traffic["NO_SHARD"]`.
            """,
            ro="""
            **Exercițiul 6.** Scrieți, ca funcție, câte elemente trimite un rang la fiecare pas cu
            `FULL_SHARD`, pentru `n_params` parametri, dintre care `root_params` în unitatea rădăcină, pe
            `world_size` ranguri: teoria cu rădăcina socotită cum o rulează FSDP. Comparați raportul ei față
            de DDP cu `traffic["FULL_SHARD"] / traffic["NO_SHARD"]`.
            """,
        ),
        code(
            """
            def full_shard_sent(n_params, root_params, world_size):
                ### BEGIN SOLUTION
                return (3 * n_params - root_params) * (world_size - 1) / world_size
                ### END SOLUTION


            v = big.values[0]["FULL_SHARD"]["units"]
            ddp_sent = 2 * (n - 1) / n * sum(v.values())
            print(full_shard_sent(sum(v.values()), v["root"], n) / ddp_sent, traffic["FULL_SHARD"] / traffic["NO_SHARD"])
            """
        ),
        check('labkit.check("lesson2.full_shard_sent", full_shard_sent)'),
        md(
            en="""
            ## Recap

            - ZeRO shards the optimizer state (stage 1), then the gradients (stage 2), then the
              parameters (stage 3); only stage 3 divides all of the model's state by the number of ranks.
            - FSDP's `FULL_SHARD` is ZeRO-3, `SHARD_GRAD_OP` rests like it but keeps every unit gathered
              through the step, `NO_SHARD` is DDP, and `HYBRID_SHARD` is ZeRO-3 inside a group of ranks.
            - Your runs measured it per rank at 1, 2 and 4 ranks, and the formula matched.
            - FSDP2's `fully_shard` does the same with one argument: `reshard_after_forward=True` is
              `FULL_SHARD`, `False` is `SHARD_GRAD_OP` (and the advised setting for the root), a 2-D mesh
              is `HYBRID_SHARD`; FSDP1 and its `NO_SHARD` are legacy.
            - The price is traffic: all-gathers before computing, a reduce-scatter after, 3/2 of DDP's
              volume under `FULL_SHARD`.

            Next, lesson 3: what a unit is, and why without a wrap policy every parameter is whole at the
            peak (the optimizer and gradient shards still stay 1/N).
            """,
            ro="""
            ## Recapitulare

            - ZeRO fragmentează stările optimizatorului (etapa 1), apoi gradienții (etapa 2), apoi parametrii
              (etapa 3); doar etapa 3 împarte toată starea modelului la numărul de ranguri.
            - `FULL_SHARD` din FSDP este ZeRO-3, `SHARD_GRAD_OP` ocupă la fel de puțin între pași, dar
              păstrează fiecare unitate colectată pe tot pasul, `NO_SHARD` este DDP, iar `HYBRID_SHARD` este ZeRO-3 în interiorul
              unui grup de ranguri.
            - Rulările voastre au măsurat asta pe rang, pe 1, 2 și 4 ranguri, iar formula s-a potrivit.
            - `fully_shard` din FSDP2 face același lucru cu un singur argument: `reshard_after_forward=True`
              este `FULL_SHARD`, `False` este `SHARD_GRAD_OP` (și setarea recomandată pentru rădăcină), o
              grilă 2D este `HYBRID_SHARD`; FSDP1 și `NO_SHARD` al lui sunt moștenite.
            - Prețul este traficul: colectări complete înainte de calcul, o reducere cu distribuire după,
              3/2 din volumul DDP cu `FULL_SHARD`.

            Urmează lecția 3: ce este o unitate și de ce, fără o politică de împachetare, fiecare parametru
            este întreg la vârf (fragmentele optimizatorului și ale gradienților rămân totuși 1/N).
            """,
        ),
    ],
)
