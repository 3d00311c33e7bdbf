"""The messages of labkit.launch: the options, the magics, launches, warm sessions and their failures.

Data only, in English and Romanian; every key starts with ``launch.``. ``labkit.i18n.t`` imports
this module the first time one of its keys is asked for.
"""

MESSAGES: dict[str, dict[str, str]] = {
    # labkit.launch.diagnose
    "launch.rank_failed": {
        "en": "rank {rank} failed{at}: {type}: {message}",
        "ro": "rangul {rank} a eșuat{at}: {type}: {message}",
    },
    "launch.at_step": {"en": " at step {step}", "ro": " la pasul {step}"},
    "launch.at_line": {"en": " (cell line {line})", "ro": " (linia {line} din celulă)"},
    "launch.rank_exit": {
        "en": "rank {rank} exited with code {code} (sys.exit)",
        "ro": "rangul {rank} a ieșit cu codul {code} (sys.exit)",
    },
    "launch.rank_signal": {
        "en": "rank {rank} was killed by {signal} (exit {code})",
        "ro": "rangul {rank} a fost omorât de {signal} (ieșire {code})",
    },
    "launch.rank_vanished": {
        "en": "rank {rank} stopped without a word (exit code {code})",
        "ro": "rangul {rank} s-a oprit fără niciun mesaj (cod de ieșire {code})",
    },
    "launch.early_exit": {
        "en": "rank {rank} finished early, while rank {other} still waited for it in a collective ({detail})",
        "ro": "rangul {rank} a terminat prea devreme, în timp ce rangul {other} încă îl aștepta într-o operație colectivă ({detail})",
    },
    "launch.timeout": {
        "en": "the run went past its timeout of {timeout:.0f} s; ranks still running: {alive}",
        "ro": "rularea a depășit limita de {timeout:.0f} s; ranguri încă active: {alive}",
    },
    "launch.timeout.last": {"en": "rank {rank}, last lines:", "ro": "rangul {rank}, ultimele linii:"},
    "launch.timeout.where": {"en": "stuck in: {frames}", "ro": "blocat în: {frames}"},
    "launch.stopped": {"en": "the run was stopped", "ro": "rularea a fost oprită"},
    "launch.interrupted": {
        "en": "interrupted: every rank was stopped (results so far are in labkit.last_run)",
        "ro": "întrerupt: toate rangurile au fost oprite (rezultatele de până acum sunt în labkit.last_run)",
    },
    "launch.agent_died": {
        "en": "torchrun exited with code {code} before the ranks reported back. Its output:\n{log}",
        "ro": "torchrun a ieșit cu codul {code} înainte ca rangurile să raporteze. Ieșirea sa:\n{log}",
    },
    "launch.missing": {
        "en": "ranks {ranks} never connected; torchrun's output:\n{log}",
        "ro": "rangurile {ranks} nu s-au conectat niciodată; ieșirea torchrun:\n{log}",
    },
    "launch.secondary": {
        "en": "other ranks stopped because of it: {ranks}",
        "ro": "alte ranguri s-au oprit din cauza lui: {ranks}",
    },
    "launch.same_way": {"en": "ranks {ranks} failed the same way", "ro": "rangurile {ranks} au eșuat la fel"},
    "launch.same_way_one": {"en": "rank {ranks} failed the same way", "ro": "rangul {ranks} a eșuat la fel"},
    "launch.also_failed": {
        "en": "rank {rank} failed too: {type}: {message}",
        "ro": "rangul {rank} a eșuat și el: {type}: {message}",
    },
    "launch.stderr_tail": {
        "en": "rank {rank} stderr (last lines):",
        "ro": "stderr rangul {rank} (ultimele linii):",
    },
    "launch.hint.early": {
        "en": "every rank must make the same collective calls in the same order; look for a rank-dependent `if` or `return`.",
        "ro": "toate rangurile trebuie să facă aceleași apeluri colective în aceeași ordine; căutați un `if` sau un `return` care depinde de rang.",
    },
    "launch.hint.sigkill": {
        "en": "SIGKILL with no traceback usually means the machine ran out of memory (the OOM killer): try a smaller model, fewer ranks, or more sharding.",
        "ro": "SIGKILL fără traceback înseamnă de obicei că mașina a rămas fără memorie (OOM killer): încercați un model mai mic, mai puține ranguri sau mai multă fragmentare.",
    },
    "launch.hint.sigsegv": {
        "en": "a native crash; the rank's stderr (below) has the stack that faulthandler printed.",
        "ro": "o prăbușire nativă; stderr-ul rangului (mai jos) conține stiva afișată de faulthandler.",
    },
    "launch.diag.hint.cuda_oom": {
        "en": "the GPU ran out of memory: a smaller batch or model, activation checkpointing, or more sharding (FULL_SHARD) lowers the peak; torch.cuda.memory_summary() shows what holds it.",
        "ro": "GPU-ul a rămas fără memorie: un lot sau un model mai mic, recalcularea activărilor sau mai "
        "multă fragmentare (FULL_SHARD) scad vârful; torch.cuda.memory_summary() arată ce îl ocupă.",
    },
    "launch.diag.hint.nccl_timeout": {
        "en": "an NCCL collective timed out: some rank never made the matching call (a rank-dependent `if`, a hang, or a failed peer); the first rank to fail is the cause.",
        "ro": "o operație colectivă NCCL a expirat: un rang nu a făcut apelul corespunzător (un `if` care depinde de rang, un blocaj sau un rang căzut); primul rang care a eșuat este cauza.",
    },
    "launch.diag.hint.never_joined": {
        "en": "the ranks waited in init_process_group for a rank that never wrote its address to the store: the number at the end of the key is that rank. It did not reach init_process_group in time (stuck before it, or still starting); its log (run.logs[rank].stderr) has its stack.",
        "ro": "rangurile au așteptat în init_process_group un rang care nu și-a scris niciodată adresa în store: numărul de la capătul cheii este acel rang. Nu a ajuns la timp la init_process_group (blocat înainte sau încă pornind); jurnalul lui (run.logs[rang].stderr) conține stiva.",
    },
    "launch.diag.hint.peer_lost": {
        "en": "a peer rank closed its gloo connection: it failed, was stopped, or finished before this collective.",
        "ro": "un rang pereche și-a închis conexiunea gloo: a eșuat, a fost oprit sau a terminat înaintea acestei operații colective.",
    },
    "launch.diag.hint.port_in_use": {
        "en": "the port is taken by another process: omit the port (labkit picks a free one) or choose another.",
        "ro": "portul este ocupat de alt proces: omiteți portul (labkit alege unul liber) sau alegeți altul.",
    },
    "launch.diag.hint.open_files": {
        "en": "the process ran out of file descriptors: close files and sockets you open (a `with` block), or raise the limit (ulimit -n).",
        "ro": "procesul a rămas fără descriptori de fișier: închideți fișierele și socket-urile deschise (un bloc `with`) sau ridicați limita (ulimit -n).",
    },
    # labkit.launch.group
    "launch.bad_target": {
        "en": "torchrun() takes code (a string), a path to a .py file, or a function; got {type}",
        "ro": "torchrun() primește cod (un șir), calea unui fișier .py sau o funcție; nu {type}",
    },
    # labkit.launch.logs
    "launch.log.truncated": {
        "en": "[{n:@earlier line|earlier lines} not shown; the whole log is in {path}]",
        "ro": "[{n:@linie anterioară nu este afișată|linii anterioare nu sunt afișate}; jurnalul complet este "
        "în {path}]",
    },
    # labkit.launch.magic
    "launch.magic.bad_option": {"en": "{magic}: {error}\nusage: {usage}", "ro": "{magic}: {error}\nutilizare: {usage}"},
    "launch.magic.lang": {"en": "labkit speaks English now.", "ro": "labkit vorbește acum românește."},
    "launch.magic.lang.unknown": {
        "en": "%labkit_lang: unknown language {value!r}; choose one of {langs}",
        "ro": "%labkit_lang: limbă necunoscută {value!r}; alegeți una dintre {langs}",
    },
    "launch.magic.help.usage": {"en": "usage: ", "ro": "utilizare: "},
    "launch.magic.help.options": {"en": "options", "ro": "opțiuni"},
    "launch.magic.help.help": {
        "en": "show these options and run nothing",
        "ro": "arată aceste opțiuni și nu rulează nimic",
    },
    "launch.warm.started": {
        "en": "{nproc:@warm rank|warm ranks} ({backend}) ready in {seconds:.1f} s: run cells there with %%ranks",
        "ro": "{nproc:@rang persistent|ranguri persistente} ({backend}) gata în {seconds:.1f} s: rulați celule "
        "acolo cu %%ranks",
    },
    "launch.warm.stopped": {"en": "the warm ranks were stopped", "ro": "rangurile persistente au fost oprite"},
    "launch.warm.none": {
        "en": "no warm ranks are running: start them with %torchrun_start -n 2 (or labkit.Session(nproc=2))",
        "ro": "nu rulează niciun rang persistent: porniți-le cu %torchrun_start -n 2 (sau labkit.Session(nproc=2))",
    },
    "launch.warm.no_session": {"en": "no warm ranks to stop", "ro": "nu există ranguri persistente de oprit"},
    "launch.warm.restarting": {"en": "restarting the warm ranks…", "ro": "se repornesc rangurile persistente…"},
    "launch.warm.replacing": {
        "en": "stopping the warm ranks that were running first",
        "ro": "mai întâi se opresc rangurile persistente care rulau",
    },
    # labkit.launch.nodes
    "launch.nodes.ran_on": {
        "en": "rank {rank} ran on node {node} (local rank {local})",
        "ro": "rangul {rank} a rulat pe nodul {node} (rang local {local})",
    },
    "launch.nodes.rdzv": {
        "en": "the rendezvous never completed; nodes whose agent started: {started}; node ranks that never joined: {missing} (a node stuck or slow to start: LABKIT_RDZV_TIMEOUT gives it longer)",
        "ro": "rendezvous-ul nu s-a încheiat niciodată; noduri al căror agent a pornit: {started}; ranguri de nod care nu s-au alăturat: {missing} (un nod blocat sau lent la pornire: LABKIT_RDZV_TIMEOUT îi dă mai mult timp)",
    },
    # labkit.launch.options
    "launch.opt.nproc.type": {
        "en": "nproc must be a whole number of ranks, got {value!r}",
        "ro": "nproc trebuie să fie un număr întreg de ranguri, nu {value!r}",
    },
    "launch.opt.nproc.small": {
        "en": "nproc must be at least 1, got {value}",
        "ro": "nproc trebuie să fie cel puțin 1, nu {value}",
    },
    "launch.opt.nproc.large": {
        "en": "{value:@CPU rank is|CPU ranks is} too many for this machine ({cpus:@core|cores}, {mem:.0f} GiB "
        "free): at most {limit}. Set LABKIT_MAX_RANKS to raise the limit.",
        "ro": "{value:@rang CPU este prea mult|ranguri CPU sunt prea multe} pentru această mașină "
        "({cpus:@nucleu|nuclee}, {mem:.0f} GiB liberi): cel mult {limit}. Setați LABKIT_MAX_RANKS pentru a "
        "ridica limita.",
    },
    "launch.opt.backend": {
        "en": "unknown backend {value!r}{hint}; choose one of: auto, gloo, nccl",
        "ro": "bibliotecă de comunicare necunoscută {value!r}{hint}; alegeți una dintre: auto, gloo, nccl",
    },
    "launch.opt.didyoumean": {"en": " (did you mean {name!r}?)", "ro": " (ați vrut să scrieți {name!r}?)"},
    "launch.opt.timeout": {
        "en": "timeout must be a positive number of seconds, got {value!r}",
        "ro": "timeout trebuie să fie un număr pozitiv de secunde, nu {value!r}",
    },
    "launch.opt.seconds": {
        "en": "{option} must be a positive number of seconds, got {value!r}",
        "ro": "{option} trebuie să fie un număr pozitiv de secunde, nu {value!r}",
    },
    "launch.opt.interval": {
        "en": "{option} must be a number of seconds, 0 or more, got {value!r}",
        "ro": "{option} trebuie să fie un număr de secunde, 0 sau mai mult, nu {value!r}",
    },
    "launch.opt.flag": {
        "en": "{option} is on or off (True or False), got {value!r}",
        "ro": "{option} este activată sau nu (True sau False), nu {value!r}",
    },
    "launch.opt.text": {
        "en": "{option} takes text, got {value!r}",
        "ro": "{option} primește text, nu {value!r}",
    },
    "launch.opt.unknown": {
        "en": "{where} has no option {name!r}{hint}",
        "ro": "{where} nu are opțiunea {name!r}{hint}",
    },
    "launch.opt.help.grace": {
        "en": "seconds between SIGTERM and SIGKILL when stopping ranks",
        "ro": "secundele dintre SIGTERM și SIGKILL la oprirea rangurilor",
    },
    "launch.opt.help.sample_interval": {
        "en": "seconds between memory samples in each rank; 0 turns sampling off",
        "ro": "secundele dintre eșantioanele de memorie din fiecare rang; 0 oprește eșantionarea",
    },
    "launch.opt.help.start_method": {
        "en": "fork (ranks are copies of torchrun's agent, torch already imported) or spawn (a fresh interpreter per rank)",
        "ro": "fork (rangurile sunt copii ale agentului torchrun, cu torch deja importat) sau spawn (un interpretor nou pentru fiecare rang)",
    },
    # argparse's own words (labkit.launch.parsers), in the magics and the labkit command
    "launch.args.positionals": {"en": "positional arguments", "ro": "argumente poziționale"},
    "launch.args.help": {
        "en": "show this help message and exit",
        "ro": "afișează acest mesaj de ajutor și iese",
    },
    "launch.args.error": {"en": "{prog}: error: {message}", "ro": "{prog}: eroare: {message}"},
    "launch.args.argument": {"en": "argument {name}: {error}", "ro": "argumentul {name}: {error}"},
    "launch.args.required": {
        "en": "the following arguments are required: {names}",
        "ro": "următoarele argumente sunt obligatorii: {names}",
    },
    "launch.args.unrecognized": {
        "en": "unrecognized arguments: {words}",
        "ro": "argumente necunoscute: {words}",
    },
    "launch.args.choice": {
        "en": "invalid choice: {value} (choose from {choices})",
        "ro": "alegere nevalidă: {value} (alegeți dintre {choices})",
    },
    "launch.args.one": {"en": "expected one argument", "ro": "se așteaptă un argument"},
    "launch.args.value": {"en": "invalid {type} value: {value}", "ro": "valoare {type} nevalidă: {value}"},
    "launch.args.not_with": {
        "en": "not allowed with argument {name}",
        "ro": "nu este permis împreună cu argumentul {name}",
    },
    "launch.opt.display": {
        "en": "display must be one of auto, widgets, text, none; got {value!r}",
        "ro": "display trebuie să fie unul dintre auto, widgets, text, none; nu {value!r}",
    },
    "launch.opt.start_method": {
        "en": "LABKIT_START_METHOD must be fork or spawn, got {value!r}",
        "ro": "LABKIT_START_METHOD trebuie să fie fork sau spawn, nu {value!r}",
    },
    "launch.opt.env": {
        "en": "--env expects KEY=VALUE, got {value!r}",
        "ro": "--env așteaptă CHEIE=VALOARE, nu {value!r}",
    },
    "launch.opt.nnodes": {
        "en": "nnodes must be a whole number of nodes, at least 1; got {value!r}",
        "ro": "nnodes trebuie să fie un număr întreg de noduri, cel puțin 1; nu {value!r}",
    },
    "launch.opt.nodes.how": {
        "en": "{nnodes:@node needs|nodes need} a way to be reached: --slurm (srun) or --hosts a,b (ssh)",
        "ro": "{nnodes:@nod are|noduri au} nevoie de o cale de acces: --slurm (srun) sau --hosts a,b (ssh)",
    },
    "launch.opt.nodes.both": {
        "en": "--slurm and --hosts exclude each other: Slurm chooses the nodes, --hosts names them",
        "ro": "--slurm și --hosts se exclud: Slurm alege nodurile, --hosts le numește",
    },
    "launch.opt.nodes.count": {
        "en": "--nnodes {nnodes} but --hosts names {count:@host|hosts} ({hosts}): one agent per host",
        "ro": "--nnodes {nnodes}, dar --hosts numește {count:@gazdă|gazde} ({hosts}): un agent pe gazdă",
    },
    "launch.opt.nodes.no_srun": {
        "en": "--slurm needs srun, which is not on PATH here ({path}): run the kernel on a Slurm login or compute node, or load Slurm's module",
        "ro": "--slurm are nevoie de srun, care nu este în PATH aici ({path}): porniți kernelul pe un nod de login sau de calcul Slurm, sau încărcați modulul Slurm",
    },
    "launch.opt.nodes.no_ssh": {
        "en": "--hosts needs ssh, which is not on PATH here",
        "ro": "--hosts are nevoie de ssh, care nu este în PATH aici",
    },
    "launch.opt.nodes.slurm_args": {
        "en": "--slurm-args without --slurm: the arguments are srun's",
        "ro": "--slurm-args fără --slurm: argumentele sunt pentru srun",
    },
    "launch.opt.nodes.slurm_args_bad": {
        "en": "--slurm-args {value!r}: {error}",
        "ro": "--slurm-args {value!r}: {error}",
    },
    "launch.opt.nodes.channel_host": {
        "en": "--channel-host is for ranks on other nodes; with one node the channel is a Unix socket",
        "ro": "--channel-host este pentru rangurile de pe alte noduri; pe un singur nod canalul este un socket Unix",
    },
    "launch.opt.vars.pickle": {
        "en": "variable {name!r} ({type}) cannot be sent to the ranks: {error}",
        "ro": "variabila {name!r} ({type}) nu poate fi trimisă rangurilor: {error}",
    },
    "launch.opt.vars.undefined": {
        "en": "--vars names {name!r}, which is not defined in the notebook",
        "ro": "--vars numește {name!r}, care nu este definită în notebook",
    },
    # the magics' usage lines and option help (labkit.launch.magic builds its parsers from these)
    "launch.warm.usage.start": {
        "en": "%torchrun_start [-n NPROC] [--backend auto|gloo|nccl] [--pg-timeout SECONDS] [--env K=V ...] [--pin]",
        "ro": "%torchrun_start [-n NPROC] [--backend auto|gloo|nccl] [--pg-timeout SECUNDE] [--env K=V ...] [--pin]",
    },
    "launch.warm.usage.ranks": {
        "en": "%%ranks [--timeout SECONDS] [--vars a,b] [--quiet] [--display auto|widgets|text|none]",
        "ro": "%%ranks [--timeout SECUNDE] [--vars a,b] [--quiet] [--display auto|widgets|text|none]",
    },
    "launch.magic.help.nproc": {
        "en": "number of ranks (default: the visible GPUs, else 2)",
        "ro": "numărul de ranguri (implicit: GPU-urile vizibile, altfel 2)",
    },
    "launch.magic.help.backend": {
        "en": "process-group backend",
        "ro": "biblioteca de comunicare a grupului de procese",
    },
    "launch.magic.help.timeout": {
        "en": "limit for the whole run, in seconds",
        "ro": "limita pentru întreaga rulare, în secunde",
    },
    "launch.magic.help.vars": {
        "en": "notebook variables to send to every rank",
        "ro": "variabile din notebook trimise fiecărui rang",
    },
    "launch.magic.help.env": {
        "en": "environment variable for the ranks (repeatable)",
        "ro": "variabilă de mediu pentru ranguri (repetabilă)",
    },
    "launch.magic.help.quiet": {"en": "no dashboard, no summary", "ro": "fără panou și fără rezumat"},
    "launch.magic.help.nnodes": {
        "en": "nodes, one torchrun agent each (needs --slurm or --hosts)",
        "ro": "noduri, câte un agent torchrun pe fiecare (cere --slurm sau --hosts)",
    },
    "launch.magic.help.slurm": {
        "en": "start the agents with srun (inside an allocation, or srun asks for one)",
        "ro": "pornește agenții cu srun (într-o alocare, sau srun cere una)",
    },
    "launch.magic.help.slurm_args": {"en": "srun's own options, quoted", "ro": "opțiunile lui srun, între ghilimele"},
    "launch.magic.help.hosts": {
        "en": "hosts to start the agents on with ssh",
        "ro": "gazdele pe care ssh pornește agenții",
    },
    "launch.magic.help.channel_host": {
        "en": "address the ranks connect back to (default: the interface facing the nodes)",
        "ro": "adresa la care se conectează rangurile (implicit: interfața spre noduri)",
    },
    "launch.magic.help.display": {
        "en": "widgets, text or none (default: auto)",
        "ro": "widgets, text sau none (implicit: auto)",
    },
    "launch.warm.help.pg_timeout": {
        "en": "collective timeout in the ranks, in seconds",
        "ro": "limita operațiilor colective în ranguri, în secunde",
    },
    "launch.warm.help.timeout": {
        "en": "limit for this cell, in seconds",
        "ro": "limita pentru această celulă, în secunde",
    },
    # labkit.launch.warm
    "launch.warm.not_running": {
        "en": "this session's ranks are not running ({why}); session.restart() (or %torchrun_restart) starts fresh ones",
        "ro": "rangurile acestei sesiuni nu rulează ({why}); session.restart() (sau %torchrun_restart) pornește altele noi",
    },
    "launch.warm.why.never": {"en": "not started", "ro": "nepornite"},
    "launch.warm.why.stopped": {"en": "stopped", "ro": "oprite"},
    "launch.warm.why.ended": {"en": "ended in cell {cell}", "ro": "încheiate în celula {cell}"},
    "launch.warm.busy": {
        "en": "this session is running a cell already; wait for it to end",
        "ro": "această sesiune rulează deja o celulă; așteptați să se termine",
    },
    "launch.warm.bad_code": {
        "en": "Session.run() takes code (a string); got {type}",
        "ro": "Session.run() primește cod (un șir); nu {type}",
    },
    "launch.warm.ended": {
        "en": "The session has ended and its processes are gone: session.restart() (or %torchrun_restart) starts fresh ranks.",
        "ro": "Sesiunea s-a încheiat și procesele ei au dispărut: session.restart() (sau %torchrun_restart) pornește ranguri noi.",
    },
    "launch.warm.unsafe": {
        "en": "The session is still up, but its ranks may now disagree about which collective comes next: session.restart() (or %torchrun_restart) gives fresh ranks.",
        "ro": "Sesiunea rulează în continuare, dar rangurile ei pot să nu mai fie de acord asupra următoarei operații colective: session.restart() (sau %torchrun_restart) pornește ranguri noi.",
    },
    "launch.warm.unsafe.note": {
        "en": "note: {reason}, so collectives may not line up; session.restart() (or %torchrun_restart) gives fresh ranks.",
        "ro": "notă: {reason}, deci operațiile colective pot să nu se potrivească; session.restart() (sau %torchrun_restart) pornește ranguri noi.",
    },
    "launch.warm.reason.interrupted": {"en": "cell {cell} was interrupted", "ro": "celula {cell} a fost întreruptă"},
    "launch.warm.reason.collective": {
        "en": "a collective failed on rank {rank} in cell {cell}",
        "ro": "o operație colectivă a eșuat pe rangul {rank} în celula {cell}",
    },
    "launch.warm.busy_after_error": {
        "en": "ranks {ranks} were still running {grace:.0f} s after rank {rank} failed (waiting for it in a collective?), so they were interrupted.",
        "ro": "rangurile {ranks} încă rulau la {grace:.0f} s după ce rangul {rank} a eșuat (îl așteptau într-o operație colectivă?), așa că au fost întrerupte.",
    },
    "launch.warm.timeout": {
        "en": "the cell went past its timeout of {timeout:g} s; ranks still running: {alive}",
        "ro": "celula a depășit limita de {timeout:g} s; ranguri încă active: {alive}",
    },
    "launch.warm.done_early": {
        "en": "ranks {done} had finished the cell while ranks {busy} were still in it.",
        "ro": "rangurile {done} terminaseră celula, în timp ce rangurile {busy} erau încă în ea.",
    },
    "launch.warm.interrupted": {
        "en": "interrupted: the cell was stopped on every rank (what it measured is in labkit.last_run)",
        "ro": "întrerupt: celula a fost oprită pe toate rangurile (ce a măsurat este în labkit.last_run)",
    },
    "launch.warm.cell_stopped": {
        "en": "the cell was stopped on every rank",
        "ro": "celula a fost oprită pe toate rangurile",
    },
    "launch.warm.stuck": {
        "en": "ranks {ranks} did not stop when interrupted (stuck outside Python?), so the session was ended.",
        "ro": "rangurile {ranks} nu s-au oprit la întrerupere (blocate în afara Python?), așa că sesiunea a fost încheiată.",
    },
    "launch.warm.start_timeout": {
        "en": "the ranks were not ready within {timeout:.0f} s; torchrun's output:\n{log}",
        "ro": "rangurile nu au fost gata în {timeout:.0f} s; ieșirea torchrun:\n{log}",
    },
    "launch.warm.start_interrupted": {
        "en": "interrupted while the warm ranks were starting; they were stopped",
        "ro": "întrerupt în timp ce rangurile persistente porneau; au fost oprite",
    },
    "launch.warm.repr": {
        "en": "<labkit.Session {run_id}: {nproc:@rank|ranks}, {backend}, {cells:@cell|cells}, {state}>",
        "ro": "<labkit.Session {run_id}: {nproc:@rang|ranguri}, {backend}, {cells:@celulă|celule}, {state}>",
    },
    "launch.warm.state.up": {"en": "running", "ro": "rulează"},
    "launch.warm.state.unsafe": {"en": "running, unsafe", "ro": "rulează, nesigură"},
    "launch.warm.state.down": {"en": "not running", "ro": "nu rulează"},
    # labkit.launch.linkspec
    "launch.netem.link.bad": {
        "en": "--link {value!r}: write RATE[,LATENCY], e.g. 200mbit,100us or 1gbit (rates in bit, kbit, mbit, gbit; latency in us, ms)",
        "ro": "--link {value!r}: scrieți RATĂ[,LATENȚĂ], de ex. 200mbit,100us sau 1gbit (rate în bit, kbit, mbit, gbit; latența în us, ms)",
    },
    "launch.netem.link.bytes": {
        "en": "--link {value!r}: {unit} means bytes per second in tc; write the rate in bits: {bits}",
        "ro": "--link {value!r}: {unit} înseamnă octeți pe secundă în tc; scrieți rata în biți: {bits}",
    },
    "launch.netem.link.range": {
        "en": "--link {value!r}: the rate must be between 1mbit and 100gbit, the latency at most 1 s",
        "ro": "--link {value!r}: rata trebuie să fie între 1mbit și 100gbit, latența cel mult 1 s",
    },
    "launch.netem.nodes": {
        "en": "--nodes must be a whole number of emulated nodes, 1 to {most}; got {value!r}",
        "ro": "--nodes trebuie să fie un număr întreg de noduri emulate, între 1 și {most}; nu {value!r}",
    },
    "launch.netem.link.one_node": {
        "en": "--link shapes the link between emulated nodes: give --nodes 2 or more (ranks on one node talk over its loopback)",
        "ro": "--link modelează legătura dintre noduri emulate: dați --nodes 2 sau mai mult (rangurile de pe un nod comunică prin loopback-ul lui)",
    },
    "launch.netem.nodes.real": {
        "en": "--nodes emulates nodes on this machine; --nnodes, --slurm and --hosts use real ones: choose one",
        "ro": "--nodes emulează noduri pe această mașină; --nnodes, --slurm și --hosts folosesc noduri reale: alegeți una",
    },
    # labkit.launch.cold
    "launch.profile_written": {
        "en": "torch.profiler traces, one per rank (open in ui.perfetto.dev): {folder}",
        "ro": "urme torch.profiler, câte una pe rang (deschideți în ui.perfetto.dev): {folder}",
    },
    # labkit.launch.netem
    "launch.netem.unavailable": {
        "en": "emulated nodes need network namespaces, and this machine cannot make them: {why}. Run without --nodes/--link (one node), or use the simulator (labkit.simulate).",
        "ro": "nodurile emulate au nevoie de spații de nume de rețea, iar această mașină nu le poate crea: {why}. Rulați fără --nodes/--link (un singur nod) sau folosiți simulatorul (labkit.simulate).",
    },
    "launch.netem.why.userns": {
        "en": "unprivileged user namespaces are not allowed ({detail})",
        "ro": "spațiile de nume de utilizator neprivilegiate nu sunt permise ({detail})",
    },
    "launch.netem.why.unshare": {
        "en": "unshare() was refused: {error} (a container's seccomp or security profile forbids it)",
        "ro": "unshare() a fost refuzat: {error} (profilul seccomp sau de securitate al containerului îl interzice)",
    },
    "launch.netem.why.tool": {
        "en": "the {tool} command (iproute2) is not installed",
        "ro": "comanda {tool} (iproute2) nu este instalată",
    },
    "launch.netem.why.step": {
        "en": "`{command}` failed inside the namespace: {error}",
        "ro": "`{command}` a eșuat în spațiul de nume: {error}",
    },
    "launch.netem.why.platform": {
        "en": "network namespaces exist on Linux only (this is {platform})",
        "ro": "spațiile de nume de rețea există doar pe Linux (aceasta este {platform})",
    },
    "launch.netem.no_latency": {
        "en": "note: this kernel has no netem qdisc, so the link's latency ({asked}) is not emulated: its rate is, each direction; the latency is veth's own (about {base}). The simulator uses the latter.",
        "ro": "notă: acest kernel nu are qdisc-ul netem, deci latența legăturii ({asked}) nu este emulată: rata ei este, în fiecare direcție; latența este cea proprie veth (circa {base}). Simulatorul o folosește pe aceasta.",
    },
    # labkit.launch.options
    "launch.magic.usage": {
        "en": "%%torchrun [-n NPROC] [--backend auto|gloo|nccl] [--timeout SECONDS] [--vars a,b] [--env K=V ...] [--quiet] [--display auto|widgets|text|none] [--nnodes N --slurm [--slurm-args ARGS] | --hosts a,b] [--channel-host ADDR] [--nodes N [--link RATE[,LATENCY]]] [--pin] [--profile]",
        "ro": "%%torchrun [-n NPROC] [--backend auto|gloo|nccl] [--timeout SECUNDE] [--vars a,b] [--env K=V ...] [--quiet] [--display auto|widgets|text|none] [--nnodes N --slurm [--slurm-args ARGS] | --hosts a,b] [--channel-host ADR] [--nodes N [--link RATĂ[,LATENȚĂ]]] [--pin] [--profile]",
    },
    "launch.magic.help.nodes": {
        "en": "emulated nodes on this machine, a network namespace each (-n ranks on each)",
        "ro": "noduri emulate pe această mașină, fiecare cu spațiul său de nume de rețea (-n ranguri pe fiecare)",
    },
    "launch.magic.help.link": {
        "en": "the link between emulated nodes: RATE[,LATENCY] each direction, e.g. 200mbit,100us",
        "ro": "legătura dintre nodurile emulate: RATĂ[,LATENȚĂ] în fiecare direcție, de ex. 200mbit,100us",
    },
    "launch.magic.help.pin": {
        "en": "bind each rank to one core (the same placement every run when ranks outnumber cores)",
        "ro": "leagă fiecare rang de un nucleu (aceeași așezare la fiecare rulare când sunt mai multe ranguri decât nuclee)",
    },
    "launch.opt.pin": {
        "en": "--pin binds ranks to cores with sched_setaffinity, which {platform} does not have (Linux does)",
        "ro": "--pin leagă rangurile de nuclee cu sched_setaffinity, pe care {platform} nu o are (Linux o are)",
    },
    "launch.magic.help.profile": {
        "en": "write each rank's torch.profiler trace beside the notebook",
        "ro": "scrie urma torch.profiler a fiecărui rang lângă notebook",
    },
    # labkit.launch.prefork
    "launch.prefork.stale": {
        "en": "labkit: {what} changed since torch was imported ahead of time; this cell starts torchrun the usual way (seconds), and the next cells use a fresh pre-imported process",
        "ro": "labkit: {what} s-a schimbat de când torch a fost importat din timp; această celulă pornește torchrun obișnuit (câteva secunde), iar celulele următoare folosesc un proces nou, cu torch importat din timp",
    },
    "launch.prefork.died": {
        "en": "labkit: the process with torch imported ahead of time ended ({why}); this cell starts torchrun the usual way (seconds), and a fresh one starts for the next cells",
        "ro": "labkit: procesul cu torch importat din timp s-a încheiat ({why}); această celulă pornește torchrun obișnuit (câteva secunde), iar pentru celulele următoare pornește unul nou",
    },
    "launch.prefork.failed": {
        "en": "labkit: torch could not be imported ahead of time ({why}); cells start torchrun the usual way (seconds each)",
        "ro": "labkit: torch nu a putut fi importat din timp ({why}); celulele pornesc torchrun obișnuit (câteva secunde fiecare)",
    },
    "launch.prefork.env": {
        "en": "labkit: --env {name} is read by torch when it is imported, so this cell starts torchrun the usual way (seconds)",
        "ro": "labkit: --env {name} este citită de torch la import, așa că această celulă pornește torchrun obișnuit (câteva secunde)",
    },
    "launch.prefork.what.env": {
        "en": "the environment variable {name}",
        "ro": "variabila de mediu {name}",
    },
    "launch.prefork.what.cwd": {
        "en": "the working folder",
        "ro": "directorul de lucru",
    },
    "launch.prefork.what.python": {
        "en": "the Python interpreter",
        "ro": "interpretorul Python",
    },
    "launch.prefork.what.files": {
        "en": "labkit's or torch's files",
        "ro": "fișierele labkit sau torch",
    },
    "launch.prefork.why.exit": {
        "en": "exit code {code}",
        "ro": "codul de ieșire {code}",
    },
    "launch.prefork.why.threads": {
        "en": "{threads:@thread|threads} after importing torch; forking it would not be safe",
        "ro": "{threads:@fir de execuție|fire de execuție} după importul torch; o bifurcare nu ar fi sigură",
    },
    "launch.prefork.why.silent": {
        "en": "no answer in {seconds:.0f} s",
        "ro": "niciun răspuns în {seconds:.0f} s",
    },
    "launch.prefork.why.adopt": {
        "en": "the agent could not be adopted by the kernel",
        "ro": "agentul nu a putut fi adoptat de kernel",
    },
    # labkit.launch.group
    "launch.start_interrupted": {
        "en": "interrupted while torchrun was starting; nothing of the run is left",
        "ro": "întrerupt în timp ce torchrun pornea; nu a rămas nimic din rulare",
    },
}
