"""One display output from labkit in a kernel, without a wait it does not need.

publish({"text/html": ..., "text/plain": ...})   # as display(bundle, raw=True)
"""

from __future__ import annotations

import sys
from typing import Any


def publish(bundle: dict[str, Any]) -> None:
    """``display(bundle, raw=True)``, without its wait on the kernel's output thread when there is
    nothing to wait for.

    ipykernel flushes stdout and stderr before each display, so that what was printed comes
    first; each flush is a round trip to its output thread, even with nothing printed (about
    a third of a millisecond per display on a busy machine, a warm cell's end has one). When
    neither stream holds unsent text (ipykernel's ``_flush_pending``), there is nothing to
    order, and the display goes out without them. Anything else (another kernel, a stream
    replaced by a capture, an ipykernel without that flag) flushes as usual.
    """
    from IPython import get_ipython
    from IPython.display import display

    pub = getattr(get_ipython(), "display_pub", None)
    idle = all(getattr(stream, "_flush_pending", None) is False for stream in (sys.stdout, sys.stderr))
    if pub is None or not idle or not callable(getattr(pub, "_flush_streams", None)):
        display(bundle, raw=True)
        return
    own = pub.__dict__.get("_flush_streams")  # one set on the instance already (a test's, a tool's)
    pub._flush_streams = _no_flush  # on the instance, for this one display
    try:
        display(bundle, raw=True)
    finally:
        if own is None:
            del pub._flush_streams
        else:
            pub._flush_streams = own


def _no_flush() -> None:
    pass
