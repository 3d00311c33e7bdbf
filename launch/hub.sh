#!/usr/bin/env bash
# A class JupyterHub on this server: students log in with their system account, each gets a
# server under their own uid with the student edition of the course in their language.
#
#   sudo bash launch/hub.sh --students ana,ben --instructors prof            # http://127.0.0.1:8000
#   sudo bash launch/hub.sh --students ana,ben --instructors prof --ip 0.0.0.0 --port 80
#   sudo bash launch/hub.sh --students ana,ben --instructors prof --slurm    # each server a Slurm job
#   sudo bash launch/hub.sh --roster class.csv --login oidc                  # the university's single sign-on
#   sudo bash launch/hub.sh --roster class.csv --login lti13                 # launched from the LMS, grades passed back
#
# Options (or the LABKIT_HUB_* variable each sets; labkit/hub/settings.py has them all):
#   --students A,B       who may log in as a student (system users; --create-users makes missing ones)
#   --instructors P      JupyterHub admins; they read every submission (~/submissions)
#   --roster FILE        the class as a CSV file (id,name,email,lang,role,sis_id: labkit/hub/roster.py), with or instead of the two above
#   --login pam|oidc|lti13   system passwords (default), OpenID Connect (LABKIT_HUB_OIDC_*), or LTI 1.3 (LABKIT_HUB_LTI_*)
#   --ip ADDR --port N   where the hub listens (default 127.0.0.1:8000: put TLS in front for a class)
#   --slurm              servers are Slurm jobs (batchspawner), submitted as each student
#   --memory 4G --cpus 2 --max-ranks 4   per student: cgroup memory and CPU, ranks per %%torchrun cell
#   --gpus auto|none|0,1,..|MIG-..,..   the GPU pool (default auto: nvidia-smi -L); each server gets its own
#   --gpu-profile 1|2|..|shared         each student's GPUs (LABKIT_HUB_GPU_PROFILES=ana=2,ben=shared: one's own)
#   --cull-timeout S     idle seconds before jupyterhub-idle-culler stops a server (default 3600)
#   --dir DIR            the hub's state: database, secrets, student editions, submissions (/srv/labkit-hub)
#   --course FILE        the course file (docs/classroom.md): the exchange service's roster and deadlines, and
#                        who logs in (its [[students]] and [[instructors]]: enough without --students or --roster)
#   --create-users       create missing system users (no password: set one with passwd)
# Needs root (servers run as each student), the course environment (launch/setup-env.sh, with
# the hub extra), and configurable-http-proxy (npm; installed under ~/.cache/labkit-hub when missing).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=launch/lib.sh
source "$repo/launch/lib.sh"

create_users=
while [ $# -gt 0 ]; do
    case $1 in
    --students) export LABKIT_HUB_STUDENTS=$2 && shift ;;
    --instructors) export LABKIT_HUB_INSTRUCTORS=$2 && shift ;;
    --roster) LABKIT_HUB_ROSTER=$(realpath "$2") && export LABKIT_HUB_ROSTER && shift ;;
    --login) export LABKIT_HUB_LOGIN=$2 && shift ;;
    --ip) export LABKIT_HUB_IP=$2 && shift ;;
    --port) export LABKIT_HUB_PORT=$2 && shift ;;
    --slurm) export LABKIT_HUB_SPAWNER=slurm ;;
    --memory) export LABKIT_HUB_MEMORY=$2 && shift ;;
    --cpus) export LABKIT_HUB_CPUS=$2 && shift ;;
    --max-ranks) export LABKIT_HUB_MAX_RANKS=$2 && shift ;;
    --gpus) export LABKIT_HUB_GPUS=$2 && shift ;;
    --gpu-profile) export LABKIT_HUB_GPU_PROFILE=$2 && shift ;;
    --cull-timeout) export LABKIT_HUB_CULL_TIMEOUT=$2 && shift ;;
    --dir) export LABKIT_HUB_DIR=$2 && shift ;;
    --course) export LABKIT_HUB_COURSE=$(realpath "$2") && shift ;;
    --create-users) create_users=1 ;;
    *) die "labkit hub: unknown option %s" "labkit hub: opțiune necunoscută %s" "$1" ;;
    esac
    shift
done
[ "$(id -u)" = 0 ] || die "labkit hub: run it as root: each student's server runs under the student's own uid" \
    "labkit hub: porniți-l ca root: serverul fiecărui student rulează cu uid-ul studentului"

