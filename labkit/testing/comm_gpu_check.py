"""On a GPU: the collective counter under NCCL, the synchronized timeline, per-unit GPU compute.

    LABKIT_REPORT_DIR=/tmp/out python -m torch.distributed.run --nproc-per-node 1 \
        labkit/testing/comm_gpu_check.py small large

One rank is enough for what a single GPU can check: DDP still all-reduces its buckets at
world size 1 (through NCCL, from the autograd engine's device thread), FSDP2 skips its
collectives, and a plain model gives each block's forward and backward time on the device,
which labkit.simulate can replay on any link and world size. Each model also runs a few
steps with no recorder, to measure what synchronizing at every hook costs.
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

from labkit import comm, timeline
from labkit.models import TransformerLM, get_config, synthetic_batch
from labkit.rank import send

STEPS = 6
BATCH = 8


def train(
    model: torch.nn.Module, cfg, rec: timeline.Recorder | None, label: str, opt: torch.optim.Optimizer
) -> list[float]:
    times = []
    for i in range(STEPS):
        x, y = synthetic_batch(cfg, BATCH, i, 0, device="cuda")
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if rec is None:
            model(x, y).backward()
            opt.step()
            opt.zero_grad()
        else:
            with rec.step(i, config=label, num_params=cfg.num_params()):
                model(x, y).backward()
                opt.step()
                opt.zero_grad()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    dist.init_process_group("nccl", timeout=timedelta(seconds=60))
    torch.cuda.set_device(0)
    for name in sys.argv[1:]:
        cfg = get_config(name)
        torch.manual_seed(0)
        model = TransformerLM(cfg).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        plain = train(model, cfg, None, f"plain:{name}", opt)
        rec = timeline.Recorder(model, optimizer=opt)
        synced = train(model, cfg, rec, f"plain:{name}", opt)
        rec.close()
        send("gpu_timing", config=f"plain:{name}", plain=plain, synced=synced, device=torch.cuda.get_device_name())
        print(name, "plain", statistics.median(plain[1:]), "recorded", statistics.median(synced[1:]), flush=True)

    cfg = get_config(sys.argv[1])
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    ddp = DistributedDataParallel(TransformerLM(cfg).cuda(), device_ids=[0])
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
    rec = timeline.Recorder(ddp, optimizer=opt)
    train(ddp, cfg, rec, "ddp", opt)
    rec.close()
    x, y = synthetic_batch(cfg, BATCH, 0, 0, device="cuda")
    with comm.count(config="ddp-unsynced"):  # completion from NCCL's own future, no synchronize
        ddp(x, y).backward()
    torch.cuda.synchronize()

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = TransformerLM(cfg).cuda()
    mesh = init_device_mesh("cuda", (1,))
    for block in model.layers:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    rec = timeline.Recorder(model, optimizer=opt)
    train(model, cfg, rec, "fsdp2", opt)
    rec.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
