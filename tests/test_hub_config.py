"""The class hub's JupyterHub configuration, as launch/hub.sh's variables make it (no hub started)."""

from __future__ import annotations

import pytest

pytest.importorskip("jupyterhub", reason="the hub extra: pip install -e .[hub]")


def configured(monkeypatch, tmp_path, **env):
    from traitlets.config import Config

    from labkit.hub import config, homes, settings

    monkeypatch.setattr(homes, "ensure_instructors_group", lambda s: 0)  # groupadd is root's (the live test does it)
    base = {
        "LABKIT_HUB_DIR": str(tmp_path),
        "LABKIT_HUB_STUDENTS": "ana,ben",
        "LABKIT_HUB_INSTRUCTORS": "prof",
        "LABKIT_HUB_PYTHON": "/srv/view/bin/python",
        "LABKIT_HUB_SCRIPTS": "/repo/.venv/bin",
        "LABKIT_HUB_JUPYTER_CONFIG": "/repo/launch/jupyter",
    }
    for name, value in {**base, **env}.items():
        monkeypatch.setenv(name, value)
    c = Config()
    s = settings.from_env()
    config.configure(c, s)
    return c, s


def test_local_hub(monkeypatch, tmp_path):
    from labkit.hub import spawners

    c, s = configured(monkeypatch, tmp_path, LABKIT_HUB_MEMORY="2G", LABKIT_HUB_MAX_RANKS="3")
    assert c.JupyterHub.authenticator_class == "jupyterhub.auth.PAMAuthenticator"
    assert c.Authenticator.allowed_users == {"ana", "ben", "prof"} and c.Authenticator.admin_users == {"prof"}
    assert c.JupyterHub.spawner_class is spawners.LocalCourseSpawner
    assert c.Spawner.cmd == ["/srv/view/bin/python", "/repo/.venv/bin/jupyterhub-singleuser"]
    assert c.Spawner.mem_limit == 2 * 2**30 and s.max_ranks == 3
    assert s.env["JUPYTER_CONFIG_PATH"] == "/repo/launch/jupyter:/repo/.venv/etc/jupyter"  # news off; lab's extension
    assert s.env["JUPYTERLAB_DIR"] == "/repo/.venv/share/jupyter/lab"
    culler, exchange = c.JupyterHub.services
    assert culler["command"][1:3] == ["-m", "jupyterhub_idle_culler"] and "--timeout=3600" in culler["command"]
    assert exchange["name"] == "exchange" and exchange["command"][1:3] == ["-m", "labkit.classroom.service"]
    assert exchange["command"][4] == s.exchange and exchange["url"].startswith("http://127.0.0.1:")
    assert s.env["LABKIT_EXCHANGE_URL"] == "http://127.0.0.1:8000/services/exchange/"  # through the proxy
    (role,) = c.JupyterHub.load_roles
    assert role["services"] == ["idle-culler"] and "delete:servers" in role["scopes"]
    assert spawners.options_from_form({"lang": ["ro"]}) == {"lang": "ro"}
    assert spawners.options_from_form({"lang": ["../../etc"]}) == {"lang": "en"}  # only a course language
    assert "Română" in c.Spawner.options_form and "name='lang'" in c.Spawner.options_form


def test_slurm_hub(monkeypatch, tmp_path):
    c, _ = configured(monkeypatch, tmp_path, LABKIT_HUB_SPAWNER="slurm", LABKIT_HUB_CPUS="1")
    assert c.JupyterHub.spawner_class.__name__ == "SlurmCourseSpawner"
    assert c.BatchSpawnerBase.exec_prefix == "runuser -u {username} --"
    assert c.BatchSpawnerBase.batchspawner_singleuser_cmd == "/srv/view/bin/python -m batchspawner.singleuser"
    assert c.Spawner.cmd == ["/repo/.venv/bin/jupyterhub-singleuser"]
    assert c.BatchSpawnerBase.req_nprocs == "1" and c.BatchSpawnerBase.req_memory == "4G"
    script = c.BatchSpawnerBase.batch_script
    assert "--get-user-env" not in script and "#SBATCH --export={{keepvars}}" in script
    assert "SLURM_CONF" in c.Spawner.env_keep


def test_parse_bytes():
    from labkit.hub.settings import parse_bytes

    assert [parse_bytes(x) for x in ("4G", "512M", "1.5G", "1024")] == [4 * 2**30, 512 * 2**20, 3 * 2**29, 1024]


def test_cgroup_v1_limits_written(tmp_path):
    from labkit.hub import limits
    from labkit.hub.settings import HubSettings

    for ctl in ("memory", "cpu", "pids"):
        (tmp_path / ctl).mkdir()
    made = limits.create("ana", HubSettings(state_dir="x", memory="1G", cpus=1.5, max_processes=64), root=str(tmp_path))
    assert len(made) == 3
    assert (tmp_path / "memory/labkit-hub/ana/memory.limit_in_bytes").read_text() == str(2**30)
    assert (tmp_path / "cpu/labkit-hub/ana/cpu.cfs_quota_us").read_text() == "150000"
    assert (tmp_path / "pids/labkit-hub/ana/pids.max").read_text() == "64"
