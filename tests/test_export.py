"""labkit.export: a lesson's %%torchrun cells as a script that plain torchrun runs, with the
notebook's values. The script is run for real on 2 gloo ranks and compared with the same
cells run the notebook's way (labkit.launch.magic.run_cell, what %%torchrun calls)."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys

import nbformat
import pytest

from labkit import export
from labkit.export import cells as export_cells
from labkit.i18n import set_lang
from labkit.ranks import rank as labkit_rank
from labkit.wire.errors import OptionError

PY = sys.executable
TIMEOUT = 120  # seconds for one torchrun launch; a healthy one takes 3-8 s here

CELL_REDUCE = """\
import torch
import torch.distributed as dist
from labkit import rank

x = torch.tensor([float(rank.rank() + 1)])
for i in rank.steps(STEPS):
    pass
dist.all_reduce(x)
torch.manual_seed(0)
rank.report(total=x.item() * factor, sizes=sizes, world=dist.get_world_size(), seeded=torch.randn(2),
            device=str(rank.device()))
"""

CELL_OWN_GROUP = """\
import torch
import torch.distributed as dist

dist.init_process_group("gloo")  # the cell makes its own group: the export must not make another
from labkit import rank

ranks = [None, None]
dist.all_gather_object(ranks, dist.get_rank())
rank.report(world=dist.get_world_size(), backend=dist.get_backend(), ranks=ranks)
"""


def make_notebook(path: str) -> str:
    c = nbformat.v4.new_code_cell
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# A lesson"),  # 0
        c("STEPS = 3\nSCALE = 2.0", metadata={"tags": ["parameters"]}),  # 1
        c("%load_ext labkit\nimport math\nfactor = SCALE * 1.5\nsizes = [1, 2]\nsizes.append(STEPS)"),  # 2
        c("%%torchrun -n 2 --backend gloo --vars STEPS,factor,sizes\n" + CELL_REDUCE),  # 3
        c("%%torchrun -n 2 --backend gloo\n" + CELL_OWN_GROUP),  # 4
        c("STEPS = 99\nfor i in range(2):\n    SCALE = i"),  # 5: after cell 3, so not its value
        c("%%torchrun -n 2 --vars STEPS\nfrom labkit import rank\nrank.report(steps=STEPS)"),  # 6
        c("%%torchrun -n 2 --vars SCALE\npass"),  # 7: SCALE was last set in a for loop
        c("%%torchrun -n 4\npass"),  # 8
    ]
    nbformat.write(nb, path)
    return path


@pytest.fixture
def notebook(tmp_path) -> str:
    return make_notebook(str(tmp_path / "lesson.ipynb"))


def expected_cell3(r: int) -> dict:
    import torch

    torch.manual_seed(0)
    return {"total": 9.0, "sizes": [1, 2, 3], "world": 2, "seeded": torch.randn(2).tolist(), "device": "cpu"}


EXPECTED_CELL4 = {"world": 2, "backend": "gloo", "ranks": [0, 1]}


def run_torchrun(script: str, report_dir: str, extra_env: dict | None = None) -> subprocess.CompletedProcess:
    """``torchrun --nproc-per-node=2 script`` with a hard timeout; every process it made is gone after."""
    from labkit.launch.group import find_run_processes

    mark = "exporttest-" + secrets.token_hex(4)  # found in /proc by the sweep below
    env = {**os.environ, "LABKIT_REPORT_DIR": report_dir, "LABKIT_RUN_ID": mark, **(extra_env or {})}
    cmd = [PY, "-m", "torch.distributed.run", "--nproc-per-node=2", "--rdzv-backend=c10d"]
    cmd += ["--rdzv-endpoint=127.0.0.1:0", "--max-restarts=0", "--log-dir", os.path.join(report_dir, "torchelastic")]
    cmd += [script]
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        out, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # torchrun passes SIGTERM on to its ranks
        out, _ = proc.communicate(timeout=30)
        pytest.fail(f"torchrun did not finish in {TIMEOUT} s:\n{out[-3000:]}")
    finally:
        for pid in find_run_processes(mark):
            os.kill(pid, signal.SIGKILL)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, "")


def reported(report_dir: str) -> dict[int, dict[int, dict]]:
    """{cell: {rank: values}} from the JSON lines the ranks wrote."""
    out: dict[int, dict[int, dict]] = {}
    for r in (0, 1):
        cell = None
        with open(os.path.join(report_dir, f"rank{r}.jsonl")) as f:
            for line in f:
                msg = json.loads(line)
                if msg["t"] == "cell":
                    cell = msg["index"]
                elif msg["t"] == "report":
                    out.setdefault(cell, {}).setdefault(r, {}).update(msg["values"])
    return out


def notebook_run(path: str, index: int) -> dict[int, dict]:
    """The cell run as %%torchrun runs it, after the kernel ran the cells above it."""
    from labkit.launch import magic

    cells = nbformat.read(path, as_version=4).cells
    namespace: dict = {}
    for cell in cells[:index]:
        if cell.cell_type == "code" and not cell.source.startswith("%%"):
            exec("\n".join(ln for ln in cell.source.split("\n") if not ln.startswith("%")), namespace)
    line, body = export_cells.split_magic(cells[index].source)
    run = magic.run_cell(line + " --quiet", body, namespace)
    return run.values


@pytest.mark.slow
def test_exported_lesson_gives_the_notebook_values(notebook, tmp_path):
    script = str(tmp_path / "lesson.py")
    export.export_notebook(notebook, cells=[3, 4], out=script)
    reports = tmp_path / "reports"
    reports.mkdir()
    done = run_torchrun(script, str(reports))
    assert done.returncode == 0, done.stdout[-3000:]

    values = reported(str(reports))
    assert values[3] == {r: expected_cell3(r) for r in (0, 1)}
    assert values[4] == {0: EXPECTED_CELL4, 1: EXPECTED_CELL4}
    assert "cell 3, rank 0 reported: " + json.dumps(values[3][0]) in done.stdout  # reporting with no notebook

    # the cell with --vars, run the notebook's way: the kernel's values went to the ranks there,
    # the notebook's assignments are in the script here (cell 4 sends nothing: its values above are exact)
    assert notebook_run(notebook, 3) == values[3]


ENDING_CELL = """\
import atexit
import threading
import time

