"""`course`: the command line. Each command is a thin function that parses and delegates."""

from __future__ import annotations

import logging
import os
import sys

from ._app import app

# Importing a command module registers its commands on `app`.
from . import autograder, bench, blockspec, gates, grade, release, schedule, site  # noqa: F401 - imported to register their commands

# Commands that end at once when done: everything they write is written and closed by then, and the Python
# shutdown of a process that imported jax (and libtpu) took 1-3 s of a one-notebook `course grade`.
EXIT_AT_ONCE = {"grade"}


def main() -> None:
    if sys.argv[1:2] and sys.argv[1] in EXIT_AT_ONCE:
        try:
            app()
        except SystemExit as e:
            if e.code is not None and not isinstance(e.code, int):
                raise
            code = e.code or 0
        else:
            code = 0
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    app()
