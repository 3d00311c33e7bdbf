"""A ``Run`` as text and as a figure: the rank table, the summary, the memory and step-time plot.

``Run`` keeps the data; this module shows it (``run.summary()`` and ``run.plot()`` call here),
and the dashboard builds its HTML from the same rows. Bytes are formatted by ``labkit.units``.
"""

from __future__ import annotations

from typing import Any

from labkit.fmt import fmt_bytes, fmt_spec, render_table
from labkit.i18n import t
from labkit.wire.protocol import ELAPSED, Msg, Status
from labkit.wire.records import RunRecord, first_message

SUMMARY_COLUMNS = ("rank", "status", "mem", "peak", "step", "steps")


def rank_label(run: RunRecord, r: int) -> str:
    """``r``, or ``r (node/local rank)`` when the run's ranks are on more than one node."""
    hellos = {q: first_message(run, q, Msg.HELLO) or {} for q in run.ranks}
    if len({h.get("node") for h in hellos.values() if h.get("node")}) < 2:
        return str(r)
    hello = hellos[r]
    return f"{r} ({hello['node']}/{hello.get('local_rank', '?')})" if hello.get("node") else str(r)


def status_label(run: RunRecord, r: int) -> str:
    s = run.ranks[r]
    label = t(f"views.run.status.{s.status}")
    if s.status in (Status.FAILED, Status.KILLED) and s.signal:
        return f"{label} ({s.signal})"
    if s.status == Status.FAILED and s.exit_code not in (None, 0):
        return f"{label} (exit {s.exit_code})"
    return label


def rows(run: RunRecord) -> list[dict[str, str]]:
    """One row of strings per rank: what the summary and the dashboard's table show."""
    out = []
    for r, s in run.ranks.items():
        dt = s.last_step_time
        comm = run.last_message(r, Msg.COMM)
        out.append(
            {
                "rank": rank_label(run, r),
                "status": status_label(run, r),
                "mem": fmt_bytes(run.memory_now(r)),
                "peak": fmt_bytes(run.main_peak(r)),
                "step": "" if dt is None else f"{dt * 1000:.0f} ms (#{s.last_step})",
                "steps": steps_label(run, r),
                "comm": "" if comm is None else comm_label(comm),
                "log": s.last_log[-120:],
            }
        )
    return out


def steps_label(run: RunRecord, r: int) -> str:
    """Steps done, "i/n" inside ``rank.steps(n)``, and while the rank runs the time left at its recent pace."""
    times = run.step_times[r]
    last = run.last_message(r, Msg.STEP)
    n = last.get("n") if last else None
    if not isinstance(n, int) or n < 1:  # steps timed by rank.step() alone: no total known
        return str(len(times))
    done = (last.get("i") or 0) + 1  # of this loop (a cell may time steps before it)
    if run.ranks[r].status != Status.RUNNING or done >= n or not times:
        return f"{done}/{n}"
    recent = times[-5:]  # the pace now: the first steps (warm-up, allocation) are slower
    return t("views.run.steps.left", done=done, n=n, left=fmt_seconds(sum(recent) / len(recent) * (n - done)))


def fmt_seconds(seconds: float) -> str:
    """``34 s``, ``1 min 34 s``: whole seconds, the same in both languages."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes} min {secs:02d} s"


def summary(run: RunRecord) -> str:
    state = t("views.run.summary.ok") if run.ok else t("views.run.summary.failed")
    head = t(
        "views.run.summary.head",
        run_id=run.run_id,
        nproc=run.nproc,
        backend=run.backend,
        wall=run.wall_time,
        state=state,
    )
    table = [[t(f"views.run.col.{c}") for c in SUMMARY_COLUMNS]] + [
        [row[c] for c in SUMMARY_COLUMNS] for row in rows(run)
    ]
    lines = [head, render_table(table, align="l" * len(SUMMARY_COLUMNS))]
    for r, vals in run.values.items():
        if vals:
            shown = ", ".join(f"{k}={_short(v)}" for k, v in list(vals.items())[:8])
            lines.append(f"  {t('views.run.col.rank')} {r} {t('views.run.col.values')}: {shown}")
    return "\n".join(lines)


MEMORY_LABELS = {"allocated": "views.run.mem.cuda", "tensor_bytes": "views.run.mem.tensor", "rss": "views.run.mem.rss"}


def main_memory(run: RunRecord) -> tuple[str, str]:
    """The quantity a memory curve shows (see ``Run.main_memory_key``), and its label."""
    key = run.main_memory_key()
    return key, t(MEMORY_LABELS[key])


def plot(run: RunRecord, ax: Any = None) -> Any:
    """Memory over time for every rank, and step times: one matplotlib figure, in the theme's look
    (``palette.figure_style``), its lines in Okabe-Ito's colours and, per rank, a marker of their own."""
    from labkit.views import palette

    with palette.figure_style():
        return _plot(run, ax)


def _plot(run: RunRecord, ax: Any) -> Any:
    import matplotlib.pyplot as plt

    from labkit.views.palette import MARKERS

    if ax is None:
        fig, (ax_mem, ax_step) = plt.subplots(1, 2, figsize=(10, 3.2), constrained_layout=True)
    else:
        ax_mem, ax_step, fig = ax, None, ax.figure
    key, label = main_memory(run)
    markers = {r: MARKERS[i % len(MARKERS)] for i, r in enumerate(run.ranks)}
    for r, samples in run.memory.items():
        xs = [s[ELAPSED] for s in samples if key in s]
        ys = [s[key] / 2**20 for s in samples if key in s]
        mark = {"marker": markers.get(r, "o"), "markevery": max(1, len(xs) // 8), "ms": 4}
        ax_mem.plot(xs, ys, label=f"{t('views.run.col.rank')} {rank_label(run, r)}", **mark)
    ax_mem.set_title(f"{t('views.run.plot.title')} ({label})")
    ax_mem.set_xlabel(t("views.run.plot.time"))
    ax_mem.set_ylabel(t("views.run.plot.mem"))
    ax_mem.legend(fontsize="small")
    if ax_step is not None:
        for r, times in run.step_times.items():
            if times:
                ax_step.plot(
                    range(len(times)),
                    times,
                    marker=markers.get(r, "o"),
                    label=f"{t('views.run.col.rank')} {rank_label(run, r)}",
                )
        ax_step.set_title(t("views.run.plot.steps"))
        ax_step.set_xlabel(t("views.run.plot.step"))
        ax_step.set_ylabel(t("views.run.plot.seconds"))
        if any(run.step_times.values()):
            ax_step.legend(fontsize="small")
    plt.close(fig)  # returned, not shown twice by the inline backend
    return fig


def comm_label(msg: dict[str, Any]) -> str:
    """A ``comm`` message in a few characters: what this rank sent on the wire, and how many calls."""
    counts = msg.get("counts") or {}
    wire = sum(c.get("wire_bytes", 0) for c in counts.values())
    calls = sum(int(c.get("calls", 0)) for c in counts.values())
    return f"{fmt_bytes(wire)} ({calls})"


def _short(v: Any) -> str:
    s = fmt_spec(v, ".4g") if isinstance(v, float) else repr(v)
    return s if len(s) <= 40 else s[:37] + "..."
