"""The class hub's spawners: each student's server under their own uid, locally or as a Slurm job.

Both ask for the course language at each start (a form: English or Română), prepare the home
(``labkit.hub.homes``) and set ``LABKIT_LANG`` and ``LABKIT_MAX_RANKS`` for the server, its
kernels and their ranks. The local one puts the server in its student's cgroups and gives it its
GPUs from the hub's pool (``labkit.hub.gpus``: ``CUDA_VISIBLE_DEVICES``, given back when it stops);
the Slurm one (batchspawner) submits it as the student, and finds the node's address as Slurm knows
it (its GPUs are Slurm's to give).
"""

from __future__ import annotations

import html
import re
import subprocess
from typing import Any

from jupyterhub.spawner import LocalProcessSpawner

from labkit.hub import gpus, homes, limits
from labkit.hub.settings import LANGS, HubSettings
from labkit.i18n import t
from labkit.wire import env as envvars

SETTINGS: HubSettings | None = None  # set by labkit.hub.config.configure
POOL: gpus.GpuPool | None = None  # a local hub's GPUs, when the server has any (configure)
LANG_NAMES = {"en": "English", "ro": "Română"}

FORM = (
    f"<label for='labkit-lang'>{html.escape(t('hub.form.lang', 'en'))} / {html.escape(t('hub.form.lang', 'ro'))}</label>"
    "<select class='form-control' name='lang' id='labkit-lang'>"
    + "".join(f"<option value='{code}'>{html.escape(LANG_NAMES[code])}</option>" for code in LANGS)
    + "</select>"
)


def options_from_form(formdata: dict[str, list[str]]) -> dict[str, str]:
    lang = (formdata.get("lang") or ["en"])[0]
    return {"lang": lang if lang in LANGS else "en"}


def pre_spawn(spawner: Any) -> None:
    """Before a server starts (in the hub, as root): the home, then the server's environment."""
    settings = SETTINGS
    lang = (spawner.user_options or {}).get("lang", "en")
    folder = homes.prepare_home(spawner.user.name, lang, settings)
    spawner.environment.update(
        LABKIT_LANG=lang,
        LABKIT_MAX_RANKS=str(settings.max_ranks),
        JUPYTER_PREFER_ENV_PATH="1",
        **settings.env,
    )
    if POOL is not None and POOL.devices:  # GpuPoolExhausted: no server, the reason on the spawn page
        profile = settings.gpu_profiles.get(spawner.user.name, settings.gpu_profile)
        spawner.environment.update(gpus.environment(POOL.allocate(spawner.user.name, profile)))
    spawner.default_url = f"/lab/tree/{folder}"


class LocalCourseSpawner(LocalProcessSpawner):
    """A process under the student's uid, in the student's cgroups (memory, CPU, processes)."""

    def make_preexec_fn(self, name: str) -> Any:
        setuid = super().make_preexec_fn(name)
        folders = limits.create(name, SETTINGS)
        if not folders:
            self.log.warning(t("hub.limits.none", user=name))

        def preexec() -> None:  # in the child, still root: into the cgroups, then the student's uid
            limits.enter(folders)
            setuid()

        return preexec

    async def stop(self, now: bool = False) -> None:
        await super().stop(now=now)
        limits.kill_all(self.user.name)  # kernels and ranks that outlived the server
        limits.remove(self.user.name)
        if POOL is not None:
            POOL.release(self.user.name)


def slurm_spawner_class() -> type:
    """batchspawner's Slurm spawner, made for the course (imported only on a Slurm hub)."""
    from batchspawner import SlurmSpawner
    from traitlets import Unicode

    class SlurmCourseSpawner(SlurmSpawner):
        # where the server listens on its node: every interface, so the hub reaches it from its
        # own machine (LABKIT_HUB_SERVER_IP narrows it, e.g. to 127.0.0.1 when the nodes are this host)
        ip = Unicode(envvars.get("LABKIT_HUB_SERVER_IP")).tag(config=True)

        def state_gethost(self) -> str:
            """The node's address as Slurm has it (NodeAddr): node names need not resolve."""
            node = super().state_gethost()
            shown = subprocess.run(["scontrol", "-o", "show", "node", node], capture_output=True, text=True, timeout=30)
            found = re.search(r"\bNodeAddr=(\S+)", shown.stdout)
            return found.group(1) if found else node

    return SlurmCourseSpawner


# the job a Slurm hub submits for a student's server: the hub's variables by name (no
# --get-user-env: the server's environment is the hub's, as for a local server)
SLURM_SCRIPT = """#!/bin/bash
#SBATCH --output={{homedir}}/.labkit-hub-%j.log
#SBATCH --job-name=labkit-hub-{{username}}
#SBATCH --chdir={{homedir}}
#SBATCH --export={{keepvars}}
{% if partition %}#SBATCH --partition={{partition}}
{% endif %}{% if runtime %}#SBATCH --time={{runtime}}
{% endif %}{% if memory %}#SBATCH --mem={{memory}}
{% endif %}{% if nprocs %}#SBATCH --cpus-per-task={{nprocs}}
{% endif %}{% if options %}#SBATCH {{options}}
{% endif %}
set -euo pipefail
{{prologue}}
{% if srun %}{{srun}} {% endif %}{{cmd}}
{{epilogue}}
"""
