"""Lesson 6: FSDP2 and scaling to 70B. fully_shard and the FSDP1 options it replaces,
meta-device initialization (why the seed's model.to(rank) cannot work at 70B), LOCAL_RANK,
sharded checkpoints with torch.distributed.checkpoint, a 70B memory plan checked with the
fake-tensor estimator, and the way out of the notebook to torchrun on many nodes or Slurm."""

from labkit.course.cells import Lesson, check, code, exercise, md, parameters, setup
from labkit.course.rank_exercises import LESSON6 as RANK_EXERCISE

LESSON = Lesson(
    id="lesson6",
    file="06_fsdp2_70b",
    title={"en": "Lesson 6: FSDP2 and scaling to 70B", "ro": "Lecția 6: FSDP2 și drumul până la 70B"},
    terms=("dtensor", "meta_device", "local_rank", "sharded_checkpoint", "activation_checkpointing", "fake_tensor"),
    cells=[
        md(
            en="""
            # Lesson 6: FSDP2 and scaling to 70B

            Everything so far used FSDP1, `FullyShardedDataParallel`. PyTorch's current API is FSDP2,
            `fully_shard`, and it is what you would use to train a 70-billion-parameter model. This
            lesson moves the course's model to FSDP2 and then asks what changes when the model no longer
            fits anywhere whole.

            **In this lesson you will**

            - map every FSDP1 option you have used to its FSDP2 form;
            - see why the usual `model.to(rank)` before wrapping cannot work at 70B, and build the model
              on the meta device instead, measuring what each rank allocates;
            - pick the GPU with `LOCAL_RANK`, not the global rank;
            - save a sharded checkpoint with `torch.distributed.checkpoint`, resume from it, and load it
              back on a different number of processes;
            - plan 70B on N GPUs with the memory model, and check the plan with the fake-tensor estimator;
            - take the lesson's code out of the notebook, to `torchrun` on several nodes or to Slurm.
            """,
            ro="""
            # Lecția 6: FSDP2 și drumul până la 70B

            Tot ce am făcut până acum a folosit FSDP1, `FullyShardedDataParallel`. API-ul actual din PyTorch
            este FSDP2, `fully_shard`, și pe el l-ați folosi ca să antrenați un model de 70 de miliarde de
            parametri. Lecția aceasta mută modelul cursului pe FSDP2 și apoi se întreabă ce se schimbă când
            modelul nu mai încape întreg nicăieri.

            **În această lecție veți**

            - găsi forma FSDP2 a fiecărei opțiuni FSDP1 pe care ați folosit-o;
            - vedea de ce obișnuitul `model.to(rank)` dinaintea împachetării nu poate funcționa la 70B și
              veți construi modelul pe dispozitivul meta, măsurând ce alocă fiecare rang;
            - alege GPU-ul cu `LOCAL_RANK`, nu cu rangul global;
            - salva un punct de control fragmentat cu `torch.distributed.checkpoint`, veți relua antrenarea
              din el și îl veți încărca pe un alt număr de procese;
            - planifica 70B pe N GPU-uri cu modelul de memorie și veți verifica planul cu estimatorul cu
              tensori fictivi;
            - scoate codul lecției din notebook, spre `torchrun` pe mai multe noduri sau spre Slurm.
            """,
        ),
        parameters(
            nproc=2,
            backend="auto",
            model_size="tiny",
            steps=3,
            plan_model="llama-70b",
            plan_gpus=8,
            estimate_model="llama-70b",
        ),
        md(
            en="""
            Besides the usual four, the parameters cell names the model to plan for (`plan_model`), the
            number of GPUs of the plan (`plan_gpus`), and the model the fake-tensor estimator runs
            (`estimate_model`: the plan's model by default; a smaller one makes section 6 faster).
            """,
            ro="""
            Pe lângă cei patru obișnuiți, celula de parametri numește modelul pentru care se face planul
            (`plan_model`), numărul de GPU-uri al planului (`plan_gpus`) și modelul pe care îl rulează
            estimatorul cu tensori fictivi (`estimate_model`: implicit modelul planului; unul mai mic face
            secțiunea 6 mai rapidă).
            """,
        ),
        setup("from labkit import estimate, memory_model, memory_view", "from labkit.course import show"),
        md(
            en="""
            ## 1. From FSDP1 to FSDP2

            FSDP1 wraps a module in a new `FullyShardedDataParallel` object and flattens each unit's
            parameters into one flat parameter. FSDP2's `fully_shard(module, mesh=...)` wraps nothing:
            the module keeps its class (FSDP2 adds `FSDPModule` to it) and its parameter names, and every
            parameter becomes a **DTensor**, a tensor whose rows are split over the ranks of a
            device mesh, each rank holding its own rows. The optimizer, the state dict and your code see
            ordinary parameters with ordinary names.

            What each FSDP1 option of the previous lessons becomes (PyTorch's FSDP1-to-FSDP2 migration
            guide):

            | FSDP1 | FSDP2 |
            |---|---|
            | `FullyShardedDataParallel(model, auto_wrap_policy=...)` | `fully_shard(block)` on each block, then `fully_shard(model)` on the root |
            | `ShardingStrategy.FULL_SHARD` | `reshard_after_forward=True` |
            | `ShardingStrategy.SHARD_GRAD_OP` | `reshard_after_forward=False` |
            | `ShardingStrategy.HYBRID_SHARD` | a 2-D mesh: `init_device_mesh(device, (replicas, shards), mesh_dim_names=(...))` |
            | `ShardingStrategy.NO_SHARD` (deprecated: it warns) | no equivalent: use DDP |
            | none | `reshard_after_forward=k`, an int: after forward, keep a shard over a group of k ranks (a node), so that backward gathers within it (ZeRO++'s hpZ) |
            | `fully_shard(model)` on the root with `reshard_after_forward=True` | the docs advise `False` for the root: its backward starts right after its forward |
            | `backward_prefetch=BACKWARD_PRE` | the default: one unit ahead, in backward's order; `BACKWARD_POST` does not exist |
            | more than one unit ahead, or another order | `module.set_modules_to_backward_prefetch([...])` |
            | `forward_prefetch=True` | `module.set_modules_to_forward_prefetch([...])`, or `unshard()` by hand |
            | `limit_all_gathers=True` | gone: FSDP2 has no rate limiter to set |
            | `CPUOffload(offload_params=True)` | `offload_policy=CPUOffloadPolicy()` (the optimizer step runs on the CPU too) |
            | `MixedPrecision(param_dtype, reduce_dtype, ...)` | `mp_policy=MixedPrecisionPolicy(param_dtype, reduce_dtype, output_dtype)` |
            | `with model.no_sync():` | `model.set_requires_gradient_sync(False)` |
            | `param_init_fn=...`, `sync_module_states=True` | build on the meta device, then `to_empty()` and `reset_parameters()` (section 2) |
            | `FSDP.state_dict_type(...)` | DTensor state dicts and `torch.distributed.checkpoint` (section 4) |

            One caution: the default of `reshard_after_forward` has changed between releases, and older
            ones kept the root unit gathered after forward whatever you passed. Set it explicitly, and
            when you compare memory, say which torch you ran.
            """,
            ro="""
            ## 1. De la FSDP1 la FSDP2

            FSDP1 împachetează un modul într-un obiect nou, `FullyShardedDataParallel`, și aplatizează
            parametrii fiecărei unități într-un singur parametru aplatizat. `fully_shard(module, mesh=...)`
            din FSDP2 nu împachetează nimic: modulul își păstrează clasa (FSDP2 îi adaugă `FSDPModule`) și
            numele parametrilor, iar fiecare parametru devine un **tensor distribuit (DTensor)**, un tensor
            ale cărui rânduri sunt împărțite între rangurile unei grile de dispozitive, fiecare rang ținând
            propriile rânduri. Optimizatorul, dicționarul de stare și codul vostru văd parametri obișnuiți,
            cu nume obișnuite.

            Ce devine fiecare opțiune FSDP1 din lecțiile anterioare (ghidul de migrare FSDP1 → FSDP2 al
            PyTorch):

            | FSDP1 | FSDP2 |
            |---|---|
            | `FullyShardedDataParallel(model, auto_wrap_policy=...)` | `fully_shard(block)` pe fiecare bloc, apoi `fully_shard(model)` pe rădăcină |
            | `ShardingStrategy.FULL_SHARD` | `reshard_after_forward=True` |
            | `ShardingStrategy.SHARD_GRAD_OP` | `reshard_after_forward=False` |
            | `ShardingStrategy.HYBRID_SHARD` | o grilă 2D: `init_device_mesh(device, (replici, fragmente), mesh_dim_names=(...))` |
            | `ShardingStrategy.NO_SHARD` (învechit: avertizează) | niciun echivalent: folosiți DDP |
            | niciuna | `reshard_after_forward=k`, un întreg: după trecerea directă, păstrează un fragment pe un grup de k ranguri (un nod), ca trecerea inversă să colecteze în interiorul lui (hpZ din ZeRO++) |
            | `fully_shard(model)` pe rădăcină cu `reshard_after_forward=True` | documentația recomandă `False` pentru rădăcină: trecerea ei inversă începe imediat după cea directă |
            | `backward_prefetch=BACKWARD_PRE` | implicit: o unitate înainte, în ordinea trecerii inverse; `BACKWARD_POST` nu există |
            | mai mult de o unitate înainte sau altă ordine | `module.set_modules_to_backward_prefetch([...])` |
            | `forward_prefetch=True` | `module.set_modules_to_forward_prefetch([...])` sau `unshard()` de mână |
            | `limit_all_gathers=True` | dispărut: FSDP2 nu are un limitator de ritm de setat |
            | `CPUOffload(offload_params=True)` | `offload_policy=CPUOffloadPolicy()` (și pasul optimizatorului rulează pe CPU) |
            | `MixedPrecision(param_dtype, reduce_dtype, ...)` | `mp_policy=MixedPrecisionPolicy(param_dtype, reduce_dtype, output_dtype)` |
            | `with model.no_sync():` | `model.set_requires_gradient_sync(False)` |
            | `param_init_fn=...`, `sync_module_states=True` | construire pe dispozitivul meta, apoi `to_empty()` și `reset_parameters()` (secțiunea 2) |
            | `FSDP.state_dict_type(...)` | dicționare de stare cu DTensor și `torch.distributed.checkpoint` (secțiunea 4) |

            O precauție: valoarea implicită a lui `reshard_after_forward` s-a schimbat de la o versiune la
            alta, iar versiunile mai vechi păstrau unitatea rădăcină colectată după trecerea directă, orice
            i-ați fi dat. Setați-o explicit și, când comparați memoria, spuneți ce versiune de torch ați rulat.
            """,
        ),
        md(
            en="""
            **Exercise 1.** Write the FSDP2 setting of `reshard_after_forward` for the two FSDP1 strategies,
            as a dict of booleans.
            """,
            ro="""
            **Exercițiul 1.** Scrieți valoarea FSDP2 a lui `reshard_after_forward` pentru cele două strategii
            FSDP1, ca dicționar de valori booleene.
            """,
        ),
        exercise(solution='reshard = {"FULL_SHARD": True, "SHARD_GRAD_OP": False}', pure=True),
        check('labkit.check("lesson6.reshard_after_forward", reshard)'),
        md(
            en="""
            ## 2. Why `model.to(rank)` cannot work at 70B

            The usual first FSDP script, and this course's starting example, builds the model whole and
            only then shards it:

            ```python
            model = TransformerLM(cfg).to(rank)   # every rank: the whole model, in fp32, then on "its" GPU
            model = FSDP(model, ...)              # only now split into shards
            ```

            Every rank first creates every parameter in fp32, in host memory, and then copies all of them
            to its GPU. For the Llama-like configurations, with the parameter counts `labkit.models`
            computes:
            """,
            ro="""
            ## 2. De ce `model.to(rank)` nu poate funcționa la 70B

            Primul script FSDP obișnuit, ca și exemplul de pornire al acestui curs, construiește modelul
            întreg și abia apoi îl fragmentează:

            ```python
            model = TransformerLM(cfg).to(rank)   # fiecare rang: tot modelul, în fp32, apoi pe GPU-ul „lui”
            model = FSDP(model, ...)              # abia acum împărțit în fragmente
            ```

            Fiecare rang creează întâi fiecare parametru în fp32, în memoria gazdei, apoi îi copiază pe toți
            pe GPU-ul lui. Pentru configurațiile de tip Llama, cu numerele de parametri calculate de
            `labkit.models`:
            """,
        ),
        code(
            """
            from labkit.models import PRESETS

            gpus_per_node = 8
            show.table([
                {"model": name, "n_params": PRESETS[name].num_params(), "per_gpu": 4 * PRESETS[name].num_params(),
                 "host_per_node": gpus_per_node * 4 * PRESETS[name].num_params(),
                 "fits": 4 * PRESETS[name].num_params() <= memory_model.gpu_bytes("H100-80GB")}
                for name in ("llama-7b", "llama-13b", plan_model)
            ], units={"per_gpu": "GB", "host_per_node": "GB"}, headers={"fits": show.label("fits", gpu="80 GB")})
            """,
            pure=True,
        ),
        md(
            en="""
            At 70B the whole fp32 model is about 276 GB: no GPU holds it, and a node of 8 ranks would need
            over 2 TB of host memory just to build 8 copies before any of them is sharded. The script has
            a second bug that only shows on the second node: `.to(rank)` uses the global rank as a GPU
            index. Rank 8 is GPU 0 of node 1, and `cuda:8` does not exist there (section 3).

            The way out is the **meta device**: tensors on `torch.device("meta")` have a
            shape and a dtype but no memory. Build the model there, shard it (each rank's DTensors then
            describe only its own rows, still without memory), and only then allocate and initialize:

            ```python
            with torch.device("meta"):
                model = TransformerLM(cfg)          # shapes only
            for block in model.layers:
                fully_shard(block, mesh=mesh, reshard_after_forward=True)
            fully_shard(model, mesh=mesh, reshard_after_forward=False)  # the root: backward needs it at once
            model.to_empty(device=device)           # allocate this rank's rows, uninitialized
            model.reset_parameters()                # initialize them
            ```

            Each rank then allocates 4Ψ/N bytes of parameters, never 4Ψ. `reset_parameters()` is the
            model's own initialization; `TransformerLM` has one for this reason.
            """,
            ro="""
            La 70B, întregul model fp32 are aproximativ 276 GB: niciun GPU nu îl ține, iar un nod cu 8 ranguri
            ar avea nevoie de peste 2 TB de memorie a gazdei doar ca să construiască 8 copii înainte ca vreuna
            să fie fragmentată. Scriptul mai are o eroare, care se vede abia pe al doilea nod: `.to(rank)`
            folosește rangul global ca număr de GPU. Rangul 8 este GPU-ul 0 al nodului 1, iar `cuda:8` nu
            există acolo (secțiunea 3).

            Soluția este **dispozitivul meta (meta device)**: tensorii de pe `torch.device("meta")` au formă și
            tip, dar nu au memorie. Construiți modelul acolo, fragmentați-l (DTensor-ii fiecărui rang descriu
            atunci doar propriile rânduri, tot fără memorie) și abia apoi alocați și inițializați:

            ```python
            with torch.device("meta"):
                model = TransformerLM(cfg)          # doar forme
            for block in model.layers:
                fully_shard(block, mesh=mesh, reshard_after_forward=True)
            fully_shard(model, mesh=mesh, reshard_after_forward=False)  # rădăcina: trecerea inversă o cere imediat
            model.to_empty(device=device)           # alocă rândurile acestui rang, neinițializate
            model.reset_parameters()                # și le inițializează
            ```

            Fiecare rang alocă atunci 4Ψ/N octeți de parametri, niciodată 4Ψ. `reset_parameters()` este
            inițializarea proprie a modelului; `TransformerLM` are una tocmai de aceea.
            """,
        ),
        md(
            en="""
            ## 3. FSDP2 on your ranks

            The next cell does all of it on `nproc` ranks: builds the model on the meta device, shards it
            with FSDP2, measures what each rank has allocated before and after `to_empty()`, trains
            `steps` steps, saves a sharded checkpoint, and resumes from it in a second model (section 4).
            Each rank also reports the variables torchrun gave it.
            """,
            ro="""
            ## 3. FSDP2 pe rangurile voastre

            Celula următoare le face pe toate pe `nproc` ranguri: construiește modelul pe dispozitivul meta,
            îl fragmentează cu FSDP2, măsoară ce a alocat fiecare rang înainte și după `to_empty()`,
            antrenează `steps` pași, salvează un punct de control fragmentat și reia antrenarea din el într-un
            al doilea model (secțiunea 4). Fiecare rang raportează și variabilele primite de la torchrun.
            """,
        ),
        code(
            """
            %%torchrun -n $nproc --backend $backend --vars model_size,steps
            import os
            import tempfile

            import torch
            import torch.distributed as dist
            import torch.distributed.checkpoint as dcp
            from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
            from torch.distributed.checkpoint.stateful import Stateful
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard

            from labkit import rank
            from labkit.models import TransformerLM, get_config, synthetic_batch

            cfg = get_config(model_size)
            device = rank.device()  # cuda:LOCAL_RANK under NCCL (labkit has called torch.cuda.set_device), else the CPU
            mesh = init_device_mesh(device.type, (dist.get_world_size(),))  # one dimension: shard over all ranks


            def build():
                \"\"\"The model on the meta device, sharded: shapes only, no memory, not initialized.\"\"\"
                with torch.device("meta"):
                    model = TransformerLM(cfg)
                for block in model.layers:
                    fully_shard(block, mesh=mesh, reshard_after_forward=True)  # FULL_SHARD, set explicitly
                fully_shard(model, mesh=mesh, reshard_after_forward=False)  # the root: the docs advise False
                return model


            def allocated(model):
                \"\"\"Bytes this rank's parameters occupy: its own rows; a meta tensor occupies none.\"\"\"
                return sum(p.to_local().numel() * p.element_size() for p in model.parameters() if not p.is_meta)


            torch.manual_seed(0)
            model = build()
            on_meta = allocated(model)
            model.to_empty(device=device)  # allocate this rank's rows, uninitialized
            model.reset_parameters()  # initialize them
            weight = model.layers[0].attn.wq.weight
            rank.report(
                torch=torch.__version__, RANK=os.environ["RANK"], LOCAL_RANK=os.environ["LOCAL_RANK"],
                device=str(device), on_meta=on_meta, allocated=allocated(model),
                weight=f"{type(weight).__name__} {tuple(weight.shape)}, {weight.placements}, "
                       f"local {tuple(weight.to_local().shape)}",
            )

            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            for step in rank.steps(steps):
                inputs, targets = synthetic_batch(cfg, 8, step, rank.rank(), device)
                loss = model(inputs, targets)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()


            class TrainState(Stateful):
                \"\"\"The model and its optimizer as DCP saves and loads them: each rank its own rows.\"\"\"

                def __init__(self, model, optimizer):
                    self.model, self.optimizer = model, optimizer

                def state_dict(self):
                    model_state, optim_state = get_state_dict(self.model, self.optimizer)
                    return {"model": model_state, "optim": optim_state}

                def load_state_dict(self, state):
                    set_state_dict(self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])


            # rank 0 picks a fresh folder and tells the others; on several nodes, use one every node can see
            folder = [tempfile.mkdtemp(prefix="lesson6-checkpoint-") if rank.rank() == 0 else None]
            dist.broadcast_object_list(folder, src=0)
            checkpoint_dir = folder[0]
            dcp.save({"train": TrainState(model, optimizer)}, checkpoint_id=checkpoint_dir)

            probe = synthetic_batch(cfg, 8, 10_000, 0, device)  # one batch, the same on every rank
            with torch.no_grad():
                saved_loss = model(*probe).item()

            resumed = build()
            resumed.to_empty(device=device)  # garbage, about to be overwritten by the checkpoint
            resumed_optimizer = torch.optim.AdamW(resumed.parameters(), lr=1e-3)
            dcp.load({"train": TrainState(resumed, resumed_optimizer)}, checkpoint_id=checkpoint_dir)
            with torch.no_grad():
                resumed_loss = resumed(*probe).item()

            # one more step on both: the same only if the optimizer's state came back too
            batch = synthetic_batch(cfg, 8, steps, rank.rank(), device)
            for m, opt in ((model, optimizer), (resumed, resumed_optimizer)):
                m(*batch).backward()
                opt.step()
                opt.zero_grad()
            with torch.no_grad():
                next_losses = [model(*probe).item(), resumed(*probe).item()]
            rank.report(checkpoint_dir=checkpoint_dir, saved_loss=saved_loss, resumed_loss=resumed_loss,
                        next_step=next_losses)
            """
        ),
        code(
            """
            fsdp2 = labkit.last_run
            print("torch", fsdp2.values[0]["torch"])
            print(fsdp2.values[0]["weight"])
            show.table(
                [{"rank": r, **{k: fsdp2.values[r][k] for k in ("RANK", "LOCAL_RANK", "device", "on_meta", "allocated")}}
                 for r in range(fsdp2.nproc)],
                units={"on_meta": "KiB", "allocated": "KiB"},
            )
            """
        ),
        md(
            en="""
            Each parameter is a DTensor with placement `Shard(dim=0)`: the rank holds `1/nproc` of its rows.
            Before `to_empty()` nothing was allocated; after it, each rank holds only its own rows.

            **Exercise 2.** Write the bytes of parameters one rank allocates, as a formula of `n_params` and
            `world_size` (the parameters are fp32). The check compares it with what rank 0 measured.
            """,
            ro="""
            Fiecare parametru este un DTensor cu plasarea `Shard(dim=0)`: rangul ține `1/nproc` din rândurile
            lui. Înainte de `to_empty()` nu era alocat nimic; după, fiecare rang ține doar propriile rânduri.

            **Exercițiul 2.** Scrieți câți octeți de parametri alocă un rang, ca formulă de `n_params` și
            `world_size` (parametrii sunt fp32). Verificarea o compară cu ce a măsurat rangul 0.
            """,
        ),
        exercise(
            """
            from labkit.models import get_config

            n_params, world_size = get_config(model_size).num_params(), fsdp2.nproc
            """,
            solution="""
            def rank_bytes(n_params, world_size):
                return 4 * n_params / world_size
            """,
        ),
        check('labkit.check("lesson6.rank_bytes", rank_bytes, run=fsdp2, n_params=n_params)'),
        md(
            en="""
            ### `LOCAL_RANK`, not `RANK`

            torchrun gives every rank `RANK` (its number in the whole job, 0 to N-1) and `LOCAL_RANK` (its
            number on its own node, from 0), and the **local rank** is the one that names a
            GPU: on every node the GPUs are numbered from 0. On one machine the two are equal, as the table
            shows, which is why the seed's `torch.cuda.set_device(rank)` works on a laptop and fails on the
            second node of a cluster. Call `torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))` before
            anything touches CUDA, or every rank of a node allocates on GPU 0. (labkit does it for its own
            cells, and `rank.device()` returns `cuda:LOCAL_RANK`.)

            **Exercise 3.** On nodes of `gpus_per_node = 8` GPUs, torchrun numbers the ranks node by node.
            Which GPU index must global rank 11 pass to `set_device`? Write it as a formula of `global_rank`
            and `gpus_per_node`.
            """,
            ro="""
            ### `LOCAL_RANK`, nu `RANK`

            torchrun îi dă fiecărui rang `RANK` (numărul lui în tot jobul, de la 0 la N-1) și `LOCAL_RANK`
            (numărul lui pe propriul nod, de la 0), iar **rangul local (local rank)** este cel care numește un
            GPU: pe fiecare nod GPU-urile sunt numerotate de la 0. Pe o singură mașină cele două sunt egale,
            cum arată tabelul, și de aceea `torch.cuda.set_device(rank)` din scriptul de pornire merge pe un
            laptop și eșuează pe al doilea nod al unui cluster. Apelați
            `torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))` înainte ca ceva să atingă CUDA, altfel toate
            rangurile unui nod alocă pe GPU-ul 0. (labkit face asta pentru celulele lui, iar `rank.device()`
            întoarce `cuda:LOCAL_RANK`.)

            **Exercițiul 3.** Pe noduri cu `gpus_per_node = 8` GPU-uri, torchrun numerotează rangurile nod cu nod.
            Ce număr de GPU trebuie să dea rangul global 11 lui `set_device`? Scrieți-l ca formulă de
            `global_rank` și `gpus_per_node`.
            """,
        ),
        code(
            """
            def device_index(global_rank, gpus_per_node):
                ### BEGIN SOLUTION
                return global_rank % gpus_per_node
                ### END SOLUTION


            print(device_index(11, gpus_per_node))
            """,
            pure=True,
        ),
        check('labkit.check("lesson6.local_rank", device_index)'),
        md(
            en="""
            ## 4. A sharded checkpoint

            `torch.distributed.checkpoint` (DCP) writes a **sharded checkpoint**: every
            rank writes its own rows, in parallel, and rank 0 adds a `.metadata` file that says which rows of
            which tensor are in which file. No rank ever holds the whole model, which at 70B is the only way:
            gathering it on one rank to `torch.save` it would need the 276 GB the meta device just avoided.

            The ranks saved, loaded the files into a second, uninitialized model and optimizer, and compared
            the two on the same batch, and again after one more training step:
            """,
            ro="""
            ## 4. Un punct de control fragmentat

            `torch.distributed.checkpoint` (DCP) scrie un **punct de control fragmentat (sharded checkpoint)**: fiecare
            rang își scrie propriile rânduri, în paralel, iar rangul 0 adaugă un fișier `.metadata` care spune ce
            rânduri din ce tensor se află în ce fișier. Niciun rang nu ține vreodată tot modelul, și la 70B
            acesta este singurul mod: colectarea lui pe un rang ca să fie salvat cu `torch.save` ar cere cei 276 GB
            pe care dispozitivul meta tocmai i-a evitat.

            Rangurile au salvat, au încărcat fișierele într-un al doilea model și optimizator, neinițializate,
            și le-au comparat pe același lot, apoi din nou după încă un pas de antrenare:
            """,
        ),
        code(
            """
            import os

            v = fsdp2.values[0]
            checkpoint_dir = v["checkpoint_dir"]
            print(f"loss on the probe batch: saved model {v['saved_loss']:.6f}, resumed model {v['resumed_loss']:.6f}")
            print(f"after one more step:     saved model {v['next_step'][0]:.6f}, resumed model {v['next_step'][1]:.6f}")
            show.table([{"file": name, "bytes": os.path.getsize(os.path.join(checkpoint_dir, name))}
                        for name in sorted(os.listdir(checkpoint_dir))], units={"bytes": "KiB"})
            """
        ),
        md(
            en="""
            One `.distcp` file per rank, each about a rank's share of the parameters and of Adam's two
            moments (4 + 8 bytes per parameter, divided by the ranks) plus a little per tensor, and the
            metadata. The resumed model gives the
            same loss, and the same loss again after a step: the optimizer state was restored too.

            A checkpoint is not tied to the number of ranks that wrote it. DCP reads whatever rows the loader
            asks for, from whichever files hold them, so a checkpoint written by 64 GPUs can be loaded on 32,
            or, for a small model, in one process. This notebook's kernel is one process, with no process
            group at all (`no_dist=True`).

            **Exercise 4.** Load the model's weights from `checkpoint_dir` into `plain`, an ordinary
            `TransformerLM` in this kernel, and compute its loss on the probe batch. DCP fills the state dict
            you give it, under the same names the ranks saved: `{"train": {"model": plain.state_dict()}}`;
            then `plain.load_state_dict(...)` takes the filled inner dict. The check compares your loss with
            the ranks' `saved_loss`.
            """,
            ro="""
            Câte un fișier `.distcp` pentru fiecare rang, fiecare cam cât partea unui rang din parametri și din
            cele două momente Adam (4 + 8 octeți pe parametru, împărțiți la ranguri), plus puțin pentru fiecare
            tensor, și metadatele. Modelul reluat dă
            aceeași pierdere, și din nou aceeași după un pas: și starea optimizatorului a fost restaurată.

            Un punct de control nu este legat de numărul de ranguri care l-au scris. DCP citește ce rânduri îi
            cere cel care încarcă, din fișierele care le conțin, așa că un punct de control scris de 64 de
            GPU-uri poate fi încărcat pe 32 sau, pentru un model mic, într-un singur proces. Kernelul acestui
            notebook este un singur proces, fără niciun grup de procese (`no_dist=True`).

            **Exercițiul 4.** Încărcați ponderile modelului din `checkpoint_dir` în `plain`, un `TransformerLM`
            obișnuit din acest kernel, și calculați-i pierderea pe lotul de probă. DCP completează dicționarul de
            stare pe care i-l dați, sub aceleași nume sub care au salvat rangurile:
            `{"train": {"model": plain.state_dict()}}`; apoi `plain.load_state_dict(...)` primește dicționarul
            interior completat. Verificarea compară pierderea voastră cu `saved_loss` al rangurilor.
            """,
        ),
        exercise(
            """
            import torch
            import torch.distributed.checkpoint as dcp

            from labkit.models import TransformerLM, get_config, synthetic_batch

            cfg = get_config(model_size)
            plain = TransformerLM(cfg)
            probe = synthetic_batch(cfg, 8, 10_000, 0)  # the ranks' probe batch
            """,
            solution="""
            state = {"train": {"model": plain.state_dict()}}
            dcp.load(state, checkpoint_id=checkpoint_dir, no_dist=True)
            plain.load_state_dict(state["train"]["model"])
            with torch.no_grad():
                reloaded_loss = plain(*probe).item()
            """,
            after='print(f"loss of the reloaded model: {reloaded_loss:.6f}")',
        ),
        check('labkit.check("lesson6.reloaded_loss", plain, run=fsdp2)'),
        *RANK_EXERCISE,
        md(
            en="""
            ## 5. A memory plan for 70B

            Now the question this course has been building to: on how many 80 GB GPUs does `plan_model`
            train, and how much memory does each one use? The plan is FSDP2 with FULL_SHARD, bf16 mixed
            precision and fp32 shards (the torch accounting of lesson 5), one sequence of the model's full
            length per GPU, and **activation checkpointing**, in Romanian
            *recalcularea activărilor*: each block keeps only its input for the backward pass and computes
            its activations again when backward reaches it, one more forward's compute for a fraction of the
            memory. The memory model gives the peak per GPU for each number of GPUs:
            """,
            ro="""
            ## 5. Un plan de memorie pentru 70B

            Acum întrebarea spre care a mers tot cursul: pe câte GPU-uri de 80 GB se antrenează `plan_model` și
            câtă memorie folosește fiecare? Planul este FSDP2 cu FULL_SHARD, precizie mixtă bf16 și fragmente
            fp32 (socoteala torch din lecția 5), o secvență de lungimea completă a modelului pe fiecare GPU și
            **recalcularea activărilor (activation checkpointing)**: fiecare bloc își păstrează pentru trecerea
            inversă doar intrarea și își calculează din nou activările când trecerea inversă ajunge la el, încă
            un calcul de trecere directă în schimbul unei fracțiuni din memorie. Modelul de memorie dă vârful pe
            GPU pentru fiecare număr de GPU-uri:
            """,
        ),
        code(
            """
            PLAN = dict(precision="bf16", convention="torch", checkpointing=True, micro_batch=1)
            show.table([
                {"ranks": n, "per_gpu": memory_model.peak_memory(plan_model, "FULL_SHARD", n, **PLAN).total,
                 "fits": bool(memory_model.fits(plan_model, "H100-80GB", "FULL_SHARD", n, **PLAN))}
                for n in (8, 16, 32, 64, 128)
            ], units={"per_gpu": "GB"}, headers={"fits": show.label("fits", gpu="80 GB")})
            """,
            pure=True,
        ),
        code(
            """
            figure = memory_view.plot_memory_vs_gpus(plan_model, "H100-80GB", strategies=("DDP", "FULL_SHARD"),
                                                      world_sizes=(8, 16, 32, 64, 128, 256), peak=True, **PLAN)
            """
        ),
        md(
            en="""
            **Exercise 5.** What is the smallest number of 80 GB GPUs on which `plan_model` fits with this
            plan? The table only tries powers of two; `memory_model.fits(...)` answers for any number.
            """,
            ro="""
            **Exercițiul 5.** Care este cel mai mic număr de GPU-uri de 80 GB pe care `plan_model` încape cu
            acest plan? Tabelul încearcă doar puteri ale lui doi; `memory_model.fits(...)` răspunde pentru
            orice număr.
            """,
        ),
        exercise(
            solution="""
            min_gpus = next(n for n in range(1, 1025)
                            if memory_model.fits(plan_model, "H100-80GB", "FULL_SHARD", n, **PLAN))
            """,
            pure=True,
        ),
        check('labkit.check("lesson6.min_gpus", min_gpus, model=plan_model)'),
        md(
            en="""
            That count is not yet one you can deploy. It counts GPUs of 80 GB as the memory model defines
            them, 80·10⁹ bytes; the card's 80 GB is in fact 80 GiB (2³⁰-byte units), a little more, of
            which CUDA and its libraries keep some for themselves. And GPUs come in nodes, 8 to a node on
            DGX/HGX machines: a job takes whole nodes, and HSDP shards within a node, so round up to a
            multiple of 8. The cell prints the count both ways and the deployable count.
            """,
            ro="""
            Numărul acesta nu este încă unul pe care îl puteți folosi în practică. Numără GPU-uri de 80 GB
            așa cum le definește modelul de memorie, 80·10⁹ octeți; cei 80 GB ai plăcii sunt de fapt 80 GiB
            (unități de 2³⁰ octeți), ceva mai mult, din care CUDA și bibliotecile ei păstrează o parte pentru
            ele. Iar GPU-urile vin în noduri, câte 8 pe nod la mașinile DGX/HGX: o lucrare ia noduri
            întregi, iar HSDP fragmentează în interiorul unui nod, așa că rotunjiți în sus la un multiplu de
            8. Celula afișează numărul în ambele feluri și numărul care poate fi folosit.
            """,
        ),
        code(
            """
            min_gpus_gib = next(n for n in range(1, 1025)
                                if memory_model.fits(plan_model, 80 * 2**30, "FULL_SHARD", n, **PLAN))
            deployable = -(-max(min_gpus, min_gpus_gib) // gpus_per_node) * gpus_per_node  # whole nodes (section 2)
            show.table([{"model": plan_model, "gpus_gb": min_gpus, "gpus_gib": min_gpus_gib,
                         "nodes": deployable // gpus_per_node, "deployable": deployable}])
            """,  # not pure: its output holds exercise 5's answer, so it is printed only when a student runs it
        ),
        md(
            en="""
            ## 6. Checking the plan with fake tensors

            A formula is only as good as what it leaves out. `labkit.estimate` checks it by running the real
            thing on **fake tensors**: tensors with a shape, a dtype and a device but no data,
            on which every operation runs without computing anything. In a subprocess it joins a fake
            process group of `plan_gpus` ranks as rank 0, builds the model under `FakeTensorMode`, shards it
            with `fully_shard` as section 3 did, and runs one training step under the same memory tracker as
            lesson 5. The memory it reports is what PyTorch would allocate, category by category, with
            nothing allocated at all.

            It is not free in time: the step runs every operation of every layer in Python, and a 70B model
            has 80 layers. Its blocks are identical, though, so the estimator traces the model with a few
            blocks (`estimate.DEPTHS`) and extrapolates each category to the full depth, linearly in the number of blocks
            (a test checks the extrapolation against a whole trace, within 1%). The note under the table
            says which depths were traced and how long it took. It runs `estimate_model`, the plan's model
            unless you chose another in the parameters cell.
            """,
            ro="""
            ## 6. Verificarea planului cu tensori fictivi

            O formulă valorează doar cât îi permite ce lasă pe dinafară. `labkit.estimate` o verifică rulând
            lucrul real pe **tensori fictivi (fake tensor)**: tensori cu formă, tip și dispozitiv, dar fără date, pe
            care fiecare operație rulează fără să calculeze nimic. Într-un subproces, se alătură ca rangul 0 unui
            grup de procese fictiv cu `plan_gpus` ranguri, construiește modelul sub `FakeTensorMode`, îl
            fragmentează cu `fully_shard` ca în secțiunea 3 și rulează un pas de antrenare sub același
            măsurător de memorie ca în lecția 5. Memoria raportată este cea pe care ar aloca-o PyTorch, pe
            categorii, fără să fie alocat nimic.

            Nu este gratuit ca timp: pasul rulează în Python fiecare operație a fiecărui strat, iar un model
            de 70B are 80 de straturi. Blocurile lui sunt însă identice, așa că estimatorul rulează modelul
            cu câteva blocuri (`estimate.DEPTHS`) și extrapolează fiecare categorie la adâncimea întreagă, liniar în numărul
            de blocuri (un test compară extrapolarea cu rularea modelului întreg, la 1%). Nota de sub tabel
            spune ce adâncimi au fost rulate și cât a durat. Rulează `estimate_model`, modelul planului,
            dacă nu ați ales altul în celula de parametri.
            """,
        ),
        code(
            """
            fake = estimate.estimate_peak(estimate_model, world_size=plan_gpus, precision="bf16", checkpointing=True)
            print(fake)
            """
        ),
        md(
            en="""
            The table puts the fake run beside the memory model, category by category, and the notes under
            it say where and why they differ: the model finds the moment of the step when the most is alive
            and counts each term at that moment, backward's temporaries included
            (`memory_model.peak_memory(...).explain()` lists them). The totals are close, which is what a
            plan needs; where you are near the edge of a GPU, trust the fake run, and leave a margin for the
            CUDA context and fragmentation that neither of them sees.

            ## 7. Leaving the notebook

            A 70B run does not start from a notebook cell. `labkit export` turns a lesson's `%%torchrun` cells
            into one plain script for `torchrun`, with the `--vars` values taken from the parameters cell:
            """,
            ro="""
            Tabelul pune rularea fictivă lângă modelul de memorie, categorie cu categorie, iar notele de sub el
            spun unde și de ce diferă: modelul găsește momentul pasului în care trăiește cel mai mult și
            numără fiecare termen în acel moment, inclusiv valorile temporare ale trecerii inverse
            (`memory_model.peak_memory(...).explain()` le enumeră). Totalurile sunt apropiate, și de asta are
            nevoie un plan; acolo unde sunteți aproape de limita unui GPU, aveți încredere în
            rularea fictivă și lăsați o rezervă pentru contextul CUDA și fragmentarea memoriei, pe care nu le
            vede niciuna dintre ele.

            ## 7. Ieșirea din notebook

            O rulare de 70B nu pornește dintr-o celulă de notebook. `labkit export` transformă celulele
            `%%torchrun` ale unei lecții într-un singur script pentru `torchrun`, cu valorile din `--vars` luate
            din celula de parametri:
            """,
        ),
        code(
            """
            import subprocess
            import tempfile

            import nbformat

            from labkit import export

            repo = os.path.dirname(os.path.dirname(labkit.__file__))  # the fsdp-labkit checkout
            here = "06_fsdp2_70b.ipynb"  # this notebook, when Jupyter runs it from its own folder; else the course's copy
            source = here if os.path.exists(here) else os.path.join(repo, "notebooks", labkit.get_lang(), here)
            folder = tempfile.mkdtemp(prefix="lesson6-export-")
            notebook = nbformat.read(source, as_version=4)
            for cell in notebook.cells:  # the values this kernel ran with (papermill may have set them), not the file's
                cell.source = cell.source.replace("$nproc", str(nproc)).replace("$backend", backend)
            copy, script = os.path.join(folder, "lesson6.ipynb"), os.path.join(folder, "fsdp2.py")
            nbformat.write(notebook, copy)
            text = export.export_notebook(copy, out=script)  # in a shell: labkit export lesson6.ipynb -o fsdp2.py
            print(f"wrote {script}: {len(text.splitlines())} lines; its head:\\n")
            print("\\n".join(text.splitlines()[:14]))
            """
        ),
        md(
            en="""
            The repository's `launch/` folder starts that script on real machines:

            - `launch/torchrun-multinode.sh`: run it on every node with the same arguments; node 0 hosts
              torchrun's c10d rendezvous, and each node starts one rank per GPU it was given. `--dry-run`
              prints the `torchrun` command it would run, as the next cell does for node 0 of a two-node job.
            - `launch/slurm/train.sbatch`: `sbatch launch/slurm/train.sbatch fsdp2.py` runs one torchrun per
              node under Slurm (edit its `#SBATCH` lines for your cluster), through
              `launch/slurm/torchrun-from-slurm.sh`, which finds the first node and the node's rank from
              Slurm's variables.

            Two things the notebook did for you that a cluster will not: the checkpoint folder must be one
            that every node can see (a shared file system, not `/tmp`), and under NCCL each rank must call
            `torch.cuda.set_device(LOCAL_RANK)` first, as section 3 said (the exported script keeps labkit's
            process-group setup, which does).
            """,
            ro="""
            Folderul `launch/` al depozitului pornește acest script pe mașini reale:

            - `launch/torchrun-multinode.sh`: rulați-l pe fiecare nod cu aceleași argumente; nodul 0 găzduiește
              rendezvous-ul c10d al lui torchrun, iar fiecare nod pornește câte un rang pentru fiecare GPU primit.
              `--dry-run` afișează comanda `torchrun` pe care ar rula-o, cum face celula următoare pentru nodul 0
              al unui job pe două noduri.
            - `launch/slurm/train.sbatch`: `sbatch launch/slurm/train.sbatch fsdp2.py` rulează câte un torchrun pe
              fiecare nod sub Slurm (adaptați liniile `#SBATCH` la clusterul vostru), prin
              `launch/slurm/torchrun-from-slurm.sh`, care află primul nod și rangul nodului din variabilele Slurm.

            Două lucruri pe care notebook-ul le-a făcut pentru voi și pe care un cluster nu le face: folderul
            punctului de control trebuie să fie unul pe care îl vede fiecare nod (un sistem de fișiere partajat,
            nu `/tmp`), iar sub NCCL fiecare rang trebuie să apeleze întâi `torch.cuda.set_device(LOCAL_RANK)`,
            cum spunea secțiunea 3 (scriptul exportat păstrează pregătirea grupului de procese a labkit, care
            face asta).
            """,
        ),
        code(
            """
            launcher = os.path.join(repo, "launch", "torchrun-multinode.sh")
            dry = subprocess.run(
                ["bash", launcher, "--nnodes", "2", "--node-rank", "0", "--rdzv-endpoint", "node0:29400",
                 "--nproc-per-node", "8", "--dry-run", script],
                capture_output=True, text=True, timeout=60,
            )
            print(dry.stderr.strip())
            """
        ),
        md(
            en="""
            ## Recap

            - FSDP2's `fully_shard` shards each parameter as a DTensor and keeps the module and its names;
              every FSDP1 option you used has an FSDP2 form, and `reshard_after_forward` should be set
              explicitly (`False` for the root, as the documentation advises).
            - `model.to(rank)` before wrapping makes every rank build the whole model: 276 GB in fp32 at 70B.
              Build on the meta device, shard, then `to_empty()` and `reset_parameters()`: your ranks
              allocated nothing before and their own rows after.
            - Pick the GPU with `LOCAL_RANK`: the global rank is not a GPU index beyond the first node.
            - `torch.distributed.checkpoint` saves each rank's shards in parallel; your run resumed from them
              exactly, and this kernel loaded them into an unsharded model.
            - The memory model plans `plan_model` on N GPUs, and the fake-tensor estimator checks the plan
              without allocating it. `labkit export` and `launch/` take the same code to torchrun on many
              nodes or to Slurm.
            """,
            ro="""
            ## Recapitulare

            - `fully_shard` din FSDP2 fragmentează fiecare parametru ca DTensor și păstrează modulul și numele
              lui; fiecare opțiune FSDP1 pe care ați folosit-o are o formă FSDP2, iar `reshard_after_forward`
              trebuie setat explicit (`False` pentru rădăcină, cum recomandă documentația).
            - `model.to(rank)` înainte de împachetare face ca fiecare rang să construiască tot modelul: 276 GB în
              fp32 la 70B. Construiți pe dispozitivul meta, fragmentați, apoi `to_empty()` și
              `reset_parameters()`: rangurile voastre nu au alocat nimic înainte și doar propriile rânduri după.
            - Alegeți GPU-ul cu `LOCAL_RANK`: rangul global nu este un număr de GPU dincolo de primul nod.
            - `torch.distributed.checkpoint` salvează în paralel fragmentele fiecărui rang; rularea voastră a
              reluat exact din ele, iar acest kernel le-a încărcat într-un model nefragmentat.
            - Modelul de memorie planifică `plan_model` pe N GPU-uri, iar estimatorul cu tensori fictivi verifică
              planul fără să-l aloce. `labkit export` și `launch/` duc același cod spre torchrun pe mai multe
              noduri sau spre Slurm.
            """,
        ),
    ],
)
