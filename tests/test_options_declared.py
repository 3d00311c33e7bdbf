"""Each ``%%torchrun`` option is declared once, on its ``RunConfig`` field (issue 46): the magics' parsers,
``labkit run``'s, and the keyword checks of ``labkit.torchrun`` and ``labkit.Session`` are made from the
declarations, and a value is coerced and checked in one place, with the same error on every path."""

from __future__ import annotations

import argparse
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import labkit
from labkit import i18n
from labkit.launch import cold, magic, options
from labkit.launch.warm import Session
from labkit.wire.errors import OptionError

ROOT = Path(__file__).resolve().parents[1]
# a help message registered by the test (its first part is no package's: not a key of the catalogs)
DUMMY_HELP = "test_options.dummy_level"


def long_flags(p: argparse.ArgumentParser) -> set[str]:
    return {s for a in p._actions for s in a.option_strings if s.startswith("--")} - {"--help"}


# -- the options each magic and command takes, as they were before they were declared ----------------

TORCHRUN_FLAGS = {
    "--nproc", "--backend", "--timeout", "--vars", "--env", "--quiet", "--display", "--nnodes", "--slurm",
    "--slurm-args", "--hosts", "--channel-host", "--nodes", "--link", "--profile", "--pin",
}  # fmt: skip


@pytest.mark.parametrize(
    "make,flags",
    [
        (magic.parser, TORCHRUN_FLAGS),
        (magic.start_parser, {"--nproc", "--backend", "--pg-timeout", "--env", "--pin"}),
        (magic.ranks_parser, {"--timeout", "--vars", "--quiet", "--display"}),
    ],
)
def test_each_magic_keeps_its_options(make, flags):
    p = make()
    assert long_flags(p) == flags
    assert long_flags(p) == {"--" + n.replace("_", "-") for n in options.declared(p.prog)}
    if "--nproc" in flags:
        assert "-n" in {s for a in p._actions for s in a.option_strings}


