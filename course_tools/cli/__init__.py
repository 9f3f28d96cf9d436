"""`course`: the command line. Each command is a thin function that parses and delegates."""
from __future__ import annotations

from ._app import app

# Importing a command module registers its commands on `app`.
from . import autograder, bench, blockspec, gates, grade, release, schedule, site  # noqa: F401,E402


def main() -> None:
    app()
