"""``configure(c, settings)``: the whole class hub, written into a JupyterHub config object.

    # launch/hub/jupyterhub_config.py
    from labkit.hub.config import configure
    from labkit.hub.settings import from_env
    configure(get_config(), from_env())

Students log in with their system password (PAM), the university's single sign-on (OpenID Connect)
or a launch from the LMS (LTI 1.3): ``labkit.hub.login``. Each server runs as its student (a
process in their cgroups, or a Slurm job submitted as them); instructors are JupyterHub admins
and read every submission; jupyterhub-idle-culler stops servers left idle.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from labkit.hub import gpus, homes, login, spawners
from labkit.hub.settings import HubSettings, parse_bytes
from labkit.wire import env as envvars


def configure(c: Any, settings: HubSettings) -> None:
    spawners.SETTINGS = settings
    spawners.POOL = gpu_pool(settings)
    homes.ensure_instructors_group(settings)
    state = settings.state_dir
    python = settings.python or sys.executable  # the students'
    singleuser = os.path.join(settings.scripts or os.path.dirname(sys.executable), "jupyterhub-singleuser")

    c.JupyterHub.ip = settings.ip
    c.JupyterHub.port = settings.port
    c.JupyterHub.hub_ip = "127.0.0.1"
    c.JupyterHub.hub_port = int(envvars.get("LABKIT_HUB_API_PORT"))
    c.JupyterHub.db_url = f"sqlite:///{os.path.join(state, 'jupyterhub.sqlite')}"
    c.JupyterHub.cookie_secret_file = os.path.join(state, "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = os.path.join(state, "jupyterhub.pid")
    c.JupyterHub.cleanup_servers = True  # the hub's stop ends every student's server (and Slurm job)
    c.JupyterHub.shutdown_on_logout = False
    c.ConfigurableHTTPProxy.command = [settings.proxy]
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{envvars.get('LABKIT_HUB_PROXY_API_PORT')}"
    c.ConfigurableHTTPProxy.pid_file = os.path.join(state, "proxy.pid")

    login.configure_login(c, settings)  # PAM, OpenID Connect or LTI 1.3; the roster's people, its admins

    c.Spawner.cmd = [python, singleuser]  # the script, run by a Python the student may execute
    # that Python's prefix may be a view of the course environment (launch/hub.sh): JupyterLab's
    # server extension (etc/), its pages, the widget extensions and the kernel specs (share/) are
    # found in the environment itself
    prefix = os.path.dirname(os.path.dirname(singleuser))
    data = os.path.join(prefix, "share", "jupyter")
    settings.env.setdefault("JUPYTER_PATH", data)
    settings.env.setdefault("JUPYTERLAB_DIR", os.path.join(data, "lab"))
    config_path = [settings.env.get("JUPYTER_CONFIG_PATH", ""), os.path.join(prefix, "etc", "jupyter")]
    settings.env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(p for p in config_path if p)
    c.Spawner.notebook_dir = "~"
    c.Spawner.default_url = "/lab"
    c.Spawner.options_form = spawners.FORM
    c.Spawner.options_from_form = spawners.options_from_form
    c.Spawner.pre_spawn_hook = spawners.pre_spawn
    c.Spawner.mem_limit = parse_bytes(settings.memory)
    c.Spawner.cpu_limit = settings.cpus
    c.Spawner.start_timeout = 180  # a busy machine, or a job in the queue
    c.Spawner.http_timeout = 120
    keep = envvars.get("LABKIT_HUB_ENV_KEEP") or ""
    c.Spawner.env_keep = ["PATH", "LANG", "LC_ALL", "SLURM_CONF", *[k for k in keep.split(",") if k]]

    if settings.spawner == "slurm":
        c.JupyterHub.spawner_class = spawners.slurm_spawner_class()
        c.BatchSpawnerBase.exec_prefix = "runuser -u {username} --"  # sbatch, squeue, scancel as the student
        c.BatchSpawnerBase.batch_script = spawners.SLURM_SCRIPT
        c.BatchSpawnerBase.batchspawner_singleuser_cmd = f"{python} -m batchspawner.singleuser"
        c.Spawner.cmd = [singleuser]  # batchspawner.singleuser runs it in its own process
        c.BatchSpawnerBase.req_memory = settings.memory if settings.slurm_memory is None else settings.slurm_memory
        c.BatchSpawnerBase.req_nprocs = str(max(1, int(settings.cpus)))
        c.BatchSpawnerBase.req_runtime = settings.slurm_runtime
        c.BatchSpawnerBase.req_partition = settings.slurm_partition
        c.BatchSpawnerBase.startup_poll_interval = 0.5
    else:
        c.JupyterHub.spawner_class = spawners.LocalCourseSpawner
        c.LocalProcessSpawner.interrupt_timeout = 3  # a server asked to stop is done in a second; then SIGTERM

    c.JupyterHub.services = [
        {
            "name": "idle-culler",
            "command": [
                sys.executable,
                "-m",
                "jupyterhub_idle_culler",
                f"--timeout={settings.cull_timeout}",
                f"--cull-every={settings.cull_every}",
            ],
        },
        exchange_service(settings),
    ]
    c.JupyterHub.load_roles = [
        {
            "name": "idle-culler",
            "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
            "services": ["idle-culler"],
        }
    ]


def exchange_service(settings: HubSettings) -> dict[str, Any]:
    """The submission exchange (``labkit.classroom.service``), the one writer of ``<state>/exchange``: a
    student's ``labkit.submit()`` reaches it through the proxy with their own hub token, on every spawner
    (``LABKIT_EXCHANGE_URL`` in each server's environment)."""
    import socket

    with socket.socket() as s:  # a free port for the service's own address (the proxy routes to it)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "labkit.classroom.service", "--root", settings.exchange]
    if settings.course:
        command += ["--course", settings.course]
    host = "127.0.0.1" if settings.spawner != "slurm" else socket.getfqdn()  # a Slurm server runs on a node
    settings.env.setdefault("LABKIT_EXCHANGE_URL", f"http://{host}:{settings.port}/services/exchange/")
    return {"name": "exchange", "url": f"http://127.0.0.1:{port}", "command": command}


def gpu_pool(settings: HubSettings) -> gpus.GpuPool | None:
    """A local hub's GPU pool, every profile checked against it; None on a Slurm hub (Slurm gives GPUs)."""
    if settings.spawner == "slurm":
        return None
    pool = gpus.GpuPool(gpus.discover(settings.gpus), share=settings.gpu_share)
    if pool.devices:
        for profile in {settings.gpu_profile, *settings.gpu_profiles.values()}:
            pool.check(profile)
    return pool
