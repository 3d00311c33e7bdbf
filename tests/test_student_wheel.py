"""The student wheel is a lab of its own: installed with ``[lab]`` in a fresh venv, it runs lesson 0.

``labkit build-student notebooks/en`` writes the student edition and the wheel; its METADATA asks for
what pyproject.toml asks for (torch, psutil, cloudpickle, and each extra's requirements). Then, away
from this checkout (a venv under pytest's temporary folder, no PYTHONPATH, its own cwd):

- torch goes in from a wheel already on this machine (``pip download torch==<this torch>`` finds it in
  PIP_FIND_LINKS, an index of files on disk or pip's cache; the test is skipped when none has it), never
  PyPI's CUDA build;
- ``launch/setup-student-env.sh dist dest`` (relative folders, ``LABKIT_SKIP_TORCH=1``) installs the
  wheel with ``[lab]`` (JupyterLab, ipywidgets, matplotlib, jupyter-ui-poll, jupytext), torch untouched;
- nbclient from that venv runs lesson 0's student edition in a kernel of that venv: the ``%%torchrun``
  cells start their ranks and draw the dashboard, and every error is a stub's NotImplementedError (or
  what follows from one), every check "not answered";
- ``import labkit.course.questions`` fails in that kernel.

Measured here, on 2 shared cores: 3 min 38 s the first time (the fixture 185 s: torch's wheel and its
requirements about 1 min, the [lab] requirements from this machine's index of files about 1.3 min;
the notebook 31 s), 79 s once pip's cache held them (fixture 65 s, notebook 13 s): marked slow.

    .venv/bin/pytest tests/test_student_wheel.py -q
"""

from __future__ import annotations

import email.parser
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from labkit.grading.cli import main
from labkit.grading.student import build_wheel, write_install

ROOT = Path(__file__).resolve().parents[1]
LAB = ("jupyterlab", "ipykernel", "ipywidgets", "matplotlib", "jupyter-ui-poll", "jupytext")
PROBE = "PROBE-PREFIX"

# the notebook run, by the venv's own Python: its nbclient, its jupyter_client, its kernel
RUNNER = textwrap.dedent(f"""
    import sys

    import nbformat
    from nbclient import NotebookClient

    src, out, workdir = sys.argv[1:4]
    nb = nbformat.read(src, as_version=4)
    probe = "import sys\\nimport labkit\\nprint({PROBE!r}, sys.prefix, labkit.__file__)\\nimport labkit.course.questions"
    nb.cells.append(nbformat.v4.new_code_cell(probe))
    NotebookClient(nb, timeout=600, allow_errors=True, kernel_name="python3", resources={{"metadata": {{"path": workdir}}}}).execute()
    nbformat.write(nb, out)
""")


