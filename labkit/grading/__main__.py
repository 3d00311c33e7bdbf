"""``python -m labkit.grading grade|build-student ...``: the grading subcommands on their own."""

import sys

from labkit.grading.cli import main

sys.exit(main())
