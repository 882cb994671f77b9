"""The commit of the code a study runs, for the reports that record it."""

from __future__ import annotations

import subprocess


def commit() -> str:
    """``git rev-parse --short HEAD`` of the working directory, or ``"unknown"`` outside a
    repository (or without git)."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        )
        return done.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"
