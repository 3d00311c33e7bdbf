"""``labkit doctor``: this environment, checked end to end, one pass/fail line each with what to do.

    labkit doctor            # about 30 s on a 2-core laptop
    labkit doctor --json     # the same as JSON, for a CI log

1. torch is in the range labkit supports (``torch_hooks.MIN_TORCH``..``MAX_TORCH``), and whether
   that release was tested;
2. every private torch API labkit reads is there (``torch_hooks.HOOKS``: FSDP1 ``FlatParamHandle``,
   FSDP2 ``FSDPParamGroup``, ``ProcessContext.join``, the fake process group, the dispatcher);
3. they behave: a real 2-rank run trains FSDP1 and FSDP2 with the timeline and memtrack on, and
   the timeline must find the units and name every collective after one, and memtrack must
   find parameters, gradients, optimizer state and gathered parameters; torchrun's agent's
   ``ProcessContext.join`` wrapper must name every failed rank;
4. the fake-tensor estimator runs;
5. GPUs: what ``--backend auto`` chooses and why, and NCCL where there are GPUs;
6. user namespaces (``unshare -rn``), which emulated slow links need; ``/dev/shm``.

The exit status is 1 when a check failed (a warning does not fail).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from labkit.fmt import fmt_number
from labkit.i18n import t
from labkit.regress import messages  # noqa: F401  (registers the regress.* messages)
from labkit.wire.setting import Backend, Flavor

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
RUN_TIMEOUT = 120.0  # seconds for the 2-rank run


@dataclass
class Line:
    status: str
    what: str
    detail: str = ""
    fix: str = ""  # what to do, for warn and fail

    def text(self) -> str:
        out = f"{t('regress.doctor.status.' + self.status):<5} {self.what}"
        if self.detail:
            out += f": {self.detail}"
        if self.fix and self.status in (WARN, FAIL):
            out += "\n      " + t("regress.doctor.todo", fix=self.fix)
        return out


# -- 1. torch ------------------------------------------------------------------------------


def check_torch() -> Iterator[Line]:
    from labkit.ranks import torch_hooks as th

    try:
        version = th.torch_version()
    except ImportError as err:
        yield Line(FAIL, "torch", str(err), t("regress.doctor.fix.install_torch", spec=supported_range()))
        return
    v = th.version_tuple(version)
    if not th.MIN_TORCH <= v < th.MAX_TORCH:
        yield Line(FAIL, f"torch {version}", t("regress.doctor.torch.out", spec=supported_range()),
                   t("regress.doctor.fix.install_torch", spec=supported_range()))  # fmt: skip
    elif not th.tested(version):
        yield Line(WARN, f"torch {version}", t("regress.doctor.torch.untested", spec=supported_range(),
                   tested=", ".join(th.TESTED)), t("regress.doctor.fix.untested"))  # fmt: skip
    else:
        yield Line(PASS, f"torch {version}", t("regress.doctor.torch.ok", spec=supported_range()))


def supported_range() -> str:
    from labkit.ranks import torch_hooks as th

    return f">={th.MIN_TORCH[0]}.{th.MIN_TORCH[1]},<{th.MAX_TORCH[0]}"


# -- 2. the private APIs, present ------------------------------------------------------------


def check_hooks() -> Iterator[Line]:
    from labkit.ranks import torch_hooks as th

    for hook in th.HOOKS:
        try:
            gone = hook.probe()
        except Exception as exc:  # a probe must not take the doctor down: what broke it is the finding
            gone = [f"{type(exc).__name__}: {exc}"]
        what = t("regress.doctor.hook", api=hook.api)
        if gone:
            lost = th.missing_message(", ".join(gone), hook.lost)
            yield Line(FAIL, what, lost, t("regress.doctor.fix.hook", users=", ".join(hook.used_by)))
        else:
            yield Line(PASS, what, t("regress.doctor.hook.ok", users=", ".join(hook.used_by)))


# -- 3. the private APIs, behaving: a real run ---------------------------------------------------


def check_run(backend: str) -> Iterator[Line]:
    from labkit.launch.cold import torchrun
    from labkit.regress.doctor_job import CODE
    from labkit.wire.errors import RunError

    try:
        run = torchrun(CODE, nproc=2, backend=backend, timeout=RUN_TIMEOUT, quiet=True)
    except RunError as err:
        yield Line(FAIL, t("regress.doctor.run", backend=backend), str(err).splitlines()[0][:400],
                   t("regress.doctor.fix.run"))  # fmt: skip
        return
    for flavor in (Flavor.FSDP1, Flavor.FSDP2):
        yield from judge_flavor(flavor, run.values.get(0, {}).get(flavor))


def judge_flavor(flavor: str, found: dict[str, Any] | None) -> Iterator[Line]:
    """The timeline's and memtrack's findings on one flavor, as two lines."""
    name = flavor.upper()
    fix = t("regress.doctor.fix.behaviour")
    if not found:
        yield Line(FAIL, t("regress.doctor.timeline", flavor=name), t("regress.doctor.nothing"), fix)
        return
    warned = "; ".join(found.get("warnings") or [])
    units, coll, named = found.get("units") or [], found.get("collectives", 0), found.get("named", 0)
    ok = found.get("flavor") == flavor and len(units) >= 3 and coll > 0 and named == coll and found.get("held", 0) > 0
    detail = t("regress.doctor.timeline.found", units=len(units), named=named, collectives=coll, held=found.get("held"))
    yield Line(PASS if ok and not warned else FAIL, t("regress.doctor.timeline", flavor=name),
               detail + (f"; {warned}" if warned else ""), fix)  # fmt: skip
    most = found.get("most") or {}
    need = ("params", "params_unsharded", "grads", "optimizer")
    zero = [cat for cat in need if not most.get(cat)]
    shown = ", ".join(f"{cat} {fmt(most.get(cat))}" for cat in need)
    yield Line(FAIL if zero else PASS, t("regress.doctor.memtrack", flavor=name),
               t("regress.doctor.memtrack.zero", cats=", ".join(zero)) if zero else shown, fix)  # fmt: skip


def fmt(n: Any) -> str:
    from labkit.fmt import fmt_bytes

    return fmt_bytes(n) if isinstance(n, (int, float)) else "-"


AGENT_PROBE = r"""
import multiprocessing as mp, os, sys, time
from torch.multiprocessing import start_processes
from labkit.launch.agent import report_every_failed_rank

