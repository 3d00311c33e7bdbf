"""argparse in the user's language, and the parsers made from ``RunConfig``'s declarations.

``LocalParser`` is argparse with its own words ("usage:", "options:", "show this help message and exit",
its error messages) in the language of the moment; the magics and the ``labkit`` command use it.
``add_options(parser, surface)`` adds the options a magic or a command takes, as ``labkit.launch.options``
declares them: no option is spelled here.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any, NoReturn

from labkit.i18n import t
from labkit.launch import options

# argparse's own error messages (Python 3.10-3.13 wording), each with the message that says it in our words
ARGPARSE_ERRORS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.DOTALL), key)
    for pattern, key in (
        (r"^argument (?P<name>.+?): (?P<error>.*)$", "launch.args.argument"),
        (r"^the following arguments are required: (?P<names>.*)$", "launch.args.required"),
        (r"^unrecognized arguments: (?P<words>.*)$", "launch.args.unrecognized"),
        (r"^invalid choice: (?P<value>.*?) \(choose from (?P<choices>.*)\)$", "launch.args.choice"),
        (r"^expected one argument$", "launch.args.one"),
        (r"^invalid (?P<type>\w+) value: (?P<value>.*)$", "launch.args.value"),
        (r"^not allowed with argument (?P<name>.*)$", "launch.args.not_with"),
    )
)


def translate(message: str) -> str:
    """One of argparse's error messages in the user's language (as it was, where we do not know it)."""
    for pattern, key in ARGPARSE_ERRORS:
        m = pattern.match(message)
        if m:
            found = m.groupdict()
            if "error" in found:
                found["error"] = translate(found["error"])
            return t(key, **found)
    return message


class LocalFormatter(argparse.HelpFormatter):
    def add_usage(self, usage: Any, actions: Any, groups: Any, prefix: str | None = None) -> None:
        super().add_usage(usage, actions, groups, t("launch.magic.help.usage") if prefix is None else prefix)


class LocalParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose headings, help option and errors are in the user's language; the
    parsers of its subcommands (``add_subparsers().add_parser``) are made of this class too."""

    def __init__(self, *args: Any, add_help: bool = True, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", LocalFormatter)
        super().__init__(*args, add_help=False, **kwargs)
        self._positionals.title = t("launch.args.positionals")
        self._optionals.title = t("launch.magic.help.options")
        if add_help:
            self.add_argument("-h", "--help", action="help", default=argparse.SUPPRESS, help=t("launch.args.help"))

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(2, t("launch.args.error", prog=self.prog, message=translate(message)) + "\n")


def add_options(p: argparse.ArgumentParser, surface: str) -> None:
    """The options ``surface`` takes, as declared. Their defaults are ``RunConfig``'s constants (None where
    it makes one at run time); on ``%%ranks`` every default is None: the session's value."""
    for name, opt in options.declared(surface).items():
        flags = [*opt.short, "--" + name.replace("_", "-")]
        value = None if surface == options.RANKS else options.default(name)
        if name in options.CELL_OPTIONS:
            value = ""
        kwargs: dict[str, Any] = {"dest": name, "help": t(opt.help_key(surface)).replace("%", "%%")}
        if opt.flag:
            kwargs.update(action="store_true", default=value)
        elif opt.many:
            kwargs.update(action="append", default=[])
        else:
            kwargs.update(default=value)
        p.add_argument(*flags, **kwargs)


def completed_usage(usage: str, surface: str) -> str:
    """A magic's usage line (a message, written by hand to show how options go together), with any declared
    option it does not name yet added at its end."""
    named = set(re.findall(r"-{1,2}[\w-]+", usage))
    for name, opt in options.declared(surface).items():
        flag = "--" + name.replace("_", "-")
        if flag not in named and not named & set(opt.short):
            usage += f" [{flag}]" if opt.flag else f" [{flag} {name.upper()}]"
    return usage


def given(opts: argparse.Namespace, surface: str) -> dict[str, Any]:
    """The declared options of ``surface`` from a parsed line, None (not given, no default) left out."""
    return {name: getattr(opts, name) for name in options.declared(surface) if getattr(opts, name, None) is not None}
