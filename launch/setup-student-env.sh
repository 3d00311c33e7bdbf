#!/usr/bin/env bash
# The students' environment, for the hub's image or shared folder: labkit WITHOUT the answers.
#
#   .venv/bin/labkit build-student notebooks --out dist/student        # on the instructor's machine
#   bash launch/setup-student-env.sh dist/student /opt/fsdp-labkit-student
#
# Makes a virtual environment in DEST/venv with torch and the student's wheel of labkit
# (dist/student/fsdp_labkit-*+student-py3-none-any.whl: no lesson sources, no references,
# no solutions; its checks use salted hashes), and copies the student notebooks to
# DEST/notebooks. Nothing of this repository is installed: point the hub at DEST
# (launch/jupyterhub/*: LABKIT_COURSE_DIR=DEST). The last step checks that the answers are
# not importable there, and fails if they are.
#   PYTHON           the Python that makes the environment (default: python3)
#   TORCH_SPEC       the torch to install (default: torch==2.13.0); TORCH_INDEX_URL an index for it
#   LABKIT_SKIP_TORCH=1   do not install torch (an image that has it; the tests)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=launch/lib.sh
source "$repo/launch/lib.sh"
dist=${1:?usage: setup-student-env.sh DIST DEST}
dest=${2:?usage: setup-student-env.sh DIST DEST}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

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
if [ "${LABKIT_SKIP_TORCH:-0}" != 1 ]; then
    spec=${TORCH_SPEC:-torch==2.13.0}
    if [ -n "${TORCH_INDEX_URL:-}" ]; then
        "$py" -m pip install --index-url "$TORCH_INDEX_URL" "$spec"
    else
        "$py" -m pip install "$spec"
    fi
fi
say "labkit: installing %s" "labkit: instalez %s" "${wheels[0]}"
"$py" -m pip install "${wheels[0]}"                              # with its requirements
"$py" -m pip install --force-reinstall --no-deps "${wheels[0]}"  # this build, even under the same version

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
