"""The class hub's environment variables (``launch/hub.sh``, ``labkit.hub``): its registry, one of
``labkit.wire.env.REGISTRIES``. The hub's code reads them through ``labkit.wire.env.get`` as any other.
"""

from __future__ import annotations

import sys

from labkit.wire import env as envvars
from labkit.wire.env import USER, Var

TITLE = "The class hub"
ABOUT = "`labkit/hub/env.py`: what `launch/hub.sh` and `labkit.hub` read, in the hub's process (as root)."

VARS: tuple[Var, ...] = (
    Var(
        "LABKIT_HUB_DIR",
        "/srv/labkit-hub",
        f"{USER} (hub.sh --dir); launch/hub.sh exports it",
        ("labkit.hub.settings", "launch/hub.sh"),
        "The class hub's state: its database, cookie secret, the student editions, the submissions, the students' Python view.",
    ),
    Var(
        "LABKIT_HUB_STUDENTS",
        None,
        f"{USER} (hub.sh --students); launch/hub.sh exports it",
        ("labkit.hub.settings", "launch/hub.sh"),
        "The students who may log in to the class hub: system accounts, comma-separated.",
    ),
    Var(
        "LABKIT_HUB_INSTRUCTORS",
        None,
        f"{USER} (hub.sh --instructors); launch/hub.sh exports it",
        ("labkit.hub.settings", "launch/hub.sh"),
        "The class hub's instructors (JupyterHub admins): they read every submission in ~/submissions.",
    ),
    Var(
        "LABKIT_HUB_SPAWNER",
        "local",
        f"{USER} (hub.sh --slurm); launch/hub.sh exports it",
        ("labkit.hub.settings",),
        "local: each student's server is a process under their uid, in their cgroups; slurm: a Slurm job (batchspawner).",
    ),
    Var(
        "LABKIT_HUB_IP",
        "127.0.0.1",
        f"{USER} (hub.sh --ip); launch/hub.sh exports it",
        ("labkit.hub.settings", "launch/hub.sh"),
        "Where the class hub listens (put TLS in front before opening it to a network).",
    ),
    Var(
        "LABKIT_HUB_PORT",
        "8000",
        f"{USER} (hub.sh --port); launch/hub.sh exports it",
        ("labkit.hub.settings", "launch/hub.sh"),
        "The class hub's public port.",
    ),
    Var(
        "LABKIT_HUB_PYTHON",
        None,
        "launch/hub.sh (python -m labkit.hub.view)",
        ("labkit.hub.settings", "tests/browser/test_hub_browser.py"),
        "The Python the students' servers, kernels and ranks run: the course environment's, or a view of it they can execute.",
    ),
    Var(
        "LABKIT_HUB_SCRIPTS",
        None,
        "launch/hub.sh",
        ("labkit.hub.settings",),
        "The course environment's bin/ (jupyterhub-singleuser, run by LABKIT_HUB_PYTHON).",
    ),
    Var(
        "LABKIT_HUB_PROXY",
        None,
        f"{USER}; launch/hub.sh (npm) when unset",
        ("labkit.hub.settings", "launch/hub.sh"),
        "The configurable-http-proxy command. Unset: the one on PATH, else installed with npm under LABKIT_HUB_NPM.",
    ),
    Var(
        "LABKIT_HUB_NPM",
        None,
        USER,
        ("launch/hub.sh",),
        "Where launch/hub.sh installs configurable-http-proxy with npm. Unset: ~/.cache/labkit-hub/npm.",
    ),
    Var(
        "LABKIT_HUB_MEMORY",
        "4G",
        f"{USER} (hub.sh --memory); launch/hub.sh exports it",
        ("labkit.hub.settings",),
        "Per student: the memory of their server, kernels and ranks together (cgroup; a Slurm hub's --mem).",
    ),
    Var(
        "LABKIT_HUB_CPUS",
        "2",
        f"{USER} (hub.sh --cpus); launch/hub.sh exports it",
        ("labkit.hub.settings",),
        "Per student: CPUs (cgroup quota; a Slurm hub's --cpus-per-task).",
    ),
    Var(
        "LABKIT_HUB_MAX_RANKS",
        "4",
        f"{USER} (hub.sh --max-ranks); launch/hub.sh exports it",
        ("labkit.hub.settings",),
        "The most ranks one cell of a student may start: their server's LABKIT_MAX_RANKS.",
    ),
    Var(
        "LABKIT_HUB_MAX_PROCESSES",
        "512",
        USER,
        ("labkit.hub.settings",),
        "Per student: the most processes in their cgroup (pids.max).",
    ),
    Var(
        "LABKIT_HUB_CULL_TIMEOUT",
        "3600",
        f"{USER} (hub.sh --cull-timeout); launch/hub.sh exports it",
        ("labkit.hub.settings",),
        "Seconds a server may be idle before jupyterhub-idle-culler stops it.",
    ),
    Var(
        "LABKIT_HUB_CULL_EVERY",
        "300",
        USER,
        ("labkit.hub.settings",),
        "Seconds between two rounds of jupyterhub-idle-culler.",
    ),
    Var(
        "LABKIT_HUB_SLURM_PARTITION",
        None,
        USER,
        ("labkit.hub.settings",),
        "A Slurm hub's partition for the students' servers. Unset: the cluster's default.",
    ),
    Var(
        "LABKIT_HUB_SLURM_RUNTIME",
        "8:00:00",
        USER,
        ("labkit.hub.settings",),
        "A Slurm hub's time limit of a student's server job.",
    ),
    Var(
        "LABKIT_HUB_SLURM_MEMORY",
        None,
        f"{USER}; tests/browser/test_hub_browser.py",
        ("labkit.hub.settings",),
        "A Slurm hub's --mem for a server's job. Unset: LABKIT_HUB_MEMORY; \"\": none asked (nodes that declare no memory).",
    ),
    Var(
        "LABKIT_HUB_GPUS",
        "auto",
        f"{USER} (hub.sh --gpus); launch/hub.sh exports it",
        ("labkit.hub.settings",),
        "A local hub's GPU pool: auto (what nvidia-smi -L lists: whole GPUs by index, a MIG GPU's "
        "instances by UUID), none, or the devices named (0,1,2 or MIG-...). Each server gets its own in "
        "CUDA_VISIBLE_DEVICES.",
    ),
    Var(
        "LABKIT_HUB_GPU_PROFILE",
        "1",
        f"{USER} (hub.sh --gpu-profile); launch/hub.sh exports it",
        ("labkit.hub.settings",),
        "Each student's GPUs from the pool: a number of whole GPUs (MIG instances) theirs alone, 0, or "
        "shared (one GPU time-shared by up to LABKIT_HUB_GPU_SHARE students).",
    ),
    Var(
        "LABKIT_HUB_GPU_PROFILES",
        None,
        USER,
        ("labkit.hub.settings",),
        "Students whose GPU profile is not LABKIT_HUB_GPU_PROFILE: ana=2,ben=shared.",
    ),
    Var(
        "LABKIT_HUB_GPU_SHARE",
        "4",
        USER,
        ("labkit.hub.settings",),
        "How many students with the shared GPU profile share one GPU.",
    ),
    Var(
        "LABKIT_HUB_JUPYTER_CONFIG",
        None,
        "launch/hub.sh (launch/jupyter)",
        ("labkit.hub.settings", "launch/hub.sh"),
        "JupyterLab's course defaults (no news prompt) for the students' servers: their JUPYTER_CONFIG_PATH.",
    ),
    Var(
        "LABKIT_HUB_API_PORT",
        "8081",
        "launch/hub.sh (a free port)",
        ("labkit.hub.config", "launch/hub.sh"),
        "The port of JupyterHub's own API, on 127.0.0.1.",
    ),
    Var(
        "LABKIT_HUB_PROXY_API_PORT",
        "8001",
        "launch/hub.sh (a free port)",
        ("labkit.hub.config", "launch/hub.sh"),
        "The port of configurable-http-proxy's API, on 127.0.0.1.",
    ),
    Var(
        "LABKIT_HUB_ENV_KEEP",
        None,
        f"{USER}; labkit.testing.hub",
        ("labkit.hub.config", "labkit/testing/hub.py"),
        "More variables the students' servers inherit from the hub, comma-separated (PATH, LANG, LC_ALL, SLURM_CONF always).",
    ),
    Var(
        "LABKIT_HUB_COURSE",
        None,
        f"{USER} (hub.sh --course); launch/hub.sh exports it",
        ("labkit.hub.settings", "launch/hub.sh"),
        "The course file (course.toml) the exchange service checks submissions against (roster, lessons, deadlines); its students and instructors log in, as a roster's do.",
    ),
    Var(
        "LABKIT_HUB_GROUP",
        "labkit-instructors",
        USER,
        ("labkit.hub.settings",),
        "The instructors' system group: it reads the submissions.",
    ),
    Var(
        "LABKIT_HUB_SERVER_IP",
        "0.0.0.0",
        f"{USER}; tests/browser/test_hub_browser.py",
        ("labkit.hub.spawners",),
        "Where a Slurm hub's server listens on its node: every interface, or 127.0.0.1 when the nodes are the hub's own machine.",
    ),
    Var(
        "LABKIT_HUB_LOGIN",
        "pam",
        f"{USER} (hub.sh --login); launch/hub.sh exports it",
        ("labkit.hub.settings", "launch/hub.sh"),
        "How students log in: pam (their system password), oidc (the university's single sign-on, OpenID Connect), lti13 (a launch from the LMS, with grade passback).",
    ),
    Var(
        "LABKIT_HUB_ROSTER",
        None,
        f"{USER} (hub.sh --roster); launch/hub.sh exports it",
        ("labkit.hub.settings", "launch/hub.sh"),
        "The class's roster, a CSV file (id,name,email,lang,role,sis_id): its students and instructors log in, a sign-on's e-mail maps to their id (labkit/hub/roster.py).",
    ),
    Var(
        "LABKIT_HUB_LOGIN_CLAIM",
        "email",
        USER,
        ("labkit.hub.settings",),
        "The sign-on's claim that names the student (oidc, lti13): email (mapped to the roster's id), sub, preferred_username, or custom_<name> for an LTI custom parameter.",
    ),
    Var(
        "LABKIT_HUB_PUBLIC_URL",
        None,
        USER,
        ("labkit.hub.settings",),
        "The hub's address as the students' browsers reach it (https://hub.uni.example), for the sign-on's callback; unset: the address of each request.",
    ),
    Var(
        "LABKIT_HUB_OIDC_ISSUER",
        None,
        USER,
        ("labkit.hub.settings",),
        "The OpenID Connect provider's issuer URL: its /.well-known/openid-configuration is read when the hub starts.",
    ),
    Var(
        "LABKIT_HUB_OIDC_CLIENT_ID",
        None,
        USER,
        ("labkit.hub.settings",),
        "The hub's client id at the OpenID Connect provider.",
    ),
    Var(
        "LABKIT_HUB_OIDC_SECRET_FILE",
        None,
        USER,
        ("labkit.hub.settings",),
        "A file (root's alone) that holds the hub's client secret at the OpenID Connect provider.",
    ),
    Var(
        "LABKIT_HUB_OIDC_NAME",
        "single sign-on",
        USER,
        ("labkit.hub.settings",),
        "The sign-on's name on the hub's login button.",
    ),
    Var(
        "LABKIT_HUB_LTI_ISSUER",
        None,
        USER,
        ("labkit.hub.settings", "labkit.hub.lti"),
        "The LMS's issuer (LTI 1.3 platform id), from its tool registration.",
    ),
    Var(
        "LABKIT_HUB_LTI_CLIENT_ID",
        None,
        USER,
        ("labkit.hub.settings", "labkit.hub.lti"),
        "The hub's client id at the LMS (LTI 1.3 tool registration).",
    ),
    Var(
        "LABKIT_HUB_LTI_AUTHORIZE_URL",
        None,
        USER,
        ("labkit.hub.settings",),
        "The LMS's OIDC authentication endpoint for LTI 1.3 launches.",
    ),
    Var(
        "LABKIT_HUB_LTI_JWKS_URL",
        None,
        USER,
        ("labkit.hub.settings",),
        "The LMS's public keyset URL: a launch's id_token is checked against it.",
    ),
    Var(
        "LABKIT_HUB_LTI_TOKEN_URL",
        None,
        USER,
        ("labkit.hub.lti",),
        "The LMS's OAuth 2 token endpoint, for grade passback (Assignment and Grade Services).",
    ),
)


def section() -> str:
    """This registry's section of docs/environment.md."""
    return envvars.render(sys.modules[__name__])
