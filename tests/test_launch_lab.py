"""launch/setup-env.sh, launch/lab.sh and the JupyterHub examples.

setup-env.sh's decisions are checked with a stand-in Python whose pip only writes down what
it was asked (a real install takes minutes; CI's own first step is a real run). lab.sh is
started for real and answered over HTTP on 127.0.0.1, on the notebooks and on the lessons' MyST sources.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import types
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETUP = os.path.join(ROOT, "launch", "setup-env.sh")
LAB = os.path.join(ROOT, "launch", "lab.sh")
HUB = os.path.join(ROOT, "launch", "jupyterhub")

# the venv's python: the real one, except that pip only logs its arguments
VENV_PYTHON = f"""#!/usr/bin/env bash
if [ "$1 $2" = "-m pip" ]; then echo "pip ${{*:3}}" >> "$FAKE_LOG"; exit 0; fi
if [ "$1" = "-c" ] && [[ $2 == *'find_spec("torch")'* ]] && [ -n "${{FAKE_NO_TORCH:-}}" ]; then exit 1; fi
exec {sys.executable} "$@"
"""
# the base python3 that makes the venv
BASE_PYTHON = """#!/usr/bin/env bash
[ "$1 $2" = "-m venv" ] || exit 3
mkdir -p "$3/bin" && cp "$FAKE_VENV_PYTHON" "$3/bin/python" && echo "venv $3" >> "$FAKE_LOG"
"""


@pytest.fixture
def fake(tmp_path) -> dict[str, str]:
    for name, text in (("venv-python", VENV_PYTHON), ("base-python", BASE_PYTHON)):
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_INDEX_URL", "TORCH_SPEC", "JUPYTER_TOKEN")}
    env.update(
        LABKIT_VENV=str(tmp_path / "venv"),
        PYTHON=str(tmp_path / "base-python"),
        FAKE_VENV_PYTHON=str(tmp_path / "venv-python"),
        FAKE_LOG=str(tmp_path / "calls.log"),
        LABKIT_LANG="en",
        LABKIT_WORKSPACE=str(tmp_path / "workspace"),  # lab.sh's learner's workspace: never the real home's
    )
    return env


def setup(env: dict[str, str], **extra: str) -> list[str]:
    """Run setup-env.sh; return what it asked of venv and pip, one line per call."""
    log = env["FAKE_LOG"]
    if os.path.exists(log):
        os.remove(log)
    done = subprocess.run(["bash", SETUP], env={**env, **extra}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return open(log).read().splitlines() if os.path.exists(log) else []


def test_setup_env_makes_the_venv_then_does_nothing(fake):
    venv = fake["LABKIT_VENV"]
    assert setup(fake, FAKE_NO_TORCH="1") == [
        f"venv {venv}",
        "pip install torch==2.13.0",  # pinned, first, alone: never an unpinned CUDA build
        f"pip install -e {ROOT}[lab,grade,test,browser,hub]",
    ]
    assert setup(fake) == []  # the second run: nothing to do
    assert setup(fake, FAKE_NO_TORCH="1", TORCH_INDEX_URL="https://example.invalid/whl/cpu") == [
        "pip install --index-url https://example.invalid/whl/cpu torch==2.13.0"
    ]
    with open(os.path.join(venv, ".labkit-setup"), "w") as f:
        f.write("an older pyproject.toml\n")
    assert setup(fake) == [f"pip install -e {ROOT}[lab,grade,test,browser,hub]"]  # pyproject changed: labkit again


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except OSError:  # not listening yet
        return 0, ""


@contextlib.contextmanager
def running_lab(fake: dict[str, str], tmp_path, **extra: str) -> Iterator[tuple[str, str]]:
    """lab.sh started for real on a free port: (its base URL, its token); stopped afterwards."""
    setup(fake)  # the venv is ready: lab.sh's own setup step does nothing
    port = free_port()
    env = {
        **fake,
        "LABKIT_LAB_PORT": str(port),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
        **extra,
    }
    log = open(tmp_path / "lab.log", "w")
    lab = subprocess.Popen(["bash", LAB], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        token, deadline = None, time.monotonic() + 90
        while time.monotonic() < deadline and lab.poll() is None:
            text = open(tmp_path / "lab.log").read()
            found = re.search(rf"the lab is at http://127\.0\.0\.1:{port}/lab\?token=(\S+)", text)
            if found:
                token = found.group(1)
                status, _ = get(f"http://127.0.0.1:{port}/api/status?token={token}")
                if status == 200:
                    break
            time.sleep(0.5)
        else:
            pytest.fail("the lab did not answer:\n" + open(tmp_path / "lab.log").read()[-3000:])
        yield f"http://127.0.0.1:{port}", token
    finally:
        stop(lab)
        log.close()


@pytest.mark.slow
def test_lab_starts_on_loopback_with_a_token(fake, tmp_path):
    with running_lab(fake, tmp_path) as (base, token):
        assert get(f"{base}/api/status")[0] == 403  # no token, no lab
        status, page = get(f"{base}/lab?token={token}")
        assert status == 200 and re.search(r'"news":\s*\{\s*"disabled":\s*true', page)  # no news fetched
        # and no "Would you like to get notified about official Jupyter news?": JupyterLab asks it
        # whenever fetchNews is "none", its default, whatever news_url says
        status, body = get(f"{base}/lab/api/settings/@jupyterlab/apputils-extension:notification?token={token}")
        schema = json.loads(body)["schema"]["properties"]
        assert (
            status == 200
            and schema["fetchNews"]["default"] == "false"
            and schema["checkForUpdates"]["default"] is False
        )
        status, body = get(f"{base}/api/contents?token={token}")
        assert status == 200 and {item["name"] for item in json.loads(body)["content"]} >= {"en", "ro"}
        # the token is in the environment, not on any command line `ps` shows
        assert token not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout


@pytest.mark.slow
def test_lab_opens_a_lesson_source_as_a_notebook(fake, tmp_path):
    with running_lab(fake, tmp_path, LABKIT_LAB_DIR="labkit/course/lessons") as (base, token):
        status, body = get(f"{base}/api/contents/00_setup.md?type=notebook&token={token}")  # what the lab asks
        assert status == 200, body
        model = json.loads(body)
        cells = model["content"]["cells"]
        assert model["type"] == "notebook" and cells[0]["metadata"]["tags"] == ["lang-en"]
        assert any(c["cell_type"] == "code" and c["source"].startswith("%%torchrun") for c in cells)
        # a double click opens a .md with jupytext's notebook view (launch/jupyter/labconfig)
        status, body = get(f"{base}/lab/api/settings/@jupyterlab/docmanager-extension:plugin?token={token}")
        viewers = json.loads(body)["schema"]["properties"]["defaultViewers"]["default"]
        assert status == 200 and viewers["markdown"] == "Jupytext Notebook"


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the lab's session (Jupyter and its kernels), then SIGKILL if it lingers."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue


def test_z2jh_values_have_cpu_and_gpu_profiles():
    with open(os.path.join(HUB, "z2jh-values.yaml")) as f:
        values = yaml.safe_load(f)
    single = values["singleuser"]
    profiles = {p["slug"]: p for p in single["profileList"]}
    assert "nvidia.com/gpu" not in str(profiles["cpu"]) and profiles["cpu"].get("default") is True
    gpus = {
        slug: p["kubespawner_override"]["extra_resource_limits"]["nvidia.com/gpu"]
        for slug, p in profiles.items()
        if slug != "cpu"
    }
    assert gpus == {"gpu1": "1", "gpu4": "4"}
    for p in profiles.values():  # the language choice, in every profile
        assert set(p["profile_options"]["lang"]["choices"]) == {"en", "ro"}
    # /dev/shm as a memory-backed volume, or multi-rank runs die with bus errors at 64 MB
    (volume,) = single["storage"]["extraVolumes"]
    (mount,) = single["storage"]["extraVolumeMounts"]
    assert volume["emptyDir"]["medium"] == "Memory" and mount == {"name": volume["name"], "mountPath": "/dev/shm"}
    assert single["extraEnv"]["JUPYTER_PREFER_ENV_PATH"] == "1"


def test_batchspawner_config_is_valid(monkeypatch):
    from traitlets.config import Config

    path = os.path.join(HUB, "batchspawner_config.py")
    source = open(path).read()
    compile(source, path, "exec")
    monkeypatch.setitem(sys.modules, "batchspawner", types.ModuleType("batchspawner"))  # the hub has it; we need not
    c = Config()
    exec(source, {"get_config": lambda: c, "__name__": "jupyterhub_config"})
    assert c.JupyterHub.spawner_class == "wrapspawner.ProfilesSpawner"
    profiles = {key: (spawner, settings) for _, key, spawner, settings in c.ProfilesSpawner.profiles}
    assert set(profiles) == {"cpu", "gpu1", "gpu4"}
    assert all(spawner == "batchspawner.SlurmSpawner" for spawner, _ in profiles.values())
    assert "req_options" not in profiles["cpu"][1] and profiles["gpu1"][1]["req_options"] == "--gres=gpu:1"
    assert c.BatchSpawnerBase.req_prologue.startswith("source ") and c.BatchSpawnerBase.req_prologue.endswith(
        "/bin/activate"
    )
