"""The student's install: labkit without the answers, and the catalog its checks use instead.

    labkit build-student notebooks --out dist/student

writes, besides the student editions of the notebooks (``labkit.grading.build``),

    dist/student/install/labkit/...                         the package, as the sandbox imports it
    dist/student/fsdp_labkit-<version>+student-py3-none-any.whl   the same, for ``pip install`` on the hub

Left out (they hold solutions, references or the lessons' sources, which the instructor's
install keeps): ``INSTRUCTOR_ONLY``. Added: ``labkit/grading/catalog.json``, one entry per
question with what a check needs to give feedback and nothing to read an answer from: points,
hints, the unseen points a formula is tried at, the reference's values there only as salted
hashes (``labkit.grading.hashed``), the known mistakes likewise, and the names of the
verifiers the install ships (``labkit.grading.exercises``). Multiple choice has no entry for its
answer at all, and a question only the grader can judge says so in the notebook.
"""

from __future__ import annotations

import base64
import compileall
import csv
import hashlib
import importlib
import inspect
import io
import json
import os
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labkit.grading import hashed, registry
from labkit.i18n import all_messages
from labkit.wire import env as envvars

# the lessons' MyST sources hold every solution (and the rank exercises' solutions, inline); the
# questions hold the references
INSTRUCTOR_ONLY = ("labkit/course/lessons", "labkit/course/questions")
SKIP_NAMES = ("__pycache__",)
SKIP_SUFFIXES = (".pyc", ".pyo")
DIST, VERSION_LABEL = "fsdp_labkit", "student"


def _package_root() -> Path:
    import labkit

    return Path(labkit.__file__).resolve().parent


def shipped(module: str) -> bool:
    """Is this module in the student's install?"""
    path = module.replace(".", "/")
    return module.startswith("labkit.") and not any(path == p or path.startswith(p + "/") for p in INSTRUCTOR_ONLY)


def _name(fn: Callable[..., Any] | None) -> str | None:
    """``module:function`` of a verifier the install ships; None for anything else (the grader's own)."""
    if fn is None:
        return None
    module, qualname = getattr(fn, "__module__", ""), getattr(fn, "__qualname__", "")
    if not shipped(module) or "<" in qualname:
        return None
    try:
        found = getattr(importlib.import_module(module), qualname)
    except (ImportError, AttributeError):
        return None
    return f"{module}:{qualname}" if found is fn else None


def _salt(q: registry.Question) -> str:
    return hashlib.sha256(f"labkit|{q.id}|{q.rel}|{q.abs}".encode()).hexdigest()[:16]


def _seal(q: registry.Question, value: Any, salt: str, case: str, i: int) -> dict[str, Any]:
    return hashed.seal(value, q.rel, q.abs, salt, f"{q.id}|{case}|{i}")


def _sealed_formula(q: registry.Question, salt: str) -> dict[str, Any]:
    points = q.samples()
    case = {"points": [_seal(q, q.answer(**p), salt, "", i) for i, p in enumerate(points)], "mistakes": []}
    for wrong, _ in q.mistakes:
        case["mistakes"].append(
            [_seal(q, wrong(**p), salt, "", i) for i, p in enumerate(points)] if callable(wrong) else None
        )
    return {"salt": salt, "needs": [], "cases": {"": case}}


def _sealed_value(q: registry.Question, salt: str) -> dict[str, Any] | None:
    needs = list(inspect.signature(q.answer).parameters) if callable(q.answer) else []
    contexts = list(q.contexts) if needs else [{}]
    cases = {}
    for context in contexts:
        key = registry.case_key(needs, context)
        try:
            expected = registry.call_with(q, q.answer, context) if needs else q.answer
        except Exception:  # a context the reference cannot answer: no hashes for it (the grader judges)
            continue
        wrongs = []
        for wrong, _ in q.mistakes:
            try:
                value = registry.call_with(q, wrong, context) if callable(wrong) else wrong
                wrongs.append([_seal(q, value, salt, key, 0)])
            except Exception:
                wrongs.append(None)
        cases[key] = {"points": [_seal(q, expected, salt, key, 0)], "mistakes": wrongs}
    return {"salt": salt, "needs": needs, "cases": cases} if cases else None


