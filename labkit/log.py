"""labkit's logger: ``logging.getLogger("labkit")`` and its children, one per module.

Nothing is configured by default: warnings reach stderr through logging's last resort, DEBUG
records go nowhere until the application (or the student) asks for them, with ``logging`` as
usual or with ``LABKIT_DEBUG=1`` in the kernel's environment, which prints labkit's DEBUG
records on stderr (in a notebook: under the cell).
What is logged at DEBUG: the agent's command and the run folder, each teardown step, the
processes swept, the channel's clients (``labkit.wire.channel``). Never the run's token.
"""

from __future__ import annotations

import logging
import os
import sys

LOGGER = logging.getLogger("labkit")
FORMAT = "labkit %(levelname)s %(name)s: %(message)s"
_handler: logging.Handler | None = None


def get(name: str) -> logging.Logger:
    """The logger of module ``name`` (``labkit.launch.group``): a child of ``labkit``."""
    debug_from_env()
    return logging.getLogger(name)


def debug_from_env() -> bool:
    """``LABKIT_DEBUG`` set (and not 0/false/no): DEBUG records of ``labkit.*`` on stderr. Returns whether on."""
    global _handler
    on = os.environ.get("LABKIT_DEBUG", "").strip().lower() not in ("", "0", "false", "no", "off")
    if on and _handler is None:
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(logging.Formatter(FORMAT))
        LOGGER.addHandler(_handler)
        LOGGER.setLevel(logging.DEBUG)
    elif not on and _handler is not None:
        LOGGER.removeHandler(_handler)
        LOGGER.setLevel(logging.NOTSET)
        _handler = None
    return on
