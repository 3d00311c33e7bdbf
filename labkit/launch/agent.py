"""torchrun's agent, as ``python -m labkit.agent ARGS`` = ``torchrun ARGS``, with two changes to its logging.

When a forked rank fails, the agent logs the failure with its traceback, and torch's log
formatter imports ``torch._dynamo`` (and sympy) just to format a traceback: 2-3 s on a
laptop, in the path where the student waits to see what went wrong. Here the traceback is
formatted by the standard library instead, into the same log line.

And torch's process context reports only the first failed rank it looks at (the lowest
index among those that ended): when rank 1 is SIGKILLed and rank 0 then fails in a
collective with it, torchrun names rank 0 alone. Here every rank that had already ended
with an error when the failure was seen gets a line ``labkit: local_rank N exitcode C``
(``labkit.diagnose`` reads it). Everything else is torchrun's own ``main``.
"""

from __future__ import annotations

import logging
import sys
import traceback
from typing import Any

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


def report_every_failed_rank() -> None:
    """Wrap ``ProcessContext.join`` (what the agent polls): log every rank that had failed before it raised."""
    from torch.multiprocessing.spawn import ProcessContext

    join = ProcessContext.join

    def join_reporting(self: Any, *args: Any, **kwargs: Any) -> Any:
        # exitcode polls without blocking; a rank that ended before this call is known now
        ended = {i: p.exitcode for i, p in enumerate(self.processes) if p.exitcode not in (None, 0)}
        try:
            return join(self, *args, **kwargs)
        except Exception:
            for i, code in ended.items():
                print(f"labkit: local_rank {i} exitcode {code}", file=sys.stderr, flush=True)
            raise

    ProcessContext.join = join_reporting


def main() -> None:
    from torch.distributed.run import main as torchrun_main

    from labkit.wire import devices as gpus

    gpus.prepare_agent()  # torchrun must not start CUDA here: the ranks are forked from this process
    for name in LOGGERS:
        logging.getLogger(name).addFilter(PlainTraceback())
    from labkit.wire import env as envvars

    if envvars.get("LABKIT_NODES"):  # one of several nodes: where they meet, and who hosts the store
        from labkit.launch.nodes import agent_args

        sys.argv[1:1] = agent_args()
    else:  # its lines name local ranks, which are the ranks on one node only
        report_every_failed_rank()
    torchrun_main()


if __name__ == "__main__":
    main()