def entry(q: registry.Question) -> dict[str, Any]:
    """One question as the student's install knows it (see the module docstring)."""
    messages = all_messages()
    # multiple choice: no known mistake's hint, not even its text, since which options have one rules them out
    mistakes = [] if q.sealed else [k for _, k in q.mistakes]
    keys = [q.hint_key, *(f"{q.hint_key}{i}" for i in range(2, q.levels + 1)), *mistakes]
    sealed = None
    salt = _salt(q)
    if q.kind == "formula":
        sealed = _sealed_formula(q, salt)
    elif q.kind == "value" and q.verify is None and q.observe is None and q.answer is not registry.UNSET:
        sealed = _sealed_value(q, salt)
    return {
        "id": q.id,
        "points": q.points,
        "rel": q.rel,
        "abs": q.abs,
        "sealed": q.sealed,
        "formula": q.formula,
        "takes": q.takes,
        "args": list(q.args),
        "levels": q.levels,
        "mistakes": mistakes,
        "texts": {k: dict(messages[k]) for k in keys if k in messages},
        "observe": _name(q.observe),
        "output_check": _name(q.output_check),
        "probes": list(q.probes),
        "batch": list(q.batch),
        "hashed": sealed,
    }


def catalog() -> dict[str, Any]:
    return {"format": 1, "iterations": hashed.ITERATIONS, "questions": [entry(q) for q in registry.all_questions()]}


# -- the install: a folder, and a wheel of it -------------------------------------------------------


def _files(root: Path) -> list[Path]:
    """The package's files that go to a student, relative to the folder above ``labkit``."""
    out = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root.parent)
        text = rel.as_posix()
        if not path.is_file() or any(p in SKIP_NAMES for p in rel.parts) or path.suffix in SKIP_SUFFIXES:
            continue
        if any(text == p or text.startswith(p + "/") for p in INSTRUCTOR_ONLY) or text == "labkit/grading/catalog.json":
            continue
        out.append(rel)
    return out


def write_install(target: str | Path) -> Path:
    """The student's ``labkit`` under ``target`` (``target/labkit/...``), with its catalog; replaced if there."""
    target = Path(target)
    root = _package_root()
    if (target / "labkit").exists():
        shutil.rmtree(target / "labkit")
    for rel in _files(root):
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root.parent / rel, dest)
    text = json.dumps(catalog(), ensure_ascii=False, sort_keys=True, indent=1)
    (target / "labkit" / "grading" / "catalog.json").write_text(text + "\n", encoding="utf-8")
    # compiled now: the sandbox mounts the install read-only, and every kernel would compile labkit again
    compileall.compile_dir(str(target / "labkit"), quiet=1, workers=1)
    for path in target.rglob("*"):  # readable by the sandbox's user, whoever made it
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    os.chmod(target, 0o755)
    return target


def _project() -> dict[str, Any] | None:
    """``[project]`` of the checkout's pyproject.toml, when labkit runs from a checkout (else None)."""
    path = _package_root().parent / "pyproject.toml"
    if not path.is_file():
        return None
    try:
        import tomllib
    except ImportError:  # Python 3.10: no TOML reader without a package of its own; the metadata then
        return None
    project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
    return project if project.get("name") == "fsdp-labkit" else None


def _for_extra(requirement: str, extra: str) -> str:
    """A requirement of one extra, as METADATA writes it: its own marker (if any) and the extra's."""
    spec, _, marker = requirement.partition(";")
    if marker.strip():
        return f'{spec.strip()}; ({marker.strip()}) and extra == "{extra}"'
    return f'{spec.strip()}; extra == "{extra}"'


