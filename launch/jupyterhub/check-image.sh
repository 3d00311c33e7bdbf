#!/usr/bin/env bash
# Run INSIDE the course image (docs/deploy.md, "The course image"): what a student's server gets.
#
#   podman run --rm --network none -v "$PWD/launch/jupyterhub:/check:ro" IMAGE bash /check/check-image.sh
#
# Prints the versions of torch, the student labkit and [lab]'s packages; fails if the questions'
# references are importable, or if lesson 0's student edition (run by the image's nbclient, in its
# kernel) does not start its ranks, or fails anywhere but at the stubs a student fills in.
set -euo pipefail
python - <<'PY'
import importlib.metadata as m
import importlib.util
import os
import shutil
import sys
import tempfile

import nbformat
from nbclient import NotebookClient

names = ("torch", "fsdp-labkit", "jupyterlab", "ipykernel", "ipywidgets", "matplotlib", "jupyter-ui-poll", "jupytext")
print(*(f"{n}=={m.version(n)}" for n in names))
if importlib.util.find_spec("labkit.course.questions") is not None:
    sys.exit("labkit.course.questions is importable in the image")
work = tempfile.mkdtemp()
src = shutil.copy("/opt/fsdp-course/en/00_setup.ipynb", work)
nb = nbformat.read(src, as_version=4)
NotebookClient(nb, timeout=600, allow_errors=True, kernel_name="python3", resources={"metadata": {"path": work}}).execute()
cells = [c for c in nb.cells if c.cell_type == "code"]
shown = ["".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in c.outputs) for c in cells]
finished = sum("all ranks finished" in s for c, s in zip(cells, shown) if c.source.startswith("%%torchrun"))
bad, stub = [], False
for c in cells:
    errors = [o for o in c.outputs if o.output_type == "error"]
    for o in errors:  # a stub's NotImplementedError, on the kernel or the ranks, or the name a stub never set
        if not (o.ename == "NotImplementedError" or "NotImplementedError" in o.evalue or (o.ename == "NameError" and stub)):
            bad.append(f"{o.ename}: {o.evalue[:200]}")
    for o in c.outputs:
        check = o.get("data", {}).get("application/vnd.labkit.check+json")
        if check and check["status"] != "unanswered" and check["key"] != "grading.exercise.cell_failed":
            bad.append(f"check {check['id']}: {check['status']}")
    stub = any(o.ename == "NotImplementedError" for o in errors)
print(f"lesson 0: {finished} runs finished on every rank, {len(bad)} unexpected outcomes")
if finished < 3 or bad:
    sys.exit("\n".join(bad) or "the ranks did not run")
PY
