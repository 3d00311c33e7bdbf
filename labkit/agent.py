"""torchrun's agent, as ``python -m labkit.agent ARGS`` = ``torchrun ARGS``, with one change to its logging.

When a forked rank fails, the agent logs the failure with its traceback, and torch's log
formatter imports ``torch._dynamo`` (and sympy) just to format a traceback: 2-3 s on a
laptop, in the path where the student waits to see what went wrong. Here the traceback is
formatted by the standard library instead, into the same log line. Everything else is
torchrun's own ``main``.
"""

from __future__ import annotations

import logging
import traceback

LOGGERS = (  # the agent's loggers that report a worker's failure with its traceback
    "torch.distributed.elastic.multiprocessing.api",
    "torch.distributed.elastic.agent.server.api",
    "torch.distributed.elastic.agent.server.local_elastic_agent",
)


class PlainTraceback(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info:
            text = "".join(traceback.format_exception(*record.exc_info)).rstrip()
            record.msg, record.args = f"{record.getMessage()}\n{text}", None
            record.exc_info = None
        return True


def main() -> None:
    from torch.distributed.run import main as torchrun_main

    from labkit import gpus

    gpus.prepare_agent()  # torchrun must not start CUDA here: the ranks are forked from this process
    for name in LOGGERS:
        logging.getLogger(name).addFilter(PlainTraceback())
    torchrun_main()


if __name__ == "__main__":
    main()
