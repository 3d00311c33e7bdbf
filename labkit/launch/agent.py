"""torchrun's agent, as ``python -m labkit.launch.agent ARGS`` = ``torchrun ARGS``, with two changes to its logging.

When a forked rank fails, the agent logs the failure with its traceback, and torch's log
formatter imports ``torch._dynamo`` (and sympy) just to format a traceback: 2-3 s on a
laptop, in the path where the student waits to see what went wrong. Here the traceback is
formatted by the standard library instead, into the same log line.

And torch's process context reports only the first failed rank it looks at (the lowest
index among those that ended): when rank 1 is SIGKILLed and rank 0 then fails in a
collective with it, torchrun names rank 0 alone. Here every rank that had already ended
with an error when the failure was seen gets a line ``labkit: local_rank N exitcode C``
(``labkit.launch.diagnose`` reads it).

And three things that cost a cold cell time and nothing else:
- the rendezvous records each of its steps under the name of the calling method, found with
  ``inspect.stack()`` twice per step: that reads the source of every frame and scans every
  module torch loaded, 20-40 ms a step, several hundred ms a launch. ``sys._getframe`` gives
  the same name;
- on its first round the rendezvous sleeps a random 0-0.3 s to spread the first attempts of
  several nodes; one node has no other to spread from (several nodes keep it);
- at exit, torch's own handler unregisters thousands of operator kernels one by one (about
  100 ms) in a process that is about to end: ``run`` ends the agent as the interpreter would
  (logging flushed, multiprocessing's exit handler, the streams), without that.
Everything else is torchrun's own ``main``.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import sys
import traceback
from typing import Any, NoReturn

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


def remove_error_files(context: Any) -> None:
    """A ``ProcessContext``'s error files, each rank's pickled traceback, removed (``leave_no_error_files``)."""
    for path in getattr(context, "error_files", None) or []:
        with contextlib.suppress(OSError):
            os.unlink(path)


def leave_no_error_files() -> None:
    """Each rank that raises pickles its traceback to ``/tmp/pytorch-errorfile-*.pickle``, a rank
    stopped by the agent's SIGTERM too (the handler it inherits raises); torch reads the first failed
    rank's to raise, and leaves every file behind, readable by every user of the machine (a
    student's traceback, on a shared hub). Remove them once ``ProcessContext.join`` has raised
    (every rank stopped and joined by then) and once the agent has closed its ranks
    (``MultiprocessContext.close``: a run that was stopped)."""
    from torch.distributed.elastic.multiprocessing.api import MultiprocessContext
    from torch.multiprocessing.spawn import ProcessContext

    join, close = ProcessContext.join, MultiprocessContext.close

    def join_removing(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return join(self, *args, **kwargs)
        except Exception:
            remove_error_files(self)
            raise

    def close_removing(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            close(self, *args, **kwargs)
        finally:
            remove_error_files(getattr(self, "_pc", None))

    ProcessContext.join = join_removing
    MultiprocessContext.close = close_removing


# what every lesson's rank imports after the fork (0.7 s for FSDP, 0.5 s more for dynamo, which the
# first optimizer imports): the prefork server imports it before it forks agents (one node). A node's
# own agent (several nodes) does not: a cell that never uses FSDP would pay for it on every node.
RANK_IMPORTS = ("torch.distributed.fsdp", "torch.distributed.fsdp.wrap", "torch._dynamo")


def quicker_rendezvous(one_node: bool) -> None:
    """The rendezvous's step names without ``inspect.stack()``, and no start-up skew on one node."""
    from torch.distributed.elastic.rendezvous import dynamic_rendezvous

    def get_method_name(depth: int = 2) -> str:
        try:  # frame 0 is this function, as inspect.stack()[0] was torch's
            return sys._getframe(depth).f_code.co_name
        except ValueError:
            return "no_method_name"

    dynamic_rendezvous.get_method_name = get_method_name
    if one_node:
        delay = dynamic_rendezvous._delay

        def no_skew(seconds: Any) -> None:
            if not isinstance(seconds, tuple):  # (low, high): the random first-round skew; a number: a real wait
                delay(seconds)

        dynamic_rendezvous._delay = no_skew


def main() -> None:
    from torch.distributed.run import main as torchrun_main

    from labkit.wire import devices as gpus

    gpus.prepare_agent()  # torchrun must not start CUDA here: the ranks are forked from this process
    for name in LOGGERS:
        logging.getLogger(name).addFilter(PlainTraceback())
    from labkit.wire import env as envvars

    several = bool(envvars.get("LABKIT_NODES"))
    quicker_rendezvous(one_node=not several)
    leave_no_error_files()
    if several:  # one of several nodes: where they meet, and who hosts the store
        from labkit.launch.nodes import agent_args

        sys.argv[1:1] = agent_args()
    else:  # its lines name local ranks, which are the ranks on one node only
        report_every_failed_rank()
    if several and "--start-method=fork" in sys.argv:
        # what torch's import made lives as long as the process: out of the collector's sight, a
        # rank's gc.collect() (memtrack, each phase) walks less (see forkserver.main)
        gc.freeze()
    torchrun_main()


def run() -> NoReturn:
    """``main``, then the end of the process as the interpreter would make it (see the module's doc)."""
    code = 1
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exit_code(exc)
    except KeyboardInterrupt:  # an uncaught Ctrl-C ends an interpreter by SIGINT
        finish()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        traceback.print_exc()
    finish()
    os._exit(code)


def exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def finish() -> None:
    """What the interpreter's exit does that matters here: logging flushed, multiprocessing's
    exit handler (it joins the ranks' process objects), the streams flushed."""
    import multiprocessing.util

    for step in (logging.shutdown, multiprocessing.util._exit_function):
        try:
            step()
        except BaseException:
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


if __name__ == "__main__":
    run()