def metadata_of(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(z.read(name).decode())


def test_the_wheel_asks_for_what_pyproject_asks_for(tmp_path):
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+ (the wheel reads the metadata on 3.10)
    wheel = build_wheel(write_install(tmp_path / "install"), tmp_path)
    meta = metadata_of(wheel)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert meta.get_all("Provides-Extra") == list(extras)
    assert meta["Requires-Python"] == project["requires-python"]
    requires = meta.get_all("Requires-Dist")
    assert [r for r in requires if "extra ==" not in r] == project["dependencies"]
    for extra, reqs in extras.items():
        assert [r for r in requires if r.endswith(f'; extra == "{extra}"')] == [
            f'{r}; extra == "{extra}"' for r in reqs
        ]
    lab = {r.split(";")[0].split(">")[0].split("<")[0].split("=")[0] for r in requires if r.endswith('extra == "lab"')}
    assert set(LAB) <= lab


def text(output: dict) -> str:
    """What an output shows as text: the dashboard's summary comes as a stream, or as a display's text
    when the run ended before the live view was drawn (seen in the course image)."""
    return output.get("text", "") + str(output.get("data", {}).get("text/plain", ""))


def clean_env(venv: Path) -> dict[str, str]:
    """This machine's environment without a way back to the checkout: no PYTHONPATH, the venv first on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env = {k: v for k, v in env.items() if not k.startswith(("JUPYTER_", "LABKIT_"))}
    return {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", "JUPYTER_PREFER_ENV_PATH": "1"}


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def torch_wheel(folder: Path) -> Path:
    """This machine's wheel of the torch the tests run on (find-links, a local index, pip's cache), or skip."""
    import torch

    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", f"torch=={torch.__version__}", "--no-deps", "-d", str(folder)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    wheels = sorted(folder.glob("torch-*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        pytest.skip(f"no wheel of torch {torch.__version__} on this machine: {done.stderr[-300:]}")
    return wheels[0]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("student-wheel")
    dist = base / "dist"
    assert main(["build-student", str(ROOT / "notebooks" / "en"), "--out", str(dist / "en")]) == 0
    for wheel in (dist / "en").glob("*.whl"):  # as the image's first stage does: the wheel beside en/
        wheel.rename(dist / wheel.name)
    shutil.rmtree(dist / "en" / "install")
    venv = base / "dest" / "venv"
    env = clean_env(venv)
    run([sys.executable, "-m", "venv", str(venv)], base, env)
    run([str(venv / "bin" / "python"), "-m", "pip", "install", str(torch_wheel(base / "wheels"))], base, env)
    log = run(
        ["bash", str(ROOT / "launch" / "setup-student-env.sh"), "dist", "dest"], base, {**env, "LABKIT_SKIP_TORCH": "1"}
    )
    return SimpleNamespace(base=base, venv=venv, env=env, log=log, python=str(venv / "bin" / "python"))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_lab_extra_is_installed_and_torch_kept(lab):
    import torch

    assert "no answers" in lab.log
    code = "import importlib.metadata as m, sys; print(*(m.version(d) for d in sys.argv[1:]))"
    versions = run([lab.python, "-c", code, "torch", "fsdp-labkit", *LAB], lab.base, lab.env).split()
    assert versions[:2] == [torch.__version__, "0.1.0+student"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_lesson_0_runs_in_the_students_lab(lab):
    work = lab.base / "work"
    work.mkdir()
    (work / "runner.py").write_text(RUNNER)
    src = lab.base / "dest" / "notebooks" / "en" / "00_setup.ipynb"
    run([lab.python, "runner.py", str(src), "out.ipynb", str(work)], work, lab.env, timeout=800)
    cells = [c for c in nbformat.read(work / "out.ipynb", as_version=4).cells if c.cell_type == "code"]

    runs = [c for c in cells if c.source.startswith("%%torchrun")]
    texts = ["".join(text(o) for o in c.outputs) for c in runs]
    assert len(runs) >= 3 and sum("all ranks finished" in t for t in texts) >= 3, texts
    assert any("3/3" in t for t in texts)  # the dashboard's text: every rank's steps
    assert all(any("application/vnd.labkit.run+json" in o.get("data", {}) for o in c.outputs) for c in runs)

    previous = None
    for cell in cells[:-1]:
        for o in cell.outputs:
            if o.output_type == "error":  # a stub's, or a name a stub never defined, or ranks that ran one
                after_stub = o.ename == "NameError" and previous is not None and "NotImplementedError" in previous
                assert (
                    o.ename == "NotImplementedError"
                    or after_stub
                    or (o.ename == "RankError" and "NotImplementedError" in o.evalue)
                ), (cell.source[:200], o.ename, o.evalue)
            check = o.get("data", {}).get("application/vnd.labkit.check+json")
            if check:
                assert check["status"] == "unanswered" or check["key"] == "grading.exercise.cell_failed", check
        previous = cell.source if any(o.output_type == "error" for o in cell.outputs) else None
    assert sum(bool(o.get("data", {}).get("application/vnd.labkit.check+json")) for c in cells for o in c.outputs) >= 3

    probe = cells[-1].outputs
    line = next(o.text for o in probe if o.output_type == "stream" and PROBE in o.text).split()
    assert Path(line[1]) == lab.venv and Path(line[2]).is_relative_to(lab.venv)  # the venv's labkit, not ours
    error = next(o for o in probe if o.output_type == "error")
    assert error.ename == "ModuleNotFoundError" and "labkit.course.questions" in error.evalue
