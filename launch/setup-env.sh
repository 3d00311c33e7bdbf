#!/usr/bin/env bash
# The course's virtual environment, made or brought up to date; a second run does nothing.
#
#   bash launch/setup-env.sh
#
# Needs only Python 3.10+ with venv and pip, and a package index (PyPI). No conda, no stdin.
#   LABKIT_VENV      where the environment lives (default: .venv in the repo)
#   PYTHON           the Python that makes it (default: python3)
#   TORCH_SPEC       the torch to install when none is importable (default: torch==2.13.0)
#   TORCH_INDEX_URL  an index for torch only, e.g. https://download.pytorch.org/whl/cpu for a
#                    CPU build (PyPI's Linux torch is the CUDA build, several GB with its libraries)
# torch goes in first and on its own, pinned: `pip install -e .` alone would pick whatever
# torch it finds. labkit goes in (editable, with the extras the lab and the tests need: lab,
# grade, test, browser, hub) when it is missing, is another checkout's, or pyproject.toml changed
# since the last run (a stamp in the venv).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=launch/lib.sh
source "$repo/launch/lib.sh"
venv=${LABKIT_VENV:-$repo/.venv}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
# pip compiles every module's bytecode at install (a third of the set-up's time) and must: the
# grading sandbox and the hub's students import from this venv read-only, so a module without its
# .pyc is compiled again by every such process (tried --no-compile: sandboxed runs slowed so much
# that the suite took 18 minutes and judges timed out)

if [ ! -x "$venv/bin/python" ]; then
    say "labkit: creating the environment in %s" "labkit: creez mediul în %s" "$venv"
    "${PYTHON:-python3}" -m venv "$venv"
fi
py=$venv/bin/python

# is torch there? (find_spec, not import: importing torch costs seconds on every run)
if ! "$py" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' 2>/dev/null; then
    spec=${TORCH_SPEC:-torch==2.13.0}
    say "labkit: installing %s" "labkit: instalez %s" "$spec"
    if [ -n "${TORCH_INDEX_URL:-}" ]; then
        "$py" -m pip install --index-url "$TORCH_INDEX_URL" "$spec"
    else
        "$py" -m pip install "$spec"
    fi
fi

stamp=$venv/.labkit-setup
want="$(cd "$repo" && "$py" -c 'import hashlib, os; print(hashlib.sha256(open("pyproject.toml", "rb").read()).hexdigest(), os.path.realpath(os.getcwd()))')"
have=$(cat "$stamp" 2>/dev/null || true)
# which checkout is installed (asked from /, so that ./labkit does not answer for it)
where=$(cd / && "$py" -c 'import os, labkit; print(os.path.dirname(os.path.dirname(os.path.realpath(labkit.__file__))))' 2>/dev/null) || where=
if [ "$where" != "$repo" ] || [ "$have" != "$want" ]; then
    say "labkit: installing labkit from %s" "labkit: instalez labkit din %s" "$repo"
    "$py" -m pip install -e "${repo}[lab,grade,test,browser,hub]"
    echo "$want" >"$stamp"
fi
