"""The notebook magics: ``%%torchrun`` (one-shot ranks), the warm-rank magics, ``%labkit_lang``.

    %%torchrun -n 2 --timeout 60 --vars model_size,steps
    from labkit import rank
    rank.report(hello=rank.rank())

    %torchrun_start -n 2          # warm ranks (labkit.launch.warm.Session), kept across cells
    %%ranks                       # a cell on them, in the namespace the earlier cells left
    %torchrun_restart / %torchrun_stop

The options are the ones ``labkit.launch.options`` declares for each magic (the same as
``labkit.torchrun()`` and ``labkit.Session`` take); the parsers are made from those declarations
(``labkit.launch.parsers``). The ``Run`` ends up in ``_`` and in ``labkit.last_run``.
Each ``*_line``/``*_cell`` function is what the magic does, without IPython (tests call them).
"""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING, Any, NoReturn

from labkit.i18n import LANGS, get_lang, set_lang, t
from labkit.launch import options
from labkit.launch.parsers import LocalParser, add_options, completed_usage, given, translate
from labkit.wire.errors import CellSyntaxError, OptionError
from labkit.wire.setting import Display

if TYPE_CHECKING:
    from labkit.launch.run import Run
    from labkit.launch.warm import Session


_session: Session | None = None  # the session the warm magics use


class _Parser(LocalParser):
    def error(self, message: str) -> NoReturn:  # argparse would call sys.exit(); we raise instead
        raise OptionError(t("launch.magic.bad_option", magic=self.prog, error=translate(message), usage=self.usage))

    def format_help(self) -> str:
        """The options in the user's language, under one heading, after the usage line as the magic spells it."""
        f = self._get_formatter()
        usage = (self.usage or "").replace("%", "%%")  # argparse formats it with %: keep %%torchrun as typed
        f.add_usage(usage, self._actions, self._mutually_exclusive_groups, prefix=t("launch.magic.help.usage"))
        f.start_section(t("launch.magic.help.options"))
        f.add_arguments(self._actions)
        f.end_section()
        return f.format_help()


def _new_parser(magic: str, usage_key: str) -> argparse.ArgumentParser:
    """A magic's parser: its options are the ones ``labkit.launch.options`` declares for it."""
    p = _Parser(prog=magic, add_help=False, usage=completed_usage(t(usage_key), magic))
    p.add_argument("-h", "--help", action="store_true", help=t("launch.magic.help.help"))  # parse_line prints it
    add_options(p, magic)
    return p


def parser() -> argparse.ArgumentParser:
    """The options of ``%%torchrun``."""
    return _new_parser(options.TORCHRUN, "launch.magic.usage")


def start_parser() -> argparse.ArgumentParser:
    """The options of ``%torchrun_start``."""
    return _new_parser(options.START, "launch.warm.usage.start")


_ranks_parsers: dict[tuple[str, type], argparse.ArgumentParser] = {}  # (language, the options' class) -> parser


def ranks_parser() -> argparse.ArgumentParser:
    """The options of ``%%ranks``, made once per language: a warm cell takes milliseconds, and
    building an argparse parser with its help texts is a noticeable part of them."""
    key = (get_lang(), options.RunConfig)
    p = _ranks_parsers.get(key)
    if p is None:
        p = _ranks_parsers[key] = _new_parser(options.RANKS, "launch.warm.usage.ranks")
    return p


def parse_line(line: str, p: argparse.ArgumentParser | None = None) -> argparse.Namespace | None:
    """The options on a magic's line; None when they ask for ``--help`` (then printed, and nothing runs)."""
    p = p or parser()
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise OptionError(t("launch.magic.bad_option", magic=p.prog, error=exc, usage=p.usage)) from None
    if "-h" in words or "--help" in words:  # before parsing: `--help` beside a bad option still helps
        print(p.format_help(), flush=True)
        return None
    return p.parse_args(words)


def help_text(p: argparse.ArgumentParser | None = None) -> str:
    """What ``%%torchrun?`` shows: the options, in the language of the moment."""
    return (p or parser()).format_help()


def pick_vars(names: str, namespace: dict[str, Any]) -> dict[str, Any]:
    picked = {}
    for name in (n.strip() for n in names.split(",")):
        if not name:
            continue
        if name not in namespace:
            raise OptionError(t("launch.opt.vars.undefined", name=name))
        picked[name] = namespace[name]
    return picked


def run_cell(line: str, cell: str, namespace: dict[str, Any]) -> Run | None:
    """What ``%%torchrun`` does (None after ``--help``: nothing ran)."""
    from labkit.launch.cold import torchrun

    opts = parse_line(line)
    if opts is None:
        return None
    kwargs = given(opts, options.TORCHRUN)
    names = kwargs.pop("vars", "")
    if opts.quiet:
        kwargs["display"] = Display.NONE
    try:
        # line 1 of the cell is the %%torchrun line: keep line numbers as the student sees them
        return torchrun("\n" + cell, vars=pick_vars(names, namespace), **kwargs)
    except SyntaxError as exc:
        # IPython shows a SyntaxError from a magic as a trace through labkit; ours is just the cell line
        raise CellSyntaxError("\n".join(syntax_lines(exc))) from None


def syntax_lines(exc: SyntaxError) -> list[str]:
    lines = [f"SyntaxError: {exc.msg} (cell line {exc.lineno})"]
    if exc.text:
        lines.append("    " + exc.text.rstrip("\n"))
        if exc.offset:
            lines.append("    " + " " * (exc.offset - 1) + "^")
    return lines