# the roster's people are accounts on this machine, as the ones --students and --instructors name
# (its own Python: the course environment may not be made yet, and the roster needs only labkit's base)
# (the course file is a roster too: its students and instructors, labkit.hub.roster reads either)
named_students=${LABKIT_HUB_STUDENTS:-} named_instructors=${LABKIT_HUB_INSTRUCTORS:-} # either may be left to a roster
roster_students= roster_instructors=
for roster in "${LABKIT_HUB_ROSTER:-}" "${LABKIT_HUB_COURSE:-}"; do
    [ -n "$roster" ] || continue
    roster_students+=,$(cd / && PYTHONPATH=$repo python3 -m labkit.hub.roster "$roster" students) || exit 1
    roster_instructors+=,$(cd / && PYTHONPATH=$repo python3 -m labkit.hub.roster "$roster" instructors) || exit 1
done

# Students log in on this machine: what of the checkout holds the answers must be unreadable to them
# (the lessons' sources and the questions hold every solution and reference, notebooks/ the solution
# edition, .git all of it). Checked as every student and as nobody, before anything else is done.
protected=(labkit/course/questions labkit/course/lessons notebooks .git)
for user in nobody ${named_students//,/ } ${roster_students//,/ }; do
    id "$user" >/dev/null 2>&1 || continue
    for path in "${protected[@]}"; do
        [ -e "$repo/$path" ] || continue
        # readable = the folder can be listed, or a file in it opened by name (a file: opened; a worktree's
        # .git is one) (the names are looked up as root: a folder that cannot be listed may still let its files be opened)
        if runuser -u "$user" -- sh -c 'if [ -d "$1" ]; then ls "$1"; else cat "$1"; fi >/dev/null 2>&1 && exit 0; shift
            for f in "$@"; do cat "$f" >/dev/null 2>&1 && exit 0; done; exit 1' sh "$repo/$path" \
            $(find "$repo/$path" -maxdepth 2 -type f 2>/dev/null | head -n 5); then
            die "labkit hub: %s can read %s, which holds the course's answers: run  chmod -R o-rwx %s  (or keep the checkout where students cannot read it) and start again" \
                "labkit hub: %s poate citi %s, care conține răspunsurile cursului: rulați  chmod -R o-rwx %s  (sau țineți copia unde studenții nu o pot citi) și porniți din nou" \
                "$user" "$repo/$path" "${protected[*]/#/$repo/}"
        fi
    done
done
bash "$repo/launch/setup-env.sh"
venv=${LABKIT_VENV:-$repo/.venv}
py=$venv/bin/python
[ -x "$venv/bin/jupyterhub-singleuser" ] || "$py" -m pip install -q -e "${repo}[hub]"
export LABKIT_HUB_SCRIPTS=$venv/bin
export LABKIT_HUB_DIR=${LABKIT_HUB_DIR:-/srv/labkit-hub}
mkdir -p "$LABKIT_HUB_DIR" && chmod 0711 "$LABKIT_HUB_DIR"

# The students' servers run this environment's packages (their labkit is the student install,
# below) and JupyterLab's course settings from launch/jupyter, so both must be readable by them.
# The environment's Python may not be (a pyenv build under /root): the servers run a view of a
# readable Python of the same version, seeing the same packages (labkit.hub.view).
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if ! runuser -u nobody -- test -r "$site"; then
    die "labkit hub: %s is not readable by other users: the students' servers run its packages; put the environment where they can read it (LABKIT_VENV)" \
        "labkit hub: %s nu poate fi citit de alți utilizatori: serverele studenților îi rulează pachetele; puneți mediul unde îl pot citi (LABKIT_VENV)" "$site"
fi

# configurable-http-proxy, from npm, once
if [ -z "${LABKIT_HUB_PROXY:-}" ]; then
    LABKIT_HUB_PROXY=$(command -v configurable-http-proxy || true)
    npmdir=${LABKIT_HUB_NPM:-$HOME/.cache/labkit-hub/npm}
    if [ -z "$LABKIT_HUB_PROXY" ] && [ ! -x "$npmdir/node_modules/.bin/configurable-http-proxy" ]; then
        command -v npm >/dev/null || die "labkit hub: npm is missing (apt-get install npm)" "labkit hub: lipsește npm (apt-get install npm)"
        say "labkit hub: installing configurable-http-proxy in %s" "labkit hub: instalez configurable-http-proxy în %s" "$npmdir"
        mkdir -p "$npmdir"
        npm install --silent --no-audit --no-fund --prefix "$npmdir" configurable-http-proxy >&2
    fi
    LABKIT_HUB_PROXY=${LABKIT_HUB_PROXY:-$npmdir/node_modules/.bin/configurable-http-proxy}
fi
export LABKIT_HUB_PROXY

# the student edition, in both languages (built side by side), rebuilt when the course changed
builds=()
for lang in en ro; do
    out=$LABKIT_HUB_DIR/student/$lang
    if [ ! -d "$out" ] || [ -n "$(find "$repo/notebooks/$lang" -newer "$out" -name '*.ipynb' -print -quit)" ]; then
        (rm -rf "$out" "$out.tmp" && mkdir -p "$out.tmp" &&
            "$py" -m labkit.cli build-student --lang "$lang" --out "$out.tmp" "$repo/notebooks/$lang" >&2 &&
            mv "$out.tmp" "$out") &
        builds+=("$!")
    fi
done
for pid in "${builds[@]}"; do wait "$pid"; done
# the students' labkit: the student install (no lesson sources, no references), rebuilt when labkit changed
install=$LABKIT_HUB_DIR/student/install
if [ ! -d "$install/labkit" ] || [ -n "$(find "$repo/labkit" -newer "$install/labkit" -name '*.py' -print -quit)" ]; then
    "$py" -c 'import sys; from labkit.grading.student import write_install; write_install(sys.argv[1])' "$install"
fi
chmod -R a+rX "$LABKIT_HUB_DIR/student"
LABKIT_HUB_PYTHON=$("$py" -m labkit.hub.view "$LABKIT_HUB_DIR/python" "$install")
export LABKIT_HUB_PYTHON
# what a student's kernel imports holds no answers: checked as a student would (nobody), or no hub
if ! (cd / && runuser -u nobody -- "$LABKIT_HUB_PYTHON" -c 'import importlib.util as u, labkit, sys; sys.exit(u.find_spec("labkit.course.questions") is not None or "/student/install/" not in labkit.__file__)'); then
    die "labkit hub: the students' Python imports labkit with its answers (%s)" \
        "labkit hub: Python-ul studenților importă labkit cu răspunsurile (%s)" "$LABKIT_HUB_PYTHON"
fi

if [ -n "$create_users" ]; then
    for user in ${named_students//,/ } ${named_instructors//,/ } ${roster_students//,/ } ${roster_instructors//,/ }; do
        id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
    done
fi

# free ports for the hub's own API and the proxy's (the public port is --port)
read -r LABKIT_HUB_API_PORT LABKIT_HUB_PROXY_API_PORT < <("$py" -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')
export LABKIT_HUB_API_PORT LABKIT_HUB_PROXY_API_PORT
# JupyterLab's course defaults (no news prompt), copied beside the student editions: no path into the
# checkout is in a student's environment
rm -rf "$LABKIT_HUB_DIR/jupyter" && cp -R "$repo/launch/jupyter" "$LABKIT_HUB_DIR/jupyter"
chmod -R a+rX "$LABKIT_HUB_DIR/jupyter"
export LABKIT_HUB_JUPYTER_CONFIG=$LABKIT_HUB_DIR/jupyter
say "labkit hub: http://%s:%s (state in %s)" "labkit hub: http://%s:%s (starea în %s)" \
    "${LABKIT_HUB_IP:-127.0.0.1}" "${LABKIT_HUB_PORT:-8000}" "$LABKIT_HUB_DIR"
if [ "${LABKIT_HUB_LOGIN:-pam}" = lti13 ]; then # the tool's key, made once: its public half goes to the LMS
    mkdir -p -m 0700 "$LABKIT_HUB_DIR/lti"
    "$py" -m labkit.hub.lti jwks --hub-dir "$LABKIT_HUB_DIR" >"$LABKIT_HUB_DIR/lti/tool-jwks.json"
    say "labkit hub: LTI 1.3: the tool's public keyset for the LMS is in %s" \
        "labkit hub: LTI 1.3: setul de chei publice al instrumentului pentru LMS este în %s" "$LABKIT_HUB_DIR/lti/tool-jwks.json"
fi
cd "$LABKIT_HUB_DIR"
touch jupyterhub.sqlite && chmod 0600 jupyterhub.sqlite # the database is root's alone (SQLite keeps the mode)
exec "$venv/bin/jupyterhub" -f "$repo/launch/hub/jupyterhub_config.py"
