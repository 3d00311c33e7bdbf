#!/usr/bin/env bash
# The students' environment, for the hub's image or shared folder: labkit WITHOUT the answers.
#
#   .venv/bin/labkit build-student notebooks --out dist/student        # on the instructor's machine
#   bash launch/setup-student-env.sh dist/student /opt/fsdp-labkit-student
#
# Makes a virtual environment in DEST/venv with torch, and the student's wheel of labkit with its [lab] extra (JupyterLab)
# (dist/student/fsdp_labkit-*+student-py3-none-any.whl: no lesson sources, no references,
# no solutions; its checks use salted hashes), and copies the student notebooks to
# DEST/notebooks. Nothing of this repository is installed: point the hub at DEST
# (launch/jupyterhub/*: LABKIT_COURSE_DIR=DEST). The last step checks that the answers are
# not importable there, and fails if they are.
#   PYTHON           the Python that makes the environment (default: python3)
#   TORCH_SPEC       the torch to install (default: torch==2.13.0); TORCH_INDEX_URL an index for it
#   LABKIT_SKIP_TORCH=1   do not install torch (an image, or a venv, that has it; the tests): pip then
#                    never replaces it, nor pulls one in when there is none
#   PIP_NO_DEPS=1    the wheel alone, without the [lab] requirements (no index at hand)
#
# How torch is kept: the wheel goes in with --no-deps, then its requirements and those of its [lab]
# extra, read from the wheel's own METADATA (the instructor's pyproject.toml, copied at build time),
# with torch left out under LABKIT_SKIP_TORCH=1, and under a constraint pinning the torch already
# there (torch==<its version>). A plain `pip install WHEEL[lab]` would let the resolver swap a CPU
# torch for PyPI's CUDA build, or pull one into an environment that was meant to have none.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=launch/lib.sh
source "$repo/launch/lib.sh"
usage="usage: setup-student-env.sh DIST DEST"
dist=${1:?$usage}
dest=${2:?$usage}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
# the venv alone, as a student's kernel sees it: a PYTHONPATH of the caller's (an instructor's checkout)
# would put the answers on the path of the last check, and the instructor's packages in pip's view
unset PYTHONPATH PYTHONHOME

[ -d "$dist" ] || die "labkit: %s is not a folder" "labkit: %s nu este un dosar" "$dist"
dist=$(cd "$dist" && pwd -P) # absolute: the last step runs from /, and pip from anywhere
mkdir -p "$dest"
dest=$(cd "$dest" && pwd -P)

shopt -s nullglob
wheels=("$dist"/fsdp_labkit-*+student-py3-none-any.whl)
[ ${#wheels[@]} -eq 1 ] || die "labkit: %s must hold one student wheel (run: labkit build-student notebooks --out %s)" \
    "labkit: %s trebuie să conțină o singură roată pentru studenți (rulați: labkit build-student notebooks --out %s)" \
    "$dist" "$dist"

venv=$dest/venv
if [ ! -x "$venv/bin/python" ]; then
    say "labkit: creating the students' environment in %s" "labkit: creez mediul studenților în %s" "$venv"
    "${PYTHON:-python3}" -m venv "$venv"
fi
py=$venv/bin/python
skip_torch=${LABKIT_SKIP_TORCH:-0}
if [ "$skip_torch" != 1 ]; then
    spec=${TORCH_SPEC:-torch==2.13.0}
    if [ -n "${TORCH_INDEX_URL:-}" ]; then
        "$py" -m pip install --index-url "$TORCH_INDEX_URL" "$spec"
    else
        "$py" -m pip install "$spec"
    fi
fi
torch_version() { (cd / && "$py" -c 'from importlib.metadata import version; print(version("torch"))' 2>/dev/null) || true; }
torch_before=$(torch_version)

say "labkit: installing %s" "labkit: instalez %s" "${wheels[0]}"
"$py" -m pip install --force-reinstall --no-deps "${wheels[0]}" # this build, even under the same version
case ${PIP_NO_DEPS:-0} in
1 | [Tt]rue | [Yy]es | [Oo]n) ;;
*)
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    [ -z "$torch_before" ] || echo "torch==$torch_before" >"$work/constraints.txt"
    touch "$work/constraints.txt"
    # the installed wheel's requirements and its [lab] extra's, as lines for pip (torch left out if skipped)
    (cd / && "$py" - lab "$skip_torch" >"$work/requirements.txt") <<'EOF'
import re
import sys
from importlib.metadata import requires

lines, skip_torch = requires("fsdp-labkit") or [], sys.argv[2] == "1"


def wanted(extras, seen):
    for line in lines:
        spec, _, marker = (part.strip() for part in line.partition(";"))
        m = re.fullmatch(r'(?:(.*?)\s+and\s+)?extra == "([^"]+)"', marker)
        marker, extra = (m.group(1) or "", m.group(2)) if m else (marker, None)
        if extra is not None and extra not in extras:
            continue
        name = re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", spec).group(0)).lower()
        if name == "fsdp-labkit":  # an extra made of others ([grade] holds [lab])
            more = {e.strip() for e in re.search(r"\[(.*)\]", spec).group(1).split(",")} - seen
            yield from wanted(more, seen | more)
        elif not (name == "torch" and skip_torch):
            yield spec + (f"; {marker}" if marker else "")


for requirement in dict.fromkeys(wanted({sys.argv[1]}, {sys.argv[1]})):
    print(requirement)
EOF
    say "labkit: installing its requirements and [lab]'s (torch kept: %s)" \
        "labkit: instalez dependențele sale și pe cele din [lab] (torch păstrat: %s)" "${torch_before:-none}"
    "$py" -m pip install -c "$work/constraints.txt" -r "$work/requirements.txt"
    ;;
esac
if [ "$skip_torch" = 1 ] && [ "$(torch_version)" != "$torch_before" ]; then
    die "labkit: pip changed torch (%s, now %s) under LABKIT_SKIP_TORCH=1" \
        "labkit: pip a schimbat torch (%s, acum %s) cu LABKIT_SKIP_TORCH=1" "${torch_before:-none}" "$(torch_version)"
fi

mkdir -p "$dest/notebooks"
for lang in en ro; do
    if [ -d "$dist/$lang" ]; then
        rm -rf "${dest:?}/notebooks/$lang"
        cp -R "$dist/$lang" "$dest/notebooks/$lang"
    fi
done

# the check: what a student's kernel can import holds no answers
(cd / && "$py" - <<'EOF'
import importlib.util
import os
import sys

import labkit
from labkit.grading import registry

for module in ("labkit.course.questions", "labkit.course.lessons"):
    if importlib.util.find_spec(module) is not None:
        sys.exit(f"labkit: {module} is in the students' environment")
root = os.path.dirname(labkit.__file__)
for folder in ("course/lessons", "course/snippets", "course/questions"):  # the lessons' sources hold the solutions
    if os.path.exists(os.path.join(root, folder)):
        sys.exit(f"labkit: labkit/{folder} is in the students' environment")
questions = registry.all_questions()
if not questions or any(q.answer is not registry.UNSET or q.verify is not None for q in questions):
    sys.exit("labkit: the students' environment holds references")
print(f"labkit {labkit.__version__}: {len(questions)} questions, no answers")
EOF
)
say "labkit: the students' environment is ready in %s" "labkit: mediul studenților este gata în %s" "$dest"