folder = os.environ["LABKIT_REPORT_DIR"]
def late():
    time.sleep(0.5)
    open(os.path.join(folder, "thread"), "w").close()

threading.Thread(target=late).start()  # not a daemon: Python waits for it at exit
atexit.register(lambda: open(os.path.join(folder, "atexit"), "w").close())
print("unflushed", end="")
"""


@pytest.mark.slow
def test_the_rank_ends_without_teardown_after_atexit_and_flush(tmp_path):
    """After the last cell the rank ends with os._exit, having done what Python does first at exit."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%%torchrun -n 1 --backend gloo\nimport os\n" + ENDING_CELL)]
    nbformat.write(nb, str(tmp_path / "end.ipynb"))
    script = export.export_notebook(str(tmp_path / "end.ipynb"), out=str(tmp_path / "end.py"))
    assert script.rstrip().endswith(
        "_labkit_exit()  # as a labkit rank ends: no interpreter teardown (see the function)"
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "LABKIT_REPORT_DIR": str(tmp_path), "LABKIT_LANG": "en"}
    env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    done = subprocess.run([PY, str(tmp_path / "end.py")], env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("unflushed")
    assert os.path.exists(tmp_path / "thread") and os.path.exists(tmp_path / "atexit")


@pytest.mark.slow
def test_exported_script_runs_without_labkit(notebook, tmp_path):
    # labkit hidden by a package that refuses to import; one process, started the way a
    # launcher other than torchrun starts a rank (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
    shadow = tmp_path / "shadow" / "labkit"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text('raise ImportError("labkit is not installed on this cluster")\n')
    script = str(tmp_path / "cell3.py")
    export.export_notebook(notebook, cells=[3], out=script)
    reports = tmp_path / "reports"
    reports.mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(shadow.parent), "LABKIT_REPORT_DIR": str(reports), "LABKIT_LANG": "en"}
    env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    done = subprocess.run([PY, script], env=env, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "the number of ranks was 2 in the notebook and is 1 here" in done.stderr
    values = {**expected_cell3(0), "total": 3.0, "world": 1}  # one rank: the all_reduce adds only its own 1
    assert "cell 3, rank 0 reported: " + json.dumps(values) in done.stdout
    messages = [json.loads(line) for line in open(reports / "rank0.jsonl")]
    assert [m["t"] for m in messages] == ["cell"] + ["step_start", "step"] * 3 + ["report"]  # what labkit sends
    assert messages[-1]["values"] == values and all(isinstance(m["time"], float) for m in messages)


def test_vars_come_from_the_notebook_in_order(notebook):
    text = export.export_notebook(notebook, cells=[3])
    section = text.split("# ---- cell 3:")[1]
    assert "# from cell 1 (parameters)\nSTEPS = 3\nSCALE = 2.0\n# from cell 2\n" in section
    assert "factor = SCALE * 1.5\nsizes = [1, 2]\nsizes.append(STEPS)\n" in section
    assert "import math" not in section  # not needed by any --vars name
    assert "_labkit_begin_cell(_LABKIT, 3, backend='gloo', own_init=False)" in section
    # cell 6 comes after `STEPS = 99`: that is its value, and only that
    six = export.export_notebook(notebook, cells=[6]).split("# ---- cell 6:")[1]
    assert "STEPS = 99" in six and "STEPS = 3" not in six
    assert "backend='auto'" in six  # no --backend: NCCL where CUDA is, else gloo, decided on the rank
    assert "own_init=True" in export.export_notebook(notebook, cells=[4])
    compile(text, "lesson.py", "exec")


def test_functions_and_later_changes_come_along(tmp_path):
    c = nbformat.v4.new_code_cell
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        c("import torch\ndef make(k):\n    return torch.ones(k) * scale\nscale = 2.0\nn, m = 3, 4\nn += 1\nprint(n)"),
        c("%%torchrun -n 2 --vars make,n\nprint(make(n))"),
    ]
    path = str(tmp_path / "fn.ipynb")
    nbformat.write(nb, path)
    section = export.export_notebook(path).split("# from cell 0\n")[1].split("_labkit_begin_cell")[0]
    namespace: dict = {}
    exec(section, namespace)  # what the script runs before the cell: the values the kernel had
    assert namespace["n"] == 4 and namespace["make"](namespace["n"]).tolist() == [2.0] * 4
    assert "print(n)" not in section


