"""Lesson 1: DDP's memory wall. Bytes per parameter, a real DDP run where every rank holds
everything, and where one 80 GB GPU stops being enough."""

from labkit.course.cells import Lesson, check, code, md, parameters, setup
from labkit.course.rank_exercises import LESSON1 as RANK_EXERCISE

LESSON = Lesson(
    id="lesson1",
    file="01_ddp_memory_wall",
    title={"en": "Lesson 1: DDP's memory wall", "ro": "Lecția 1: zidul de memorie al DDP"},
    terms=(
        "weights",
        "gradients",
        "optimizer_state",
        "mixed_precision",
        "master_weights",
        "data_parallel",
        "replica",
        "activations",
    ),
    cells=[
        md(
            en="""
            # Lesson 1: DDP's memory wall

            **Data parallelism** (PyTorch's `DistributedDataParallel`, DDP) is the simplest way to use
            many GPUs: every rank keeps a whole copy of the model and trains it on its own slice of the
            data. It is also why large models do not fit: memory per GPU does not go down when you add
            GPUs.

            **In this lesson you will**

            - count the bytes a training step keeps for every parameter, in fp32 and in mixed precision;
            - see that most of it is the optimizer's, not the model's;
            - measure a real DDP run in which every rank holds the full amount;
            - predict the model size at which one 80 GB GPU is no longer enough.
            """,
            ro="""
            # Lecția 1: zidul de memorie al DDP

            **Paralelismul de date (data parallelism)**, adică `DistributedDataParallel` din PyTorch (DDP),
            este cel mai simplu mod de a folosi mai multe GPU-uri: fiecare rang ține o copie întreagă a
            modelului și o antrenează pe propria parte din date. Tot de aici vine și problema modelelor mari: memoria
            necesară pe fiecare GPU nu scade când adăugați GPU-uri.

            **În această lecție veți**

            - număra octeții pe care un pas de antrenare îi păstrează pentru fiecare parametru, în fp32
              și în precizie mixtă;
            - vedea că cea mai mare parte aparține optimizatorului, nu modelului;
            - măsura o rulare DDP reală în care fiecare rang ține totul;
            - prezice de la ce dimensiune a modelului un GPU de 80 GB nu mai ajunge.
            """,
        ),
        parameters(nproc=2, backend="auto", model_size="small", steps=2),
        setup("from labkit import memory_model as mm, memory_view", "from labkit.course import show"),
        md(
            en="""
            ## 1. What a training step keeps, per parameter

            For every parameter of the model, training with AdamW keeps:

            - the **weights** themselves, used by the forward and the backward pass;
            - the **gradients**, written by the backward pass and read by the optimizer;
            - the **optimizer state**: Adam's two running averages, `m` (of the gradient) and `v`
              (of its square), one number each per parameter.

            In **mixed precision** (the way large models are trained) forward and backward run in
            bf16, two bytes a number, but the update is done in fp32: the optimizer also keeps
            **master weights**, an fp32 copy of every weight. This is the accounting of the ZeRO
            paper (Rajbhandari et al., 2020). DeepSpeed's own estimators also keep the gradients in
            fp32, which adds two bytes per parameter; when you read "18 bytes per parameter", that is
            why.

            Besides these *model states*, a step holds **activations** (the intermediate outputs kept
            for the backward pass), which grow with the batch and the sequence length, not with the
            number of parameters; this lesson leaves them aside.

            The table takes each size from torch itself (`element_size()` of an empty tensor of that
            type):
            """,
            ro="""
            ## 1. Ce păstrează un pas de antrenare, pentru fiecare parametru

            Pentru fiecare parametru al modelului, antrenarea cu AdamW păstrează:

            - **ponderile (weights)** însele, folosite de trecerea directă și de cea inversă;
            - **gradienții (gradients)**, scriși de trecerea inversă și citiți de optimizator;
            - **stările optimizatorului (optimizer state)**: cele două medii mobile ale lui Adam, `m`
              (a gradientului) și `v` (a pătratului său), câte un număr pe parametru.

            În **precizie mixtă (mixed precision)**, felul în care se antrenează modelele mari, trecerile
            directă și inversă rulează în bf16, doi octeți pe număr, dar actualizarea se face în fp32:
            optimizatorul mai ține și **copia master a ponderilor (master weights)**, o copie fp32 a
            fiecărei ponderi. Aceasta este socoteala din articolul ZeRO (Rajbhandari et al., 2020).
            Estimatoarele DeepSpeed țin și gradienții în fp32, ceea ce adaugă doi octeți pe parametru;
            de aici vin cei „18 octeți pe parametru” pe care îi veți mai întâlni.

            Pe lângă aceste *stări ale modelului*, un pas mai ține și **activări (activations)**, ieșirile
            intermediare păstrate pentru trecerea inversă, care cresc cu lotul și cu lungimea secvenței,
            nu cu numărul de parametri; lecția aceasta le lasă deoparte.

            Tabelul ia fiecare dimensiune chiar din torch (`element_size()` al unui tensor gol de acel tip):
            """,
        ),
        code(
            """
            import torch


            def size_of(dtype):
                return torch.empty(0, dtype=dtype).element_size()


            fp32, bf16 = size_of(torch.float32), size_of(torch.bfloat16)
            components = [  # (what, bytes in fp32 training, bytes in mixed precision)
                ("weights", fp32, bf16),
                ("gradients", fp32, bf16),
                ("master", 0, fp32),
                ("adam_m", fp32, fp32),
                ("adam_v", fp32, fp32),
            ]
            show.table([{"what": show.label(what), "fp32_bytes": a, "mixed_bytes": b} for what, a, b in components])
            """,
            pure=True,
        ),
        md(
            en="""
            **Exercise 1.** How many bytes per parameter does mixed-precision AdamW keep in all?
            Add up the right column from the sizes above (use `bf16` and `fp32`, not typed numbers).
            """,
            ro="""
            **Exercițiul 1.** Câți octeți pe parametru păstrează în total AdamW în precizie mixtă?
            Însumați coloana din dreapta folosind dimensiunile de mai sus (`bf16` și `fp32`, nu numere
            scrise de mână).
            """,
        ),
        code(
            """
            def mixed_state_bytes(n_params):  # the bytes mixed-precision AdamW keeps for n_params parameters
                ### BEGIN SOLUTION
                return (bf16 + bf16 + fp32 + fp32 + fp32) * n_params
                ### END SOLUTION


            bytes_per_param = mixed_state_bytes(1)
            """,
            pure=True,
        ),
        check('labkit.check("lesson1.bytes_per_param", mixed_state_bytes)'),
        md(
            en="""
            **Exercise 2.** What fraction of those bytes does only the optimizer need (the master
            weights and the two Adam moments)? Give a fraction between 0 and 1.
            """,
            ro="""
            **Exercițiul 2.** Ce fracție din acești octeți îi trebuie doar optimizatorului (copia master
            și cele două momente Adam)? Dați o fracție între 0 și 1.
            """,
        ),
        code(
            """
            def optimizer_share(precision):  # "bf16" or "fp16": mixed precision (right column); "fp32": left column
                ### BEGIN SOLUTION
                if precision == "fp32":
                    return (fp32 + fp32) / (fp32 + fp32 + fp32 + fp32)
                return (fp32 + fp32 + fp32) / bytes_per_param
                ### END SOLUTION
            """,
            pure=True,
        ),
        check('labkit.check("lesson1.optimizer_share", optimizer_share)'),
        md(
            en="""
            In fp32 training the total is the same (four fp32 numbers), but there the optimizer's share
            is only Adam's two moments. The runs of this lesson train in fp32, on the CPU as on a GPU,
            so their measurements compare with the left column; the right column is what a
            mixed-precision GPU run keeps.

            ## 2. A real DDP run: every rank holds everything

            The next cell trains the lesson's model with DDP on `nproc` ranks. After the last step,
            before the gradients are cleared, each rank adds up the bytes of the tensors it holds: its
            parameters, their gradients and the optimizer's state. It also reports a checksum of its
            weights: if the ranks are true **replicas**, the checksums are equal.

            `gradient_as_bucket_view=True` makes each `.grad` a view into the buckets DDP uses to
            all-reduce gradients; without it DDP would keep a second copy of every gradient.
            """,
            ro="""
            În antrenarea fp32 totalul este același (patru numere fp32), dar acolo partea optimizatorului
            sunt doar cele două momente Adam. Rulările din această lecție antrenează în fp32, pe CPU ca și
            pe GPU, deci măsurătorile lor se compară cu coloana din stânga; coloana din dreapta este ce
            păstrează o rulare pe GPU în precizie mixtă.

            ## 2. O rulare DDP reală: fiecare rang ține totul

            Celula următoare antrenează modelul lecției cu DDP pe `nproc` ranguri. După ultimul pas,
            înainte ca gradienții să fie șterși, fiecare rang însumează octeții tensorilor pe care îi ține:
            parametrii, gradienții lor și stările optimizatorului. Raportează și o sumă de control a
            ponderilor: dacă rangurile sunt cu adevărat **replici (replica)**, sumele sunt egale.

            `gradient_as_bucket_view=True` face din fiecare `.grad` o vedere în tampoanele pe care DDP le
            folosește pentru reducerea globală a gradienților; fără el, DDP ar ține o a doua copie a
            fiecărui gradient.
            """,
        ),
        code(
            """
            %%torchrun -n $nproc --backend $backend --vars model_size,steps
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            from labkit import rank
            from labkit.models import TransformerLM, get_config, synthetic_batch


            def nbytes(tensors):
                return sum(t.numel() * t.element_size() for t in tensors)


            cfg = get_config(model_size)
            torch.manual_seed(0)
            model = DDP(TransformerLM(cfg).to(rank.device()), gradient_as_bucket_view=True)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

            for step in rank.steps(steps):
                inputs, targets = synthetic_batch(cfg, 8, step, rank.rank(), rank.device())
                model(inputs, targets).backward()  # DDP all-reduces the gradients during backward
                optimizer.step()
                if step < steps - 1:
                    optimizer.zero_grad()  # the last step keeps its gradients, to be measured

            params = list(model.parameters())
            rank.report(
                n_params=sum(p.numel() for p in params),
                param_bytes=nbytes(params),
                grad_bytes=nbytes(p.grad for p in params),
                optim_bytes=nbytes(v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v)),
                checksum=sum(p.double().sum().item() for p in params),
            )
            """
        ),
        code(
            """
            ddp = labkit.last_run
            n_params = ddp.values[0]["n_params"]
            rows = []
            for r in range(ddp.nproc):
                v = ddp.values[r]
                state = v["param_bytes"] + v["grad_bytes"] + v["optim_bytes"]
                rows.append({"rank": r, "params": v["param_bytes"], "grads": v["grad_bytes"],
                             "optim": v["optim_bytes"], "state": state, "peak": ddp.main_peak(r)})
            show.say("ddp_head", model=model_size, n=n_params, nproc=ddp.nproc)
            show.table(rows, units={c: "MiB" for c in ("params", "grads", "optim", "state", "peak")})
            show.say("checksums", values=[round(ddp.values[r]["checksum"], 6) for r in range(ddp.nproc)])
            """
        ),
        md(
            en="""
            Every row is the same: each rank holds the whole model, all its gradients and the whole
            optimizer state. The last column is the dashboard's own peak for that rank. On a GPU that is
            CUDA's allocator peak, a second, independent measurement that also sees activations and
            temporaries. On the CPU it is not independent: the dashboard samples the bytes of the same
            tensors the cell can reach by name, so it confirms the count above rather than checking it
            against an allocator. With `nproc = 4` in the parameters cell, the rows would be four and each just as
            large: DDP's memory per rank does not depend on the number of ranks.

            **Exercise 3.** With the formula of section 1, write the bytes of model state (weights,
            gradients, optimizer) that one DDP rank holds for this model in fp32 training. Use
            `n_params`. The check compares your formula with what rank 0 measured.
            """,
            ro="""
            Toate rândurile sunt la fel: fiecare rang ține întregul model, toți gradienții și toate
            stările optimizatorului. Ultima coloană este vârful măsurat de panou pentru acel rang. Pe GPU
            acesta este vârful alocatorului CUDA, o a doua măsurătoare, independentă, care vede și
            activările și valorile temporare. Pe CPU nu este independentă: panoul eșantionează octeții
            acelorași tensori pe care celula îi poate atinge prin nume, așa că confirmă numărătoarea de
            mai sus, fără să o verifice față de un alocator. Cu `nproc = 4` în celula de parametri ar fi
            patru rânduri, la fel de mari: memoria DDP pe rang nu depinde de numărul de ranguri.

            **Exercițiul 3.** Cu formula din secțiunea 1, scrieți câți octeți de stări ale modelului
            (ponderi, gradienți, optimizator) ține un rang DDP pentru acest model, în antrenarea fp32.
            Folosiți `n_params`. Verificarea compară formula voastră cu ce a măsurat rangul 0.
            """,
        ),
        code(
            """
            def ddp_rank_bytes(n_params):  # one DDP rank's model state, fp32 AdamW
                ### BEGIN SOLUTION
                return (fp32 + fp32 + fp32 + fp32) * n_params
                ### END SOLUTION
            """
        ),
        check('labkit.check("lesson1.ddp_rank_bytes", ddp_rank_bytes, run=ddp)'),
        *RANK_EXERCISE,
        md(
            en="""
            ## 3. The wall

            The measurement agrees with the formula, so the formula can go where no laptop can: to
            real model sizes. The table uses Llama-like configurations whose parameters
            `labkit.models` counts exactly (they are never built), with mixed-precision AdamW as a
            GPU run would use it.
            """,
            ro="""
            ## 3. Zidul

            Măsurătoarea se potrivește cu formula, așa că formula poate merge acolo unde niciun laptop nu
            ajunge: la dimensiuni reale de modele. Tabelul folosește configurații de tip Llama, ai căror
            parametri îi numără exact `labkit.models` (modelele nu sunt construite niciodată), cu AdamW în
            precizie mixtă, ca într-o rulare pe GPU.
            """,
        ),
        code(
            """
            from labkit.models import PRESETS

            gpu_bytes = 80e9  # an 80 GB GPU (A100 80GB, H100)
            sizes = {name: PRESETS[name].num_params() for name in ("llama-1b", "llama-7b", "llama-13b", "llama-70b")}
            show.table(
                [{"model": name, "n_params": n, "per_gpu": bytes_per_param * n, "fits": bytes_per_param * n <= gpu_bytes}
                 for name, n in sizes.items()],
                units={"per_gpu": "GB"},
                headers={"fits": show.label("fits", gpu="80 GB")},
            )
            """,
            pure=True,
        ),
        md(
            en="""
            **Exercise 4.** What is the largest number of parameters whose mixed-precision AdamW model
            state fits in one GPU of `gpu_bytes` bytes under DDP? (Activations would need room too; leave
            them out.)
            """,
            ro="""
            **Exercițiul 4.** Care este cel mai mare număr de parametri ale căror stări ale modelului, cu
            AdamW în precizie mixtă, încap sub DDP într-un GPU de `gpu_bytes` octeți? (Și activările ar
            avea nevoie de loc; lăsați-le deoparte.)
            """,
        ),
        code(
            """
            def ddp_max_params(gpu_bytes):  # the most parameters DDP trains on a GPU of gpu_bytes
                ### BEGIN SOLUTION
                return gpu_bytes / bytes_per_param
                ### END SOLUTION
            """,
            pure=True,
        ),
        check('labkit.check("lesson1.ddp_max_params", ddp_max_params)'),
        md(
            en="""
            `labkit.memory_model` gives the same answer, and shows what the other convention (DeepSpeed's,
            gradients kept in fp32) changes:
            """,
            ro="""
            `labkit.memory_model` dă același răspuns și arată ce schimbă cealaltă convenție (a DeepSpeed,
            cu gradienții păstrați în fp32):
            """,
        ),
        code(
            """
            for convention in ("zero", "deepspeed"):
                per_param = mm.bytes_per_param("bf16", "adamw", convention).total
                largest = mm.max_params_that_fit("DDP", 1, gpu_bytes, convention=convention)
                show.say("convention", name=convention, b=per_param, n=largest)
            show.say("weights_wall", b=bf16 + bf16, n=gpu_bytes // (bf16 + bf16))  # as if the optimizer state were free
            """,
            pure=True,
        ),
        md(
            en="""
            The figure draws the same formula for every model size. The full state crosses 80 GB at
            the point you just computed. The lower line counts only the bf16 weights and gradients
            (`bf16 + bf16` bytes per parameter), as if the optimizer state cost nothing: even then a
            single GPU is full at four times that size, the last line above, 20 billion parameters. A
            model of half that size would still fit its weights and gradients, but its full state is
            twice the GPU; from 20 billion parameters on, no shrinking of the optimizer state makes DDP
            fit on one 80 GB GPU, and well before that the activations have no room left. Adding GPUs
            does not help: every DDP rank needs the full amount. Lesson 2 divides it instead.
            """,
            ro="""
            Figura desenează aceeași formulă pentru orice dimensiune a modelului. Starea completă trece
            de 80 GB exact în punctul calculat mai sus. Linia de jos numără doar ponderile și gradienții
            bf16 (`bf16 + bf16` octeți pe parametru), ca și cum stările optimizatorului nu ar costa nimic:
            chiar și așa un singur GPU se umple la o dimensiune de patru ori mai mare, ultima linie de mai
            sus, 20 de miliarde de parametri. Ponderile și gradienții unui model de două ori mai mic ar
            încăpea încă, dar starea lui completă este de două ori cât GPU-ul; de la 20 de
            miliarde de parametri în sus, nicio micșorare a stărilor optimizatorului nu mai face DDP să
            încapă pe un GPU de 80 GB, iar cu mult înainte activările nu mai au loc. Adăugarea de GPU-uri
            nu ajută: fiecare rang DDP are nevoie de tot. Lecția 2 împarte în schimb această memorie.
            """,
        ),
        code(
            """
            import matplotlib.pyplot as plt

            billions = [b / 2 for b in range(1, 61)]  # 0.5B to 30B parameters
            fig, ax = plt.subplots(figsize=(7, 3.5))
            ax.plot(billions, [bytes_per_param * b for b in billions], label=show.text("fig.ddp_full", b=bytes_per_param))
            ax.plot(billions, [(bf16 + bf16) * b for b in billions], "--", label=show.text("fig.weights_grads", b=bf16 + bf16))
            ax.axhline(gpu_bytes / 1e9, color="black", linewidth=1)
            ax.text(0.5, gpu_bytes / 1e9 + 8, "80 GB")
            ax.set_xlabel(show.text("fig.params_b"))
            ax.set_ylabel(show.text("fig.gb_per_gpu"))
            ax.legend(fontsize="small")
            plt.show()
            """
        ),
        md(
            en="""
            **Exercise 5.** A look ahead: if each of the `ddp.nproc` ranks kept only an equal slice of
            every one of those copies, how many bytes of mixed-precision state would one rank hold for
            a model of `n_params` parameters?
            """,
            ro="""
            **Exercițiul 5.** O privire înainte: dacă fiecare dintre cele `ddp.nproc` ranguri ar păstra
            doar o felie egală din fiecare dintre aceste copii, câți octeți de stare în precizie mixtă ar
            ține un rang pentru un model cu `n_params` parametri?
            """,
        ),
        code(
            """
            def sharded_bytes(n_params, world_size):  # one rank's model state, fully sharded
                ### BEGIN SOLUTION
                return bytes_per_param * n_params / world_size
                ### END SOLUTION
            """
        ),
        check('labkit.check("lesson1.sharded_bytes_per_rank", sharded_bytes)'),
        md(
            en="""
            That is ZeRO stage 3, and FSDP's `FULL_SHARD`. The memory model draws where it leads: the
            largest model whose state fits one 80 GB GPU, against the number of GPUs. DDP stays flat;
            sharding only the optimizer state (ZeRO-1) or the gradients too (ZeRO-2) levels off; sharding
            everything (ZeRO-3) keeps growing.
            """,
            ro="""
            Aceasta este etapa 3 a ZeRO, adică `FULL_SHARD` din FSDP. Modelul de memorie desenează unde duce:
            cel mai mare model a cărui stare încape într-un GPU de 80 GB, în funcție de numărul de GPU-uri.
            DDP rămâne constant; fragmentarea doar a stărilor optimizatorului (ZeRO-1) sau și a gradienților
            (ZeRO-2) se oprește la un plafon; fragmentarea tuturor (ZeRO-3) crește mai departe.
            """,
        ),
        code('memory_view.plot_max_model_vs_gpus("80GB")'),
        md(
            en="""
            ## Recap

            - AdamW keeps 16 bytes per parameter in mixed precision: bf16 weights and gradients, and
              an fp32 master copy plus two fp32 moments, which are 75% of it and belong to the optimizer.
            - Under DDP every rank is a replica: each holds all of it, whatever the number of ranks. Your
              run measured it, and the formula matched the measurement.
            - So one 80 GB GPU holds the training state of a few billion parameters and no more; from 20
              billion parameters on, its bf16 weights and gradients alone fill it, even if the optimizer
              state were free.

            Next, lesson 2: ZeRO and FSDP split these bytes over the ranks.
            """,
            ro="""
            ## Recapitulare

            - AdamW păstrează 16 octeți pe parametru în precizie mixtă: ponderi și gradienți bf16, plus o
              copie master fp32 și două momente fp32, care reprezintă 75% și aparțin optimizatorului.
            - Sub DDP fiecare rang este o replică: fiecare ține tot, oricâte ranguri ar fi. Rularea voastră
              a măsurat asta, iar formula s-a potrivit cu măsurătoarea.
            - Așadar un GPU de 80 GB ține starea de antrenare a câtorva miliarde de parametri și nu mai
              mult; de la 20 de miliarde de parametri în sus, doar ponderile și gradienții bf16 îl umplu,
              chiar dacă stările optimizatorului nu ar costa nimic.

            Urmează lecția 2: ZeRO și FSDP împart acești octeți între ranguri.
            """,
        ),
    ],
)
