"""The environment registries (labkit/wire/env.py, labkit/hub/env.py, labkit/testing/env.py) against the
repository: every ``LABKIT_*`` name used is in one of them, each entry's readers do read it, each registry
holds its owner's, labkit's code reads them through ``labkit.wire.env``, and docs/environment.md is the
tables as they stand. Nothing is launched.

    .venv/bin/python -m pytest tests/test_environment.py -q
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from labkit.wire import env as envvars

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"\bLABKIT_[A-Z0-9_]*[A-Z0-9]\b")
SCANNED = ("labkit", "tests", "benchmarks", "launch", "docs")
SUFFIXES = {".py", ".sh", ".md", ".yaml", ".yml", ".sbatch", ".toml", ".cfg", ".txt", ""}
# the registries, their page, and this file (its made-up names test the registry itself)
REGISTRY_FILES = {
    ROOT / "labkit" / "wire" / "env.py",
    ROOT / "labkit" / "hub" / "env.py",
    ROOT / "labkit" / "testing" / "env.py",
    ROOT / "docs" / "environment.md",
    Path(__file__).resolve(),
}
# read os.environ themselves: the base layer (below wire: i18n, log), and the runtime copied into exported scripts
DIRECT_READERS = {"labkit/i18n.py", "labkit/log.py", "labkit/export/runtime.py", "labkit/wire/env.py"}


def text_files() -> list[Path]:
    out = [ROOT / "README.md", ROOT / "pyproject.toml"]
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                out.append(path)
    return [p for p in out if p.exists()]


def uses() -> dict[str, set[str]]:
    """LABKIT_ name -> the files (relative paths) that mention it, the registry's own files aside."""
    found: dict[str, set[str]] = {}
    for path in text_files():
        if path in REGISTRY_FILES:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for name in NAME.findall(text):
            found.setdefault(name, set()).add(str(path.relative_to(ROOT)))
    return found


def module_file(reader: str) -> Path:
    """``labkit.launch.options`` or ``launch/lab.sh`` -> its file."""
    if "/" in reader:
        return ROOT / reader
    path = ROOT / Path(*reader.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def direct_reads(path: Path) -> list[str]:
    """``os.environ.get("LABKIT_X")``, ``os.environ["LABKIT_X"]`` (read), ``os.getenv``, ``os.environ.pop``
    and ``"LABKIT_X" in os.environ``, the name given literally or as a module constant."""
    module = ast.parse(path.read_text())
    constants = {
        t.id: node.value.value
        for node in module.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for t in node.targets
        if isinstance(t, ast.Name)
    }

    def labkit_name(node: ast.AST) -> str | None:
        value = node.value if isinstance(node, ast.Constant) else constants.get(getattr(node, "id", ""))
        return value if isinstance(value, str) and value.startswith("LABKIT_") else None

    found = []
    for node in ast.walk(module):
        name = None
        if isinstance(node, ast.Call) and node.args:
            fn = ast.unparse(node.func)
            if fn in ("os.environ.get", "os.getenv", "os.environ.pop", "os.environ.setdefault"):
                name = labkit_name(node.args[0])
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and ast.unparse(node.value) == "os.environ"
        ):
            name = labkit_name(node.slice)
        elif isinstance(node, ast.Compare) and any(ast.unparse(c) == "os.environ" for c in node.comparators):
            name = labkit_name(node.left)
        if name and not (isinstance(node, ast.Call) and ast.unparse(node.func) == "os.environ.setdefault"):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} reads {name}")
    return found


def test_the_scan_sees_the_code():
    found = uses()
    assert "labkit/launch/options.py" in found["LABKIT_PG_TIMEOUT"] and "launch/lab.sh" in found["LABKIT_LAB_PORT"]
    assert direct_reads(ROOT / "labkit" / "export" / "runtime.py"), "the AST check must see os.environ reads"


def test_every_labkit_variable_used_is_in_the_registry():
    missing = {name: sorted(files) for name, files in sorted(uses().items()) if name not in envvars.table()}
    assert not missing, "add these to their owner's registry (then --write docs/environment.md):\n" + "\n".join(
        f"{name}: {', '.join(files)}" for name, files in missing.items()
    )


