"""The class hub's settings, read from the ``LABKIT_HUB_*`` variables ``launch/hub.sh`` exports
(each one's default and meaning: labkit/wire/env.py, docs/environment.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from labkit.hub.gpus import parse_profiles
from labkit.hub.roster import read_roster
from labkit.wire import env as envvars

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
    gpus: str = "auto"  # the GPU pool of a local hub (labkit.hub.gpus): auto, none, or the devices named
    gpu_profile: str = "1"  # each student's GPUs: a number of whole GPUs (or MIG instances), or "shared"
    gpu_profiles: dict[str, str] = field(default_factory=dict)  # a student's own profile, by name
    gpu_share: int = 4  # students on one shared GPU
    env: dict[str, str] = field(default_factory=dict)  # more variables for every server
    # how students log in (labkit.hub.login): pam, oidc or lti13; a sign-on's name -> an account (the roster's)
    login: str = "pam"
    username_map: dict[str, str] = field(default_factory=dict)
    login_claim: str = "email"
    public_url: str = ""
    oidc_issuer: str = ""
    oidc_client_id: str = ""
    oidc_client_secret: str = ""
    oidc_name: str = "single sign-on"
    lti_issuer: str = ""
    lti_client_id: str = ""
    lti_authorize_url: str = ""
    lti_jwks_url: str = ""
    course: str = ""  # the course file (labkit.classroom): the exchange service's roster and deadlines

    @property
    def editions(self) -> str:
        return os.path.join(self.state_dir, "student")

    @property
    def submissions(self) -> str:
        return os.path.join(self.state_dir, "submissions")

    @property
    def exchange(self) -> str:
        return os.path.join(self.state_dir, "exchange")

    @property
    def instructors_group(self) -> str:
        return envvars.get("LABKIT_HUB_GROUP")


def from_env() -> HubSettings:
    """The settings ``launch/hub.sh`` exported (each variable's default is in labkit/wire/env.py)."""
    get = envvars.get
    jupyter_config = get("LABKIT_HUB_JUPYTER_CONFIG")
    students, instructors = _names(get("LABKIT_HUB_STUDENTS") or ""), _names(get("LABKIT_HUB_INSTRUCTORS") or "")
    username_map: dict[str, str] = {}
    # the roster's people log in too, and so do the course file's; a sign-on's e-mail is mapped to their id
    for path in (get("LABKIT_HUB_ROSTER"), get("LABKIT_HUB_COURSE")):
        if path:
            roster = read_roster(path)
            students = tuple(dict.fromkeys((*students, *roster.students)))
            instructors = tuple(dict.fromkeys((*instructors, *roster.instructors)))
            username_map = {**roster.username_map(), **username_map}
    secret_file = get("LABKIT_HUB_OIDC_SECRET_FILE")
    return HubSettings(
        state_dir=get("LABKIT_HUB_DIR"),
        students=students,
        instructors=instructors,
        spawner=get("LABKIT_HUB_SPAWNER"),
        ip=get("LABKIT_HUB_IP"),
        port=int(get("LABKIT_HUB_PORT")),
        python=get("LABKIT_HUB_PYTHON") or "",
        scripts=get("LABKIT_HUB_SCRIPTS") or "",
        proxy=get("LABKIT_HUB_PROXY") or "configurable-http-proxy",
        memory=get("LABKIT_HUB_MEMORY"),
        cpus=envvars.get_float("LABKIT_HUB_CPUS"),
        max_ranks=int(get("LABKIT_HUB_MAX_RANKS")),
        max_processes=int(get("LABKIT_HUB_MAX_PROCESSES")),
        cull_timeout=int(get("LABKIT_HUB_CULL_TIMEOUT")),
        cull_every=int(get("LABKIT_HUB_CULL_EVERY")),
        slurm_partition=get("LABKIT_HUB_SLURM_PARTITION") or "",
        slurm_runtime=get("LABKIT_HUB_SLURM_RUNTIME"),
        slurm_memory=get("LABKIT_HUB_SLURM_MEMORY"),
        env={"JUPYTER_CONFIG_PATH": jupyter_config} if jupyter_config else {},
        gpus=get("LABKIT_HUB_GPUS"),
        gpu_profile=get("LABKIT_HUB_GPU_PROFILE"),
        gpu_profiles=parse_profiles(get("LABKIT_HUB_GPU_PROFILES") or ""),
        gpu_share=int(get("LABKIT_HUB_GPU_SHARE")),
        login=get("LABKIT_HUB_LOGIN"),
        username_map=username_map,
        login_claim=get("LABKIT_HUB_LOGIN_CLAIM"),
        public_url=get("LABKIT_HUB_PUBLIC_URL") or "",
        oidc_issuer=get("LABKIT_HUB_OIDC_ISSUER") or "",
        oidc_client_id=get("LABKIT_HUB_OIDC_CLIENT_ID") or "",
        oidc_client_secret=_read_secret(secret_file) if secret_file else "",
        oidc_name=get("LABKIT_HUB_OIDC_NAME"),
        lti_issuer=get("LABKIT_HUB_LTI_ISSUER") or "",
        lti_client_id=get("LABKIT_HUB_LTI_CLIENT_ID") or "",
        lti_authorize_url=get("LABKIT_HUB_LTI_AUTHORIZE_URL") or "",
        lti_jwks_url=get("LABKIT_HUB_LTI_JWKS_URL") or "",
        course=get("LABKIT_HUB_COURSE") or "",
    )


def _read_secret(path: str) -> str:
    """A secret from a file (not from the environment, which every process the hub starts could inherit)."""
    with open(path) as f:
        return f.read().strip()


def parse_bytes(text: str) -> int:
    """``"4G"``, ``"512M"``, ``"1073741824"`` as bytes (binary units, as Slurm and cgroups count)."""
    text = text.strip().upper().removesuffix("B")
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)
