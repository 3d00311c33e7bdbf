"""The messages of labkit.timing: spans, calibration, links, the simulator and comm theory.

Data only, in English and Romanian; every key starts with ``timing.``. ``labkit.i18n.t`` imports
this module the first time one of its keys is asked for.
"""

MESSAGES: dict[str, dict[str, str]] = {
    # labkit.timing.calibrate
    "timing.simulate.no_profile": {
        "en": "no timeline in this run to simulate from: record steps with labkit.timeline.Recorder",
        "ro": "rularea nu are o cronologie din care să se simuleze: înregistrați pașii cu labkit.timeline.Recorder",
    },
    # labkit.timing.links
    "timing.simulate.unknown_link": {
        "en": "unknown link {name!r}; choose one of {choices}, or give a bandwidth in bytes/s",
        "ro": "legătură necunoscută {name!r}; alegeți una dintre {choices} sau dați o lățime de bandă în octeți/s",
    },
    # labkit.timing.simulate
    "timing.simulate.unknown_prefetch": {
        "en": "unknown backward_prefetch {name!r}; choose BACKWARD_PRE, BACKWARD_POST or None",
        "ro": "backward_prefetch necunoscut {name!r}; alegeți BACKWARD_PRE, BACKWARD_POST sau None",
    },
    "timing.simulate.repr": {
        "en": "SIMULATED {strategy} {prefetch} on {link}: step {step:.2f} ms (compute {compute:.2f} ms, comm "
        "{comm:.2f} ms of which exposed {exposed:.2f} ms), peak {peak:@unit|units} held",
        "ro": "SIMULAT {strategy} {prefetch} pe {link}: pas {step:.2f} ms (calcul {compute:.2f} ms, comunicare "
        "{comm:.2f} ms din care expusă {exposed:.2f} ms), maxim {peak:@unitate ținută|unități ținute}",
    },
    "timing.simulate.col.strategy": {"en": "strategy", "ro": "strategie"},
    "timing.simulate.col.prefetch": {"en": "prefetch", "ro": "preîncărcare"},
    "timing.simulate.col.link": {"en": "link", "ro": "legătură"},
    "timing.simulate.col.step": {"en": "step ms (sim.)", "ro": "pas ms (sim.)"},
    "timing.simulate.col.compute": {"en": "compute ms", "ro": "calcul ms"},
    "timing.simulate.col.exposed": {"en": "exposed comm ms (sim.)", "ro": "comunicare expusă ms (sim.)"},
    "timing.simulate.col.peak": {"en": "peak units", "ro": "unități maxim"},
    "timing.simulate.table.the_run": {"en": "the run", "ro": "rulare"},
    "timing.simulate.table.note": {
        "en": "simulated: measured compute and bytes of {source}, re-timed on each link",
        "ro": "simulat: calcul și octeți măsurați în {source}, recronometrați pe fiecare legătură",
    },
    # labkit.timing.spans
    "timing.spans.no_spans": {
        "en": "no timeline in this run: record a step with labkit.timeline.Recorder(model).step(i)",
        "ro": "această rulare nu are cronologie: înregistrați un pas cu labkit.timeline.Recorder(model).step(i)",
    },
    "timing.spans.no_step": {
        "en": "step {step} was not recorded; recorded steps: {steps}",
        "ro": "pasul {step} nu a fost înregistrat; pași înregistrați: {steps}",
    },
    # labkit.timing.theory
    "timing.comm.unknown_strategy": {
        "en": "unknown strategy {name!r}; choose one of {choices}",
        "ro": "strategie necunoscută {name!r}; alegeți una dintre {choices}",
    },
    "timing.comm.bad_shard_size": {
        "en": "HYBRID_SHARD needs shard_size dividing world_size ({world_size}); got {shard_size}",
        "ro": "HYBRID_SHARD are nevoie de un shard_size care să dividă world_size ({world_size}); primit {shard_size}",
    },
    "timing.comm.table.op": {"en": "collective", "ro": "colectivă"},
    "timing.comm.table.calls": {"en": "calls", "ro": "apeluri"},
    "timing.comm.table.bytes": {"en": "payload", "ro": "volum util"},
    "timing.comm.table.wire": {"en": "sent per rank (ring)", "ro": "trimis per rang (inel)"},
    # labkit.timing.predict
    "timing.predict.unknown": {
        "en": "unknown configuration {spec!r}: use ddp, fsdp1:STRATEGY[:PREFETCH], fsdp2:implicit or fsdp2:explicit",
        "ro": "configurație necunoscută {spec!r}: folosiți ddp, fsdp1:STRATEGIE[:PREFETCH], fsdp2:implicit sau fsdp2:explicit",
    },
    "timing.predict.no_flavor": {
        "en": "the calibration has no {flavor} run; it has: {have}",
        "ro": "calibrarea nu are o rulare {flavor}; are: {have}",
    },
    "timing.predict.failed_fit": {
        "en": "failed fit: {what} came out {value} (a cost of zero or less has no physical sense); used: {used}",
        "ro": "potrivire eșuată: {what} a ieșit {value} (un cost zero sau negativ nu are sens fizic); folosit: {used}",
    },
    "timing.predict.nothing": {"en": "nothing (the cost left at zero)", "ro": "nimic (costul lăsat la zero)"},
    "timing.predict.no_spread": {
        "en": "a prediction's range needs at least two calibration parts; got {parts}",
        "ro": "intervalul unei predicții are nevoie de cel puțin două părți ale calibrării; primit {parts}",
    },
}
