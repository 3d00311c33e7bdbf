"""JupyterHub on a Slurm cluster: each student's server is a Slurm job (batchspawner), picked
from a menu of profiles (wrapspawner's ProfilesSpawner). Add to jupyterhub_config.py:

    exec(open("/path/to/fsdp-labkit/launch/jupyterhub/batchspawner_config.py").read())

or copy what you need. Needs, on the hub: ``pip install batchspawner wrapspawner``; on the
compute nodes: the students' environment (``launch/setup-student-env.sh dist/student DIR``: the
student wheel of labkit, without answers, and the student notebooks; never this repository's
.venv, which holds them) with ``batchspawner`` in it, since the job runs ``batchspawner-singleuser`` there.

Inside the job the server, its kernels and labkit see what Slurm gave: CUDA_VISIBLE_DEVICES
for the GPUs (labkit takes exactly those) and the SLURM_* variables (labkit's launcher
drops them before it starts torchrun, so a notebook's run is not mistaken for a step of
the job). ``c`` is the config object JupyterHub provides.
"""

import os

import batchspawner  # noqa: F401 - registers batchspawner's API handler with the hub

c = get_config()  # noqa: F821 - defined by JupyterHub when it reads its config

# setup-student-env.sh's DEST, on a filesystem the nodes share: venv/ and notebooks/
COURSE = os.environ.get("LABKIT_COURSE_DIR", "/opt/fsdp-labkit-student")
VENV = os.environ.get("LABKIT_VENV", f"{COURSE}/venv")

c.JupyterHub.spawner_class = "wrapspawner.ProfilesSpawner"
c.JupyterHub.hub_ip = "0.0.0.0"  # the servers run on compute nodes, which must reach the hub
# c.JupyterHub.hub_connect_ip = "login01.cluster"  # the hub's name as the compute nodes know it

c.Spawner.default_url = "/lab"
c.Spawner.environment = {"JUPYTER_PREFER_ENV_PATH": "1", "LABKIT_PG_TIMEOUT": "120"}
c.Spawner.http_timeout = 300
c.BatchSpawnerBase.start_timeout = 900  # a job may wait in the queue before its server starts
c.BatchSpawnerBase.req_runtime = "4:00:00"
c.BatchSpawnerBase.req_prologue = f"source {VENV}/bin/activate"
# Language: the job loads the student's login environment (sbatch --get-user-env=L), so
# `export LABKIT_LANG=ro` in ~/.bashrc makes labkit speak Romanian; `%labkit_lang ro` in a notebook too.


def slurm(partition: str, cpus: int, memory: str, gpus: int = 0) -> dict:
    """The SlurmSpawner settings of one profile."""
    settings = {"req_partition": partition, "req_nprocs": str(cpus), "req_memory": memory}
    if gpus:
        settings["req_options"] = f"--gres=gpu:{gpus}"
    return settings


c.ProfilesSpawner.profiles = [
    # (menu text, key, spawner, its settings)
    ("CPU: 2 ranks on gloo, 4 cores, 16 GB", "cpu", "batchspawner.SlurmSpawner", slurm("cpu", 4, "16G")),
    ("1 GPU: NCCL, real CUDA memory", "gpu1", "batchspawner.SlurmSpawner", slurm("gpu", 8, "32G", gpus=1)),
    ("4 GPUs of one node: FSDP on NCCL", "gpu4", "batchspawner.SlurmSpawner", slurm("gpu", 32, "128G", gpus=4)),
]
