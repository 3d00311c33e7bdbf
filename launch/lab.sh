#!/usr/bin/env bash
# The local lab: JupyterLab on the course's notebooks, on this machine only.
#
#   bash launch/lab.sh                  # the student edition, in your workspace (sets up .venv first if needed)
#   bash launch/lab.sh --instructor     # the solution edition: notebooks/, every solution and output in it
#   LABKIT_LAB_PORT=9000 bash launch/lab.sh
#   LABKIT_LAB_DIR=labkit/course/lessons bash launch/lab.sh   # the lessons' MyST sources, to edit and run
#   LABKIT_WORKSPACE=~/fsdp bash launch/lab.sh                # a workspace elsewhere than ~/fsdp-labkit-work
#
# The workspace is the learner's own (labkit.grading.selfstudy): made on the first start from the
# self-study build of notebooks/ (en/ and ro/, no solutions in the notebooks), never written over; a newer
# course goes to updates/<version>/ beside it, with a one-line message. labkit.progress(),
# labkit.solution(id) and `labkit grade --self` read it (LABKIT_WORKSPACE is exported to the kernel).
#
# A lesson's source (NN_name.md) opens as a notebook on a double click: jupytext reads and saves it,
# and launch/jupyter/labconfig (on JUPYTER_CONFIG_PATH) makes its notebook view the default for .md files.
# The same labconfig sets fetchNews "false": JupyterLab otherwise asks every new user "Would you like
# to get notified about official Jupyter news?" (news_url=None below stops the fetch, not the question).
# launch/jupyter/jupyter_server_config.json: no language-server extension (none is installed; it only
# slows the start).
#
# Listens on 127.0.0.1 with a fresh random token (in the environment, not on the command line,
# where `ps` would show it to every user of the machine). Extra arguments go to `jupyter lab`.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=launch/lib.sh
source "$repo/launch/lib.sh"
bash "$repo/launch/setup-env.sh"
py=${LABKIT_VENV:-$repo/.venv}/bin/python
instructor= args=() prefer=()
for arg in "$@"; do
    if [ "$arg" = --instructor ]; then instructor=1; else args+=("$arg"); fi
done
if [ -n "$instructor" ] || [ -n "${LABKIT_LAB_DIR:-}" ]; then # the solution edition (or a folder named), as it is
    dir=${LABKIT_LAB_DIR:-notebooks}
    case $dir in /*) ;; *) dir=$repo/$dir ;; esac
    [ -d "$dir" ] || die "labkit: no folder %s (LABKIT_LAB_DIR)" "labkit: nu există folderul %s (LABKIT_LAB_DIR)" "$dir"
else # the learner's workspace: made once, an update offered beside it (its message on stderr)
    dir=$("$py" -m labkit.grading.selfstudy "$repo/notebooks") ||
        die "labkit: the workspace could not be prepared (above: why)" "labkit: spațiul de lucru nu a putut fi pregătit (mai sus: de ce)"
    export LABKIT_WORKSPACE=$dir
    prefer=(--ContentsManager.preferred_dir="$(labkit_lang)") # the file browser opens on en/ or ro/
fi
export JUPYTER_CONFIG_PATH="$repo/launch/jupyter${JUPYTER_CONFIG_PATH:+:$JUPYTER_CONFIG_PATH}"

# the first free port from LABKIT_LAB_PORT (default 8888) on: the URL printed below is then right
port=$("$py" - "${LABKIT_LAB_PORT:-8888}" <<'PY'
import socket, sys
start = int(sys.argv[1])
for port in range(start, start + 100):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        print(port)
        break
PY
)
[ -n "$port" ] || die "labkit: no free port from %s on" "labkit: niciun port liber începând cu %s" "${LABKIT_LAB_PORT:-8888}"
JUPYTER_TOKEN=${JUPYTER_TOKEN:-$("$py" -c 'import secrets; print(secrets.token_urlsafe(24))')}
export JUPYTER_TOKEN
export JUPYTER_PREFER_ENV_PATH=1 # the kernel is this environment's Python, whatever else is installed
say "labkit: the lab is at http://127.0.0.1:%s/lab?token=%s" "labkit: laboratorul este la http://127.0.0.1:%s/lab?token=%s" "$port" "$JUPYTER_TOKEN"
allow_root=
[ "$(id -u)" -ne 0 ] || allow_root=--allow-root # root in a container (or CI): Jupyter refuses it otherwise
exec "$py" -m jupyter lab ${allow_root:+"$allow_root"} \
    --ServerApp.root_dir="$dir" \
    --ServerApp.ip=127.0.0.1 \
    --ServerApp.port="$port" \
    --ServerApp.port_retries=0 \
    --no-browser \
    --LabApp.news_url=None \
    --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate \
    ${prefer[@]+"${prefer[@]}"} ${args[@]+"${args[@]}"}