def fail(i):
    sys.exit(3 + i)

report_every_failed_rank()
ctx = start_processes(fail, nprocs=2, join=False, start_method="fork")
deadline = time.time() + 20
while any(p.exitcode is None for p in ctx.processes) and time.time() < deadline:
    time.sleep(0.05)
try:
    ctx.join()
except Exception as exc:
    print("raised", type(exc).__name__, file=sys.stderr)
"""


def check_agent() -> Iterator[Line]:
    """torchrun's agent polls ``ProcessContext.join``; labkit's wrapper must still name every failed rank."""
    what = t("regress.doctor.agent")
    try:
        proc = subprocess.run([sys.executable, "-c", AGENT_PROBE], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        yield Line(
            FAIL, what, t("regress.doctor.agent.timeout"), t("regress.doctor.fix.hook", users="labkit/launch/agent.py")
        )
        return
    named = [line for line in proc.stderr.splitlines() if line.startswith("labkit: local_rank")]
    if len(named) == 2 and "raised" in proc.stderr:
        yield Line(PASS, what, t("regress.doctor.agent.ok"))
    else:
        tail = (proc.stderr.strip().splitlines() or ["-"])[-1][:300]
        yield Line(FAIL, what, t("regress.doctor.agent.bad", n=len(named), tail=tail),
                   t("regress.doctor.fix.hook", users="labkit/launch/agent.py"))  # fmt: skip


# -- 4. the estimator --------------------------------------------------------------------------


def check_estimator() -> Iterator[Line]:
    from labkit.memory.estimate import estimate_peak
    from labkit.wire.errors import LabkitError

    what = t("regress.doctor.estimate")
    try:
        e = estimate_peak("tiny", world_size=2, precision="fp32", checkpointing=True, timeout=120, extrapolate=False)
    except (LabkitError, OSError) as err:
        yield Line(FAIL, what, str(err).splitlines()[0][:400], t("regress.doctor.fix.estimate"))
        return
    need = {"params": e.peak, "grads": e.phases.get("backward", {}), "optimizer": e.phases.get("optimizer", {})}
    zero = [cat for cat, found in need.items() if not found.get(cat)]
    if zero:
        yield Line(
            FAIL, what, t("regress.doctor.memtrack.zero", cats=", ".join(zero)), t("regress.doctor.fix.estimate")
        )
    else:
        yield Line(PASS, what, t("regress.doctor.estimate.ok", peak=fmt(e.total), seconds=fmt_number(e.seconds, 1)))


# -- 5. GPUs -------------------------------------------------------------------------------------


def check_gpus(nproc: int = 2) -> Iterator[Line]:
    from labkit.wire import devices

    gpus = devices.visible_gpus()
    choice = devices.choose_backend("auto", max(1, len(gpus)) if gpus else nproc)
    if not gpus:
        yield Line(SKIP, t("regress.doctor.gpus"), t("regress.doctor.gpus.none", reason=choice.reason))
        return
    import torch
    import torch.distributed as dist

    names = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    yield Line(PASS if torch.cuda.is_available() else FAIL, t("regress.doctor.gpus"),
               t("regress.doctor.gpus.found", n=len(gpus), names=names, cuda=torch.version.cuda),
               t("regress.doctor.fix.cuda"))  # fmt: skip
    if not dist.is_nccl_available():
        yield Line(FAIL, "NCCL", t("regress.doctor.nccl.missing"), t("regress.doctor.fix.cuda"))
    yield Line(PASS if choice.backend == Backend.NCCL else WARN, t("regress.doctor.auto"), choice.reason,
               t("regress.doctor.fix.auto"))  # fmt: skip


# -- 6. the machine ------------------------------------------------------------------------------


def check_namespaces() -> Iterator[Line]:
    what = t("regress.doctor.userns")
    unshare = shutil.which("unshare")
    if not unshare:
        yield Line(WARN, what, t("regress.doctor.userns.no_tool"), t("regress.doctor.fix.userns"))
        return
    try:
        proc = subprocess.run([unshare, "-rn", "true"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        proc = None
    if proc is not None and proc.returncode == 0:
        yield Line(PASS, what, t("regress.doctor.userns.ok"))
    else:
        why = (proc.stderr.strip() if proc is not None else "timeout")[:200]
        yield Line(WARN, what, t("regress.doctor.userns.bad", why=why), t("regress.doctor.fix.userns"))


def check_shm() -> Iterator[Line]:
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return
    size = st.f_frsize * st.f_blocks
    ok = size >= 1 << 30
    yield Line(PASS if ok else WARN, "/dev/shm", fmt(size), t("regress.doctor.fix.shm"))


# -- all of it -------------------------------------------------------------------------------------

CHECKS: dict[str, Callable[..., Iterator[Line]]] = {
    "torch": check_torch,
    "hooks": check_hooks,
    "run": check_run,
    "agent": check_agent,
    "estimate": check_estimator,
    "gpus": check_gpus,
    "userns": check_namespaces,
    "shm": check_shm,
}


# checks that wait on a subprocess of their own: started first, in threads, while the others run
BACKGROUND = ("agent", "estimate")


def diagnose(
    backend: str = "auto", skip: tuple[str, ...] = (), echo: Callable[[str], None] | None = print
) -> list[Line]:
    """Run every check not in ``skip``; ``echo`` each line, in the order of ``CHECKS``, as it comes."""
    from concurrent.futures import ThreadPoolExecutor

    names = [n for n in CHECKS if n not in skip]
    lines: list[Line] = []
    with ThreadPoolExecutor(len(BACKGROUND)) as pool:
        early = {n: pool.submit(lambda n=n: list(CHECKS[n]())) for n in names if n in BACKGROUND}
        for name in names:
            found = (
                early[name].result() if name in early else CHECKS[name](backend) if name == "run" else CHECKS[name]()
            )
            for line in found:
                lines.append(line)
                if echo:
                    echo(line.text())
    return lines


def cmd_doctor(args: Any) -> int:
    t0 = time.monotonic()
    skip = tuple(s for s in (args.skip or "").split(",") if s)
    echo = None if args.json else (lambda s: print(s, flush=True))
    lines = diagnose(args.backend, skip, echo)
    counts = {s: sum(1 for line in lines if line.status == s) for s in (PASS, WARN, FAIL, SKIP)}
    seconds = time.monotonic() - t0
    if args.json:
        print(json.dumps({"lines": [asdict(line) for line in lines], "counts": counts, "seconds": round(seconds, 1)}))
    else:
        print(t("regress.doctor.summary", seconds=fmt_number(seconds, 1), **counts))
    return 1 if counts[FAIL] else 0


def add_arguments(p: Any) -> None:
    p.add_argument("--backend", default="auto", help=t("regress.doctor.help.backend"))
    p.add_argument("--skip", default="", help=t("regress.doctor.help.skip", names=",".join(CHECKS)))
    p.add_argument("--json", action="store_true", help=t("regress.doctor.help.json"))
