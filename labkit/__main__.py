"""``python -m labkit``: the ``labkit`` command, where its script is not on PATH."""

import sys

from labkit.cli import main

if __name__ == "__main__":
    sys.exit(main())
