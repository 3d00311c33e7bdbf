"""The course image (launch/jupyterhub/Dockerfile) installs what CI installs, the student side only.

The image is built by hand with podman on a stand-in base (docs/deploy.md, quay.io is out of reach
here): this test keeps its install lines in step with launch/setup-env.sh, which CI runs, and the
z2jh values pointing at it.
"""

from __future__ import annotations

import os
import re
import shlex

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCKERFILE = os.path.join(ROOT, "launch", "jupyterhub", "Dockerfile")
SETUP = os.path.join(ROOT, "launch", "setup-env.sh")


def dockerfile_runs(stage: int = -1) -> list[list[str]]:
    """Each pip install of the RUN lines of one stage of the Dockerfile (the last: the students' image), as words."""
    text = re.split(r"^FROM ", open(DOCKERFILE).read(), flags=re.M)[1:][stage].replace("\\\n", " ")
    installs = []
    for line in text.splitlines():
        if line.startswith("RUN "):
            for part in line[4:].split("&&"):
                words = shlex.split(part)
                if words[:2] == ["pip", "install"]:
                    installs.append(words)
    return installs


def test_the_image_installs_cis_torch_then_the_lab_extra_only():
    setup = open(SETUP).read()
    torch_spec = re.search(r"spec=\$\{TORCH_SPEC:-([^}]+)\}", setup).group(1)
    ci_extras = re.search(r'pip install -e "\$\{repo\}\[([^\]]+)\]"', setup).group(1).split(",")
    torch, labkit = dockerfile_runs()
    assert torch[-1] == torch_spec and "--index-url" in torch  # the same torch, alone and first, as CI
    (target,) = [w for w in labkit if "fsdp_labkit-*+student" in w]  # the student wheel, not the repository
    extras = re.search(r"\[([^\]]+)\]$", target).group(1).split(",")
    assert extras == ["lab"] and set(extras) <= set(ci_extras)  # the student side, which CI installs too
    for tool in ("test", "grade", "browser", "hub"):
        assert tool not in extras
    text = open(DOCKERFILE).read()
    assert text.startswith("# The course image") and "stand-in" in text
    assert re.search(r"^ARG BASE=quay\.io/jupyter/[a-z-]+-notebook:python-3\.\d+$", text, re.M)  # a docker-stacks base
    assert re.findall(r"^FROM .*", text, re.M) == ["FROM ${BASE} AS instructor", "FROM ${BASE}"]
    for lang in ("en", "ro"):
        assert f"build-student --lang {lang}" in text
    students = re.split(r"^FROM ", text, flags=re.M)[-1]
    assert "COPY . " not in students and "/tmp/fsdp-labkit" not in students  # no repository in the students' image


def test_z2jh_values_name_the_image_the_dockerfile_builds():
    import yaml

    values = yaml.safe_load(open(os.path.join(ROOT, "launch", "jupyterhub", "z2jh-values.yaml")))
    image = values["singleuser"]["image"]
    assert f"-t {image['name']}:{image['tag']} ." in open(DOCKERFILE).read()