# -- warm ranks ------------------------------------------------------------------------


def current() -> Session | None:
    """The session of ``%torchrun_start`` (None before it)."""
    return _session


def start_line(line: str) -> Session | None:
    """What ``%torchrun_start`` does (after ``--help``, nothing: the session as it was)."""
    global _session
    from labkit.launch.warm import Session

    opts = parse_line(line, start_parser())
    if opts is None:
        return _session
    kwargs = given(opts, options.START)
    options.coerce("env", kwargs.get("env", []))  # a bad --env before the running session is stopped
    if _session is not None and _session.alive:
        print(t("launch.warm.replacing"), flush=True)
        _session.stop()
    _session = Session(**kwargs)
    print(
        t("launch.warm.started", nproc=_session.nproc, backend=_session.backend, seconds=_session.start_seconds),
        flush=True,
    )
    return _session


def ranks_cell(line: str, cell: str, namespace: dict[str, Any]) -> Run | None:
    """What ``%%ranks`` does (None after ``--help``: nothing ran)."""
    from labkit.launch.warm import SessionEnded

    opts = parse_line(line, ranks_parser())
    if opts is None:
        return None
    if _session is None:
        raise SessionEnded(t("launch.warm.none"))
    kwargs = given(opts, options.RANKS)
    names = kwargs.pop("vars", "")
    if opts.quiet:
        kwargs["display"] = Display.NONE
    try:
        # line 1 of the cell is the %%ranks line: keep line numbers as the student sees them
        return _session.run("\n" + cell, vars=pick_vars(names, namespace), **kwargs)
    except SyntaxError as exc:
        raise CellSyntaxError("\n".join(syntax_lines(exc))) from None


def stop_line() -> None:
    """What ``%torchrun_stop`` does."""
    if _session is None or not _session.alive:
        print(t("launch.warm.no_session"), flush=True)
        return
    _session.stop()
    print(t("launch.warm.stopped"), flush=True)


def restart_line() -> Session:
    """What ``%torchrun_restart`` does."""
    from labkit.launch.warm import SessionEnded

    if _session is None:
        raise SessionEnded(t("launch.warm.none"))
    print(t("launch.warm.restarting"), flush=True)
    _session.restart()
    print(
        t("launch.warm.started", nproc=_session.nproc, backend=_session.backend, seconds=_session.start_seconds),
        flush=True,
    )
    return _session


def register(ipython: Any) -> None:
    """``%%torchrun``, ``%labkit_lang``, ``%torchrun_start``, ``%%ranks``, ``%torchrun_stop``, ``%torchrun_restart``."""
    from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

    import labkit
    from labkit.launch import prefork

    prefork.start()  # torch imported in the background while the student reads: the first cold cell skips it

    @magics_class
    class LabkitMagics(Magics):
        def _keep(self, run: Run | None) -> None:
            self.shell.user_ns["_"] = run if run is not None else labkit.last_run

        @cell_magic
        def torchrun(self, line: str, cell: str) -> None:
            run = None
            try:
                run = run_cell(line, cell, self.shell.user_ns)
            finally:
                self._keep(run)

        @cell_magic
        def ranks(self, line: str, cell: str) -> None:
            run = None
            try:
                run = ranks_cell(line, cell, self.shell.user_ns)
            finally:
                self._keep(run)

        # `%%torchrun?` asks IPython for the doc, through getdoc() when there is one: the help
        # as the magic's own --help prints it, in the language chosen at that moment
        torchrun.getdoc = lambda: help_text(parser())  # type: ignore[attr-defined]
        ranks.getdoc = lambda: help_text(ranks_parser())  # type: ignore[attr-defined]

        @line_magic
        def labkit_lang(self, line: str) -> None:
            lang_line(line)

        @line_magic
        def torchrun_start(self, line: str) -> None:
            start_line(line)

        torchrun_start.getdoc = lambda: help_text(start_parser())  # type: ignore[attr-defined]

        @line_magic
        def torchrun_stop(self, line: str) -> None:
            stop_line()

        @line_magic
        def torchrun_restart(self, line: str) -> None:
            restart_line()

    ipython.register_magics(LabkitMagics)
    if help_body not in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.append(help_body)


CELL_MAGICS = ("%%torchrun", "%%ranks")


def help_body(lines: list[str]) -> list[str]:
    """``%%torchrun --help`` alone in a cell: IPython refuses a cell magic with an empty body before the
    magic runs, so the help would never print. Such a cell gets an empty line for a body; a cell magic
    without ``--help`` and without a body is left to IPython's own refusal."""
    if len(lines) != 1 or not lines[0].startswith(CELL_MAGICS):
        return lines
    magic, _, rest = lines[0].strip().partition(" ")
    try:
        words = shlex.split(rest)
    except ValueError:
        return lines  # the magic says what is wrong with the line
    if magic in CELL_MAGICS and ("-h" in words or "--help" in words):
        return [lines[0].rstrip("\n") + "\n", "\n"]
    return lines


def lang_line(line: str) -> None:
    """What ``%labkit_lang`` does: ``ro``, ``en``, or nothing (the environment's again)."""
    try:
        set_lang(line.strip() or None)
    except ValueError:
        raise OptionError(t("launch.magic.lang.unknown", value=line.strip(), langs=", ".join(LANGS))) from None
    print(t("launch.magic.lang"))
