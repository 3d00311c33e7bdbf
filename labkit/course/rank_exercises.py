"""The coding exercises that run on the ranks: at least one per lesson.

Each is a ``%%torchrun`` cell with solution regions (nbgrader's markers) that the student
edition blanks. The cell measures what the student's code did (the collectives it issued,
the units FSDP made, the bytes a rank holds, the gradients it produced) and reports it; the
lesson's check reads those reports from the cell's Run (``labkit.last_run``), so no number
is typed in. Every cell is small (the ``tiny`` model, 2 ranks, one or two steps) to keep the
lessons' time flat (lesson 6's takes ``nproc``, since that lesson exports its ``%%torchrun`` cells
into one script, which runs in one world). The verifiers live in ``labkit/grading/exercises.py``: they
read what labkit observed the ranks do (``labkit.ranks.observe``), not what the cell reports.
"""

from __future__ import annotations

from labkit.course.cells import Code, check, code, md


def _check(qid: str) -> Code:
    return check(f'labkit.check("{qid}", labkit.last_run)')


# -- lesson 0: an all-reduce by hand ----------------------------------------------------------

LESSON0 = [
    md(
        en="""
        **Exercise on the ranks.** Now write code that runs on the ranks. Each rank holds its own four
        numbers, `mine` (rank `r` holds `[0, 1, 2, 3] * (r + 1)`). Inside the marked region, make `mean`
        the element-wise mean of every rank's `mine`, the same tensor on every rank, with one
        collective. The check reads what each rank reported: its `mean`, and the collectives it counted.
        """,
        ro="""
        **Exercițiu pe ranguri.** Acum scrieți cod care rulează pe ranguri. Fiecare rang are propriile
        patru numere, `mine` (rangul `r` are `[0, 1, 2, 3] * (r + 1)`). În regiunea marcată, faceți din
        `mean` media, element cu element, a valorilor `mine` ale tuturor rangurilor, același tensor pe
        fiecare rang, cu o singură operație colectivă. Verificarea citește ce a raportat fiecare rang:
        `mean` și operațiile colective numărate.
        """,
    ),
    code(
        """
        %%torchrun -n 2 --backend $backend --quiet
        import torch
        import torch.distributed as dist

        from labkit import comm, rank

        mine = torch.arange(4.0, device=rank.device()) * (rank.rank() + 1)  # each rank's own numbers
        with comm.count(send=False) as counted:  # counts the collectives your code issues
            ### BEGIN SOLUTION
            mean = mine.clone()
            dist.all_reduce(mean)  # the sum over the ranks, on every rank
            mean /= dist.get_world_size()
            ### END SOLUTION
        rank.report(mean=mean.tolist(), collectives=sorted(counted.totals()))
        """
    ),
    _check("lesson0.mean_on_ranks"),
]

# -- lesson 1: DDP's gradient averaging, by hand --------------------------------------------

LESSON1 = [
    md(
        en="""
        **Exercise on the ranks: DDP by hand.** DDP's whole mechanism is one collective. Write
        `average_gradients(model)`: after `backward()`, each rank holds the gradients of its own batch;
        make every parameter's `.grad` the mean over the ranks. The cell compares your gradients with
        those of `DistributedDataParallel` on the same batches, and the check asks for agreement to 1e-6
        on every rank.
        """,
        ro="""
        **Exercițiu pe ranguri: DDP de mână.** Tot mecanismul DDP este o singură operație colectivă.
        Scrieți `average_gradients(model)`: după `backward()`, fiecare rang are gradienții propriului
        lot; faceți din `.grad` al fiecărui parametru media pe ranguri. Celula compară gradienții voștri
        cu cei ai `DistributedDataParallel` pe aceleași loturi, iar verificarea cere potrivire la 1e-6
        pe fiecare rang.
        """,
    ),
    code(
        """
        %%torchrun -n 2 --backend $backend --quiet
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        from labkit import rank
        from labkit.models import TransformerLM, get_config, synthetic_batch


        def average_gradients(model):
            ### BEGIN SOLUTION
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= dist.get_world_size()
            ### END SOLUTION


        cfg = get_config("tiny")
        torch.manual_seed(0)
        mine = TransformerLM(cfg).to(rank.device())  # trained with your averaging
        torch.manual_seed(0)
        ddp = DistributedDataParallel(TransformerLM(cfg).to(rank.device()))  # the reference
        inputs, targets = synthetic_batch(cfg, 4, 0, rank.rank(), rank.device())  # each rank its own batch
        mine(inputs, targets).backward()
        ddp(inputs, targets).backward()


        def gap():
            return max((a.grad - b.grad).abs().max().item() for a, b in zip(mine.parameters(), ddp.module.parameters()))


        before = gap()
        average_gradients(mine)
        rank.report(grad_diff=gap(), before=before)
        """
    ),
    _check("lesson1.ddp_by_hand"),
]

