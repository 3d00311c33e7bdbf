#!/usr/bin/env bash
# Set up (when needed) and run the whole test suite: the README's test command.
#   bash launch/test.sh              # the suite, browser tests included (at most 15 minutes on 2 cores)
#   bash launch/test.sh --extended   # the second tier: the tests marked extended (CI runs it after the first)
#   bash launch/test.sh --timing     # the third tier: the small matrix's predictions, alone on the machine (2 min)
#   bash launch/test.sh --fast       # the fast tier: no test that launches ranks or a browser (under a minute)
#   bash launch/test.sh -k launcher   # extra arguments go to pytest
# Every run first checks the code with ruff (lint and format) over labkit, tests, benchmarks and launch,
# and with mypy over the modules [tool.mypy] names (where mypy is installed: the test extra pins it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash launch/setup-env.sh
lint() {
  .venv/bin/python -m ruff check labkit tests benchmarks launch
  .venv/bin/python -m ruff format --check labkit tests benchmarks launch
  # the type checker over the declared records and their readers ([tool.mypy]), where the test extra put it
  if .venv/bin/python -c "import mypy" 2>/dev/null; then .venv/bin/python -m mypy; fi
}
pytest=(.venv/bin/python -m pytest -q -p no:cacheprovider)
if [ "${1:-}" = "--fast" ]; then
  shift
  lint
  # launch-backed tests are marked slow, the browser's browser: what is left needs neither ranks nor Chromium
  exec "${pytest[@]}" -m "not slow and not browser" "$@"
fi
# The browser tests drive Debian's Chromium (never a downloaded browser build); the class hub's
# tests (launch/hub.sh) install configurable-http-proxy with npm.
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${missing[*]} for the browser and hub tests"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null) \
      || echo "${missing[*]} could not be installed: the tests that need them will be skipped"
  else
    echo "${missing[*]} not installed (apt-get install ${missing[*]}): the tests that need them will be skipped"
  fi
fi
# labkit grade runs each submission in a bubblewrap sandbox: the grading tests need it (Debian's bwrap)
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing bubblewrap for the grading tests"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null) \
      || echo "bubblewrap could not be installed: the grading tests will fail (labkit grade refuses without it)"
  else
    echo "bubblewrap is not installed (apt-get install bubblewrap): the grading tests will fail"
  fi
fi
tier=(-m "not extended and not timing")
if [ "${1:-}" = "--extended" ]; then
  shift
  tier=(-m extended)
elif [ "${1:-}" = "--timing" ]; then
  # measured steps against predicted ones: one test, nothing beside it (no xdist workers)
  shift
  exec "${pytest[@]}" -m timing tests/test_small_matrix.py "$@"
else
  lint
fi
if [ "$#" -gt 0 ]; then
  exec "${pytest[@]}" "${tier[@]}" "$@"
fi
# Everything in one run on one worker more than there are cores (pytest-xdist): tests/conftest.py
# keeps each file on one worker (its module fixtures are made once), the Slurm and hub files
# together (machine-wide users and daemons), and spreads the lesson notebooks one by one. Much of
# the suite waits on kernels, ranks, browsers, links and timeouts: on 2 cores two workers left them
# idle 14% of the run, three 4% (792 -> 662 s). Every leftover check sees its own worker's processes only.
cores=$(nproc 2>/dev/null || echo 2)
workers=$((cores + 1))
[ "$workers" -le 8 ] || workers=8
exec "${pytest[@]}" "${tier[@]}" -n "$workers" --durations=30
