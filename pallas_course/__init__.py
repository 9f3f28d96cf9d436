"""Pallas from Zero: the helpers that notebooks, the grader and the `course` command share."""

__version__ = "0.1.0"