def requirements() -> tuple[list[str], list[str], str | None]:
    """The instructor's package's ``Requires-Dist`` lines, its extras and ``Requires-Python``.

    Read from pyproject.toml at build time (the checkout's, else the installed fsdp-labkit's
    metadata, which was built from it), so the student wheel asks for what the instructor's
    package does: ``pip install 'fsdp_labkit-...+student-...whl[lab]'`` installs JupyterLab and the rest.
    """
    project = _project()
    if project is not None:
        extras = project.get("optional-dependencies", {})
        lines = list(project.get("dependencies", []))
        lines += [_for_extra(r, extra) for extra, reqs in extras.items() for r in reqs]
        return lines, list(extras), project.get("requires-python")
    from importlib import metadata

    try:  # an installed (not editable) instructor's labkit, as the image's first stage has
        meta = metadata.metadata("fsdp-labkit")
    except metadata.PackageNotFoundError:
        raise RuntimeError("labkit: no pyproject.toml and no installed fsdp-labkit to read requirements from") from None
    return meta.get_all("Requires-Dist") or [], meta.get_all("Provides-Extra") or [], meta.get("Requires-Python")


def build_wheel(install: str | Path, out_dir: str | Path) -> Path:
    """A wheel of the install folder (``pip install`` it on the hub; it replaces an instructor's labkit)."""
    import labkit

    install, out_dir = Path(install), Path(out_dir)
    version = f"{labkit.__version__}+{VERSION_LABEL}"
    info = f"{DIST}-{version}.dist-info"
    wheel = out_dir / f"{DIST}-{version}-py3-none-any.whl"
    metadata = ["Metadata-Version: 2.1", "Name: fsdp-labkit", f"Version: {version}"]
    metadata += ["Summary: fsdp-labkit for students: the course's tools, without its answers"]
    requires, extras, python = requirements()
    metadata += [f"Requires-Python: {python}"] if python else []
    metadata += [f"Requires-Dist: {r}" for r in requires] + [f"Provides-Extra: {e}" for e in extras]
    extra = {
        f"{info}/METADATA": "\n".join(metadata) + "\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: labkit build-student\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": "[console_scripts]\nlabkit = labkit.cli:main\n",
    }
    records = io.StringIO()
    writer = csv.writer(records, lineterminator="\n")
    out_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        items = [(p.relative_to(install).as_posix(), p.read_bytes()) for p in sorted((install / "labkit").rglob("*"))
                 if p.is_file() and "__pycache__" not in p.parts]  # fmt: skip
        items += [(name, text.encode()) for name, text in extra.items()]
        for name, data in items:
            z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            writer.writerow([name, f"sha256={digest}", len(data)])
        writer.writerow([f"{info}/RECORD", "", ""])
        z.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(2020, 1, 1, 0, 0, 0)), records.getvalue())
    return wheel


def fingerprint() -> str:
    """What the install depends on: labkit's files, the extra questions' files, the hashing."""
    h = hashlib.sha256(f"{hashed.ITERATIONS}".encode())
    root = _package_root()
    for rel in sorted(p.relative_to(root.parent) for p in root.rglob("*.py")):
        h.update(rel.as_posix().encode())
        h.update((root.parent / rel).read_bytes())
    for name in (envvars.get("LABKIT_QUESTIONS") or "").split(os.pathsep):
        if name.endswith(".py") and os.path.isfile(name):
            h.update(Path(name).read_bytes())
        elif name:
            h.update(name.encode())
    return h.hexdigest()[:16]


def cached_install() -> Path:
    """The student's install ``labkit grade`` runs submissions with, made once per version of labkit."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "labkit" / "student"
    target = base / fingerprint()
    if not (target / "labkit" / "grading" / "catalog.json").exists():
        partial = base / f".{target.name}-{os.getpid()}"
        write_install(partial)
        try:
            partial.rename(target)
        except OSError:  # another grader made it first
            shutil.rmtree(partial, ignore_errors=True)
    return target
