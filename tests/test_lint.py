"""The whole tree passes ruff's linter and formatter, as configured in pyproject.toml ([tool.ruff]).

CI runs the README's test command and nothing else, so the lint and format checks run here. ruff is pinned in
requirements.txt (its rules and its formatting change between releases). To see or fix what fails:
`ruff check .`, `ruff format --diff .`, then `ruff format .` (notebooks are excluded: see pyproject.toml).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def ruff(*args: str) -> subprocess.CompletedProcess[str]:
    """`ruff ARGS .` in the repository root, with its configuration; no cache written into the tree."""
    if importlib.util.find_spec("ruff") is None:
        pytest.fail("ruff is not installed: pip install -r requirements.txt (it pins ruff)")
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--no-cache", "."], cwd=REPO, capture_output=True, text=True, timeout=300
    )


def test_ruff_check_is_clean() -> None:
    run = ruff("check", "--output-format", "concise")
    assert run.returncode == 0, f"`ruff check .` found problems:\n{run.stdout}{run.stderr}"


def test_ruff_format_is_clean() -> None:
    run = ruff("format", "--check", "--output-format", "concise")
    assert run.returncode == 0, (
        f"`ruff format --check .` would reformat (run `ruff format .`):\n{run.stdout}{run.stderr}"
    )
