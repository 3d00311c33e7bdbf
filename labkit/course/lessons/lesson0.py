"""Lesson 0: setup and check. What the machine has, a first %%torchrun cell, the dashboard,
and the seed's Example 1 (FSDP on two CPU ranks)."""

from labkit.course.cells import Lesson, check, code, exercise, md, parameters, setup
from labkit.course.rank_exercises import LESSON0 as RANK_EXERCISE

LESSON = Lesson(
    id="lesson0",
    file="00_setup",
    title={"en": "Lesson 0: setup and check", "ro": "Lecția 0: pregătire și verificare"},
    terms=(
        "rank",
        "world_size",
        "process_group",
        "backend",
        "collective",
        "all_reduce",
        "dashboard",
        "loss",
        "step",
        "forward",
        "backward",
    ),
    cells=[
        md(
            en="""
            # Lesson 0: setup and check

            This course teaches PyTorch's Fully Sharded Data Parallel (FSDP) by running it: every
            number you will see comes from processes that really train on your machine, or from a
            formula that the course's tests check against such runs.

            **In this lesson you will**

            - find out what your machine offers: GPUs, the communication backend, how many ranks it can run;
            - run a first cell on several processes at once with `%%torchrun`;
            - read the live dashboard and the `Run` object a run leaves behind;
            - run FSDP for the first time: a small transformer, sharded over two ranks.

            Run the notebook top to bottom (*Run → Run All Cells*). Each lesson starts with a
            **parameters** cell: change `nproc`, `backend`, `model_size` or `steps` there, or pass them
            with papermill (`papermill 00_setup.ipynb out.ipynb -p nproc 4`).
            """,
            ro="""
            # Lecția 0: pregătire și verificare

            Acest curs predă Fully Sharded Data Parallel (FSDP) din PyTorch rulându-l: fiecare număr pe
            care îl veți vedea provine din procese care chiar antrenează pe mașina voastră, sau dintr-o
            formulă pe care testele cursului o verifică pe astfel de rulări.

            **În această lecție veți**

            - afla ce oferă mașina voastră: GPU-uri, biblioteca de comunicare, câte ranguri poate rula;
            - rula o primă celulă pe mai multe procese deodată, cu `%%torchrun`;
            - citi panoul care se actualizează în timpul rulării și obiectul `Run` rămas după ea;
            - rula FSDP pentru prima dată: un transformer mic, fragmentat pe două ranguri.

            Rulați notebook-ul de sus până jos (*Run → Run All Cells*). Fiecare lecție începe cu o celulă
            de **parametri**: schimbați acolo `nproc`, `backend`, `model_size` sau `steps`, ori dați-i
            prin papermill (`papermill 00_setup.ipynb out.ipynb -p nproc 4`).
            """,
        ),
        parameters(nproc=2, backend="auto", model_size="tiny", steps=3),
        md(
            en="""
            The first code cell loads labkit's `%%torchrun` magic, sets the language of labkit's
            messages and imports `labkit`. `show` prints the small tables of these lessons.
            """,
            ro="""
            Prima celulă de cod încarcă comanda magică `%%torchrun` din labkit, alege limba mesajelor labkit și
            importă `labkit`. `show` afișează tabelele mici din aceste lecții.
            """,
        ),
        setup("from labkit.course import show"),
        md(
            en="""
            ## 1. What this machine has

            Distributed training runs one process per device. Each process is a **rank**, numbered
            from 0; the number of ranks is the **world size**. The ranks talk through a
            **communication backend**: NCCL between NVIDIA GPUs, gloo between CPU processes. On a
            laptop without a GPU every rank is a CPU process and the backend is gloo; on a GPU node
            each rank gets one GPU and the backend is NCCL. `backend = "auto"` picks for you.
            """,
            ro="""
            ## 1. Ce are această mașină

            Antrenarea distribuită rulează un proces pentru fiecare dispozitiv. Fiecare proces este un
            **rang (rank)**, numerotat de la 0; câte ranguri sunt în total este **numărul de ranguri
            (world size)**. Rangurile comunică printr-o **bibliotecă de comunicare (backend)**: NCCL între
            GPU-uri NVIDIA, gloo între procese pe CPU. Pe un laptop fără GPU fiecare rang este un proces
            pe CPU, iar biblioteca este gloo; pe un nod cu GPU-uri fiecare rang primește un GPU, iar
            biblioteca este NCCL. `backend = "auto"` alege în locul vostru.
            """,
        ),
        code("machine = show.machine(backend)"),
        md(
            en="""
            ## 2. A first `%%torchrun` cell

            A cell that starts with `%%torchrun -n N` does not run in this notebook's kernel. labkit
            starts PyTorch's own launcher, `torchrun`, which starts N processes; each runs the cell's
            code from the top. Before your code runs, labkit joins the ranks into a **process group**
            (unless your code calls `init_process_group` itself, as Example 1 below does).

            In the cell, `from labkit import rank` gives each process its identity (`rank.rank()`,
            `rank.world_size()`, `rank.device()`) and a way to send results back: `rank.report(name=value)`.

            The cell also makes one **collective** call: an operation that every rank of the group
            takes part in. `dist.all_reduce(x)` is an **all-reduce**: each rank sends its tensor,
            and each receives the sum of all of them.
            """,
            ro="""
            ## 2. O primă celulă `%%torchrun`

            O celulă care începe cu `%%torchrun -n N` nu rulează în kernelul acestui notebook. labkit
            pornește lansatorul PyTorch, `torchrun`, care pornește N procese; fiecare rulează codul
            celulei de la început. Înainte de codul vostru, labkit unește rangurile într-un **grup de
            procese (process group)**, cu excepția cazului în care codul apelează singur
            `init_process_group`, ca Exemplul 1 de mai jos.

            În celulă, `from labkit import rank` îi dă fiecărui proces identitatea (`rank.rank()`,
            `rank.world_size()`, `rank.device()`) și un mod de a trimite rezultate înapoi:
            `rank.report(nume=valoare)`.

            Celula face și un apel colectiv, o **operație colectivă (collective)**: o operație la care
            participă toate rangurile grupului. `dist.all_reduce(x)` este o **reducere globală
            (all-reduce)**: fiecare rang își trimite tensorul și fiecare primește suma tuturor.
            """,
        ),
        code(
            """
            %%torchrun -n $nproc --backend $backend
            import os

            import torch
            import torch.distributed as dist

            from labkit import rank

            x = torch.tensor([rank.rank() + 1.0], device=rank.device())
            dist.all_reduce(x)  # every rank sends its number and receives the sum of all of them
            rank.report(
                rank=rank.rank(),
                world_size=dist.get_world_size(),
                backend=dist.get_backend(),
                device=str(rank.device()),
                pid=os.getpid(),
                total=x.item(),
            )
            """
        ),
        md(
            en="""
            The run is over; what it measured is in a `Run` object, in `labkit.last_run` (and in `_`
            right after the cell). `hello.values[r]` holds what rank `r` reported:
            """,
            ro="""
            Rularea s-a încheiat; ce a măsurat se află într-un obiect `Run`, în `labkit.last_run` (și în
            `_`, imediat după celulă). `hello.values[r]` conține ce a raportat rangul `r`:
            """,
        ),
        code(
            """
            hello = labkit.last_run
            show.table([hello.values[r] for r in sorted(hello.values)])
            """
        ),
        md(
            en="""
            **Exercise 1.** Each rank put `rank + 1` into the all-reduce. Write, as a formula of
            `world_size`, the result every rank received. The check compares your formula with the
            expected value for the world size of your run; the run's own result is printed beside it.
            """,
            ro="""
            **Exercițiul 1.** Fiecare rang a pus `rank + 1` în reducerea globală. Scrieți, ca formulă de
            `world_size`, rezultatul primit de fiecare rang. Verificarea compară formula voastră cu
            valoarea așteptată pentru numărul de ranguri al rulării; rezultatul rulării este afișat alături.
            """,
        ),
        code(
            """
            def allreduce_total(world_size):
                ### BEGIN SOLUTION
                return world_size * (world_size + 1) / 2
                ### END SOLUTION


            print(f"predicted {allreduce_total(hello.nproc)}, measured {hello.values[0]['total']}")
            """
        ),
        check('labkit.check("lesson0.allreduce_sum", allreduce_total)'),
        *RANK_EXERCISE,
        md(
            en="""
            ## 3. The dashboard

            While a run is going, the cell shows a **dashboard**, one row per rank:

            | column | what it shows |
            |---|---|
            | status | starting, running, done, or failed (with the exit code or the signal) |
            | memory now, peak | the rank's memory: on a GPU, what CUDA has allocated; on the CPU, the bytes of the tensors the cell can reach by name |
            | last step, steps | the time of the last `rank.steps()` step, and how many ran |
            | last line | the rank's last `rank.log()` or printed line |

            Below the table, a plot of every rank's memory over time; below that, one tab per rank with
            its own output (ranks never interleave), and a **Stop** button that ends the run. Where
            there is no browser (papermill, nbval), the same run prints a text summary and one figure
            at the end.

            The next cell makes each rank hold a buffer that grows by `rank + 1` MiB at every step,
            so the memory lines climb at different slopes.
            """,
            ro="""
            ## 3. Panoul

            Cât timp rulează, celula afișează un **panou (dashboard)**, cu un rând pentru fiecare rang:

            | coloană | ce arată |
            |---|---|
            | stare | pornește, rulează, gata sau eșuat (cu codul de ieșire sau semnalul) |
            | memorie acum, vârf | memoria rangului: pe GPU, cât a alocat CUDA; pe CPU, octeții tensorilor pe care celula îi poate atinge prin nume |
            | ultimul pas, pași | durata ultimului pas din `rank.steps()` și câți pași au rulat |
            | ultima linie | ultimul `rank.log()` sau ultima linie afișată de rang |

            Sub tabel, un grafic cu memoria fiecărui rang în timp; sub el, câte o filă pentru fiecare rang,
            cu ieșirea lui (rangurile nu se amestecă niciodată) și un buton **Stop** care oprește rularea.
            Acolo unde nu există browser (papermill, nbval), aceeași rulare afișează la final un rezumat
            text și o figură.

            Celula următoare face ca fiecare rang să țină un tampon care crește cu `rank + 1` MiB la
            fiecare pas, așa că liniile de memorie urcă cu pante diferite.
            """,
        ),
        code(
            """
            %%torchrun -n $nproc --backend $backend --vars steps
            import time

            import torch

            from labkit import rank

            for step in rank.steps(steps):
                buffer = torch.ones((step + 1) * (rank.rank() + 1) * 2**20, dtype=torch.uint8, device=rank.device())
                rank.log(f"step {step}: holding {buffer.numel() / 2**20:.0f} MiB")
                print(f"rank {rank.rank()} finished step {step}")
                time.sleep(0.5)  # slow enough to watch
            """
        ),
        md(
            en="""
            Everything the dashboard showed stays in the `Run`: `plot()` draws memory and step times
            again, `main_peak(r)` is rank `r`'s peak, `step_times[r]` its step times in seconds,
            `logs[r].stdout` what it printed.
            """,
            ro="""
            Tot ce a arătat panoul rămâne în `Run`: `plot()` desenează din nou memoria și duratele pașilor,
            `main_peak(r)` este vârful rangului `r`, `step_times[r]` duratele pașilor lui, în secunde, iar
            `logs[r].stdout` ce a afișat.
            """,
        ),
        code(
            """
            dash = labkit.last_run
            show.table([{"rank": r, "peak": dash.main_peak(r)} for r in range(dash.nproc)], units={"peak": "MiB"})
            print(dash.logs[0].stdout)
            dash.plot()
            """
        ),
        md(
            en="""
            **Exercise 2.** Without looking at the table: from the cell's code, how many times larger
            is the last rank's peak than rank 0's? Write it as a formula of `dash.nproc`. The check
            compares your prediction with the two peaks the run measured.
            """,
            ro="""
            **Exercițiul 2.** Fără să vă uitați în tabel: din codul celulei, de câte ori este mai mare
            vârful ultimului rang decât cel al rangului 0? Scrieți-l ca formulă de `dash.nproc`.
            Verificarea compară predicția voastră cu cele două vârfuri măsurate de rulare.
            """,
        ),
        code(
            """
            def peak_ratio(world_size):
                ### BEGIN SOLUTION
                return world_size
                ### END SOLUTION
            """
        ),
        check('labkit.check("lesson0.peak_ratio", peak_ratio, run=dash)'),
        md(
            en="""
            ## 4. Example 1: FSDP on two CPU ranks

            Here is the course's starting example: a small transformer language model wrapped with
            `FullyShardedDataParallel`, trained for a few steps on two ranks. It runs as it would on
            GPUs, changed only where the CPU needs it:

            - `dist.init_process_group("gloo")` instead of `"nccl"`: gloo is the CPU backend;
            - `device_id=torch.device("cpu")`: FSDP looks for an accelerator unless it is told the device;
            - no `torch.cuda.set_device(...)` and no `.cuda()`.

            What the options mean is the subject of the next lessons: `ShardingStrategy.FULL_SHARD`
            splits every parameter, gradient and optimizer state over the ranks (lesson 2), and the
            `auto_wrap_policy` decides which layers become separately gathered units (lesson 3). Here it
            decides nothing: no layer of this lesson's `tiny` model reaches `min_num_params=1e6`, so the
            policy wraps nothing and the whole model is one unit, gathered whole for every forward and
            backward. Lesson 3 measures what that costs and how to choose the value. The optimizer is
            created *after* wrapping, so that it holds FSDP's sharded parameters, not the originals.

            `FullyShardedDataParallel` is **FSDP1**, the API of the course's starting example. It is
            legacy: PyTorch's documentation calls it deprecated and teaches **FSDP2**, the function
            `fully_shard`, instead. The torch this course runs still builds an FSDP1 model without a
            warning (only its `NO_SHARD` strategy warns that it is deprecated), and you will meet FSDP1 in
            much existing code, so from lesson 2 on the lessons show the two side by side.

            Each rank reports its **loss** after the last **training step**: one **forward pass**, one
            **backward pass** and one update of the weights.
            """,
            ro="""
            ## 4. Exemplul 1: FSDP pe două ranguri CPU

            Iată exemplul de pornire al cursului: un model de limbaj transformer mic, împachetat cu
            `FullyShardedDataParallel` și antrenat câțiva pași pe două ranguri. Rulează la fel ca pe
            GPU-uri, schimbat doar acolo unde o cere procesorul:

            - `dist.init_process_group("gloo")` în loc de `"nccl"`: gloo este biblioteca pentru CPU;
            - `device_id=torch.device("cpu")`: FSDP caută un accelerator dacă nu i se spune dispozitivul;
            - fără `torch.cuda.set_device(...)` și fără `.cuda()`.

            Ce înseamnă opțiunile aflați în lecțiile următoare: `ShardingStrategy.FULL_SHARD` împarte
            fiecare parametru, gradient și stare a optimizatorului între ranguri (lecția 2), iar
            `auto_wrap_policy` decide care straturi devin unități colectate separat (lecția 3). Aici nu
            decide nimic: niciun strat al modelului `tiny` din această lecție nu ajunge la
            `min_num_params=1e6`, așa că politica nu împachetează nimic, iar întregul model este o singură
            unitate, colectată întreagă la fiecare trecere directă și inversă. Lecția 3 măsoară cât costă
            asta și cum se alege valoarea. Optimizatorul este creat *după* împachetare, ca să țină
            parametrii fragmentați ai FSDP, nu pe cei originali.

            `FullyShardedDataParallel` este **FSDP1**, interfața exemplului de pornire al cursului. Este
            o interfață moștenită: documentația PyTorch o declară învechită și predă în locul ei
            **FSDP2**, funcția `fully_shard`. Versiunea de torch pe care rulează cursul construiește încă
            un model FSDP1 fără niciun avertisment (doar strategia lui `NO_SHARD` avertizează că este
            învechită), iar FSDP1 apare în mult cod existent, așa că de la lecția 2 încolo lecțiile le
            arată pe amândouă, una lângă alta.

            Fiecare rang raportează **pierderea (loss)** de după ultimul **pas de antrenare (training
            step)**: o **trecere directă (forward pass)**, o **trecere inversă (backward pass)** și o
            actualizare a ponderilor.
            """,
        ),
        code(
            """
            %%torchrun -n 2 --backend gloo --vars model_size,steps
            import functools
            from datetime import timedelta

            import torch
            import torch.distributed as dist
            from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
            from torch.distributed.fsdp.wrap import size_based_auto_wrap_policy

            from labkit import rank
            from labkit.models import TransformerLM, get_config, synthetic_batch

            dist.init_process_group("gloo", timeout=timedelta(seconds=60))  # CPU: gloo instead of nccl
            torch.manual_seed(0)  # the same initial weights on every rank
            cfg = get_config(model_size)
            model = TransformerLM(cfg)
            fsdp_model = FullyShardedDataParallel(
                model,
                auto_wrap_policy=functools.partial(size_based_auto_wrap_policy, min_num_params=1e6),
                sharding_strategy=ShardingStrategy.FULL_SHARD,
                device_id=torch.device("cpu"),  # CPU: FSDP must be told the device
            )
            optimizer = torch.optim.AdamW(fsdp_model.parameters(), lr=1e-5)  # after wrapping

            for step in rank.steps(steps):
                inputs, targets = synthetic_batch(cfg, 8, step, rank.rank())
                loss = fsdp_model(inputs, targets)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            rank.report(loss=loss.item())
            dist.destroy_process_group()
            """
        ),
        code(
            """
            example = labkit.last_run
            show.table([{"rank": r, "loss": example.values[r]["loss"]} for r in sorted(example.values)])
            """
        ),
        md(
            en="""
            **Exercise 3.** The two ranks start from the same weights (`torch.manual_seed(0)` on both)
            and yet report different losses. Why? Set `answer` to the letter of the right reason.

            - **a.** FSDP gives each rank different weights.
            - **b.** Each rank trains on different data: `synthetic_batch` depends on the rank.
            - **c.** gloo adds noise to the values it communicates.
            """,
            ro="""
            **Exercițiul 3.** Cele două ranguri pornesc de la aceleași ponderi (`torch.manual_seed(0)` pe
            amândouă) și totuși raportează pierderi diferite. De ce? Dați lui `answer` litera motivului corect.

            - **a.** FSDP dă fiecărui rang alte ponderi.
            - **b.** Fiecare rang se antrenează pe alte date: `synthetic_batch` depinde de rang.
            - **c.** gloo adaugă zgomot valorilor pe care le transmite.
            """,
        ),
        exercise(solution='answer = "b"', pure=True),
        check('labkit.check("lesson0.why_losses_differ", answer)'),
        md(
            en="""
            ## Recap

            - A `%%torchrun -n N` cell runs its code in N processes, the ranks; labkit builds their
              process group with gloo on CPUs and NCCL on GPUs.
            - `rank.report()` sends values back; the `Run` (`labkit.last_run`) keeps them with each
              rank's memory, step times and output.
            - A collective such as all-reduce needs every rank of the group.
            - FSDP wraps a model so that the ranks split its memory between them; each rank trains on its
              own data.

            Next, lesson 1: why plain data parallelism runs out of memory.
            """,
            ro="""
            ## Recapitulare

            - O celulă `%%torchrun -n N` își rulează codul în N procese, rangurile; labkit le construiește
              grupul de procese cu gloo pe CPU și cu NCCL pe GPU.
            - `rank.report()` trimite valori înapoi; obiectul `Run` (`labkit.last_run`) le păstrează,
              împreună cu memoria, duratele pașilor și ieșirea fiecărui rang.
            - O operație colectivă, precum reducerea globală, are nevoie de toate rangurile grupului.
            - FSDP împachetează un model astfel încât rangurile să-i împartă memoria; fiecare rang se
              antrenează pe propriile date.

            Urmează lecția 1: de ce paralelismul de date simplu rămâne fără memorie.
            """,
        ),
    ],
)