# -- lesson 2: a mini ZeRO-3 from two collectives --------------------------------------------

LESSON2 = [
    md(
        en="""
        **Exercise on the ranks: a mini ZeRO-3.** Build ZeRO-3's mechanism from the two collectives
        above. The cell flattens the model's parameters into one vector and keeps only this rank's
        shard of it. Write `gather_params(shard)`, which returns the whole vector on every rank (the
        cell calls it before forward), and `reduce_scatter_grads(flat_grad)`, which returns this rank's
        shard of the gradient averaged over the ranks. The check asks for DDP's gradients to 1e-6, the
        two collectives, and a rank keeping 1/N of what DDP keeps.
        """,
        ro="""
        **Exercițiu pe ranguri: un mini ZeRO-3.** Construiți mecanismul ZeRO-3 din cele două operații
        colective de mai sus. Celula aplatizează parametrii modelului într-un singur vector și păstrează
        doar fragmentul acestui rang. Scrieți `gather_params(shard)`, care întoarce vectorul întreg pe
        fiecare rang (celula o apelează înainte de trecerea directă), și `reduce_scatter_grads(flat_grad)`,
        care întoarce fragmentul acestui rang din gradientul mediat pe ranguri. Verificarea cere
        gradienții DDP la 1e-6, cele două operații colective și un rang care păstrează 1/N din ce
        păstrează DDP.
        """,
    ),
    code(
        """
        %%torchrun -n 2 --backend $backend --quiet
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        from torch.nn.utils import parameters_to_vector, vector_to_parameters

        from labkit import comm, rank
        from labkit.models import TransformerLM, get_config, synthetic_batch

        world = dist.get_world_size()


        def gather_params(shard):  # -> the whole flat parameter vector, on every rank
            ### BEGIN SOLUTION
            full = shard.new_empty(shard.numel() * world)
            dist.all_gather_into_tensor(full, shard)
            return full
            ### END SOLUTION


        def reduce_scatter_grads(flat_grad):  # -> this rank's shard of the mean gradient
            ### BEGIN SOLUTION
            mine = flat_grad.new_empty(flat_grad.numel() // world)
            dist.reduce_scatter_tensor(mine, flat_grad)
            return mine / world
            ### END SOLUTION


        cfg = get_config("tiny")
        torch.manual_seed(0)
        model = TransformerLM(cfg).to(rank.device())
        shapes, numel = [p.shape for p in model.parameters()], sum(p.numel() for p in model.parameters())
        padding = torch.zeros(-numel % world, device=rank.device())  # so that the flat vector splits evenly
        flat = torch.cat([parameters_to_vector(model.parameters()).detach(), padding])
        shard = flat.chunk(world)[rank.rank()].clone()  # all this rank keeps between steps
        for p in model.parameters():
            p.data = p.data.new_empty(0)  # free the whole copy
        del flat

        inputs, targets = synthetic_batch(cfg, 4, 0, rank.rank(), rank.device())  # each rank its own batch
        with comm.count(send=False) as counted:
            full = gather_params(shard)  # before forward: the whole parameters, for this step only
            for p, shape in zip(model.parameters(), shapes):
                p.data = full.new_empty(shape)
            vector_to_parameters(full[:numel], model.parameters())
            del full
            model(inputs, targets).backward()
            flat_grad = torch.cat([parameters_to_vector(p.grad for p in model.parameters()), padding])
            grad_shard = reduce_scatter_grads(flat_grad)
        for p in model.parameters():  # after the step, free the whole parameters and gradients again
            p.data, p.grad = p.data.new_empty(0), None

        torch.manual_seed(0)
        ddp = DistributedDataParallel(TransformerLM(cfg).to(rank.device()))  # the reference
        ddp(inputs, targets).backward()
        reference = torch.cat([parameters_to_vector(p.grad for p in ddp.parameters()), padding])
        rank.report(
            grad_diff=(grad_shard - reference.chunk(world)[rank.rank()]).abs().max().item(),
            kept_bytes=(shard.numel() + grad_shard.numel()) * shard.element_size(),
            ddp_bytes=sum(2 * p.numel() * p.element_size() for p in ddp.parameters()),
            collectives=sorted(counted.totals()),
        )
        """
    ),
    _check("lesson2.mini_zero3"),
]

# -- lesson 3: units, made two ways: an FSDP1 policy of your own, and fully_shard per block ------