def test_every_registry_entry_is_used_and_read_where_it_says():
    found = uses()
    every = envvars.all_vars()
    unused = [v.name for v in every if v.name not in found]
    assert not unused, f"in the registry but used nowhere: {unused}"
    wrong = [
        f"{v.name}: {reader}"
        for v in every
        for reader in v.read_by
        if not module_file(reader).exists() or v.name not in module_file(reader).read_text()
    ]
    assert not wrong, "these entries name a reader that does not mention the variable:\n" + "\n".join(wrong)
    assert len(envvars.table()) == len(every), "a variable is in the registries twice"


def test_labkit_reads_its_variables_through_the_registry():
    reads = []
    for path in sorted((ROOT / "labkit").rglob("*.py")):
        if str(path.relative_to(ROOT)) not in DIRECT_READERS:
            reads += direct_reads(path)
    assert not reads, "read these with labkit.wire.env (get, require, pop):\n" + "\n".join(reads)


def test_the_registry_refuses_an_unknown_name(monkeypatch):
    with pytest.raises(KeyError, match="LABKIT_NO_SUCH_THING is in no registry"):
        envvars.get("LABKIT_NO_SUCH_THING")
    monkeypatch.delenv("LABKIT_PG_TIMEOUT", raising=False)
    assert envvars.get("LABKIT_PG_TIMEOUT") == "120" and envvars.get_float("LABKIT_PG_TIMEOUT") == 120.0
    assert envvars.get("LABKIT_SSH") is None and envvars.get("LABKIT_SSH", "x") == "x"
    monkeypatch.setenv("LABKIT_SSH", "")
    assert envvars.get("LABKIT_SSH", "x") == ""  # set to nothing is not unset
    monkeypatch.setenv("LABKIT_TOKEN", "secret")
    assert envvars.pop("LABKIT_TOKEN") == "secret" and envvars.get("LABKIT_TOKEN") is None


def test_docs_environment_md_is_the_registry():
    page = ROOT / "docs" / "environment.md"
    assert page.read_text() == envvars.markdown(), (
        "docs/environment.md is stale: .venv/bin/python -m labkit.wire.env --write docs/environment.md"
    )


def owned_by(v: envvars.Var, *owners: str) -> bool:
    """Whether one of ``v``'s readers is under one of ``owners`` (dotted prefixes or path prefixes)."""
    return any(r.startswith(owners) for r in v.read_by)


def test_each_registry_holds_its_owners_variables():
    from labkit.hub import env as hub_env
    from labkit.testing import env as testing_env

    assert envvars.REGISTRIES[0] == "labkit.wire.env" and len(envvars.REGISTRIES) == 3
    not_hub = [v.name for v in hub_env.VARS if not owned_by(v, "labkit.hub", "launch/hub.sh")]
    assert not not_hub, f"in labkit/hub/env.py but read by nothing of the hub: {not_hub}"
    not_tests = [v.name for v in testing_env.VARS if not owned_by(v, "labkit.testing", "tests/")]
    assert not not_tests, f"in labkit/testing/env.py but read by no test: {not_tests}"
    elsewhere = [
        v.name
        for v in envvars.VARS
        if v.read_by
        and all(r.startswith(("labkit.hub", "launch/hub.sh", "labkit.testing", "tests/")) for r in v.read_by)
    ]
    assert not elsewhere, f"in labkit/wire/env.py but read only by the hub or the tests: {elsewhere}"


def test_wire_reads_the_other_registries_by_name_not_by_import():
    # labkit.wire imports neither the hub nor the tests: the registries are looked up as i18n's catalogs are
    source = (ROOT / "labkit" / "wire" / "env.py").read_text()
    tree = ast.parse(source)
    imported = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not [i for i in imported if "hub" in i or "testing" in i], imported
    assert envvars.var("LABKIT_HUB_DIR").default == "/srv/labkit-hub"
    assert envvars.var("LABKIT_TEST_SESSION").read_by == ("labkit.testing.processes",)


def test_each_registry_writes_its_own_section():
    page = envvars.markdown()
    for module in envvars.registries():
        assert module.section() in page and module.section().startswith(f"## {module.TITLE}\n")
        assert all(f"| `{v.name}` |" in module.section() for v in module.VARS)
