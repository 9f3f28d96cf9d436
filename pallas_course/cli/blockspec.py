"""`course blockspec`: filled in by its issue."""
from __future__ import annotations

from ._app import app  # noqa: F401