LESSON3 = [
    md(
        en="""
        **Exercise on the ranks: units, two ways.** Wrap the `tiny` model so that each
        `TransformerBlock` is a unit and the rest (embeddings, final norm, output) stays in the root:
        with FSDP1, by writing a policy of your own (`my_policy` is called with `recurse=True` to ask
        whether to look inside a module, and with `recurse=False` to ask whether to wrap it); with FSDP2,
        by calling `fully_shard` on each block, then on the root. The check reads the units FSDP made
        and the parameter bytes each rank holds.
        """,
        ro="""
        **Exercițiu pe ranguri: unități, în două feluri.** Împachetați modelul `tiny` astfel încât fiecare
        `TransformerBlock` să fie o unitate, iar restul (încorporările, normalizarea finală, ieșirea) să
        rămână în rădăcină: cu FSDP1, scriind o politică proprie (`my_policy` este apelată cu
        `recurse=True` ca să afle dacă intră într-un modul și cu `recurse=False` ca să afle dacă îl
        împachetează); cu FSDP2, apelând `fully_shard` pe fiecare bloc, apoi pe rădăcină. Verificarea
        citește unitățile făcute de FSDP și octeții de parametri ținuți de fiecare rang.
        """,
    ),
    code(
        """
        %%torchrun -n 2 --backend $backend --quiet
        import torch
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard

        from labkit import comm, memtrack, rank
        from labkit.models import TransformerBlock, TransformerLM, get_config

        cfg = get_config("tiny")


        def my_policy(module, recurse, nonwrapped_numel):  # FSDP1 asks: go into the children? wrap this one?
            ### BEGIN SOLUTION
            return recurse or isinstance(module, TransformerBlock)
            ### END SOLUTION


        def shard_per_block(model, mesh):  # FSDP2: each block its own unit, the rest in the root
            ### BEGIN SOLUTION
            for block in model.layers:
                fully_shard(block, mesh=mesh)
            fully_shard(model, mesh=mesh, reshard_after_forward=False)  # the root is needed again first in backward
            ### END SOLUTION


        torch.manual_seed(0)
        fsdp1 = FullyShardedDataParallel(TransformerLM(cfg), auto_wrap_policy=my_policy, device_id=rank.device())
        fsdp2 = TransformerLM(cfg).to(rank.device())
        shard_per_block(fsdp2, init_device_mesh(rank.device().type, (rank.world_size(),)))
        rank.report(
            n_params=sum(p.numel() for p in TransformerLM(cfg).parameters()),
            blocks=[f"layers.{i}" for i in range(cfg.n_layers)],
            fsdp1_units=comm.padded_units(fsdp1),
            fsdp2_units=comm.padded_units(fsdp2),
            fsdp1_bytes=memtrack.split_by_role(fsdp1)["params"],
            fsdp2_bytes=memtrack.split_by_role(fsdp2)["params"],
        )
        """
    ),
    _check("lesson3.wrap_units"),
]

# -- lesson 4: forward prefetch, set by hand (FSDP2) ----------------------------------------------

LESSON4 = [
    md(
        en="""
        **Exercise on the ranks: forward prefetch in FSDP2.** FSDP2 has no `forward_prefetch` flag: you
        name, per module, what to gather ahead. Write `set_forward_prefetch(model)` so that, while block
        `i` computes, the all-gather of block `i + 1` is already issued. The cell counts the all-gathers
        issued when each block starts computing; the check reads those counts.
        """,
        ro="""
        **Exercițiu pe ranguri: preîncărcare în trecerea directă cu FSDP2.** FSDP2 nu are opțiunea
        `forward_prefetch`: numiți, pentru fiecare modul, ce să colecteze dinainte. Scrieți
        `set_forward_prefetch(model)` astfel încât, cât timp calculează blocul `i`, colectarea blocului
        `i + 1` să fie deja pornită. Celula numără colectările pornite când începe să calculeze fiecare
        bloc; verificarea citește aceste numere.
        """,
    ),
    code(
        """
        %%torchrun -n 2 --backend $backend --quiet
        import torch
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        from labkit import comm, rank
        from labkit.models import TransformerLM, get_config, synthetic_batch

        cfg = get_config("tiny")


        def set_forward_prefetch(model):  # while block i computes, block i + 1 should already be on its way
            ### BEGIN SOLUTION
            blocks = list(model.layers)
            for block, following in zip(blocks, blocks[1:]):
                block.set_modules_to_forward_prefetch([following])
            ### END SOLUTION


        torch.manual_seed(0)
        model = TransformerLM(cfg).to(rank.device())
        mesh = init_device_mesh(rank.device().type, (rank.world_size(),))
        for block in model.layers:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        set_forward_prefetch(model)

        inputs, targets = synthetic_batch(cfg, 4, 0, rank.rank(), rank.device())
        with comm.count(send=False) as counted:
            gathered_at_start = []  # all-gathers issued when each block starts computing
            for block in model.layers:
                block.register_forward_pre_hook(lambda *_: gathered_at_start.append(counted.totals()["all_gather"]["calls"]))
            model(inputs, targets).backward()
        rank.report(gathered_at_start=gathered_at_start)
        """
    ),
    _check("lesson4.forward_prefetch"),
]