def test_a_value_the_export_cannot_know_is_an_error(notebook):
    set_lang("en")
    try:
        with pytest.raises(OptionError, match=r"'SCALE'.*cell 5.*for i in range\(2\)"):
            export.export_notebook(notebook, cells=[7])
    finally:
        set_lang(None)


def test_missing_variable_and_dependency_are_named(tmp_path):
    c = nbformat.v4.new_code_cell
    nb = nbformat.v4.new_notebook()
    nb.cells = [c("lr = base * 2"), c("%%torchrun --vars lr,epochs\npass")]
    path = str(tmp_path / "nb.ipynb")
    nbformat.write(nb, path)
    set_lang("en")
    try:
        with pytest.raises(OptionError, match=r"'lr'.*computed from 'base'"):
            export.export_notebook(path)
        nb.cells[0] = c("base = 0.1\nlr = base * 2")
        nbformat.write(nb, path)
        with pytest.raises(OptionError, match=r"'epochs'.*epochs = \.\.\."):
            export.export_notebook(path)
        set_lang("ro")
        with pytest.raises(OptionError, match="nicio celulă de cod dinaintea ei"):
            export.export_notebook(path)
    finally:
        set_lang(None)


def test_a_dependency_set_inside_a_block_is_named_as_such(tmp_path):
    # lesson 3's shape: the --vars value is computed from a model made under `with torch.device("meta")`
    c = nbformat.v4.new_code_cell
    nb = nbformat.v4.new_notebook()
    nb.cells = [c("with open(__file__) as f:\n    base = 3"), c("n = base + 1"), c("%%torchrun --vars n\npass")]
    path = str(tmp_path / "nb.ipynb")
    nbformat.write(nb, path)
    set_lang("en")
    try:
        with pytest.raises(OptionError, match=r"'n'.*computed from 'base', but cell 0 sets 'base' inside a block"):
            export.export_notebook(path)
    finally:
        set_lang(None)


def test_cells_that_cannot_share_one_script(notebook, tmp_path):
    set_lang("en")
    try:
        with pytest.raises(OptionError, match="different numbers of ranks"):
            export.export_notebook(notebook, cells=[3, 8])
        with pytest.raises(OptionError, match=r"cell 2 is not a %%torchrun cell.*3, 4, 6, 7, 8"):
            export.export_notebook(notebook, cells=[2])
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("%%torchrun -n 2\nx = (")]
        broken = str(tmp_path / "broken.ipynb")
        nbformat.write(nb, broken)
        with pytest.raises(OptionError, match="cell 0 does not compile"):
            export.export_notebook(broken)
    finally:
        set_lang(None)


