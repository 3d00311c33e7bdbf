"""Lesson 7's hpZ question (``reshard_after_forward=gpus_per_node``) against FSDP2 itself.

FSDP2 runs on 16 fake ranks in one subprocess (torch's ``fake`` process group: collectives
do nothing, every tensor has the size a real rank's would), with ``MemTracker`` counting what
is alive when the forward returns. The activations are the same whatever the reshard setting,
so what a rank holds is the total minus the activations of the ``True`` run (whose parameters
are its own shards only). The question's formula, 4Ψ/N + 4Ψ/g, must equal that to the byte,
and its two planted mistakes must be what ``True`` and ``False`` really hold.
"""

from __future__ import annotations

import json
import subprocess
import sys

from labkit.course.questions import lesson7

N, G, WIDTH, BLOCKS = 16, 8, 512, 4

JOB = f"""
import json, torch, torch.distributed as dist, torch.nn as nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed._tools.mem_tracker import MemTracker
from torch.testing._internal.distributed.fake_pg import FakeStore

dist.init_process_group("fake", store=FakeStore(), rank=0, world_size={N})
out = {{}}
for raf in (True, {G}, False):
    model = nn.Sequential(*[nn.Sequential(nn.Linear({WIDTH}, {WIDTH}, bias=False)) for _ in range({BLOCKS})])
    mesh = init_device_mesh("cpu", ({N},))
    for block in model:
        fully_shard(block, mesh=mesh, reshard_after_forward=raf)
    fully_shard(model, mesh=mesh, reshard_after_forward=raf)
    tracker = MemTracker()
    tracker.track_external(model)
    with tracker:
        y = model(torch.randn(8, {WIDTH}))
        now = next(iter(tracker.get_tracker_snapshot("current").values()))
    out[str(raf)] = {{"total": now["Total"], "params": sum(v for k, v in now.items() if getattr(k, "value", k) == "Parameter")}}
print(json.dumps(out))
"""


def test_hpz_bytes_is_what_fsdp2_holds_between_forward_and_backward() -> None:
    proc = subprocess.run([sys.executable, "-c", JOB], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    held = json.loads(proc.stdout.strip().splitlines()[-1])
    activations = held["True"]["total"] - held["True"]["params"]
    hold = {raf: m["total"] - activations for raf, m in held.items()}
    n_params = BLOCKS * WIDTH * WIDTH
    assert hold[str(G)] == lesson7._hpz_bytes(n_params, N, G)
    assert hold["True"] == 4 * n_params / N  # the first planted mistake: reshard_after_forward=True
    assert hold["False"] == 4 * n_params + 4 * n_params / N  # the third: every unit kept whole