# -- lesson 5: a MixedPrecisionPolicy that halves the gathered bytes -------------------------------

LESSON5 = [
    md(
        en="""
        **Exercise on the ranks: a precision policy.** Write `my_policy()`, an FSDP2
        `MixedPrecisionPolicy` under which one step all-gathers half the bytes of fp32 while the
        gradients are still reduced in fp32. The cell runs one step with the default policy and one with
        yours and counts the bytes of each collective; the check compares them.
        """,
        ro="""
        **Exercițiu pe ranguri: o politică de precizie.** Scrieți `my_policy()`, o politică FSDP2
        `MixedPrecisionPolicy` cu care un pas colectează jumătate din octeții fp32, în timp ce gradienții
        sunt reduși tot în fp32. Celula rulează un pas cu politica implicită și unul cu a voastră și
        numără octeții fiecărei operații colective; verificarea îi compară.
        """,
    ),
    code(
        """
        %%torchrun -n 2 --backend $backend --quiet
        import torch
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        from labkit import comm, rank
        from labkit.models import TransformerLM, get_config, synthetic_batch

        cfg = get_config("tiny")


        def my_policy():  # gathers and computes in half the bytes; reduces the gradients in fp32
            ### BEGIN SOLUTION
            return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            ### END SOLUTION


        def one_step(policy):
            torch.manual_seed(0)
            model = TransformerLM(cfg).to(rank.device())
            mesh = init_device_mesh(rank.device().type, (rank.world_size(),))
            for block in model.layers:
                fully_shard(block, mesh=mesh, mp_policy=policy)
            fully_shard(model, mesh=mesh, mp_policy=policy)
            inputs, targets = synthetic_batch(cfg, 4, 0, rank.rank(), rank.device())
            with comm.count(send=False) as counted:
                loss = model(inputs, targets)
                loss.backward()
            totals = counted.totals()
            return {"loss": loss.item(), **{op: totals.get(op, {}).get("bytes", 0) for op in ("all_gather", "reduce_scatter")}}


        rank.report(fp32=one_step(MixedPrecisionPolicy()), yours=one_step(my_policy()))
        """
    ),
    _check("lesson5.mixed_precision"),
]

# -- lesson 6: activation checkpointing to fit a memory budget -----------------------------------

LESSON6 = [
    md(
        en="""
        **Exercise on the ranks: a memory budget.** The cell measures, with `labkit.memtrack`, the
        activations at the peak of one step of the `tiny` model under FSDP2, and sets a budget of 60% of
        them. Write `fit_in_budget(model)` (called before `fully_shard`) so that the same step, on the same
        batch, fits the budget. The check reads both measurements and both losses.
        """,
        ro="""
        **Exercițiu pe ranguri: un buget de memorie.** Celula măsoară cu `labkit.memtrack` activările de la
        vârful unui pas al modelului `tiny` cu FSDP2 și fixează un buget de 60% din ele. Scrieți
        `fit_in_budget(model)` (apelată înainte de `fully_shard`) astfel încât același pas, pe același
        lot, să încapă în buget. Verificarea citește ambele măsurători și ambele pierderi.
        """,
    ),
    code(
        """
        %%torchrun -n $nproc --backend $backend --quiet
        import torch
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        from labkit import memtrack, rank
        from labkit.models import TransformerBlock, TransformerLM, get_config, synthetic_batch

        cfg = get_config("tiny")


        def fit_in_budget(model):  # called before fully_shard: make the activations fit the budget
            ### BEGIN SOLUTION
            apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, TransformerBlock))
            ### END SOLUTION


        def activations_at_peak(prepare):
            torch.manual_seed(0)
            model = TransformerLM(cfg).to(rank.device())
            prepare(model)
            mesh = init_device_mesh(rank.device().type, (rank.world_size(),))
            for block in model.layers:
                fully_shard(block, mesh=mesh)
            fully_shard(model, mesh=mesh, reshard_after_forward=False)
            tracker = memtrack.track(model, steps=[0], send=False)
            inputs, targets = synthetic_batch(cfg, 8, 0, rank.rank(), rank.device())
            with tracker.step(0):
                loss = model(inputs, targets)
                loss.backward()
            peak = next(m for m in tracker.results if m["phase"] == "peak")
            return {"loss": loss.item(), "activations": peak["categories"]["activations"]}


        plain = activations_at_peak(lambda model: None)
        budget = plain["activations"] * 0.6  # the budget: 60% of the activations without checkpointing
        rank.report(plain=plain, budget=budget, yours=activations_at_peak(fit_in_budget))
        """
    ),
    _check("lesson6.checkpoint_budget"),
]
