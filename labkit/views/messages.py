"""The messages of labkit.views: the dashboard, the run summary, the timeline and memory plots.

Data only, in English and Romanian; every key starts with ``views.``. ``labkit.i18n.t`` imports
this module the first time one of its keys is asked for.
"""

MESSAGES: dict[str, dict[str, str]] = {
    # labkit.views.dashboard
    "views.dash.stop": {"en": "Stop", "ro": "Oprește"},
    "views.dash.stopping": {"en": "Stopping…", "ro": "Se oprește…"},
    "views.dash.rank": {"en": "rank {rank}", "ro": "rangul {rank}"},
    "views.dash.header": {
        "en": "<b>{run_id}</b> · {nproc:@rank|ranks} · {backend} · {wall:.1f} s",
        "ro": "<b>{run_id}</b> · {nproc:@rang|ranguri} · {backend} · {wall:.1f} s",
    },
    "views.dash.no_samples": {"en": "no memory samples yet", "ro": "încă nu există eșantioane de memorie"},
    "views.dash.plot.title": {"en": "memory over time ({what})", "ro": "memoria în timp ({what})"},
    "views.dash.plot.rank": {"en": "{rank}: {now} now, {peak} at most", "ro": "{rank}: {now} acum, cel mult {peak}"},
    # labkit.views.gantt
    "views.timeline.title": {"en": "Step {step}, per rank (measured)", "ro": "Pasul {step}, pe rang (măsurat)"},
    "views.timeline.title.simulated": {"en": "{title} (simulated)", "ro": "{title} (simulat)"},
    "views.timeline.xlabel": {"en": "time since step start (ms)", "ro": "timp de la începutul pasului (ms)"},
    "views.timeline.lane.compute": {"en": "rank {rank} compute", "ro": "rang {rank} calcul"},
    "views.timeline.lane.comm": {"en": "rank {rank} comm", "ro": "rang {rank} comunicare"},
    "views.timeline.lane.held": {"en": "rank {rank} units held", "ro": "rang {rank} unități ținute"},
    "views.timeline.legend.forward": {"en": "forward", "ro": "trecerea directă"},
    "views.timeline.legend.backward": {"en": "backward", "ro": "trecerea inversă"},
    "views.timeline.legend.optimizer": {"en": "optimizer", "ro": "optimizator"},
    "views.timeline.legend.all_gather": {"en": "all-gather", "ro": "all-gather"},
    "views.timeline.legend.reduce_scatter": {"en": "reduce-scatter", "ro": "reduce-scatter"},
    "views.timeline.legend.all_reduce": {"en": "all-reduce", "ro": "all-reduce"},
    "views.timeline.legend.broadcast": {"en": "broadcast", "ro": "difuzare"},
    "views.timeline.legend.held": {"en": "gathered (in memory)", "ro": "colectat (în memorie)"},
    "views.timeline.legend.host": {"en": "host overhead (simulated)", "ro": "timp pe gazdă (simulat)"},
    "views.timeline.peak": {"en": "peak {n:@unit|units} held", "ro": "maxim {n:@unitate ținută|unități ținute}"},
    # labkit.views.memory
    "views.memtrack.phase.forward": {"en": "after forward", "ro": "după trecerea directă"},
    "views.memtrack.phase.backward": {"en": "after backward", "ro": "după trecerea inversă"},
    "views.memtrack.phase.optimizer": {"en": "after optimizer step", "ro": "după pasul optimizatorului"},
    "views.memtrack.phase.peak": {"en": "peak", "ro": "vârf"},
    "views.memtrack.col.rank": {"en": "rank", "ro": "rang"},
    "views.memtrack.col.phase": {"en": "phase", "ro": "fază"},
    "views.memtrack.col.total": {"en": "total", "ro": "total"},
    "views.memtrack.none": {
        "en": "no memory categories measured: use labkit.memtrack.track(model, optimizer) in the cell",
        "ro": "nu s-au măsurat categorii de memorie: folosiți labkit.memtrack.track(model, optimizer) în celulă",
    },
    "views.memtrack.plot.title": {
        "en": "memory per rank by category ({unit})",
        "ro": "memoria per rang pe categorii ({unit})",
    },
    "views.memtrack.rank": {"en": "rank {rank}", "ro": "rangul {rank}"},
    "views.memtrack.svg.title": {"en": "memory by category, per rank", "ro": "memoria pe categorii, per rang"},
    "views.memory.plot.ylabel": {"en": "memory per GPU ({unit})", "ro": "memorie per GPU ({unit})"},
    "views.memory.plot.xlabel": {"en": "number of GPUs", "ro": "număr de GPU-uri"},
    "views.memory.plot.capacity": {"en": "{gpu} capacity", "ro": "capacitatea {gpu}"},
    "views.memory.plot.title": {
        "en": "{model}: model states per GPU, {precision} {optimizer}",
        "ro": "{model}: stările modelului per GPU, {precision} {optimizer}",
    },
    "views.memory.plot.title_peak": {
        "en": "{model}: peak memory per GPU, {precision} {optimizer}",
        "ro": "{model}: memoria de vârf per GPU, {precision} {optimizer}",
    },
    "views.memory.plot.max_title": {
        "en": "largest model whose states fit one {gpu}, {precision} {optimizer}",
        "ro": "cel mai mare model ale cărui stări încap pe un {gpu}, {precision} {optimizer}",
    },
    "views.memory.plot.max_ylabel": {"en": "parameters (billions)", "ro": "parametri (miliarde)"},
    # labkit.views.runview
    "views.run.status.starting": {"en": "starting", "ro": "pornește"},
    "views.run.status.running": {"en": "running", "ro": "rulează"},
    "views.run.status.done": {"en": "done", "ro": "gata"},
    "views.run.status.failed": {"en": "failed", "ro": "eșuat"},
    "views.run.status.killed": {"en": "killed", "ro": "omorât"},
    "views.run.status.stopped": {"en": "stopped", "ro": "oprit"},
    "views.run.summary.head": {
        "en": "Run {run_id}: {nproc:@rank|ranks}, backend {backend}, {wall:.1f} s, {state}",
        "ro": "Rularea {run_id}: {nproc:@rang|ranguri}, biblioteca de comunicare {backend}, {wall:.1f} s, {state}",
    },
    "views.run.summary.ok": {"en": "all ranks finished", "ro": "toate rangurile au terminat"},
    "views.run.summary.failed": {"en": "FAILED", "ro": "EȘUAT"},
    "views.run.col.rank": {"en": "rank", "ro": "rang"},
    "views.run.col.status": {"en": "status", "ro": "stare"},
    "views.run.col.mem": {"en": "memory now", "ro": "memorie acum"},
    "views.run.col.peak": {"en": "peak", "ro": "vârf"},
    "views.run.col.step": {"en": "last step", "ro": "ultimul pas"},
    "views.run.col.steps": {"en": "steps", "ro": "pași"},
    "views.run.col.log": {"en": "last line", "ro": "ultima linie"},
    "views.run.col.comm": {"en": "sent/step", "ro": "trimis/pas"},
    "views.run.col.values": {"en": "values", "ro": "valori"},
    "views.run.steps.left": {"en": "{done}/{n}, {left} left", "ro": "{done}/{n}, mai rămân {left}"},
    "views.run.plot.title": {"en": "Memory per rank", "ro": "Memoria fiecărui rang"},
    "views.run.plot.time": {"en": "time since start (s)", "ro": "timp de la pornire (s)"},
    "views.run.plot.mem": {"en": "MiB", "ro": "MiB"},
    "views.run.plot.steps": {"en": "Step time per rank", "ro": "Durata pasului, pe rang"},
    "views.run.plot.step": {"en": "step", "ro": "pas"},
    "views.run.plot.seconds": {"en": "seconds", "ro": "secunde"},
    "views.run.mem.tensor": {"en": "tensors", "ro": "tensori"},
    "views.run.mem.cuda": {"en": "CUDA allocated", "ro": "CUDA alocat"},
    "views.run.mem.rss": {"en": "process RSS", "ro": "RSS proces"},
    # labkit.views.dashboard
    "views.dash.text": {
        "en": "labkit dashboard: {run_id}, {nproc:@rank|ranks}, {backend}",
        "ro": "panoul labkit: {run_id}, {nproc:@rang|ranguri}, {backend}",
    },
}