def test_env_option_is_set_before_torch(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%%torchrun -n 2 --env NCCL_DEBUG=INFO --env A=1\npass")]
    path = str(tmp_path / "env.ipynb")
    nbformat.write(nb, path)
    text = export.export_notebook(path)
    assert text.index("os.environ.update({'NCCL_DEBUG': 'INFO', 'A': '1'})") < text.index("import torch")


def test_cli_subcommand(notebook, tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="labkit")
    export.register(parser.add_subparsers(dest="command"))
    out = str(tmp_path / "one.py")
    args = parser.parse_args(["export", notebook, "--cell", "3", "-o", out])
    assert args.func(args) == 0
    assert f"run it with: torchrun --nproc-per-node=2 {out}" in capsys.readouterr().err
    assert os.access(out, os.X_OK) and "# ---- cell 3:" in open(out).read()
    args = parser.parse_args(["export", notebook, "--list"])
    assert args.func(args) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [int(line.split()[0]) for line in listed] == [3, 4, 6, 7, 8]
    assert export.main([notebook, "--cell", "0"]) == 2  # an OptionError, said on stderr


def test_option_line_variables_take_the_notebooks_values(tmp_path):
    c = nbformat.v4.new_code_cell
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        c('nproc = 2\nbackend = "gloo"', metadata={"tags": ["parameters"]}),
        c("nproc = 4", metadata={"tags": ["injected-parameters"]}),  # what papermill adds: it wins
        c("%%torchrun -n $nproc --backend ${backend}\npass"),
        c("nproc = int('8')"),
        c("%%torchrun -n $nproc\npass"),
    ]
    path = str(tmp_path / "params.ipynb")
    nbformat.write(nb, path)
    text = export.export_notebook(path, cells=[2])
    assert "torchrun --nproc-per-node=4" in text and "backend='gloo'" in text
    assert [(c.index, c.opts.nproc) for c in export_cells.torchrun_cells(nb.cells[:3])] == [(2, "4")]
    set_lang("en")
    with pytest.raises(OptionError, match=r"cell 4 uses \$nproc .* a plain value"):
        export.export_notebook(path, cells=[4])


# -- the stand-in for labkit.rank that an exported script carries -----------------------------


def rank_api(module) -> dict[str, list[str]]:
    """labkit.rank's public calls (defined there, not imported) and their parameters; ``values``."""
    import inspect

    calls = {
        name: list(inspect.signature(fn).parameters)
        for name, fn in inspect.getmembers(labkit_rank, inspect.isfunction)
        if not name.startswith("_") and fn.__module__ == labkit_rank.__name__
    }
    return {name: list(inspect.signature(getattr(module, name)).parameters) for name in calls} | {"values": []}


@pytest.fixture
def standin(monkeypatch):
    """The stand-in as an exported script makes it, its sys.modules entries undone afterwards."""
    import labkit
    import labkit.ranks
    from labkit.export.runtime import RUNTIME

    # the stand-in replaces these three; the test's own labkit_rank was imported before
    monkeypatch.setitem(sys.modules, "labkit", labkit)
    monkeypatch.setitem(sys.modules, "labkit.ranks", labkit.ranks)
    monkeypatch.setitem(sys.modules, "labkit.ranks.rank", labkit_rank)
    make = next(fn for fn in RUNTIME if fn.__name__.endswith("standin_rank"))
    return make(export.WIRE)


def test_the_standin_has_labkit_ranks_public_api(standin):
    from labkit import rank as flat
    from labkit.ranks import rank as imported  # what an exported cell writes

    assert imported is flat is standin
    expected = rank_api(labkit_rank)
    assert {"on_step", "use_channel", "to_jsonable", "on_phase", "steps", "report"} <= set(expected)
    missing = sorted(set(expected) - set(dir(standin)))
    assert not missing, f"the exported script's labkit.rank lacks {missing}"
    assert rank_api(standin) == expected, "the stand-in's calls take other parameters than labkit.rank's"


def test_the_standin_sends_what_labkit_rank_sends(standin, tmp_path, monkeypatch):
    import dataclasses

    import torch

    rank = labkit_rank

    @dataclasses.dataclass
    class Point:
        x: int

    def session(module, folder):
        monkeypatch.setenv("LABKIT_REPORT_DIR", str(folder))
        seen = []
        undo = [module.on_step(lambda i: seen.append(("step", i))), module.on_phase(lambda n: seen.append(n))]
        module.reset_steps()
        for _ in module.steps(2):
            module.phase("forward")
        module.report(loss=torch.tensor(1.5), sizes=(1, 2), point=Point(3), meta=torch.empty(2, 3, device="meta"))
        module.log("x" * 600)
        for u in undo:
            u()
        module.phase("after")  # no hook left
        module.values.clear()
        return seen, [json.loads(line) for line in open(folder / "rank0.jsonl")]

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert rank._client is None  # labkit.rank writes to the report folder, as the stand-in does
    ours, sent = session(rank, tmp_path / "a")
    theirs, standin_sent = session(standin, tmp_path / "b")
    assert ours == theirs == ["forward", ("step", 0), "forward", ("step", 1)]

    def shape(msgs):  # the times differ
        return [{k: v for k, v in m.items() if k not in ("time", "dt")} for m in msgs]

    assert shape(standin_sent) == shape(sent)
    assert [list(m) for m in standin_sent] == [list(m) for m in sent]  # the keys, in the same order
    assert sent[-3]["values"] == {"loss": 1.5, "sizes": [1, 2], "point": {"x": 3}, "meta": {"meta_tensor": [2, 3]}}
    for value in (None, {1: (torch.tensor([1, 2]), {3})}, Point(4), object):
        assert standin.to_jsonable(value) == rank.to_jsonable(value)