def test_labkit_run_takes_the_declared_options(capsys):
    from labkit.cli import main

    with pytest.raises(SystemExit) as info:
        main(["run", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    for flag in ("-n NPROC", "--backend", "--timeout", "--json", i18n.t("launch.magic.help.backend", "en")):
        assert flag in out


def test_the_usage_lines_are_the_messages_as_written():
    for make, key in ((magic.parser, "launch.magic.usage"), (magic.start_parser, "launch.warm.usage.start")):
        assert make().usage == i18n.t(key), "every option they declare is in the hand-written line"
    assert magic.ranks_parser().usage == i18n.t("launch.warm.usage.ranks")


def test_defaults_are_the_ones_the_magic_always_had():
    opts = magic.parse_line("")
    assert (opts.nproc, opts.backend, opts.timeout, opts.vars, opts.env, opts.quiet, opts.display) == (
        None, "auto", None, "", [], False, "auto",
    )  # fmt: skip
    warm = magic.parse_line("", magic.ranks_parser())
    assert (warm.timeout, warm.quiet, warm.display) == (None, None, None), "a warm cell keeps the session's"


# -- one coercion, one error text, every path -----------------------------------------------------------


def test_a_number_from_the_line_is_coerced_once():
    cfg = options.resolve(options.config(options.PYTHON, nproc="2", backend="GLOO", timeout="5", env=["A=1"]))
    assert (cfg.nproc, cfg.backend, cfg.timeout, cfg.env) == (2, "gloo", 5.0, {"A": "1"})
    assert options.coerce("hosts", "a, b") == ("a", "b") and options.coerce("nnodes", "2") == 2
    assert options.coerce("nodes", "3") == 3 and options.coerce("quiet", 1) is True


def error_of(call) -> str:
    with pytest.raises(OptionError) as info:
        call()
    return str(info.value)


def test_the_same_error_from_the_magic_the_call_and_the_command(capsys, tmp_path):
    from labkit.cli import main

    script = tmp_path / "job.py"
    script.write_text("pass\n")
    from_call = error_of(lambda: labkit.torchrun("pass", nproc="two"))
    from_magic = error_of(lambda: magic.run_cell("-n two", "pass", {}))
    assert main(["run", str(script), "-n", "two"]) == 1
    assert (
        from_call == from_magic == capsys.readouterr().err.strip() == "nproc must be a whole number of ranks, got 'two'"
    )
    timeout = "timeout must be a positive number of seconds, got 'soon'"
    assert error_of(lambda: magic.run_cell("--timeout soon", "pass", {})) == timeout
    assert error_of(lambda: labkit.torchrun("pass", timeout="soon")) == timeout


@pytest.mark.parametrize(
    "kwargs,words",
    [
        ({"quiet": "yes"}, "quiet is on or off"),
        ({"pin": "x"}, "pin is on or off"),
        ({"display": "fancy"}, "display must be one of"),
        ({"sample_interval": -1}, "sample_interval must be a number of seconds, 0 or more"),
        ({"grace": "0"}, "grace must be a positive number of seconds"),
        ({"slurm_args": 3}, "slurm_args takes text"),
        ({"env": 5}, "--env expects KEY=VALUE"),
    ],
)
def test_a_wrong_type_is_refused_naming_the_option(kwargs, words):
    assert words in error_of(lambda: labkit.torchrun("pass", nproc=2, backend="gloo", **kwargs))


def test_an_unknown_keyword_is_an_option_error_with_the_closest_name():
    assert error_of(lambda: labkit.torchrun("pass", nprocs=2)) == (
        "labkit.torchrun() has no option 'nprocs' (did you mean 'nproc'?)"
    )
    assert "labkit.Session() has no option 'start_methd' (did you mean 'start_method'?)" == error_of(
        lambda: Session(nproc=2, backend="gloo", start=False, start_methd="fork")
    )
    assert "has no option 'nodes'" in error_of(lambda: Session(nproc=2, start=False, nodes=2))  # warm: one node
    session = Session(nproc=2, backend="gloo", start=False, pg_timeout="30", sample_interval="0")
    assert (session.cfg.pg_timeout, session.cfg.sample_interval) == (30.0, 0.0)
    assert "pg_timeout must be a positive number" in error_of(lambda: Session(nproc=2, start=False, pg_timeout="x"))


def test_argparse_errors_are_option_errors_in_the_users_language():
    assert "expected one argument" in error_of(lambda: magic.parse_line("-n"))
    with i18n.language("ro"):
        text = error_of(lambda: magic.parse_line("--bogus"))
        assert text.startswith("%%torchrun: argumente necunoscute: --bogus") and "utilizare:" in text
        assert "nu are opțiunea 'nprocs'" in error_of(lambda: labkit.torchrun("pass", nprocs=2))
    assert "unknown language 'xx'" in error_of(lambda: magic.lang_line("xx"))


# -- an option added in one place ------------------------------------------------------------------------


@dataclass
class WithDummy(options.RunConfig):
    """RunConfig with one more option, declared as the real ones are."""

    dummy_level: float = options.option(
        0.0,
        help=DUMMY_HELP,
        coerce=options.coerce_interval,
        takes=options.EVERYWHERE | {options.RANKS},
        short=("-D",),
    )


@pytest.fixture
def dummy(monkeypatch):
    monkeypatch.setattr(options, "RunConfig", WithDummy)
    monkeypatch.setitem(i18n._CATALOG, DUMMY_HELP, {"en": "how loud the dummy is", "ro": "cât de tare strigă"})


class Launched(Exception):
    """Raised in place of a launch, carrying the configuration it would have run with."""

    def __init__(self, cfg):
        self.cfg = cfg


class NoLaunch:
    def __init__(self, cfg, job):
        raise Launched(cfg)


def test_an_option_declared_on_runconfig_reaches_every_parser_and_call(dummy, monkeypatch, capsys):
    from labkit.cli import main

    for make in (magic.parser, magic.start_parser, magic.ranks_parser):
        text = magic.help_text(make())
        assert "-D DUMMY_LEVEL, --dummy-level DUMMY_LEVEL" in text and "how loud the dummy is" in text
        assert text.splitlines()[0].endswith(" [--dummy-level DUMMY_LEVEL]"), "the usage line names it too"
    with i18n.language("ro"):
        assert "cât de tare strigă" in magic.help_text(magic.parser())
    assert magic.parse_line("-n 2 -D 3").dummy_level == "3"
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "--dummy-level" in capsys.readouterr().out
    monkeypatch.setattr(cold, "Launch", NoLaunch)
    with pytest.raises(Launched) as info:
        labkit.torchrun("pass", nproc=2, backend="gloo", dummy_level="3")
    assert isinstance(info.value.cfg, WithDummy) and info.value.cfg.dummy_level == 3.0
    with pytest.raises(Launched) as info:
        magic.run_cell("-n 2 --backend gloo -D 4", "pass", {})
    assert info.value.cfg.dummy_level == 4.0
    assert Session(nproc=2, backend="gloo", start=False, dummy_level=1).cfg.dummy_level == 1.0
    refused = "dummy_level must be a number of seconds, 0 or more, got 'loud'"
    assert error_of(lambda: labkit.torchrun("pass", nproc=2, dummy_level="loud")) == refused
    assert error_of(lambda: magic.run_cell("-n 2 --dummy-level loud", "pass", {})) == refused


# -- %%torchrun --help alone in a cell, and bad options, in IPython ---------------------------------------


def test_help_alone_in_a_cell_and_bad_options_without_a_traceback():
    script = textwrap.dedent(
        """
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        shell.run_cell("%load_ext labkit")
        for cell in ("%%torchrun --help", "%%ranks -h", "%%torchrun -n 0\\npass", "%%torchrun --lang xx\\npass",
                     "%labkit_lang xx", "%%torchrun"):
            print("=== " + cell.split("\\n")[0], flush=True)
            shell.run_cell(cell)
        """
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "LABKIT_PREFORK": "0", "LABKIT_LANG": "en"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    parts = dict(p.split("\n", 1) for p in out.stdout.split("=== ")[1:])
    assert "--nproc NPROC" in parts["%%torchrun --help"] and "--link LINK" in parts["%%torchrun --help"]
    assert "--display DISPLAY" in parts["%%ranks -h"]
    assert parts["%%torchrun -n 0"].strip() == "OptionError: nproc must be at least 1, got 0"
    assert parts["%%torchrun --lang xx"].startswith("OptionError: %%torchrun: unrecognized arguments: --lang xx")
    assert parts["%labkit_lang xx"].strip() == "OptionError: %labkit_lang: unknown language 'xx'; choose one of en, ro"
    assert "cell body is empty" in out.stderr, "no --help, no body: IPython's own refusal"
    assert "Traceback" not in out.stdout


def test_the_help_transformer_touches_only_a_help_line():
    from IPython.core.inputtransformer2 import TransformerManager

    tm = TransformerManager()
    tm.cleanup_transforms.append(magic.help_body)
    assert tm.transform_cell("%%torchrun --help") == "get_ipython().run_cell_magic('torchrun', '--help', '\\n')\n"
    assert tm.transform_cell("%%torchrun -n 2") == "get_ipython().run_cell_magic('torchrun', '-n 2', '')\n"
    assert (
        tm.transform_cell("%%torchrun -n 2\nx = 1") == "get_ipython().run_cell_magic('torchrun', '-n 2', 'x = 1\\n')\n"
    )
    assert tm.transform_cell("%%timeit -h") == "get_ipython().run_cell_magic('timeit', '-h', '')\n"


@pytest.mark.slow
def test_help_alone_in_a_kernel_cell():
    import nbformat
    from ipc_kernels import AsyncIpcKernelManager
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in ("%load_ext labkit\n%labkit_lang ro", "%%torchrun --help")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, timeout=120, kernel_name="python3", kernel_manager_class=AsyncIpcKernelManager).execute()
    text = "".join(o.get("text", "") for o in nb.cells[1].outputs)
    assert "utilizare: %%torchrun" in text and "opțiuni:" in text and "--nproc" in text
