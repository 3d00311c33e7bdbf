"""The class hub's settings, read from the ``LABKIT_HUB_*`` variables ``launch/hub.sh`` exports."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

LANGS = ("en", "ro")


def _names(value: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in value.replace(" ", ",").split(",") if n.strip())


@dataclass
class HubSettings:
    """What one class hub is: who logs in, where its files are, what each student may use."""

    state_dir: str  # the hub's own files: database, cookie secret, student editions, submissions
    students: tuple[str, ...] = ()
    instructors: tuple[str, ...] = ()  # JupyterHub admins; they read every submission
    spawner: str = "local"  # local: a process under the student's uid; slurm: a Slurm job (batchspawner)
    ip: str = "127.0.0.1"
    port: int = 8000
    python: str = ""  # the Python the students' servers, kernels and ranks run (one they can execute)
    scripts: str = ""  # the course environment's bin/ (jupyterhub-singleuser, run by that Python)
    proxy: str = "configurable-http-proxy"
    memory: str = "4G"  # per student: their server, kernels and ranks together
    cpus: float = 2.0
    max_ranks: int = 4  # the most ranks one %%torchrun cell may ask for (LABKIT_MAX_RANKS)
    max_processes: int = 512
    cull_timeout: int = 3600  # seconds idle before jupyterhub-idle-culler stops a server
    cull_every: int = 300
    slurm_partition: str = ""
    slurm_runtime: str = "8:00:00"
    slurm_memory: str | None = None  # --mem of a server's job; None: ``memory``; "": none asked
    env: dict[str, str] = field(default_factory=dict)  # more variables for every server

    @property
    def editions(self) -> str:
        return os.path.join(self.state_dir, "student")

    @property
    def submissions(self) -> str:
        return os.path.join(self.state_dir, "submissions")

    @property
    def instructors_group(self) -> str:
        return os.environ.get("LABKIT_HUB_GROUP", "labkit-instructors")


def from_env(environ: dict[str, str] | None = None) -> HubSettings:
    e = os.environ if environ is None else environ
    get = e.get
    return HubSettings(
        state_dir=get("LABKIT_HUB_DIR", "/srv/labkit-hub"),
        students=_names(get("LABKIT_HUB_STUDENTS", "")),
        instructors=_names(get("LABKIT_HUB_INSTRUCTORS", "")),
        spawner=get("LABKIT_HUB_SPAWNER", "local"),
        ip=get("LABKIT_HUB_IP", "127.0.0.1"),
        port=int(get("LABKIT_HUB_PORT", "8000")),
        python=get("LABKIT_HUB_PYTHON", ""),
        scripts=get("LABKIT_HUB_SCRIPTS", ""),
        proxy=get("LABKIT_HUB_PROXY", "configurable-http-proxy"),
        memory=get("LABKIT_HUB_MEMORY", "4G"),
        cpus=float(get("LABKIT_HUB_CPUS", "2")),
        max_ranks=int(get("LABKIT_HUB_MAX_RANKS", "4")),
        max_processes=int(get("LABKIT_HUB_MAX_PROCESSES", "512")),
        cull_timeout=int(get("LABKIT_HUB_CULL_TIMEOUT", "3600")),
        cull_every=int(get("LABKIT_HUB_CULL_EVERY", "300")),
        slurm_partition=get("LABKIT_HUB_SLURM_PARTITION", ""),
        slurm_runtime=get("LABKIT_HUB_SLURM_RUNTIME", "8:00:00"),
        slurm_memory=get("LABKIT_HUB_SLURM_MEMORY"),
        env={"JUPYTER_CONFIG_PATH": get("LABKIT_HUB_JUPYTER_CONFIG", "")} if get("LABKIT_HUB_JUPYTER_CONFIG") else {},
    )


def parse_bytes(text: str) -> int:
    """``"4G"``, ``"512M"``, ``"1073741824"`` as bytes (binary units, as Slurm and cgroups count)."""
    text = text.strip().upper().removesuffix("B")
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)
